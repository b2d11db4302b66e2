"""What the TrainingRun controller knows of its children without asking: kopf indices
(core/watches.py) kept by watches on its Jobs (the data check, the training, a round's),
their pods, and its rounds' Deployments, Services, NetworkPolicies and RolloutBatches, each
selected by the run label; and of every RolloutBatch, what the run reads of the one it
trains on (``batch_summary``), with the runs that name each."""

from __future__ import annotations

from typing import Any

import kopf

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.watches import JOBS, POLICIES, Resource, watch_children
from coworkgym_operator.rollouts.api.types import BATCH_KIND, BATCH_PLURAL
from coworkgym_operator.training.api.types import TRAINING_PLURAL
from coworkgym_operator.training.builders.run import LABEL_TRAINING
from coworkgym_operator.training.reconcile.observe import batch_summary

DEPLOYMENTS: Resource = ("apps", "v1", "deployments")
SERVICES: Resource = ("v1", "services")
BATCHES: Resource = (GROUP, VERSION, BATCH_PLURAL)


@kopf.index(*BATCHES)
def training_batches(
    name: str, namespace: str | None, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], Any]:
    return {(str(namespace), name): batch_summary(dict(body))}


@kopf.index(GROUP, VERSION, TRAINING_PLURAL)
def training_by_batch(
    name: str, namespace: str | None, uid: str | None, spec: Any, **_: Any
) -> dict[tuple[str, str], tuple[str, str]]:
    """The runs that train on a RolloutBatch they name (spec.data.rolloutBatch.name)."""
    ref = ((spec or {}).get("data") or {}).get("rolloutBatch") or {}
    return {(str(namespace), str(ref["name"])): (name, str(uid))} if ref.get("name") else {}


# a run's children by kind: its Jobs, and its rounds' servers, policies and batches
OWNED = {
    "Job": JOBS,
    "Deployment": DEPLOYMENTS,
    "Service": SERVICES,
    "NetworkPolicy": POLICIES,
    BATCH_KIND: BATCHES,
}
WATCHES = watch_children(
    "training", LABEL_TRAINING, OWNED, more=("training_batches", "training_by_batch")
)

__all__ = ["BATCHES", "DEPLOYMENTS", "SERVICES", "WATCHES", "training_batches", "training_by_batch"]

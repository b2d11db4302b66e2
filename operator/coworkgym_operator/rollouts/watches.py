"""What the RolloutBatch controller knows of its children without asking: kopf indices
(core/watches.py) kept by watches on its Jobs (fetch, rollout, verify, collect), their
pods, its volume claim and NetworkPolicies, each selected by the batch label."""

from __future__ import annotations

from coworkgym_operator.core.watches import CLAIMS, JOBS, POLICIES, Owned, watch_children
from coworkgym_operator.rollouts.builders import LABEL_BATCH

WATCHES = watch_children(
    "batch",
    LABEL_BATCH,
    [
        Owned("batch_owned_jobs", JOBS, "Job"),
        Owned("batch_claims", CLAIMS, "PersistentVolumeClaim"),
        Owned("batch_policies", POLICIES, "NetworkPolicy"),
    ],
)

__all__ = ["WATCHES"]

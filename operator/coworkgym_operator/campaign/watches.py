"""What the SynthesisCampaign controller knows of its children without asking: a kopf index
(core/watches.py) of the CoworkEnvironments that carry a campaign label, by campaign, each
kept as its name, its owners' uids and the little the reconcile reads of it (its index,
cell, phase and defects: ``child_state``). A LIST of every child on every run of a per-campaign
timer was the controller's cost before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from coworkgym_operator.campaign.reconcile.children import LABEL_CAMPAIGN
from coworkgym_operator.campaign.reconcile.plan import ChildState, child_state
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.watches import Watches
from coworkgym_operator.environment.api.types import PLURAL

Child = tuple[str, frozenset[str], ChildState]  # name, owners' uids, state


@kopf.index(GROUP, VERSION, PLURAL, labels={LABEL_CAMPAIGN: kopf.PRESENT})
def campaign_children(
    name: str, namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], Child]:
    owners = frozenset(str(o.get("uid")) for o in body.metadata.get("ownerReferences") or [])
    state = child_state({"metadata": body.metadata, "status": body.status})
    return {(str(namespace), labels[LABEL_CAMPAIGN]): (name, owners, state)}


WATCHES = Watches(more=("campaign_children",))

__all__ = ["WATCHES", "Child", "campaign_children"]

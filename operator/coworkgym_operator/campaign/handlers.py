"""The SynthesisCampaign controller, on the event-driven toolkit (core/controller.py): one
idempotent reconcile, run on create, spec change and resume, and on the events of its child
CoworkEnvironments (read from an index, campaign/watches.py); the resync sweep is the only
timer. Each reconcile reads the campaign afresh, creates the next wave of children, writes
its status once, then posts the events. Deleting a campaign deletes its children (owner
references, and by label here, behind the finalizer coworkgym.dev/cleanup)."""

from __future__ import annotations

from collections.abc import Hashable
from datetime import UTC, datetime
from typing import Any

import kopf

from coworkgym_operator.campaign import metrics as m
from coworkgym_operator.campaign.api.types import CAMPAIGN_KIND, CAMPAIGN_PLURAL
from coworkgym_operator.campaign.kube import CampaignKube
from coworkgym_operator.campaign.reconcile.children import LABEL_CAMPAIGN
from coworkgym_operator.campaign.reconcile.plan import (
    CampaignObserved,
    CampaignPlan,
    ChildState,
    child_state,
    reconcile_campaign,
)
from coworkgym_operator.campaign.watches import WATCHES, Child
from coworkgym_operator.core import shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.controller import (
    Controller,
    Done,
    Look,
    child_key,
    done,
)
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.settings import SETTINGS
from coworkgym_operator.core.sharding import shard_from_env
from coworkgym_operator.core.turns import announce, carry_out, where
from coworkgym_operator.core.watches import Indices
from coworkgym_operator.environment.api.types import KIND as ENVIRONMENT
from coworkgym_operator.environment.api.types import PLURAL as ENVIRONMENTS

_campaign_kube: CampaignKube | None = None
# a sharded replica does not see the children a campaign spreads over other shards
# (spec.shards): such a campaign lists them and looks again every reconcile interval
_SHARDED = shard_from_env() is not None


def campaign_kube() -> CampaignKube:
    global _campaign_kube
    if _campaign_kube is None:
        _campaign_kube = CampaignKube(kube())
    return _campaign_kube


def _indexed(
    namespace: str, name: str, uid: str, indices: Indices
) -> tuple[list[ChildState], list[str]]:
    """The campaign's children from the index, those it owns (a campaign deleted and made
    again under the same name does not adopt the old one's), and those this process made
    that the watch has not delivered yet; and the delivered ones' "Kind/name"."""
    entries: list[Child] = indices.get("campaign_children", (namespace, name))
    mine = {f"{ENVIRONMENT}/{child}": state for child, owners, state in entries if uid in owners}
    return [*mine.values(), *CONTROLLER.undelivered(uid, mine).values()], list(mine)


def _look(children: list[ChildState]) -> Look:
    return Look(repr(sorted(children, key=repr)))


def _look_indexed(namespace: str, name: str, uid: str, hint: Hashable, indices: Indices) -> Look:
    return _look(_indexed(namespace, name, uid, indices)[0])


def _reconcile_once(
    campaign: dict[str, Any], body: kopf.Body, logger: kopf.Logger, indices: Indices | None
) -> Done:
    namespace, name = where(campaign)
    uid = str(campaign["metadata"]["uid"])
    ck = campaign_kube()
    listed = indices is None or (_SHARDED and bool(campaign["spec"].get("shards")))
    if listed or indices is None:
        children = ck.children(namespace, name, uid)
    else:
        children, delivered = _indexed(namespace, name, uid, indices)
        CONTROLLER.delivered(uid, delivered)
    plan = reconcile_campaign(campaign, CampaignObserved(children, datetime.now(UTC)))
    carry_out(ck, logger, namespace, name, [], plan.create, campaign["status"], plan.status)
    _record(namespace, name, campaign, plan)
    announce(logger, body, plan.transition, plan.status, plan.events)
    look = _look(children)
    if listed:  # no event comes from another shard's children: the clock looks again
        look = Look(look.seen, SETTINGS.reconcile_interval)
    made = {child_key(child): child_state(child) for child in plan.create}
    before, transition = campaign["status"], plan.transition
    return done(before, plan.status, plan.create, look=look, made=made, transition=transition)


def _record(namespace: str, name: str, campaign: dict[str, Any], plan: CampaignPlan) -> None:
    counts = plan.status.get("counts") or {}
    for state in m.STATES:
        m.CHILDREN.labels(namespace, name, state).set(counts.get(state, 0))
    ratio = plan.status.get("failureRatio")
    if ratio is not None:
        m.FAILURE_RATIO.labels(namespace, name).set(ratio)
    threshold = ((campaign.get("spec") or {}).get("failureThreshold") or {}).get(
        "maxFailureRatio", 0.5
    )
    m.FAILURE_THRESHOLD.labels(namespace, name).set(float(threshold))
    stopped = any(
        c.get("type") == "FailureRateExceeded" and c.get("status") == "True"
        for c in plan.status.get("conditions") or []
    )
    m.STOPPED.labels(namespace, name).set(1 if stopped else 0)
    if plan.finished:
        m.CAMPAIGNS_FINISHED.labels(namespace, plan.finished).inc()


CONTROLLER = Controller(CAMPAIGN_KIND, CAMPAIGN_PLURAL, WATCHES, _reconcile_once, _look_indexed)
CONTROLLER.register("on_campaign_change", "campaign_versions")
# a child environment came, changed (its phase, its defects) or went
CONTROLLER.on_child(
    (GROUP, VERSION, ENVIRONMENTS),
    {LABEL_CAMPAIGN: kopf.PRESENT},
    CONTROLLER.controlled_by(LABEL_CAMPAIGN),
    "on_campaign_child",
    "environment",
)


@kopf.on.delete(GROUP, VERSION, CAMPAIGN_PLURAL)
def on_campaign_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    campaign_kube().delete_children(namespace, name)
    m.forget(namespace, name)
    CONTROLLER.forget(namespace, name, str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["CONTROLLER", "on_campaign_delete"]

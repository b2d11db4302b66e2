"""The SynthesisCampaign controller: one idempotent reconcile, run on create, spec change,
resume and by a timer until the campaign is Complete (the timer notices children that
finished; one LIST of the children by label per run). Each reconcile reads the campaign
afresh, creates the next wave of children, writes its status once, then posts the events.
Deleting a campaign deletes its children (owner references, and by label here, behind the
finalizer coworkgym.dev/cleanup that the environment controller configures for kopf)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf

from coworkgym_operator.campaign import metrics as m
from coworkgym_operator.campaign.api.types import CAMPAIGN_PLURAL
from coworkgym_operator.campaign.kube import CampaignKube
from coworkgym_operator.campaign.reconcile.plan import (
    CampaignObserved,
    CampaignPlan,
    reconcile_campaign,
)
from coworkgym_operator.core import metrics, shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.settings import SETTINGS
from coworkgym_operator.core.turns import (
    Turns,
    carry_out,
    counted,
    fresh,
    log_transition,
    post_events,
)

KIND = "SynthesisCampaign"
_campaign_kube: CampaignKube | None = None
# the reconciles of one campaign take turns, each on a fresh read (controllers/turns.py)
_turns = Turns()


def campaign_kube() -> CampaignKube:
    global _campaign_kube
    if _campaign_kube is None:
        _campaign_kube = CampaignKube(kube())
    return _campaign_kube


def _reconcile(body: kopf.Body, logger: kopf.Logger) -> None:
    # gone, or going: on_campaign_delete handles it
    _turns.reconcile(body, logger, campaign_kube().read_campaign, _reconcile_once)


def _reconcile_once(current: dict[str, Any], body: kopf.Body, logger: kopf.Logger) -> None:
    campaign, namespace, name = fresh(current)
    ck = campaign_kube()
    with counted(namespace, KIND):
        children = ck.children(namespace, name, str(campaign["metadata"]["uid"]))
        plan = reconcile_campaign(campaign, CampaignObserved(children, datetime.now(UTC)))
        carry_out(ck, logger, namespace, name, [], plan.create, campaign["status"], plan.status)
    log_transition(logger, plan.transition, plan.status)
    _record(namespace, name, campaign, plan)
    post_events(body, plan.events)


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
    if plan.transition:
        metrics.TRANSITIONS.labels(namespace, KIND).inc()


def _not_complete(status: Any) -> bool:
    return not any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@kopf.on.resume(GROUP, VERSION, CAMPAIGN_PLURAL)
@kopf.on.create(GROUP, VERSION, CAMPAIGN_PLURAL)
@kopf.on.update(GROUP, VERSION, CAMPAIGN_PLURAL, field="spec")
def on_campaign_change(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.timer(
    GROUP,
    VERSION,
    CAMPAIGN_PLURAL,
    interval=SETTINGS.reconcile_interval,
    initial_delay=1.0,
    when=lambda status, **_: _not_complete(status),
)
def on_campaign_timer(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.on.delete(GROUP, VERSION, CAMPAIGN_PLURAL)
def on_campaign_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    campaign_kube().delete_children(namespace, name)
    m.forget(namespace, name)
    _turns.forget(str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["on_campaign_change", "on_campaign_delete", "on_campaign_timer"]

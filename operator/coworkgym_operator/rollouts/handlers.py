"""The RolloutBatch controller: one idempotent reconcile, run on create, spec change, resume
and by a timer until the batch is Complete (the timer notices finished Jobs without Job
watches). Before the first pod it resolves the environments and probes the endpoints;
each reconcile reads the batch afresh, writes its status once, then posts the events.
kopf's settings (finalizer coworkgym.dev/cleanup, annotations storage, event source) are
the ones the CoworkEnvironment controller configures at start-up."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from coworkgym_operator.core import shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.gateway_address import by_address
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.turns import (
    Turns,
    carry_out,
    counted,
    fresh,
    log_transition,
    post_events,
)
from coworkgym_operator.rollouts import metrics as m
from coworkgym_operator.rollouts.api.types import (
    BATCH_PLURAL,
    ResolvedEnvironment,
    RolloutBatchSpec,
)
from coworkgym_operator.rollouts.kube import BatchKube, probe
from coworkgym_operator.rollouts.reconcile.plan import (
    BatchObserved,
    BatchPlan,
    jobs_to_observe,
    model_endpoints,
    needs_probe,
    reconcile_batch,
)
from coworkgym_operator.rollouts.settings import BatchSettings

SETTINGS = BatchSettings.from_env()
KIND = "RolloutBatch"
_batch_kube: BatchKube | None = None


def batch_kube() -> BatchKube:
    global _batch_kube
    if _batch_kube is None:
        _batch_kube = BatchKube(kube())
    return _batch_kube


def observe(batch: dict[str, Any]) -> BatchObserved:
    namespace, name = batch["metadata"]["namespace"], batch["metadata"]["name"]
    bk = batch_kube()
    released: list[ResolvedEnvironment] | None = None
    not_released: dict[str, str] = {}
    unreachable: dict[str, str] = {}
    probed = False
    try:
        spec = RolloutBatchSpec.model_validate(batch.get("spec") or {})
    except ValidationError:
        spec = None  # the reconcile says why
    if spec is not None and needs_probe(batch):
        released, not_released = bk.resolve(namespace, spec)
        unreachable = probe(model_endpoints(spec), SETTINGS.probe_timeout_seconds)
        probed = True
    jobs: dict[str, JobObservation] = {
        job: bk.kube.observe_job(namespace, job) for job in jobs_to_observe(batch)
    }
    return BatchObserved(
        released=released,
        not_released=not_released,
        probed=probed,
        unreachable=unreachable,
        jobs=jobs,
        existing_children=bk.existing_children(namespace, name),
        now=datetime.now(UTC),
    )


def settings_now() -> BatchSettings:
    """The settings, with the gateway's host name resolved to an address for the rollout
    pods (gateway_address says why)."""
    url = SETTINGS.gateway_url
    resolved = by_address(url)
    return SETTINGS if resolved == url else replace(SETTINGS, gateway_url=resolved)


# the reconciles of one batch take turns, each on a fresh read (controllers/turns.py)
_turns = Turns()


def _reconcile(body: kopf.Body, logger: kopf.Logger) -> None:
    # gone, or going: on_batch_delete handles it
    _turns.reconcile(body, logger, batch_kube().read_batch, _reconcile_once)


def _reconcile_once(current: dict[str, Any], body: kopf.Body, logger: kopf.Logger) -> None:
    batch, namespace, name = fresh(current)
    bk = batch_kube()
    with counted(namespace, KIND):
        plan = reconcile_batch(batch, observe(batch), settings_now())
        carry_out(
            bk, logger, namespace, name, plan.delete, plan.create, batch["status"], plan.status
        )
    log_transition(logger, plan.transition, plan.status)
    _record(namespace, name, plan)
    post_events(body, plan.events)


def _record(namespace: str, name: str, plan: BatchPlan) -> None:
    for ended in plan.rollouts:
        labels = (namespace, *m.split_policy(ended.policy))
        m.ROLLOUT_PODS.labels(*labels).inc()
        m.DURATION.labels(*labels).observe(ended.seconds)
        m.TOKENS.labels(*labels).inc(ended.tokens)
        if ended.simulator_faults:
            m.SIMULATOR_FAULTS.labels(*labels).inc()
    for outcome in plan.outcomes:
        m.ROLLOUTS.labels(namespace, *m.split_policy(outcome.policy), outcome.outcome).inc()
    m.BATCH_RUNNING.labels(namespace, name).set(plan.status.get("counts", {}).get("running", 0))
    if plan.finished:
        m.BATCHES_FINISHED.labels(namespace, plan.finished).inc()


def _not_complete(status: Any) -> bool:
    return not any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@kopf.on.resume(GROUP, VERSION, BATCH_PLURAL)
@kopf.on.create(GROUP, VERSION, BATCH_PLURAL)
@kopf.on.update(GROUP, VERSION, BATCH_PLURAL, field="spec")
def on_batch_change(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.timer(
    GROUP,
    VERSION,
    BATCH_PLURAL,
    interval=SETTINGS.operator.reconcile_interval,
    initial_delay=1.0,
    when=lambda status, **_: _not_complete(status),
)
def on_batch_timer(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.on.delete(GROUP, VERSION, BATCH_PLURAL)
def on_batch_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    batch_kube().delete_children(namespace, name)
    with contextlib.suppress(KeyError):  # a batch this process never reconciled
        m.BATCH_RUNNING.remove(namespace, name)
    logger.info(f"deleted the children of {name}")


__all__ = ["observe", "on_batch_change", "on_batch_delete", "on_batch_timer"]

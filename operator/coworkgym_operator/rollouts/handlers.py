"""The RolloutBatch controller, on the event-driven toolkit (core/controller.py): one
idempotent reconcile, run on create, spec change and resume, on the events of its Jobs and
their pods (read from the watches' indices, rollouts/watches.py), and at the deadlines the
clock sets (a pod's start grace, a retry, work in flight); the resync sweep is the only
timer. Before the first pod it resolves the environments and probes the endpoints; each
reconcile reads the batch afresh, writes its status once, then posts the events. kopf's
settings (finalizer coworkgym.dev/cleanup, annotations storage, event source) are the
operator's (core/startup.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from coworkgym_operator.core import shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.controller import (
    Controller,
    Done,
    Look,
    done,
)
from coworkgym_operator.core.gateway_address import by_address
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.observe import JobObservation, start_wait
from coworkgym_operator.core.turns import announce, carry_out, where
from coworkgym_operator.core.watches import JOBS, PODS, Indices
from coworkgym_operator.rollouts import metrics as m
from coworkgym_operator.rollouts.api.types import (
    BATCH_KIND,
    BATCH_PLURAL,
    ResolvedEnvironment,
    RolloutBatchSpec,
)
from coworkgym_operator.rollouts.builders import LABEL_BATCH
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
from coworkgym_operator.rollouts.watches import WATCHES

SETTINGS = BatchSettings.from_env()
_batch_kube: BatchKube | None = None


def batch_kube() -> BatchKube:
    global _batch_kube
    if _batch_kube is None:
        _batch_kube = BatchKube(kube())
    return _batch_kube


def observe(batch: dict[str, Any], indices: Indices | None = None) -> BatchObserved:
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
    if indices is None:  # no watches registered: ask the API
        jobs = {job: bk.kube.observe_job(namespace, job) for job in jobs_to_observe(batch)}
        existing = bk.existing_children(namespace, name)
    else:
        uid = str(batch["metadata"].get("uid"))
        jobs, existing = _indexed(namespace, name, uid, tuple(jobs_to_observe(batch)), indices)
        CONTROLLER.delivered(uid, indices.children(namespace, name))
    now = datetime.now(UTC)
    return BatchObserved(released, not_released, probed, unreachable, jobs, existing, now)


def _indexed(
    namespace: str, name: str, uid: str, names: tuple[str, ...], indices: Indices
) -> tuple[dict[str, JobObservation], frozenset[str]]:
    """The Jobs named and the batch's children, from the indices (with what this process
    created that the watches have not delivered yet)."""
    children = indices.children(namespace, name)
    made = CONTROLLER.undelivered(uid, children)
    jobs = {job: indices.job(namespace, job, f"Job/{job}" in made) for job in names}
    return jobs, children | made.keys()


def _look(jobs: dict[str, JobObservation], existing: frozenset[str]) -> Look:
    seen = repr((sorted(jobs.items()), sorted(existing)))
    grace = SETTINGS.operator.stage_start_grace_seconds
    interval = SETTINGS.operator.reconcile_interval
    return Look(seen, start_wait(jobs.values(), datetime.now(UTC), grace, interval))


def _look_indexed(namespace: str, name: str, uid: str, hint: Hashable, indices: Indices) -> Look:
    names: tuple[str, ...] = hint if isinstance(hint, tuple) else ()
    return _look(*_indexed(namespace, name, uid, names, indices))


def settings_now() -> BatchSettings:
    """The settings, with the gateway's host name resolved to an address for the rollout
    pods (gateway_address says why)."""
    url = SETTINGS.gateway_url
    resolved = by_address(url)
    return SETTINGS if resolved == url else replace(SETTINGS, gateway_url=resolved)


def _reconcile_once(
    batch: dict[str, Any], body: kopf.Body, logger: kopf.Logger, indices: Indices | None
) -> Done:
    namespace, name = where(batch)
    bk = batch_kube()
    observed = observe(batch, indices)
    plan = reconcile_batch(batch, observed, settings_now())
    carry_out(bk, logger, namespace, name, plan.delete, plan.create, batch["status"], plan.status)
    _record(namespace, name, plan)
    announce(logger, body, plan.transition, plan.status, plan.events)
    look, hint = _look(observed.jobs, observed.existing_children), tuple(jobs_to_observe(batch))
    return done(
        batch["status"], plan.status, plan.create, plan.delete,
        busy=observed.probed, hint=hint, look=look, transition=plan.transition,
    )  # fmt: skip


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


CONTROLLER = Controller(BATCH_KIND, BATCH_PLURAL, WATCHES, _reconcile_once, _look_indexed)
CONTROLLER.register("on_batch_change", "batch_versions")
# a Job came, changed or went; a rollout pod scheduled, started, could not start, ended
CONTROLLER.on_child(
    JOBS, {LABEL_BATCH: kopf.PRESENT}, CONTROLLER.controlled_by(LABEL_BATCH), "on_batch_job", "job"
)
CONTROLLER.on_child(
    PODS, {LABEL_BATCH: kopf.PRESENT}, CONTROLLER.job_pod_of(LABEL_BATCH), "on_batch_pod", "pod"
)


@kopf.on.delete(GROUP, VERSION, BATCH_PLURAL)
def on_batch_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    batch_kube().delete_children(namespace, name)
    with contextlib.suppress(KeyError):  # a batch this process never reconciled
        m.BATCH_RUNNING.remove(namespace, name)
    CONTROLLER.forget(namespace, name, str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["CONTROLLER", "observe", "on_batch_delete"]

"""The RolloutBatch controller: one idempotent reconcile, run on create, spec change, resume
and by a timer until the batch is Complete (the timer notices finished Jobs without Job
watches). Before the first pod it resolves the environments and probes the endpoints;
status is written once per cycle through kopf's patch, events follow. kopf's settings
(finalizer coworkgym.dev/cleanup, annotations storage, event source) are the ones the
CoworkEnvironment controller configures at start-up."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import kopf
from pydantic import ValidationError

from .. import batch_metrics as m
from .. import metrics
from ..api.batch import BATCH_PLURAL, ResolvedEnvironment, RolloutBatchSpec
from ..api.types import GROUP, VERSION
from ..batch_settings import BatchSettings
from ..kube_batch import BatchKube, probe
from ..reconcile.batch import (
    BatchObserved,
    BatchPlan,
    jobs_to_observe,
    model_endpoints,
    needs_probe,
    reconcile_batch,
)
from ..reconcile.environment import JobObservation
from .environment import kube

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


_resolved: dict[str, str] = {}


def settings_now() -> BatchSettings:
    """The settings with the gateway's host name resolved to an address: rollout pods get
    no DNS (queries are a way out), so they are handed the Service's IP."""
    url = SETTINGS.gateway_url
    host = urlsplit(url).hostname or ""
    if not host or _is_address(host):
        return SETTINGS
    if host not in _resolved:
        _resolved[host] = socket.gethostbyname(host)  # raises: kopf retries the reconcile
    return replace(SETTINGS, gateway_url=url.replace(host, _resolved[host], 1))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _reconcile(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger) -> None:
    batch = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}
    batch["metadata"]["namespace"] = namespace = str(body.metadata.namespace)
    metrics.RECONCILES.labels(namespace, KIND).inc()
    try:
        plan = reconcile_batch(batch, observe(batch), settings_now())
        bk = batch_kube()
        for kind, child in plan.delete:
            if bk.delete(namespace, kind, child):
                logger.info(f"deleted {kind}/{child}")
        for manifest in plan.create:
            if bk.create(manifest):
                logger.info(f"created {manifest['kind']}/{manifest['metadata']['name']}")
    except Exception:
        metrics.RECONCILE_ERRORS.labels(namespace, KIND).inc()
        raise  # kopf retries with backoff
    previous = _plain(body.status or {})
    if plan.status != previous:
        patch.status.update(merge_patch(previous, plan.status))
    if plan.transition:
        before, after = plan.transition
        logger.info(f"phase {before} → {after}: {plan.status.get('message', '')}")
    _record(namespace, str(body.metadata.name), plan)
    for kind, reason, message in plan.events:
        kopf.event(body, type=kind, reason=reason, message=message)


def _plain(value: Any) -> Any:
    """kopf's read-only views as plain dicts and lists (for comparing and diffing)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def merge_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) from ``before`` to ``after``: a merge patch only adds
    and replaces map keys, so a key that is gone (a rollout no longer in status.running)
    must be sent as null to be removed."""
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            nested = merge_patch(old, value)
            if nested:
                patch[key] = nested
        elif value != old:
            patch[key] = value
    return patch


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
def on_batch_change(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, patch, logger)


@kopf.timer(
    GROUP,
    VERSION,
    BATCH_PLURAL,
    interval=SETTINGS.operator.reconcile_interval,
    initial_delay=1.0,
    when=lambda status, **_: _not_complete(status),
)
def on_batch_timer(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, patch, logger)


@kopf.on.delete(GROUP, VERSION, BATCH_PLURAL)
def on_batch_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    batch_kube().delete_children(namespace, name)
    with contextlib.suppress(KeyError):  # a batch this process never reconciled
        m.BATCH_RUNNING.remove(namespace, name)
    logger.info(f"deleted the children of {name}")


__all__ = ["observe", "on_batch_change", "on_batch_delete", "on_batch_timer"]

"""The CoworkEnvironment controller: one idempotent reconcile, run on create, update, resume
and by a timer (level-triggered: the timer notices finished Jobs without Job watches).
Status is written once per cycle through kopf's patch; events follow."""

from __future__ import annotations

import time
from typing import Any

import kopf

from .. import metrics
from ..api.types import GROUP, PLURAL, VERSION
from ..kube import Kube
from ..reconcile.environment import Observed, pending_job_name, reconcile
from ..settings import OperatorSettings

SETTINGS = OperatorSettings.from_env()
_kube: Kube | None = None


def kube() -> Kube:
    global _kube
    if _kube is None:
        from kubernetes import config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        _kube = Kube()
    return _kube


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # kopf's own bookkeeping in annotations, so that status holds only our schema
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = 20  # INFO events and above
    settings.watching.server_timeout = 60
    # we watch one known CRD; scanning for namespaces/CRDs only costs a namespaced operator
    # (without cluster-wide list rights) a minute of retries at start-up
    settings.scanning.disabled = True


def _reconcile(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger) -> None:
    env = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}
    env["metadata"]["namespace"] = body.metadata.namespace
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    metrics.RECONCILES.labels("CoworkEnvironment").inc()
    try:
        pending = pending_job_name(env)
        observed = Observed(
            job=kube().observe_job(namespace, pending) if pending else None,
            existing_children=kube().existing_children(namespace, name),
        )
        plan = reconcile(env, observed, SETTINGS)
        for child in plan.create:
            if kube().create(child):
                logger.info(f"created {child['kind']}/{child['metadata']['name']}")
    except Exception:
        metrics.RECONCILE_ERRORS.labels("CoworkEnvironment").inc()
        raise  # kopf retries with backoff: a temporary error
    if plan.status != dict(body.status or {}):  # skip no-op writes
        patch.status.update(plan.status)
    _record(f"{namespace}/{name}", plan)
    for kind, reason, message in plan.events:
        kopf.event(body, type=kind, reason=reason, message=message)


def _record(key: str, plan: Any) -> None:
    metrics.observe_phase(key, plan.status.get("phase"))
    for defect in plan.defects:
        metrics.DEFECTS.labels(defect.code, defect.owner).inc()
    if plan.stage_seconds:
        metrics.STAGE_SECONDS.labels(plan.stage_seconds[0]).observe(plan.stage_seconds[1])
    if plan.job_failed:
        metrics.JOB_FAILURES.labels(plan.job_failed).inc()
    if plan.finished:
        metrics.FINISHED.labels(plan.finished).inc()
        metrics.ITERATIONS.observe(plan.status.get("iteration", 0))
        if plan.finished == "rejected":
            metrics.BUDGET_EXHAUSTED.inc()


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def on_change(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, patch, logger)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=SETTINGS.reconcile_interval,
    initial_delay=1.0,
    when=lambda status, **_: status.get("phase") not in ("Released", "Rejected", "Failed"),
)
def on_timer(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, patch, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    kube().delete_children(namespace, name)
    metrics.observe_phase(f"{namespace}/{name}", None)
    logger.info(f"deleted the children of {name}")


__all__ = ["configure", "on_change", "on_delete", "on_timer", "time"]

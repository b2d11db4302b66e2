"""The CoworkEnvironment controller, on the event-driven toolkit (core/controller.py): one
idempotent reconcile, run on create, update and resume, on the events of its stage Jobs and
pods, and at the deadlines the clock sets (a stage pod's start grace, a retry after an
error: core/wakeups.py); one resync sweep looks again, now and then, at each unfinished
environment that changed since its last reconcile, in case an event was missed. An event
that changes nothing the reconcile reads is decided on the event loop from the watches'
indices, without an API call. Each reconcile reads the object afresh and writes its whole
status once, in turn with the object's other reconciles; events follow, posted under the
operator's own name. The log says what changed (a phase, a child created or deleted), not
that a handler ran."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf

from coworkgym_operator.core import shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import LABEL_SANDBOX
from coworkgym_operator.core.controller import (
    Controller,
    Done,
    Look,
    done,
)
from coworkgym_operator.core.gateway_address import by_address
from coworkgym_operator.core.kube import kube as shared_kube
from coworkgym_operator.core.observe import start_wait
from coworkgym_operator.core.settings import SETTINGS, OperatorSettings
from coworkgym_operator.core.startup import COMPONENT, FINALIZER, configure
from coworkgym_operator.core.turns import (
    announce,
    carry_out,
    delete_children,
    where,
)
from coworkgym_operator.core.watches import JOBS, PODS, Indices
from coworkgym_operator.environment import metrics
from coworkgym_operator.environment.api.types import KIND, PLURAL
from coworkgym_operator.environment.builders import LABEL_ENV
from coworkgym_operator.environment.kube import EnvironmentKube
from coworkgym_operator.environment.reconcile.loop import (
    Observed,
    Plan,
    pending_job_name,
    reconcile,
)
from coworkgym_operator.environment.watches import WATCHES

# what operators before 0.2 put on every environment: removed on deletion, so that an
# environment created by an older operator is not stranded by the rename
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
TERMINAL = ("Released", "Rejected", "Failed")
_kube: EnvironmentKube | None = None


def kube() -> EnvironmentKube:
    """The environment's I/O, on the operator's one client (core/kube.py)."""
    global _kube
    if _kube is None:
        _kube = EnvironmentKube(shared_kube().api)
    return _kube


def family_of(spec: dict[str, Any]) -> str:
    """The family label of the metrics: the spec's family, or the one its labels choose
    (the Builder makes the same choice), so it is one of a fixed set."""
    from coworkgym.families import FAMILIES, family_for_scenario

    task = spec.get("task") or {}
    if task.get("family"):
        return str(task["family"]) if task["family"] in FAMILIES else "unknown"
    scenario = str((task.get("labels") or {}).get("scenario", ""))
    return family_for_scenario(scenario, int(task.get("seed", 0))).name


def _observe(env: dict[str, Any], indices: Indices | None) -> Observed:
    namespace, name = env["metadata"]["namespace"], env["metadata"]["name"]
    uid, pending = str(env["metadata"].get("uid")), pending_job_name(env)
    if indices is None:  # no watches registered: ask the API
        job = kube().observe_job(namespace, pending) if pending else None
        return Observed(job, kube().existing_children(namespace, name), datetime.now(UTC))
    observed = _observe_indexed(namespace, name, uid, pending, indices)
    CONTROLLER.delivered(uid, indices.children(namespace, name))
    return observed


def _observe_indexed(
    namespace: str, name: str, uid: str, pending: str | None, indices: Indices
) -> Observed:
    children = indices.children(namespace, name)
    made = CONTROLLER.undelivered(uid, children)
    job = indices.job(namespace, pending, f"Job/{pending}" in made) if pending else None
    existing = children | {c for c in made if not c.startswith("Job/")}
    return Observed(job, existing, datetime.now(UTC))


def _look(observed: Observed) -> Look:
    """What the reconcile read, and how long until time alone may change the plan (a stage
    pod that has not started, once its grace is up)."""
    seen = repr((observed.job, sorted(observed.existing_children)))
    jobs = [observed.job] if observed.job is not None else []
    grace, interval = SETTINGS.stage_start_grace_seconds, SETTINGS.reconcile_interval
    return Look(seen, start_wait(jobs, observed.now, grace, interval))


def _look_indexed(namespace: str, name: str, uid: str, hint: Hashable, indices: Indices) -> Look:
    pending = str(hint) if hint else None
    return _look(_observe_indexed(namespace, name, uid, pending, indices))


def _reconcile_once(
    env: dict[str, Any], body: kopf.Body, logger: kopf.Logger, indices: Indices | None
) -> Done:
    namespace, name = where(env)
    observed = _observe(env, indices)
    plan = reconcile(env, observed, settings_now())
    # The status first, then the deletes: a finished stage's pod holds its result, so a
    # kill between removing it and recording the result would lose it and run the
    # stage again; recorded first, a restarted operator reads the end from the status
    # and plans the same deletes again. The pods go before the claims, whose presence
    # is what plans both again after a kill.
    carry_out(kube(), logger, namespace, name, [], plan.create, env["status"], plan.status)
    if plan.delete_stage_pods:
        kube().delete_stage_pods(namespace, name)
    delete_children(kube(), logger, namespace, plan.delete)
    _record(namespace, name, _family(env), plan, taken_up=not env["status"].get("phase"))
    announce(logger, body, plan.transition, plan.status, plan.events)
    busy, look, hint = plan.delete_stage_pods, _look(observed), pending_job_name(env)
    return done(
        env["status"], plan.status, plan.create, plan.delete,
        busy=busy, hint=hint, look=look, transition=plan.transition,
    )  # fmt: skip


def _finished(status: Any) -> bool:
    return status.get("phase") in TERMINAL


CONTROLLER = Controller(KIND, PLURAL, WATCHES, _reconcile_once, _look_indexed, finished=_finished)
CONTROLLER.register("on_change", "env_versions")
# A stage Job came, changed or went; a stage pod changed (scheduled, started, could not
# start, ended): its environment's reconcile reads it, so a finished stage is noticed in
# about a second. The log lines of that reconcile carry the child's name; its events go
# on the environment.
CONTROLLER.on_child(
    JOBS, {LABEL_ENV: kopf.PRESENT}, CONTROLLER.controlled_by(LABEL_ENV), "on_stage_job", "job"
)
CONTROLLER.on_child(
    PODS,
    {LABEL_ENV: kopf.PRESENT, LABEL_SANDBOX: "true"},
    CONTROLLER.job_pod_of(LABEL_ENV),
    "on_stage_pod",
    "pod",
)


def settings_now() -> OperatorSettings:
    """The settings, with the gateway's host name resolved to an address for the stage
    pods (gateway_address says why)."""
    url = SETTINGS.gateway_url
    resolved = by_address(url)
    return SETTINGS if resolved == url else replace(SETTINGS, gateway_url=resolved)


def _family(env: dict[str, Any]) -> str:
    try:
        return family_of(env["spec"])
    except (KeyError, TypeError, ValueError):  # an invalid spec: still counted
        return ""


def _record(namespace: str, name: str, family: str, plan: Plan, taken_up: bool = False) -> None:
    labels = (namespace, family)
    metrics.observe_phase(namespace, name, family, plan.status.get("phase"))
    if taken_up and plan.status.get("phase"):
        metrics.TAKEN_UP.labels(*labels).inc()
    for defect in plan.defects:
        metrics.DEFECTS.labels(*labels, defect.code, defect.owner).inc()
    if plan.stage_seconds:
        stage, seconds = plan.stage_seconds
        metrics.STAGE_SECONDS.labels(*labels, stage).observe(seconds)
    if plan.job_failed:
        metrics.JOB_FAILURES.labels(*labels, plan.job_failed).inc()
    if plan.llm_usage:
        used = plan.llm_usage
        metrics.ROLE_REQUESTS.labels(*labels, used.role).inc(used.requests)
        metrics.ROLE_TOKENS.labels(*labels, used.role, "prompt").inc(used.prompt_tokens)
        metrics.ROLE_TOKENS.labels(*labels, used.role, "completion").inc(used.completion_tokens)
    if plan.finished:
        metrics.FINISHED.labels(*labels, plan.finished).inc()
        metrics.ITERATIONS.labels(*labels).observe(plan.status.get("iteration", 0))
        if plan.finished == "rejected":
            metrics.BUDGET_EXHAUSTED.labels(*labels).inc()


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    kube().delete_children(namespace, name)
    if LEGACY_FINALIZER in (body.metadata.get("finalizers") or []):
        kube().remove_finalizer(namespace, name, LEGACY_FINALIZER)
    metrics.observe_phase(namespace, name, "", None)
    CONTROLLER.forget(namespace, name, str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["COMPONENT", "CONTROLLER", "FINALIZER", "configure", "family_of", "on_delete"]

"""The TrainingRun controller: one idempotent reconcile, run on create, spec change, resume
and by a timer until the run is Complete (the timer notices finished Jobs, a round's server
becoming available, its RolloutBatch completing and new progress, without watches). Each
reconcile reads the run afresh, in turn with the run's other reconciles
(controllers/turns.py), writes its status once, then posts the events. kopf's settings
(finalizer coworkgym.dev/cleanup, annotations storage, event source) are the ones the
CoworkEnvironment controller configures at start-up."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.turns import (
    Turns,
    carry_out,
    counted,
    fresh,
    log_transition,
    post_events,
)
from coworkgym_operator.training import metrics as m
from coworkgym_operator.training.api.types import (
    TRAINING_PLURAL,
    TrainingRunSpec,
    TrainingRunStatus,
)
from coworkgym_operator.training.builders.rounds import rollouts_name
from coworkgym_operator.training.builders.run import check_job_name
from coworkgym_operator.training.kube import TrainingKube
from coworkgym_operator.training.reconcile.plan import (
    BatchSeen,
    ServingSeen,
    TrainingObserved,
    TrainingPlan,
    last_report,
    previous_status,
    reconcile_training,
)
from coworkgym_operator.training.settings import TrainingSettings

SETTINGS = TrainingSettings.from_env()
KIND = "TrainingRun"
_training_kube: TrainingKube | None = None
# when each run's training pod log was last read (by uid): at most once per
# SETTINGS.progress_interval_seconds while it runs
_log_read: dict[str, float] = {}
# (namespace, run) → (objective, reason) of its coworkgym_training_failed series
_failed_reason: dict[tuple[str, str], tuple[str, str]] = {}


def training_kube() -> TrainingKube:
    global _training_kube
    if _training_kube is None:
        _training_kube = TrainingKube(kube(), ray_enabled=SETTINGS.ray == "auto")
    return _training_kube


def observe(run: dict[str, Any]) -> TrainingObserved:
    meta = run["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], str(meta.get("uid", ""))
    tk = training_kube()
    status = previous_status(run)
    try:
        spec: TrainingRunSpec | None = TrainingRunSpec.model_validate(run.get("spec") or {})
    except ValidationError:
        spec = None  # the reconcile says why
    batch = check_job = train_job = rayjob = environments = None
    report = result = None
    serving: ServingSeen | None = None
    round_batch: BatchSeen | None = None
    if spec is not None and status.step == "data":
        if spec.rollout is not None and spec.rounds > 1:
            if spec.rollout.environments.manifest_uri is None:  # a manifest: the pod reads it
                environments = tk.resolve_environments(namespace, spec.rollout.environments)
        elif spec.data is not None and spec.data.rollout_batch is not None:
            batch = tk.read_batch(namespace, spec.data.rollout_batch.name)
        else:
            check_job = tk.observe_job(namespace, check_job_name(name))
    rounds = spec is not None and spec.rounds > 1
    if status.step == "train" and status.rounds:  # the round running: its server or batch
        current = status.rounds[-1]
        if current.step == "serve":
            serving = tk.observe_serving(namespace, name, current.round)
        elif current.step == "rollout":
            batch_name = rollouts_name(name, current.round, current.attempt)
            round_batch = tk.read_batch(namespace, batch_name)
    if status.step == "train" and status.job_name:
        finished = False
        if status.backend == "RayJob":
            rayjob = tk.read_rayjob(namespace, status.job_name)
            deployment = ((rayjob or {}).get("status") or {}).get("jobDeploymentStatus")
            finished = deployment in ("Complete", "Failed")
        else:
            train_job = tk.observe_job(namespace, status.job_name)
            finished = train_job.state in ("succeeded", "failed")
        now = time.monotonic()
        if finished or now - _log_read.get(uid, 0.0) >= SETTINGS.progress_interval_seconds:
            _log_read[uid] = now
            report, result = last_report(tk.log_tail(namespace, status.job_name))
    ray = status.backend == "RayJob" or (status.backend is None and tk.ray_available())
    return TrainingObserved(
        batch=batch,
        environments=environments,
        check_job=check_job,
        train_job=train_job,
        rayjob=rayjob,
        report=report,
        logged_result=result,
        serving=serving,
        round_batch=round_batch,
        ray_available=ray,
        existing_children=tk.existing_children(namespace, name, rounds=rounds),
        now=datetime.now(UTC),
        created_at=_parse_time(meta.get("creationTimestamp")),
    )


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


_turns = Turns()


def _reconcile(body: kopf.Body, logger: kopf.Logger) -> None:
    # gone, or going: on_training_delete handles it
    _turns.reconcile(body, logger, training_kube().read_run, _reconcile_once)


def _reconcile_once(current: dict[str, Any], body: kopf.Body, logger: kopf.Logger) -> None:
    run, namespace, name = fresh(current)
    tk = training_kube()
    with counted(namespace, KIND):
        plan = reconcile_training(run, observe(run), SETTINGS)
        carry_out(tk, logger, namespace, name, plan.delete, plan.create, run["status"], plan.status)
    log_transition(logger, plan.transition, plan.status)
    _record(namespace, name, run, plan)
    post_events(body, plan.events)


def _record(namespace: str, name: str, run: dict[str, Any], plan: TrainingPlan) -> None:
    objective = str((run.get("spec") or {}).get("objective") or "unknown")
    status = TrainingRunStatus.model_validate(plan.status)
    labels = (namespace, name, objective)
    # a training pod runs (not an on-policy round's server or rollouts: no step advances
    # then, and the no-progress alert must not take that for a hung trainer)
    running = any(c.type == "Running" and c.reason == "Training" for c in status.conditions)
    m.RUNNING.labels(*labels).set(1 if running else 0)
    m.STEP.labels(*labels).set(status.progress.step)
    if "loss" in status.metrics:
        m.LOSS.labels(*labels).set(status.metrics["loss"])
    since = _parse_time(status.progress.last_report_time or status.start_time)
    if since is not None:
        m.LAST_PROGRESS.labels(*labels).set(since.timestamp())
    failed = next((c for c in status.conditions if c.type == "Failed"), None)
    reason = failed.reason if failed is not None and failed.status == "True" else ""
    if reason:  # set again after an operator restart (the resume handler reconciles it)
        m.FAILED.labels(*labels, reason).set(1)
        _failed_reason[(namespace, name)] = (objective, reason)
    if plan.finished:
        m.RUNS_FINISHED.labels(namespace, objective, plan.finished, reason).inc()
    if plan.nan_loss:
        m.NAN_LOSS.labels(namespace, objective).inc()


def _not_complete(status: Any) -> bool:
    return not any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@kopf.on.resume(GROUP, VERSION, TRAINING_PLURAL)
@kopf.on.create(GROUP, VERSION, TRAINING_PLURAL)
@kopf.on.update(GROUP, VERSION, TRAINING_PLURAL, field="spec")
def on_training_change(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.timer(
    GROUP,
    VERSION,
    TRAINING_PLURAL,
    interval=SETTINGS.operator.reconcile_interval,
    initial_delay=1.0,
    when=lambda status, **_: _not_complete(status),
)
def on_training_timer(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(body, logger)


@kopf.on.delete(GROUP, VERSION, TRAINING_PLURAL)
def on_training_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    training_kube().delete_children(namespace, name)
    spec: Any = body.spec
    objective = str(spec.get("objective") or "unknown")
    for gauge in m.PER_RUN:
        with contextlib.suppress(KeyError):  # a run this process never reconciled
            gauge.remove(namespace, name, objective)
    failed = _failed_reason.pop((namespace, name), None)
    if failed is not None:
        with contextlib.suppress(KeyError):
            m.FAILED.remove(namespace, name, *failed)
    _log_read.pop(str(body.metadata.uid), None)
    _turns.forget(str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["observe", "on_training_change", "on_training_delete", "on_training_timer"]

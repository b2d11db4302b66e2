"""The TrainingRun controller, on the event-driven toolkit (core/controller.py): one
idempotent reconcile, run on create, spec change and resume, on the events of its Jobs and
their pods, its rounds' Deployments and server pods, and its RolloutBatches (the one it
trains on, its rounds'), read from the watches' indices (training/watches.py); and at the
deadlines the clock sets: a pod's start grace, a wait with a deadline, a running trainer's
progress (its log, read at most every progress interval), a retry, work in flight. The
resync sweep is the only timer. Each reconcile reads the run afresh, in turn with the run's
other reconciles (core/turns.py), writes its status once, then posts the events. kopf's
settings (finalizer coworkgym.dev/cleanup, annotations storage, event source) are the
operator's (core/startup.py).

What the indices do not hold is still asked for, when the run is at that step: the
environments a round rolls out on (looked up again every reconcile interval while it
waits for them), a RayJob and KubeRay's presence, a round's server (its Deployment,
Service and pods), the training pod's log."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.controller import (
    Controller,
    Done,
    Key,
    Look,
    done,
)
from coworkgym_operator.core.kube import kube
from coworkgym_operator.core.observe import JobObservation, parse_time, start_wait
from coworkgym_operator.core.turns import announce, carry_out, where
from coworkgym_operator.core.watches import JOBS, PODS, Indices
from coworkgym_operator.training import metrics as m
from coworkgym_operator.training.api.types import (
    TRAINING_KIND,
    TRAINING_PLURAL,
    TrainingRunSpec,
    TrainingRunStatus,
)
from coworkgym_operator.training.builders.rounds import rollouts_name
from coworkgym_operator.training.builders.run import LABEL_TRAINING, check_job_name
from coworkgym_operator.training.kube import TrainingKube
from coworkgym_operator.training.reconcile.conditions import watched_for_progress
from coworkgym_operator.training.reconcile.observe import batch_seen
from coworkgym_operator.training.reconcile.plan import (
    BatchSeen,
    ServingSeen,
    TrainingObserved,
    TrainingPlan,
    last_report,
    previous_status,
    reconcile_training,
)
from coworkgym_operator.training.reconcile.rounds import server_start
from coworkgym_operator.training.reconcile.starting import seconds_to_deadline
from coworkgym_operator.training.reconcile.starting import start_wait as pod_start_wait
from coworkgym_operator.training.reconcile.state import age
from coworkgym_operator.training.settings import TrainingSettings
from coworkgym_operator.training.watches import BATCHES, DEPLOYMENTS, WATCHES

SETTINGS = TrainingSettings.from_env()
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


def observe(run: dict[str, Any], indices: Indices | None = None) -> TrainingObserved:
    meta = run["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], str(meta.get("uid", ""))
    tk = training_kube()
    status = previous_status(run)
    job, batch_of, existing = _readers(namespace, name, uid, indices)

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
            batch = batch_of(namespace, spec.data.rollout_batch.name)
        else:
            check_job = job(namespace, check_job_name(name))
    if status.step == "train" and status.rounds:  # the round running: its server or batch
        current = status.rounds[-1]
        if current.step == "serve":
            serving = tk.observe_serving(namespace, name, current.round)
        elif current.step == "rollout":
            batch_name = rollouts_name(name, current.round, current.attempt)
            round_batch = batch_of(namespace, batch_name)
    if status.step == "train" and status.job_name:
        finished = False
        if status.backend == "RayJob":
            rayjob = tk.read_rayjob(namespace, status.job_name)
            deployment = ((rayjob or {}).get("status") or {}).get("jobDeploymentStatus")
            finished = deployment in ("Complete", "Failed")
        else:
            train_job = job(namespace, status.job_name)
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
        existing_children=existing,
        now=datetime.now(UTC),
        created_at=parse_time(meta.get("creationTimestamp")),
    )


def _readers(
    namespace: str, name: str, uid: str, indices: Indices | None
) -> tuple[Callable[[str, str], JobObservation], Callable[[str, str], BatchSeen], frozenset[str]]:
    """How the run's Jobs and RolloutBatches are read, and its children: from the indices
    (with what this process made that the watches have not delivered), else the API."""
    tk = training_kube()
    if indices is None:  # no watches registered: ask the API
        return tk.observe_job, tk.read_batch, tk.existing_children(namespace, name, rounds=True)
    children = indices.children(namespace, name)
    made = CONTROLLER.undelivered(uid, children)
    CONTROLLER.delivered(uid, children)

    def job(namespace: str, job: str) -> JobObservation:
        return indices.job(namespace, job, f"Job/{job}" in made)

    def batch_of(namespace: str, batch: str) -> BatchSeen:
        found = indices.get("training_batches", (namespace, batch))
        return batch_seen(batch, found[0] if found else None)

    return job, batch_of, frozenset(children | made.keys() | tk.rayjobs(namespace, name))


def _clock(observed: TrainingObserved) -> float | None:
    """How long until time alone may change the plan: the check pod's start grace, the
    deadline of a training pod (or a round's server) that has not started (its pod's
    events wake the run before that: scheduled, started), a wait with a deadline (the
    batch it names, from the run's creation), the next read of a running trainer's
    progress; while it waits for environments or a round's server to be ready, the
    reconcile interval (no event of theirs reaches the run)."""
    interval = SETTINGS.operator.reconcile_interval
    grace = SETTINGS.operator.stage_start_grace_seconds
    now = observed.now
    checks = [observed.check_job] if observed.check_job is not None else []
    waits = [start_wait(checks, now, grace, interval)]
    train = observed.train_job
    if train is not None and train.state == "running":
        if train.start.started:  # its log says how far it is
            waits.append(SETTINGS.progress_interval_seconds)
        elif train.created_at is None:  # the Job has not reached the watch yet
            waits.append(interval)
        else:
            wait = pod_start_wait(train.start, train.created_at, now, SETTINGS)
            waits.append(seconds_to_deadline(wait, now))
    if observed.batch is not None and not observed.batch.found:
        waited = age(observed)
        waits.append(grace - waited + 0.1 if waited is not None and waited < grace else interval)
    envs = observed.environments
    if envs is not None and (envs.not_released or not envs.released):
        waits.append(interval)
    serving = observed.serving
    if serving is not None and not serving.available:
        pending = server_start(serving, now, SETTINGS)
        waits.append(seconds_to_deadline(pending, now) if pending.waiting else interval)
    if observed.rayjob is not None:
        waits.append(SETTINGS.progress_interval_seconds)
    return min((w for w in waits if w is not None), default=None)


def _reconcile_once(
    run: dict[str, Any], body: kopf.Body, logger: kopf.Logger, indices: Indices | None
) -> Done:
    namespace, name = where(run)
    tk = training_kube()
    observed = observe(run, indices)
    plan = reconcile_training(run, observed, SETTINGS)
    carry_out(tk, logger, namespace, name, plan.delete, plan.create, run["status"], plan.status)
    _record(namespace, name, run, plan)
    announce(logger, body, plan.transition, plan.status, plan.events)
    look = Look(wait=_clock(observed))
    before, transition = run["status"], plan.transition
    return done(before, plan.status, plan.create, plan.delete, look=look, transition=transition)


def _record(namespace: str, name: str, run: dict[str, Any], plan: TrainingPlan) -> None:
    objective = str((run.get("spec") or {}).get("objective") or "unknown")
    status = TrainingRunStatus.model_validate(plan.status)
    labels = (namespace, name, objective)
    # a training pod runs, or an on-policy round serves or rolls out: the no-progress
    # alert watches each (a round's step and its rollouts ending count as progress)
    m.RUNNING.labels(*labels).set(1 if watched_for_progress(status) else 0)
    m.STEP.labels(*labels).set(status.progress.step)
    if "loss" in status.metrics:
        m.LOSS.labels(*labels).set(status.metrics["loss"])
    since = parse_time(status.progress.last_report_time or status.start_time)
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


CONTROLLER = Controller(TRAINING_KIND, TRAINING_PLURAL, WATCHES, _reconcile_once)
CONTROLLER.register("on_training_change", "training_versions")
_labelled = {LABEL_TRAINING: kopf.PRESENT}
_named = CONTROLLER.named_by(LABEL_TRAINING)
# its Jobs and their pods, its rounds' servers and their pods
CONTROLLER.on_child(JOBS, _labelled, _named, "on_training_job", "job")
CONTROLLER.on_child(PODS, _labelled, _named, "on_training_pod", "pod")
CONTROLLER.on_child(DEPLOYMENTS, _labelled, _named, "on_training_server", "deployment")


def _batch_users(body: kopf.Body, namespace: str, labels: Any, indices: Indices) -> list[Key]:
    """The runs a RolloutBatch's change may move: the round's run that made it, and the
    runs that train on it by name."""
    users = _named(body, namespace, labels, indices)
    named = indices.get("training_by_batch", (namespace, str(body.metadata.name)))
    return [*users, *(k for run, _ in named for k in CONTROLLER.unfinished(namespace, run))]


CONTROLLER.on_child(BATCHES, None, _batch_users, "on_training_batch", "batch")


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
    CONTROLLER.forget(namespace, name, str(body.metadata.uid))
    logger.info(f"deleted the children of {name}")


__all__ = ["CONTROLLER", "observe", "on_training_delete"]

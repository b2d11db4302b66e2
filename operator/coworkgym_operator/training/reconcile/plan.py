"""One reconcile of a TrainingRun, as a pure function of what was observed.

Level-triggered: from the run (spec + the status written last time), the RolloutBatch it
names (or the dataset check's result), the training Job or RayJob and what its pod last
reported, decide the new status, what to create and what to delete. Children have
deterministic names (builders/run.py: ``<run>-check-data``, ``<run>-train-<start>``), a
child is created only when it is missing, so a second reconcile on the same observation
plans the same, and a restarted operator duplicates nothing.

    data (the batch Complete, or the s3:// dataset found) ─▶ train (Job or RayJob) ─▶ done

An on-policy run (rounds > 1) has no data to wait for: its data step resolves the released
environments every round rolls out on (a manifest is taken as it is; named or selected
CoworkEnvironments must be Released), and its train step drives the rounds, each a server,
a RolloutBatch and a training Job of its own (training_rounds.py).

Suspend deletes the training Job (or RayJob); resuming starts a new one (start + 1) that
resumes from the last checkpoint in spec.output. A NaN loss, a dataset that is not there,
a batch that failed, a pod that cannot start: Failed, with a reason naming the field.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from coworkgym_operator.core.api import read_spec, read_status
from coworkgym_operator.core.conditions import Cond, merge
from coworkgym_operator.core.observe import stuck
from coworkgym_operator.training.api.conditions import TrainingCondition as T
from coworkgym_operator.training.api.conditions import TrainingReason as R
from coworkgym_operator.training.api.types import Progress, TrainingRunSpec, TrainingRunStatus
from coworkgym_operator.training.builders.rayjob import build_rayjob, rayjob_name, rayjob_outcome
from coworkgym_operator.training.builders.run import (
    Manifest,
    check_data_job,
    check_job_name,
    data_uri_of_batch,
    train_job_name,
    training_job,
)
from coworkgym_operator.training.reconcile.conditions import PHASES, training_conditions
from coworkgym_operator.training.reconcile.rounds import (
    reconcile_rounds,
    rounds_message,
    rounds_summary,
)
from coworkgym_operator.training.reconcile.starting import follow_training_pod
from coworkgym_operator.training.reconcile.state import (
    BatchSeen,
    EnvironmentsSeen,
    RunInputs,
    RunState,
    ServingSeen,
    TrainingObserved,
    TrainingPlan,
    age,
    ensure_training_policy,
    finite_metrics,
    stamp,
    training_failed,
)
from coworkgym_operator.training.settings import TrainingSettings

STATUS_PREFIX = "coworkgym-train-status "
RESULT_PREFIX = "coworkgym-train-result "
Backend = Literal["Job", "RayJob"]


# CoworkEnvironment phases after which an environment is never Released
# (environment/api/conditions.py)
NEVER_RELEASED = ("Failed", "Rejected")


# ---- reading the pod's log -----------------------------------------------------------------
def last_report(log: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The last status line and the last result line of a training pod's log tail (each
    line carries the whole state, so the last readable one is all that counts)."""
    report: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    for line in log.splitlines():
        for prefix in (STATUS_PREFIX, RESULT_PREFIX):
            at = line.find(prefix)
            if at < 0:
                continue
            try:
                value = json.loads(line[at + len(prefix) :])
            except ValueError:
                continue
            if isinstance(value, dict):
                if prefix == STATUS_PREFIX:
                    report = value
                else:
                    result = value
    return report, result


# ---- what the controller must look at ------------------------------------------------------
def previous_status(run: Manifest) -> TrainingRunStatus:
    return read_status(TrainingRunStatus, run)


def completed(status: TrainingRunStatus) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in status.conditions)


# ---- the reconcile ---------------------------------------------------------------------------
def reconcile_training(
    run: Manifest, observed: TrainingObserved, settings: TrainingSettings
) -> TrainingPlan:
    previous = previous_status(run)
    state = RunState(previous.model_copy(deep=True), settings=settings)
    before = previous.phase
    if completed(previous):
        return _finish(state, run, observed, None, before, already=True)
    spec = read_spec(TrainingRunSpec, run)
    if isinstance(spec, str):
        state.fail(R.INVALID_SPEC, spec)
        return _finish(state, run, observed, None, before)
    inputs = RunInputs(run, spec, observed, settings)
    if state.status.step == "data":
        if spec.rounds > 1:
            _environments(state, inputs)
        else:
            _data(state, inputs)
    else:
        state.data = _data_done(spec, state.status)
    if state.failure is None and state.status.step == "train":
        if spec.rounds > 1:
            reconcile_rounds(state, inputs)
        else:
            _train(state, inputs)
    return _finish(state, run, observed, spec, before)


def _data_done(spec: TrainingRunSpec, status: TrainingRunStatus) -> Cond:
    uri = status.data_uri or ""
    if spec.data is None:  # rounds > 1: the environments each round rolls out on
        if status.environments is not None:
            names = ", ".join(e.name for e in status.environments)
            what = f"{len(status.environments)} released environment(s): {names}"
        else:
            what = f"the packages of the manifest {uri}"
        return ("True", R.ENVIRONMENTS_RESOLVED, f"{spec.rounds} rounds on {what}")
    if spec.data.rollout_batch is not None:
        return ("True", R.BATCH_COMPLETE, f"RolloutBatch {spec.data.rollout_batch.name}: {uri}")
    return ("True", R.DATASET_FOUND, uri)


def _environments(state: RunState, inputs: RunInputs) -> None:
    """rounds > 1: resolve spec.rollout.environments once, as a RolloutBatch does."""
    spec, observed, settings = inputs.spec, inputs.observed, inputs.settings
    assert spec.rollout is not None  # the spec's validator
    selection = spec.rollout.environments
    status = state.status
    if selection.manifest_uri is not None:  # the pod reads it (a missing one fails there)
        status.data_uri = selection.manifest_uri
        status.step = "train"
        state.data = _data_done(spec, status)
        return
    seen = observed.environments
    if seen is None:
        state.data = ("Unknown", R.WAITING_FOR_ENVIRONMENTS, "looking up the environments")
        return
    ended = sorted(n for n, phase in seen.not_released.items() if phase in NEVER_RELEASED)
    if ended:
        listed = ", ".join(f"{n} ({seen.not_released[n]})" for n in ended)
        message = (
            f"spec.rollout.environments.names: {listed} will never be Released; name "
            "Released CoworkEnvironments"
        )
        _data_failed(state, R.ENVIRONMENTS_NOT_RELEASED, message)
        return
    if seen.not_released or not seen.released:
        waited = age(observed)
        grace = settings.operator.stage_start_grace_seconds
        missing = sorted(n for n, phase in seen.not_released.items() if phase == "not found")
        if missing and waited is not None and waited >= grace:
            message = (
                f"spec.rollout.environments.names: no CoworkEnvironment {', '.join(missing)} "
                f"in this namespace (waited {grace:g} s); name existing environments"
            )
            _data_failed(state, R.ENVIRONMENTS_NOT_RELEASED, message)
            return
        pending = ", ".join(f"{n} ({p})" for n, p in sorted(seen.not_released.items()))
        why = f"waiting for {pending} to be Released"
        if not pending and selection.selector is not None:
            query = selection.selector.to_query() or "(everything)"
            why = f"no Released environment matches the selector {query} yet"
        state.data = ("Unknown", R.WAITING_FOR_ENVIRONMENTS, f"spec.rollout.environments: {why}")
        return
    status.environments = list(seen.released)
    status.step = "train"
    state.data = _data_done(spec, status)


def _data(state: RunState, inputs: RunInputs) -> None:
    run, spec, observed, settings = inputs.manifest, inputs.spec, inputs.observed, inputs.settings
    assert spec.data is not None  # rounds 1: the spec's validator
    ref = spec.data.rollout_batch
    if ref is not None:
        _data_from_batch(state, inputs)
        return
    uri = spec.data.uri or ""
    name = check_job_name(inputs.name)
    job = observed.check_job
    if job is None or job.state == "missing":
        if f"Job/{name}" not in observed.existing_children:
            state.plan.create.append(check_data_job(run, uri, settings))
        state.data = ("Unknown", R.CHECKING_DATASET, f"looking for {uri}")
        return
    if job.state == "running":
        why = stuck(job, observed.now, settings.operator.stage_start_grace_seconds)
        if why:
            state.plan.delete.append(("Job", name))
            _data_failed(state, R.DATA_CHECK_FAILED, f"spec.data.uri: the check pod {why}")
            return
        state.data = ("Unknown", R.CHECKING_DATASET, f"looking for {uri}")
        return
    result = job.result or {}
    state.plan.delete.append(("Job", name))  # its answer is in the status from now on
    if job.state == "failed" or not result.get("ok"):
        why = result.get("error") or job.reason or "the check pod failed without a result"
        _data_failed(state, R.DATA_CHECK_FAILED, f"spec.data.uri: could not check {uri}: {why}")
        return
    if not result.get("found"):
        _data_failed(
            state,
            R.DATASET_NOT_FOUND,
            f"spec.data.uri: {result.get('detail') or 'nothing at ' + uri}; give an s3:// "
            "trajectory .jsonl file or a prefix holding them",
        )
        return
    _data_ready(state, spec, uri)


def _data_from_batch(state: RunState, inputs: RunInputs) -> None:
    spec, observed = inputs.spec, inputs.observed
    ref = spec.data.rollout_batch if spec.data is not None else None
    assert ref is not None
    batch = observed.batch
    namespace = inputs.manifest["metadata"].get("namespace", "")
    if batch is None or not batch.found:
        waited = age(observed)
        grace = inputs.settings.operator.stage_start_grace_seconds
        if waited is not None and waited >= grace:
            _data_failed(
                state,
                R.BATCH_NOT_FOUND,
                f"spec.data.rolloutBatch.name: no RolloutBatch {ref.name!r} in namespace "
                f"{namespace} (waited {grace:g} s); name an existing batch",
            )
            return
        state.data = ("Unknown", R.WAITING_FOR_BATCH, f"RolloutBatch {ref.name} not found yet")
        return
    if not batch.complete:
        state.data = (
            "Unknown",
            R.WAITING_FOR_BATCH,
            f"RolloutBatch {ref.name} is {batch.phase or 'Pending'}: {batch.message}".rstrip(": "),
        )
        return
    if batch.failed or not batch.output_uri:
        _data_failed(
            state,
            R.BATCH_FAILED,
            f"spec.data.rolloutBatch.name: RolloutBatch {ref.name} failed: {batch.message}",
        )
        return
    if ref.trajectories == "kept" and batch.kept == 0:
        _data_failed(
            state,
            R.DATASET_NOT_FOUND,
            f"spec.data.rolloutBatch: RolloutBatch {ref.name}'s filter kept no trajectory; "
            "train on trajectories: all, or loosen the batch's filter",
        )
        return
    _data_ready(state, spec, data_uri_of_batch(batch.output_uri, ref.trajectories))


def _data_failed(state: RunState, reason: R, message: str) -> None:
    state.data = ("False", reason, message)
    state.fail(reason, message)


def _data_ready(state: RunState, spec: TrainingRunSpec, uri: str) -> None:
    state.status.data_uri = uri
    state.status.step = "train"
    state.data = _data_done(spec, state.status)


# ---- training ----------------------------------------------------------------------------------
def _train(state: RunState, inputs: RunInputs) -> None:
    status, observed = state.status, inputs.observed
    if status.backend is None:
        ray = observed.ray_available and inputs.settings.ray == "auto"
        status.backend = "RayJob" if ray else "Job"
    kind = status.backend
    if inputs.spec.suspend:
        if status.job_name is not None:
            state.plan.delete.append((kind, status.job_name))
            state.plan.events.append(
                ("Normal", "Suspended", f"deleted {kind} {status.job_name}; resumes on unsuspend")
            )
            status.job_name = None
        state.activity = "suspended"
        return
    if status.job_name is None:  # first start, or a resume
        status.starts += 1
        status.job_name = _child_name(kind, inputs.name, status.starts)
        if status.start_time is None and observed.now is not None:
            status.start_time = stamp(observed.now)
    _fold_report(state, observed.report, observed.now)
    ensure_training_policy(state, inputs)
    if kind == "Job":
        _train_job(state, inputs)
    else:
        _train_rayjob(state, inputs)


def _child_name(kind: Backend, run: str, start: int) -> str:
    return train_job_name(run, start) if kind == "Job" else rayjob_name(run, start)


def _create_training(state: RunState, inputs: RunInputs) -> None:
    run, settings = inputs.manifest, inputs.settings
    status = state.status
    assert status.job_name is not None and status.backend is not None
    if f"{status.backend}/{status.job_name}" in inputs.observed.existing_children:
        return
    data_uri = status.data_uri or ""
    if status.backend == "Job":
        state.plan.create.append(training_job(run, inputs.spec, data_uri, status.starts, settings))
    else:
        view = {**run, "status": {**(run.get("status") or {}), "dataUri": data_uri}}
        state.plan.create.append(build_rayjob(view, settings, status.starts))


def _train_job(state: RunState, inputs: RunInputs) -> None:
    job = inputs.observed.train_job
    if job is None or job.state == "missing":  # not made yet, or deleted under us
        _create_training(state, inputs)
        state.activity = "starting"
        return
    if job.state == "running":
        if follow_training_pod(state, inputs, job):
            state.plan.delete.append(("Job", job.name))
        return
    result = job.result or inputs.observed.logged_result or {}
    _fold_result(state, result)
    if job.state == "succeeded" and result.get("ok", True):
        _succeeded(state, inputs.spec)
        return
    training_failed(state, inputs.spec, result, job.reason)


def _train_rayjob(state: RunState, inputs: RunInputs) -> None:
    rayjob = inputs.observed.rayjob
    if rayjob is None:  # not made yet, or deleted under us
        _create_training(state, inputs)
        state.activity = "starting"
        return
    outcome, why = rayjob_outcome(rayjob)
    deployment = str((rayjob.get("status") or {}).get("jobDeploymentStatus") or "")
    if outcome == "running":
        state.activity = "training" if deployment == "Running" else "starting"
        return
    result = inputs.observed.logged_result or {}
    _fold_result(state, result)
    if outcome == "succeeded" and result.get("ok", True):
        _succeeded(state, inputs.spec)
        return
    if outcome == "suspended":
        state.activity = "suspended"
        return
    training_failed(state, inputs.spec, result, why)


def _succeeded(state: RunState, spec: TrainingRunSpec) -> None:
    status = state.status
    status.step = "done"
    if status.checkpoint_uri is None:
        status.checkpoint_uri = spec.output.uri


def _fold_report(state: RunState, report: dict[str, Any] | None, now: datetime | None) -> None:
    """Take the pod's last status line into the status (progress, metrics, checkpoint)."""
    if not report:
        return
    status = state.status
    progress = status.progress
    step = report.get("step")
    if isinstance(step, int) and step != progress.step:
        progress.step = step
        if now is not None:
            progress.last_report_time = stamp(now)
    total = report.get("totalSteps")
    if isinstance(total, int):
        progress.total_steps = total
    epoch = report.get("epoch")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        progress.epoch = epoch
    metrics = finite_metrics(report.get("metrics"))
    if metrics is not None:
        status.metrics = metrics
    checkpoint = report.get("checkpoint")
    if isinstance(checkpoint, str) and checkpoint:
        status.checkpoint_uri = checkpoint


def _fold_result(state: RunState, result: dict[str, Any]) -> None:
    """The result carries the final state (a status line may have been missed)."""
    if result:
        _fold_report(state, result, None)


# ---- the status ------------------------------------------------------------------------------
def _summary(status: TrainingRunStatus) -> str:
    if status.rounds:
        return rounds_summary(status)
    progress: Progress = status.progress
    steps = str(progress.step) if progress.step else ""
    if progress.total_steps:
        steps = f"{progress.step}/{progress.total_steps}"
    return steps


def _finish(
    state: RunState,
    run: Manifest,
    observed: TrainingObserved,
    spec: TrainingRunSpec | None,
    before: str,
    *,
    already: bool = False,
) -> TrainingPlan:
    status, plan = state.status, state.plan
    generation = run["metadata"].get("generation")
    if already:
        plan.status = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        return plan
    if state.failure is not None and status.job_name and status.step == "train":
        # a pod that cannot start is stopped; one that ended stays (with its log) until
        # the Job's ttlSecondsAfterFinished
        child = (status.backend or "Job", status.job_name)
        if state.failure.reason is R.POD_CANNOT_START and child not in plan.delete:
            plan.delete.append(child)
    status.progress.summary = _summary(status)
    wanted = training_conditions(
        status.step, state.failure, state.data, state.activity, _done_message(status),
        state.waiting,
    )  # fmt: skip
    _announce_pending(state, status, wanted[T.RUNNING])
    status.conditions = merge(status.conditions, wanted, generation, observed.now)
    status.phase = str(PHASES.derive(status.conditions))
    status.message = _message(status, state, _stalled_for(status, observed, state.settings))
    status.observed_generation = generation
    finished = state.failure is not None or status.step == "done"
    if finished and observed.now is not None:
        status.completion_time = stamp(observed.now)
    if state.failure is not None:
        plan.events.append(("Warning", str(state.failure.reason), state.failure.message[:400]))
    if status.phase != before:
        plan.transition = (before, status.phase)
        if finished:
            plan.finished = "failed" if state.failure is not None else "succeeded"
            if state.failure is None:
                plan.events.append(("Normal", "Succeeded", status.message))
    plan.status = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return plan


def _announce_pending(state: RunState, status: TrainingRunStatus, running: Cond) -> None:
    """A Normal event when a pod's wait to start (PodPending) begins or its reason changes:
    a wait within its deadline is not a fault (the Warning comes if the run fails)."""
    _, reason, message = running
    if reason != R.POD_PENDING:
        return
    before = next((c for c in status.conditions if c.type == T.RUNNING), None)
    if before is not None and (before.reason, before.message) == (reason, message):
        return  # said already
    state.plan.events.append(("Normal", str(R.POD_PENDING), message[:400]))


def _done_message(status: TrainingRunStatus) -> str:
    loss = status.metrics.get("loss")
    tail = f", loss {loss:.4g}" if loss is not None else ""
    progress = status.progress
    steps = f"{progress.step}/{progress.total_steps}" if progress.total_steps else progress.step
    rounds = f"{progress.rounds} rounds, " if progress.rounds else ""
    return f"trained {rounds}{steps} steps{tail}; checkpoint {status.checkpoint_uri}"


def _stalled_for(
    status: TrainingRunStatus, observed: TrainingObserved, settings: TrainingSettings | None
) -> float | None:
    """Seconds without a new step, once past settings.stall_seconds (None: not stalled)."""
    since = status.progress.last_report_time or status.start_time
    if settings is None or since is None or observed.now is None:
        return None
    waited = (observed.now - datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds()
    return waited if waited >= settings.stall_seconds else None


def _message(status: TrainingRunStatus, state: RunState, stalled: float | None = None) -> str:
    if state.failure is not None:
        return state.failure.message
    if status.step == "done":
        return _done_message(status)
    if status.step == "data":
        return state.data[2]
    if status.rounds:
        return rounds_message(status, state, stalled)
    if state.activity == "suspended":
        return "suspended; resumes from the last checkpoint when spec.suspend is false"
    where = _summary(status)
    if state.activity == "training":
        text = "training" if not where else f"training, step {where}"
        if stalled is not None:
            text += f"; no new step for {stalled / 60:.0f} min"
        return text
    if state.waiting:
        return f"starting {status.backend} {status.job_name}: {state.waiting}"
    return f"starting {status.backend} {status.job_name}"


__all__ = [
    "BatchSeen",
    "EnvironmentsSeen",
    "ServingSeen",
    "TrainingObserved",
    "TrainingPlan",
    "completed",
    "last_report",
    "previous_status",
    "reconcile_training",
]

"""The on-policy rounds of a TrainingRun (spec.rounds > 1), driven by the operator, as a pure
function of what was observed: the train step of reconcile_training.

Each round r (from 0) is a record in status.rounds that walks one small state machine:

    serve ──▶ rollout ──▶ train ──▶ trained
                 │  ▲         └────▶ skipped
                 │  └ (suspended: the round serves and rolls out again)
                 └──────────────────▶ skipped

    serve     a Deployment and Service <run>-serve-r<r> serve the round's weights (spec.model
              in round 0, else the last trained round's checkpoint); the run's NetworkPolicy
              <run>-serving fences them
    rollout   once the server is available: a RolloutBatch <run>-rollouts-r<r> of
              spec.rollout against the Service's address
    train     once the batch is Complete: the server is deleted, and a Job <run>-train-r<r>
              trains on the batch's trajectories from the same weights, checkpointing to
              checkpoints/round-<r>/
    trained   the Job succeeded: the next round serves its checkpoint
    skipped   nothing to train on (the batch kept nothing, or the trainer found no example):
              the next round serves the same weights

Every child has a deterministic name and is created only when missing, so a second
reconcile of the same observation plans the same and a restarted operator duplicates
nothing; a round that is trained or skipped is never looked at again. After the last round
the run is done (its checkpoint the last trained round's), or Failed NoExamples when no
round trained. A server that cannot start or keeps exiting (ServingFailed), a failed batch
(BatchFailed) or a failed training Job (its reason) ends the run Failed, the message naming
the round and the object.

Suspend deletes the round's server and training Job. Its RolloutBatch cannot be deleted
(the operator may not delete RolloutBatches, which users make too): it ends early against
the server that is gone. So a round suspended while rolling out goes back to serve, and its
next attempt rolls out under a new name (``-<attempt>``); one suspended while training
starts a new Job on resume, which resumes from the round's own checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from coworkgym_operator.training.api.conditions import TrainingReason as R
from coworkgym_operator.training.api.types import (
    RoundStatus,
    RoundStep,
    TrainingRunSpec,
    TrainingRunStatus,
)
from coworkgym_operator.training.builders.rounds import (
    endpoint_of,
    rollouts_name,
    round_batch,
    serve_name,
    served_as,
    serving_deployment,
    serving_policy,
    serving_policy_name,
    serving_service,
)
from coworkgym_operator.training.builders.run import (
    Manifest,
    RoundTraining,
    data_uri_of_batch,
    round_train_job_name,
    training_job,
)
from coworkgym_operator.training.reconcile.starting import (
    StartWait,
    follow_training_pod,
    start_wait,
)
from coworkgym_operator.training.reconcile.state import (
    RunInputs,
    RunState,
    ServingSeen,
    create_once,
    ensure_training_policy,
    finite_metrics,
    stamp,
    training_failed,
)
from coworkgym_operator.training.settings import TrainingSettings

# Every step a round takes, and why (tests/unit/test_training_rounds.py walks them all).
ROUND_STEPS: dict[tuple[RoundStep, RoundStep], str] = {
    ("serve", "rollout"): "the server is available: the round's RolloutBatch is created "
    "against its Service's address",
    ("rollout", "train"): "the batch is Complete with trajectories to train on: the server "
    "is deleted and the round's training Job created",
    ("rollout", "skipped"): "the batch is Complete but gave nothing to train on: the server "
    "is deleted; the next round serves the same weights",
    ("rollout", "serve"): "suspended while rolling out: the server is deleted and the batch "
    "cannot be, so on resume the round serves and rolls out again under a new name",
    ("train", "trained"): "the training Job succeeded: its checkpoint is what the next round "
    "serves",
    ("train", "skipped"): "the trainer found no example (e.g. no GRPO group with a reward "
    "spread): the next round serves the same weights",
}
ENDED: tuple[RoundStep, ...] = ("trained", "skipped")
# A server whose container exited this many times is not going to come up.
SERVING_RESTART_LIMIT = 3


def reconcile_rounds(state: RunState, inputs: RunInputs) -> None:
    spec, observed = inputs.spec, inputs.observed
    status = state.status
    status.backend = "Job"  # each round trains in a plain Job
    if status.starts == 0:
        status.starts = 1
    if status.start_time is None and observed.now is not None:
        status.start_time = stamp(observed.now)
    if not status.rounds:
        _begin(state, 0, spec.model)
    current = status.rounds[-1]
    if spec.suspend:
        _suspend(state, inputs.manifest, current)
        _progress(state, spec, observed.now)
        return
    if current.suspended:
        current.suspended = False
        status.starts += 1
        _event(state, "Resumed", f"{_which(current, spec)}: resumes in step {current.step}")
    while state.failure is None:
        current = status.rounds[-1]
        HANDLERS[current.step](state, inputs, current)
        if state.failure is not None or current.step not in ENDED:
            break
        if current.round + 1 == spec.rounds:
            _done(state, spec)
            break
        _begin(state, current.round + 1, _last_checkpoint(status) or spec.model)
    if state.failure is not None:
        _teardown_server(state, inputs.manifest, status.rounds[-1])
    _progress(state, spec, observed.now)


# ---- the steps ---------------------------------------------------------------------------
def _begin(state: RunState, index: int, served: str) -> None:
    state.status.rounds.append(RoundStatus(round=index, served=served))


def _serve(state: RunState, inputs: RunInputs, current: RoundStatus) -> None:
    spec, observed, settings = inputs.spec, inputs.observed, inputs.settings
    name = serve_name(inputs.name, current.round)
    _ensure_server(state, inputs, current)
    seen = _this_rounds(observed.serving, name)
    state.activity = "serving"
    state.note = f"serving {current.served} (Deployment {name}); waiting for it to be ready"
    if seen is None or not seen.found:
        return
    why = serving_problem(seen, observed.now, settings)
    if why:
        state.fail(R.SERVING_FAILED, f"{_which(current, spec)}: the checkpoint server {name} {why}")
        return
    waiting = server_start(seen, observed.now, settings).waiting
    if waiting:
        state.waiting = f"{_which(current, spec)}: the checkpoint server's pod {waiting}"
    if not seen.available or not seen.cluster_ip:
        return
    current.endpoint = endpoint_of(seen.cluster_ip)
    _step(state, current, "rollout")
    _rollout(state, inputs, current)


def _rollout(state: RunState, inputs: RunInputs, current: RoundStatus) -> None:
    spec, observed = inputs.spec, inputs.observed
    assert spec.rollout is not None and current.endpoint is not None
    status = state.status
    name = rollouts_name(inputs.name, current.round, current.attempt)
    current.batch = name
    seen = _this_rounds(observed.round_batch, name)
    state.activity = "rolling-out"
    state.note = f"RolloutBatch {name} rolls out against {current.endpoint}"
    if seen is None or not seen.found:
        _ensure_server(state, inputs, current)
        if f"RolloutBatch/{name}" not in observed.existing_children:
            listed = status.data_uri if spec.rollout.environments.manifest_uri else None
            batch_manifest = round_batch(
                inputs.manifest, spec, current.round, current.attempt, current.endpoint,
                status.environments, listed,
            )  # fmt: skip
            if create_once(state, batch_manifest):
                _event(state, "RollingOut", f"{_which(current, spec)}: {state.note}")
        return
    if seen.deleting:  # deleted by hand: made again once it is gone
        state.note = f"RolloutBatch {name} is being deleted; it is made again once gone"
        return
    if not seen.complete:
        _ensure_server(state, inputs, current)
        if seen.message:
            state.note += f": {seen.message}"
        ended = seen.succeeded + seen.invalid
        if ended > (current.trajectories or 0):  # rollouts ending: the round advances
            current.trajectories = ended
            state.progressed = True
        return
    _teardown_server(state, inputs.manifest, current)
    if seen.failed or not seen.output_uri:
        why = seen.message or "no output"
        state.fail(R.BATCH_FAILED, f"{_which(current, spec)}: RolloutBatch {name} failed: {why}")
        return
    current.trajectories = seen.succeeded + seen.invalid
    current.kept = seen.kept
    made = f"RolloutBatch {name} made {current.trajectories} trajectories ({seen.succeeded} valid"
    made += f", {seen.kept} kept)" if seen.kept is not None else ")"
    choice = spec.rollout.trajectories
    usable = (seen.kept or 0) if choice == "kept" else seen.succeeded
    if not usable:
        what = "its filter kept none" if choice == "kept" else "none has a valid reward"
        current.message = f"{made}; {what}: nothing to train on"
        _step(state, current, "skipped")
        _event(state, "RoundSkipped", f"{_which(current, spec)}: {current.message}")
        return
    current.data_uri = data_uri_of_batch(seen.output_uri, choice)
    _event(state, "RolloutsDone", f"{_which(current, spec)}: {made}; server deleted")
    _step(state, current, "train")
    _train(state, inputs, current)


def _train(state: RunState, inputs: RunInputs, current: RoundStatus) -> None:
    run, spec, observed, settings = inputs.manifest, inputs.spec, inputs.observed, inputs.settings
    assert current.data_uri is not None
    status = state.status
    name = round_train_job_name(inputs.name, current.round, current.attempt)
    current.job_name = status.job_name = name
    job = _this_rounds(observed.train_job, name)
    if job is not None:
        _fold_report(state, current, observed.report)
    ensure_training_policy(state, inputs)
    if job is None or job.state == "missing":  # not made yet, or deleted under us
        if f"Job/{name}" not in observed.existing_children:
            trains = RoundTraining(current.round, current.served, current.data_uri, current.attempt)
            manifest = training_job(run, spec, current.data_uri, status.starts, settings, trains)
            if create_once(state, manifest):
                what = f"Job {name} trains on {current.data_uri} from {current.served}"
                _event(state, "TrainingStarted", f"{_which(current, spec)}: {what}")
        state.activity = "starting"
        state.note = f"starting Job {name}"
        return
    if job.state == "running":
        if not follow_training_pod(state, inputs, job, f"{_which(current, spec)}: "):
            state.note = "training" if job.start.started else f"starting Job {name}"
        return
    result = job.result or observed.logged_result or {}
    _fold_report(state, current, result)
    checkpoint = current.checkpoint_uri
    status.job_name = None  # its log has nothing more to say
    if job.state == "succeeded" and result.get("ok", True) and checkpoint:
        _step(state, current, "trained")
        status.checkpoint_uri = checkpoint
        _event(state, "RoundTrained", f"{_which(current, spec)}: checkpoint {checkpoint}")
        return
    if result.get("reason") == "NoExamples":
        current.message = f"the trainer found nothing to train on: {result.get('error') or ''}"
        _step(state, current, "skipped")
        _event(state, "RoundSkipped", f"{_which(current, spec)}: {current.message}")
        return
    if job.state == "succeeded":  # ended well, yet left no checkpoint to serve next
        result = {**result, "error": "the Job succeeded but reported no checkpoint"}
    status.job_name = name  # the failure names it (and a pod that cannot start goes)
    training_failed(state, spec, result, job.reason, f"{_which(current, spec)}: Job {name}: ")


def _trained_or_skipped(*_: Any) -> None:
    """A round that ended is never looked at again."""


HANDLERS: dict[RoundStep, Callable[[RunState, RunInputs, RoundStatus], None]] = {
    "serve": _serve,
    "rollout": _rollout,
    "train": _train,
    "trained": _trained_or_skipped,
    "skipped": _trained_or_skipped,
}


def _done(state: RunState, spec: TrainingRunSpec) -> None:
    status = state.status
    checkpoint = _last_checkpoint(status)
    if checkpoint is None:
        why = "; ".join(f"round {r.round + 1}: {r.message}" for r in status.rounds)
        state.fail(R.NO_EXAMPLES, f"no round of {spec.rounds} had anything to train on ({why})")
        return
    status.checkpoint_uri = checkpoint
    status.job_name = None
    status.step = "done"


def _suspend(state: RunState, run: Manifest, current: RoundStatus) -> None:
    """Delete what the round runs, once; say what resume will do."""
    state.activity = "suspended"
    if current.suspended:
        return
    deleted = _teardown_server(state, run, current)
    if current.step == "rollout":
        _step(state, current, "serve")
        current.attempt += 1
        current.endpoint = None
    elif current.step == "train":
        if current.job_name:
            state.plan.delete.append(("Job", current.job_name))
            deleted.append(f"Job {current.job_name}")
        current.attempt += 1
        current.job_name = state.status.job_name = None
    current.suspended = True
    what = f"deleted {', '.join(deleted)}" if deleted else "nothing was running"
    _event(state, "Suspended", f"round {current.round + 1}: {what}; resumes on unsuspend")


# ---- the server ----------------------------------------------------------------------------
def serving_problem(seen: ServingSeen, now: datetime | None, settings: TrainingSettings) -> str:
    """Why the round's server will not come up ("" while it may): the first check that
    finds something says it."""
    for check in SERVING_CHECKS:
        why = check(seen, now, settings)
        if why:
            return why
    return ""


def server_start(seen: ServingSeen, now: datetime | None, settings: TrainingSettings) -> StartWait:
    """The server's pod's wait to start, from its Deployment's creation (starting.py)."""
    if seen.available:
        return StartWait()
    return start_wait(seen.start, seen.created_at, now, settings)


def _cannot_start(seen: ServingSeen, now: datetime | None, settings: TrainingSettings) -> str:
    return server_start(seen, now, settings).ended


def _keeps_exiting(seen: ServingSeen, now: datetime | None, settings: TrainingSettings) -> str:
    if seen.restarts < SERVING_RESTART_LIMIT:
        return ""
    return f"exited {seen.restarts} times: {seen.last_error or 'its log says why'}"


SERVING_CHECKS = (_cannot_start, _keeps_exiting)


def _ensure_server(state: RunState, inputs: RunInputs, current: RoundStatus) -> None:
    """The run's NetworkPolicy and the round's Deployment and Service, each made when
    missing (first, or deleted under us)."""
    run, spec, settings = inputs.manifest, inputs.spec, inputs.settings
    run_name = inputs.name
    name = serve_name(run_name, current.round)
    existing = inputs.observed.existing_children
    if f"NetworkPolicy/{serving_policy_name(run_name)}" not in existing:
        create_once(state, serving_policy(run, settings))
    if f"Deployment/{name}" not in existing:
        deployment = serving_deployment(run, spec, current.round, current.served, settings)
        if create_once(state, deployment):
            what = f"serving {current.served} as {served_as(run_name, current.round)}"
            _event(state, "Serving", f"{_which(current, spec)}: {what} (Deployment {name})")
    if f"Service/{name}" not in existing:
        create_once(state, serving_service(run, current.round))


def _teardown_server(state: RunState, run: Manifest, current: RoundStatus) -> list[str]:
    """Delete the round's server (nothing uses it past the rollouts); what was planned."""
    if current.step not in ("serve", "rollout"):
        return []
    name = serve_name(run["metadata"]["name"], current.round)
    for kind in ("Deployment", "Service"):
        if (kind, name) not in state.plan.delete:
            state.plan.delete.append((kind, name))
    return [f"Deployment and Service {name}"]


# ---- bookkeeping ---------------------------------------------------------------------------
def _step(state: RunState, current: RoundStatus, to: RoundStep) -> None:
    assert (current.step, to) in ROUND_STEPS, (current.step, to)
    state.plan.round_steps.append((current.round, current.step, to))
    current.step = to


def _event(state: RunState, reason: str, message: str) -> None:
    state.plan.events.append(("Normal", reason, message[:400]))


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def _this_rounds[Seen: _Named](seen: Seen | None, name: str) -> Seen | None:
    """What the controller observed, if it is the child named ``name`` (it may have read
    an earlier round's or attempt's, the one the status named when it looked)."""
    return seen if seen is not None and seen.name == name else None


def _which(current: RoundStatus, spec: TrainingRunSpec) -> str:
    return f"round {current.round + 1}/{spec.rounds}"


def _last_checkpoint(status: TrainingRunStatus) -> str | None:
    trained = [r.checkpoint_uri for r in status.rounds if r.step == "trained"]
    return trained[-1] if trained else None


def _fold_report(state: RunState, current: RoundStatus, report: dict[str, Any] | None) -> None:
    """The round's training pod's last status line (or its result) into the round's
    record: its steps, its checkpoint; the metrics into the run's."""
    if not report:
        return
    step, total = report.get("step"), report.get("totalSteps")
    if isinstance(step, int):
        current.steps = step
    if isinstance(total, int):
        current.total_steps = total
    checkpoint = report.get("checkpoint")
    if isinstance(checkpoint, str) and checkpoint:  # the run's newest good one, too
        current.checkpoint_uri = state.status.checkpoint_uri = checkpoint
    metrics = finite_metrics(report.get("metrics"))
    if metrics is not None:
        state.status.metrics = metrics


def _progress(state: RunState, spec: TrainingRunSpec, now: datetime | None) -> None:
    """Round r of R, and the optimizer steps over every round (of how many, when each
    round's are fixed by maxSteps). A round's step counts as progress too, and so does a
    rollout of the round's RolloutBatch ending: the no-progress alert, which watches the
    rounds' serving and rollouts as well as their training, fires on a round stuck in
    either, not on one whose rollouts take their time."""
    status = state.status
    progress = status.progress
    progress.round = status.rounds[-1].round + 1
    progress.rounds = spec.rounds
    steps = sum(r.steps or 0 for r in status.rounds)
    moved = steps != progress.step or state.plan.round_steps or state.progressed
    if moved and now is not None:
        progress.last_report_time = stamp(now)
    progress.step = steps
    max_steps = spec.hyperparameters.max_steps
    progress.total_steps = spec.rounds * max_steps if max_steps else None


# ---- what the status says --------------------------------------------------------------------
DOING: dict[RoundStep, str] = {
    "serve": "serving",
    "rollout": "rolling out",
    "train": "training",
    "trained": "done",
    "skipped": "done",
}


def rounds_summary(status: TrainingRunStatus) -> str:
    """e.g. round 2/3 training, step 12/24 (steps over every round)."""
    progress, current = status.progress, status.rounds[-1]
    doing = "suspended" if current.suspended else DOING[current.step]
    head = f"round {progress.round}/{progress.rounds} {doing}"
    if not progress.step and current.step != "train":  # no step to speak of yet
        return head
    total = f"/{progress.total_steps}" if progress.total_steps else ""
    return f"{head}, step {progress.step}{total}"


def rounds_message(status: TrainingRunStatus, state: RunState, stalled: float | None) -> str:
    current = status.rounds[-1]
    where = f"round {current.round + 1}/{status.progress.rounds}"
    if state.activity == "suspended":
        return f"suspended in {where} ({current.step}); resumes when spec.suspend is false"
    if state.waiting:  # a pod that cannot start yet: why, and until when
        return state.waiting
    text = f"{where}: {state.note}" if state.note else where
    if state.activity == "training":
        steps = f"{current.steps or 0}/{current.total_steps}" if current.total_steps else ""
        text += f", step {steps}" if steps else ""
        if stalled is not None:
            text += f"; no new step for {stalled / 60:.0f} min"
    return text


__all__ = [
    "ROUND_STEPS",
    "SERVING_RESTART_LIMIT",
    "reconcile_rounds",
    "rounds_message",
    "rounds_summary",
    "server_start",
    "serving_problem",
]

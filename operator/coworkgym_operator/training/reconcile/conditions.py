"""TrainingRun conditions from where the run is, and the phase derived from them
(training/api/conditions.py documents the types and reasons)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from coworkgym_operator.core.conditions import Cond, PhaseChain
from coworkgym_operator.training.api.conditions import TrainingCondition as T
from coworkgym_operator.training.api.conditions import TrainingPhase as P
from coworkgym_operator.training.api.conditions import TrainingReason as R
from coworkgym_operator.training.api.types import TrainingRunStatus

Step = Literal["data", "train", "done"]
# What the training Job (or RayJob) does now, in the train step; with rounds, also the
# round's server starting (serving) and its RolloutBatch running (rolling-out).
Activity = Literal["none", "starting", "serving", "rolling-out", "training", "suspended"]


@dataclass(frozen=True)
class Failure:
    step: Step  # where the run stopped
    reason: R
    message: str


def training_conditions(
    step: Step,
    failure: Failure | None,
    data: Cond,
    activity: Activity,
    done_message: str,
    waiting: str = "",
) -> dict[str, Cond]:
    """``data``: the DataReady condition as the data step decided it (its last word once
    the step is past); ``done_message``: what the run produced, once done; ``waiting``:
    why the pod starting (training pod or round's server) cannot start yet, if it says."""
    running = _running(step, failure, activity)
    if waiting and running[1] == R.STARTING:
        running = ("Unknown", R.POD_PENDING, waiting)
    out: dict[str, Cond] = {T.DATA_READY: data, T.RUNNING: running}
    if failure is not None:
        out[T.SUCCEEDED] = ("False", R.FAILED, failure.message)
        out[T.FAILED] = ("True", failure.reason, failure.message)
        out[T.COMPLETE] = ("True", R.FAILED, failure.message)
    elif step == "done":
        out[T.SUCCEEDED] = ("True", R.SUCCEEDED, done_message)
        out[T.FAILED] = ("False", R.SUCCEEDED, "nothing has failed")
        out[T.COMPLETE] = ("True", R.SUCCEEDED, done_message)
    else:
        doing = "waiting for the data" if step == "data" else "training"
        out[T.SUCCEEDED] = ("False", R.IN_PROGRESS, doing)
        out[T.FAILED] = ("False", R.IN_PROGRESS, "nothing has failed")
        out[T.COMPLETE] = ("False", R.IN_PROGRESS, doing)
    return out


def _running(step: Step, failure: Failure | None, activity: Activity) -> Cond:
    if failure is not None:
        if step == "data":
            return ("False", R.NOT_REACHED, f"the run ended before training: {failure.reason}")
        return ("False", R.FINISHED, f"the training ended: {failure.reason}")
    if step == "data":
        return ("False", R.WAITING, "the training starts once the data is ready")
    if step == "done":
        return ("False", R.FINISHED, "the training ended")
    if activity == "suspended":
        return ("False", R.SUSPENDED, "spec.suspend is true: no training pod runs")
    if activity == "training":
        return ("True", R.TRAINING, "the training pod runs")
    if activity == "rolling-out":
        return ("True", R.ROLLING_OUT, "the round's RolloutBatch rolls out its served checkpoint")
    if activity == "serving":
        return ("Unknown", R.STARTING, "the round's checkpoint server is starting")
    return ("Unknown", R.STARTING, "the training pod is starting")


PHASES = PhaseChain[P](
    [
        (P.FAILED, (T.FAILED, "True")),
        (P.SUCCEEDED, (T.SUCCEEDED, "True")),
        (P.SUSPENDED, (T.RUNNING, "False", R.SUSPENDED)),
        (P.RUNNING, (T.RUNNING, "True")),
        (P.STARTING, (T.RUNNING, "Unknown")),
        (P.WAITING_FOR_DATA, (T.DATA_READY, "Unknown")),
    ],
    P.PENDING,
)


def watched_for_progress(status: TrainingRunStatus) -> bool:
    """Whether the run is somewhere it must keep advancing, which the chart's no-progress
    alert watches (coworkgym_trainingrun_running): its training pod runs (Running
    Training), or an on-policy round serves its checkpoint or rolls out (RollingOut, or
    the round's server starting). Its progress (status.progress.lastReportTime) is a new
    optimizer step, a round's step, or a round's rollout ending, so a round stuck in its
    serving or rollouts is seen as well as a hung trainer. Not watched: waiting for data,
    a training pod not started yet (its start has its own deadline), suspended, done."""
    running = next((c for c in status.conditions if c.type == T.RUNNING), None)
    if running is None or status.step != "train":
        return False
    if running.status == "True":  # Training, RollingOut
        return True
    current = status.rounds[-1] if status.rounds else None
    serving = current is not None and current.step == "serve" and not current.suspended
    return serving and running.status == "Unknown"

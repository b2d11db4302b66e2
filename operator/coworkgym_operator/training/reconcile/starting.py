"""Whether a TrainingRun's pod (its training pod, or a round's checkpoint server) that has
not started yet should still be waited for, and until when. Pure.

Two kinds of wait, two deadlines, both counted from the Job's (or Deployment's) creation:

- the scheduler cannot place the pod (``Unschedulable``: no node has the CPU, memory or GPUs
  free; ``VolumeBinding``), or has not placed it yet: that clears by itself when a run
  ends or an autoscaler adds a node, so the run waits ``scheduling_deadline_seconds``
  (the chart's ``training.schedulingDeadlineSeconds``, 15 min by default), saying why;
- the kubelet cannot start it (the image cannot be pulled, the container not created):
  that does not clear alone, so the run waits the operator's
  ``stage_start_grace_seconds`` only, as a CoworkEnvironment's stage does.

A scheduled pod that is still pulling its image has no deadline here (a large image takes
minutes; the Job's activeDeadlineSeconds bounds it). Past its deadline the run fails
PodCannotStart (a round's server: ServingFailed) with Kubernetes' own reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.pods import PodStart
from coworkgym_operator.training.api.conditions import TrainingReason as R
from coworkgym_operator.training.reconcile.state import RunInputs, RunState, stamp
from coworkgym_operator.training.settings import TrainingSettings

# the scheduler's kinds of problem (core/pods.py): a node or a volume may yet be freed
SCHEDULING_PROBLEMS = ("Unschedulable", "VolumeBinding")


@dataclass(frozen=True)
class StartWait:
    """``ended``: why the pod will not start, once its deadline passed ("" while it may);
    ``waiting``: why it has not started yet, with the deadline, for the run's Running
    condition ("" when there is nothing to say: no word from the scheduler or kubelet
    yet); ``deadline``: when time alone ends the wait (None: nothing bounds it here)."""

    ended: str = ""
    waiting: str = ""
    deadline: datetime | None = None


def waiting_for_a_node(start: PodStart) -> bool:
    """The scheduler has not placed the pod: no problem said yet and no node chosen, or
    one of the scheduler's problems."""
    if start.problem is None:
        return not start.scheduled
    return start.problem.kind in SCHEDULING_PROBLEMS


def start_wait(
    start: PodStart, created_at: datetime | None, now: datetime | None, settings: TrainingSettings
) -> StartWait:
    if start.started or created_at is None or now is None:
        return StartWait()
    if start.problem is None and start.scheduled:  # pulling its image
        return StartWait()
    if waiting_for_a_node(start):
        limit = settings.scheduling_deadline_seconds
        setting = "training.schedulingDeadlineSeconds"
    else:
        limit = settings.operator.stage_start_grace_seconds
        setting = "operator.stageStartGraceSeconds"
    deadline = created_at + timedelta(seconds=limit)
    why = start.problem.describe() if start.problem else "its pod was not scheduled"
    if now >= deadline:
        return StartWait(ended=f"did not start within {limit:g} s: {why}", deadline=deadline)
    if start.problem is None:  # just made: the scheduler has not said anything yet
        return StartWait(deadline=deadline)
    waiting = (
        f"cannot start yet: {why}; it is waited for until {stamp(deadline)} ({setting}: "
        f"{limit:g} s), then the run fails"
    )
    return StartWait(waiting=waiting, deadline=deadline)


def follow_training_pod(
    state: RunState, inputs: RunInputs, job: JobObservation, where: str = ""
) -> bool:
    """A running training Job: True once its pod's wait to start is over (the run failed
    PodCannotStart); until then, why it waits (if the scheduler or kubelet said) and
    whether it trains yet. ``where``: what the messages start with (a round's name)."""
    wait = start_wait(job.start, job.created_at, inputs.observed.now, inputs.settings)
    if wait.ended:
        state.fail(R.POD_CANNOT_START, f"{where}the training pod {wait.ended}")
        return True
    if wait.waiting:
        state.waiting = f"{where}the training pod {wait.waiting}"
    state.activity = "training" if job.start.started else "starting"
    return False


def seconds_to_deadline(wait: StartWait, now: datetime | None) -> float | None:
    """When to look again for time's sake (just past the deadline); None: no deadline."""
    if wait.deadline is None or now is None:
        return None
    return max((wait.deadline - now).total_seconds(), 0.0) + 0.1


__all__ = [
    "SCHEDULING_PROBLEMS",
    "StartWait",
    "follow_training_pod",
    "seconds_to_deadline",
    "start_wait",
    "waiting_for_a_node",
]

"""RolloutBatch conditions from its step and failure, and the phase derived from them
(rollouts/api/conditions.py documents the types and reasons)."""

from __future__ import annotations

from dataclasses import dataclass

from coworkgym_operator.core.conditions import Cond, PhaseChain
from coworkgym_operator.rollouts.api.conditions import BatchCondition as T
from coworkgym_operator.rollouts.api.conditions import BatchPhase as P
from coworkgym_operator.rollouts.api.conditions import BatchReason as R
from coworkgym_operator.rollouts.api.types import RolloutBatchStatus

STEPS = ("resolve", "probe", "fetch", "rollout", "collect", "done")


@dataclass(frozen=True)
class Failure:
    step: str  # where the batch stopped
    reason: R
    message: str


@dataclass(frozen=True)
class StepCondition:
    type: T
    step: str
    running: R
    done: R
    failed: R  # the reason when this step fails (unless the failure names its own)


STEP_CONDITIONS = (
    StepCondition(T.RESOLVED, "resolve", R.RESOLVING, R.RESOLVED, R.NO_ENVIRONMENTS),
    StepCondition(T.ENDPOINTS_REACHABLE, "probe", R.PROBING, R.REACHABLE, R.ENDPOINT_UNREACHABLE),
    StepCondition(T.FETCHED, "fetch", R.FETCHING, R.FETCHED, R.FETCH_FAILED),
    StepCondition(T.ROLLED_OUT, "rollout", R.RUNNING, R.ROLLED_OUT, R.FAILED),
    StepCondition(T.COLLECTED, "collect", R.COLLECTING, R.COLLECTED, R.COLLECT_FAILED),
)


def _step(which: StepCondition, status: RolloutBatchStatus, failure: Failure | None) -> Cond:
    me, at = STEPS.index(which.step), STEPS.index(failure.step if failure else status.step)
    c = status.counts
    if failure is not None and me == at:
        return ("False", failure.reason, failure.message)
    if which.type is T.RESOLVED and failure and failure.reason is R.NO_ENVIRONMENTS:
        return ("False", failure.reason, failure.message)  # a manifest with no package
    if which.type is T.RESOLVED and status.environments is None and at > me:
        if failure is not None:
            return ("False", R.NOT_REACHED, "the batch ended before the manifest was read")
        return ("Unknown", R.RESOLVING, "the fetch pod reads the manifest")
    if me == at:
        return ("Unknown", which.running, _running(which.step, status))
    if me < at:
        return ("True", which.done, _done(which.step, status))
    if failure is not None:
        return ("False", R.NOT_REACHED, f"the batch ended: {failure.reason}")
    return ("False", R.WAITING, f"{c.total} rollouts planned" if c.total else "not started")


def _running(step: str, status: RolloutBatchStatus) -> str:
    c = status.counts
    return {
        "resolve": "looking up the environments",
        "probe": "probing the policies' endpoints",
        "fetch": "fetching the packages onto the batch volume",
        "rollout": f"{c.succeeded + c.invalid} of {c.total} ended, {c.running} running",
        "collect": "filtering and uploading the trajectories",
    }[step]


def _done(step: str, status: RolloutBatchStatus) -> str:
    c = status.counts
    environments = len(status.environments or [])
    return {
        "resolve": f"{environments} environment(s)",
        "probe": "every model endpoint answered (nop and oracle need none)",
        "fetch": f"{environments} package(s) fetched",
        "rollout": f"{c.succeeded} verified, {c.invalid} invalid of {c.total}",
        "collect": f"{c.kept} kept; in {status.output_uri}",
    }[step]


def batch_conditions(status: RolloutBatchStatus, failure: Failure | None) -> dict[str, Cond]:
    out: dict[str, Cond] = {str(c.type): _step(c, status, failure) for c in STEP_CONDITIONS}
    if failure is not None:
        out[T.FAILED] = ("True", failure.reason, failure.message)
        out[T.COMPLETE] = ("True", R.FAILED, failure.message)
    elif status.step == "done":
        out[T.FAILED] = ("False", R.SUCCEEDED, "the trajectories are in the output store")
        out[T.COMPLETE] = ("True", R.SUCCEEDED, _done("collect", status))
    else:
        out[T.FAILED] = ("False", R.IN_PROGRESS, "nothing has failed")
        out[T.COMPLETE] = ("False", R.IN_PROGRESS, _running(_current(status.step), status))
    return out


def _current(step: str) -> str:
    return step if step != "done" else "collect"


PHASES = PhaseChain[P](
    [
        (P.FAILED, (T.FAILED, "True")),
        (P.SUCCEEDED, (T.COMPLETE, "True", R.SUCCEEDED)),
        (P.COLLECTING, (T.COLLECTED, "Unknown")),
        (P.RUNNING, (T.ROLLED_OUT, "Unknown")),
        (P.FETCHING, (T.FETCHED, "Unknown")),
    ],
    P.PENDING,
)

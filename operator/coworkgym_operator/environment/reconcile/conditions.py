"""Conditions from the loop state, and the phase derived from the conditions.

Each condition is decided by a small function of the loop's state (which stage runs, which
one failed, what the last execution found): the first rule that matches decides, and each
stage's rules read the same way — failed here, running here, ended before it, waiting for
an earlier stage, or done. ``environment/api/conditions.py`` documents the types and reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

from coworkgym.loop.machine import LoopStatus, Phase
from coworkgym_operator.core.conditions import Cond, PhaseChain
from coworkgym_operator.environment.api.conditions import ConditionReason as R
from coworkgym_operator.environment.api.conditions import ConditionType as T

STAGES = ("builder", "verifier", "detector", "release")
ROLE_NAMES = {
    "builder": "the Builder",
    "verifier": "the Verifier Constructor",
    "detector": "the Issue Detector",
    "release": "the release",
}


@dataclass(frozen=True)
class StageCondition:
    """How one stage's condition reads: its type, and its reasons when it runs, is done
    or failed."""

    type: T
    stage: str
    running: R
    done: R
    failed: R
    done_message: str


STAGE_CONDITIONS = (
    StageCondition(
        T.BUILT, "builder", R.BUILDING, R.BUILT, R.BUILDER_FAILED, "the Builder's output is ready"
    ),
    StageCondition(
        T.VERIFIER_BUILT,
        "verifier",
        R.CONSTRUCTING,
        R.VERIFIER_BUILT,
        R.VERIFIER_FAILED,
        "the verifier is ready",
    ),
)


CONDITION_OF_STAGE: dict[str, T] = {
    **{c.stage: c.type for c in STAGE_CONDITIONS},
    "detector": T.EXECUTED,
    "release": T.RELEASED,
}


def _running_message(loop: LoopStatus, note: str) -> str:
    text = f"{loop.message} (attempt {loop.attempts})" if loop.attempts else loop.message
    return f"{text}; {note}" if note else text


def _where(loop: LoopStatus, pending: str | None) -> int:
    """How far the current iteration got: the index of the stage that runs or failed;
    past the end once a verdict is in; -1 before the start."""
    if pending in STAGES:
        return STAGES.index(pending)
    if loop.phase is Phase.FAILED:  # where it failed; unknown (an invalid spec): the start
        return STAGES.index(loop.failed_stage) if loop.failed_stage in STAGES else -1
    return len(STAGES) if loop.phase.is_terminal() else -1


def _stage(which: StageCondition, loop: LoopStatus, pending: str | None, note: str) -> Cond:
    me, at = STAGES.index(which.stage), _where(loop, pending)
    failed = loop.phase is Phase.FAILED
    if failed and loop.failed_stage == which.stage:
        return ("False", which.failed, loop.message)
    if pending == which.stage:
        return ("Unknown", which.running, _running_message(loop, note))
    if at < me and failed:
        return ("False", R.NOT_REACHED, f"the loop ended when {_ended_by(loop)} failed")
    if at < 0:
        return ("False", R.WAITING, "not started yet")
    if at < me:
        return ("False", R.WAITING, f"waiting for {ROLE_NAMES[STAGES[at]]}")
    return ("True", which.done, which.done_message)


def _ended_by(loop: LoopStatus) -> str:
    return ROLE_NAMES.get(loop.failed_stage or "", "a stage")


def _executed(loop: LoopStatus, pending: str | None, note: str) -> Cond:
    last = loop.rounds[-1].defects if loop.rounds else []
    errors = [d for d in last if d.severity == "error"]
    at = _where(loop, pending)
    if loop.phase is Phase.FAILED and loop.failed_stage == "detector":
        return ("False", R.DETECTOR_FAILED, loop.message)
    if pending == "detector":
        return ("Unknown", R.EXECUTING, _running_message(loop, note))
    if at < STAGES.index("detector") and loop.phase is Phase.FAILED:
        return ("False", R.NOT_REACHED, f"the loop ended when {_ended_by(loop)} failed")
    if errors:  # the last verdict: revising now, or rejected
        codes = ", ".join(sorted({d.code for d in errors}))
        return (
            "False",
            R.DEFECTS_FOUND,
            f"{len(errors)} defect(s) in iteration {loop.iteration}: {codes}",
        )
    if at < STAGES.index("detector"):
        return ("False", R.WAITING, f"waiting for {ROLE_NAMES[STAGES[max(at, 0)]]}")
    return ("True", R.NO_DEFECTS, f"no defects in iteration {loop.iteration}")


def _released(loop: LoopStatus, pending: str | None, note: str, uri: str | None) -> Cond:
    phase = loop.phase
    if phase is Phase.RELEASED:
        return ("True", R.RELEASED, f"released to {uri}" if uri else loop.message)
    if phase is Phase.REJECTED:
        return ("False", R.REJECTED, loop.message)
    if phase is Phase.FAILED and loop.failed_stage == "release":
        return ("False", R.RELEASE_FAILED, loop.message)
    if pending == "release":
        return ("Unknown", R.RELEASING, _running_message(loop, note))
    if phase is Phase.FAILED:
        return ("False", R.NOT_REACHED, f"the loop ended when {_ended_by(loop)} failed")
    return ("False", R.WAITING, "waiting for an execution without defects")


def _outcome(loop: LoopStatus) -> tuple[Cond, Cond]:
    """Failed, Complete."""
    phase = loop.phase
    if phase is Phase.FAILED:
        return ("True", R.STAGE_FAILED, loop.message), ("True", R.FAILED, loop.message)
    if phase is Phase.RELEASED:
        return ("False", R.RELEASED, "released"), ("True", R.RELEASED, loop.message)
    if phase is Phase.REJECTED:
        return ("False", R.REJECTED, "rejected: a verdict, not a failure"), (
            "True",
            R.REJECTED,
            loop.message,
        )
    return ("False", R.IN_PROGRESS, "no stage has failed"), (
        "False",
        R.IN_PROGRESS,
        loop.message or "not started",
    )


def conditions_for(
    loop: LoopStatus, pending_stage: str | None, note: str = "", package_uri: str | None = None
) -> dict[T, Cond]:
    """Every condition, from the loop state, the stage that runs (``pending_stage``) and a
    ``note`` on it (why its pod cannot start), which goes into the running stage's message."""
    out = {c.type: _stage(c, loop, pending_stage, note) for c in STAGE_CONDITIONS}
    out[T.EXECUTED] = _executed(loop, pending_stage, note)
    out[T.RELEASED] = _released(loop, pending_stage, note, package_uri)
    out[T.FAILED], out[T.COMPLETE] = _outcome(loop)
    return out


def invalid_spec_conditions(why: str) -> dict[T, Cond]:
    """A spec the models refuse: no stage ran, the environment Failed."""
    ended = ("False", R.NOT_REACHED, "the spec is invalid")
    return {
        T.BUILT: ended,
        T.VERIFIER_BUILT: ended,
        T.EXECUTED: ended,
        T.RELEASED: ended,
        T.FAILED: ("True", R.INVALID_SPEC, why),
        T.COMPLETE: ("True", R.FAILED, why),
    }


PHASES = PhaseChain[Phase](
    [
        (Phase.FAILED, (T.FAILED, "True")),
        (Phase.RELEASED, (T.RELEASED, "True")),
        (Phase.REJECTED, (T.RELEASED, "False", R.REJECTED)),
        (Phase.RELEASING, (T.RELEASED, "Unknown")),
        (Phase.EXECUTING, (T.EXECUTED, "Unknown")),
        # defects of the last execution are being repaired (by either constructor)
        (Phase.REVISING, (T.EXECUTED, "False", R.DEFECTS_FOUND)),
        (Phase.CONSTRUCTING_VERIFIER, (T.VERIFIER_BUILT, "Unknown")),
        (Phase.BUILDING, (T.BUILT, "Unknown")),
    ],
    Phase.PENDING,
)

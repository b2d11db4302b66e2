"""The build → execute → revise loop as a pure state machine.

``step(status, event, budget) -> Decision`` folds one observation into the status and says
what to do next. No I/O happens here: the local driver (``coworkgym.loop.local``) and the
Kubernetes controller both run the returned actions and feed back what they observed.

Routing rule: each defect goes back to its owner with its evidence, and only the owner's
stage re-runs — except that a rebuilt Builder output invalidates the verifier (it was
computed from that output), so a Builder revision is always followed by the Verifier
Constructor, with whatever defects were routed to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from ..detector.defects import Defect

MAX_STAGE_ATTEMPTS = 2  # a retryable stage failure is retried once per round
MAX_RECORDED_DEFECTS = 50  # status is bounded: it ends up in a Kubernetes object


class Phase(StrEnum):
    PENDING = "Pending"
    BUILDING = "Building"
    CONSTRUCTING_VERIFIER = "ConstructingVerifier"
    EXECUTING = "Executing"
    REVISING = "Revising"
    RELEASING = "Releasing"
    RELEASED = "Released"
    REJECTED = "Rejected"
    FAILED = "Failed"

    def is_terminal(self) -> bool:
        return self in (Phase.RELEASED, Phase.REJECTED, Phase.FAILED)


Stage = Literal["builder", "verifier", "detector", "release"]


class Round(BaseModel):
    """What one execute step found."""

    iteration: int
    defects: list[Defect]


class LoopStatus(BaseModel):
    phase: Phase = Phase.PENDING
    iteration: int = Field(0, description="completed execute steps")
    attempts: int = Field(0, description="tries of the running stage in this round")
    builder_feedback: list[Defect] = Field(default_factory=list)
    verifier_feedback: list[Defect] = Field(default_factory=list)
    rounds: list[Round] = Field(default_factory=list)
    message: str = ""
    failed_stage: Stage | None = Field(None, description="the stage that ended the loop (Failed)")

    @property
    def defects(self) -> list[Defect]:
        return self.rounds[-1].defects if self.rounds else []


# ---- events (observations) --------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class StageSucceeded:
    stage: Stage


@dataclass(frozen=True)
class StageFailed:
    stage: Stage
    message: str
    retryable: bool = True


@dataclass(frozen=True)
class Executed:
    defects: list[Defect]


Event = Start | StageSucceeded | StageFailed | Executed


# ---- actions ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunStage:
    stage: Stage
    feedback: list[Defect] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    status: LoopStatus
    actions: list[RunStage]


@dataclass(frozen=True)
class Budget:
    max_iterations: int = 3


Handler = Callable[[LoopStatus, Event, Budget], Decision]


def _go(status: LoopStatus, phase: Phase, *actions: RunStage, **changes: object) -> Decision:
    return Decision(status.model_copy(update={"phase": phase, **changes}), list(actions))


def start(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(s, Phase.BUILDING, RunStage("builder"), attempts=1, message="building")


def built(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(
        s,
        Phase.CONSTRUCTING_VERIFIER,
        RunStage("verifier"),
        attempts=1,
        message="constructing the verifier",
    )


def verifier_built(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(s, Phase.EXECUTING, RunStage("detector"), attempts=1, message="executing")


def revised_builder(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(
        s,
        Phase.REVISING,
        RunStage("verifier", list(s.verifier_feedback)),
        attempts=1,
        builder_feedback=[],  # handled: the Builder's revision is done
        message="revising the verifier after the builder",
    )


def executed(s: LoopStatus, e: Event, b: Budget) -> Decision:
    assert isinstance(e, Executed)
    errors = [d for d in e.defects if d.severity == "error"]
    rounds = [*s.rounds, Round(iteration=s.iteration + 1, defects=e.defects[:MAX_RECORDED_DEFECTS])]
    done = s.iteration + 1
    # Feedback is what the next revision works on: none is left once no revision follows.
    if not errors:
        return _go(
            s,
            Phase.RELEASING,
            RunStage("release"),
            iteration=done,
            rounds=rounds,
            attempts=1,
            builder_feedback=[],
            verifier_feedback=[],
            message="releasing",
        )
    if done >= b.max_iterations:
        return _go(
            s,
            Phase.REJECTED,
            iteration=done,
            rounds=rounds,
            attempts=0,
            builder_feedback=[],
            verifier_feedback=[],
            message=f"{len(errors)} defect(s) left after {done} iteration(s)",
        )
    to_builder = [d for d in errors if d.owner == "builder"]
    to_verifier = [d for d in errors if d.owner == "verifier"]
    first = RunStage("builder", to_builder) if to_builder else RunStage("verifier", to_verifier)
    return _go(
        s,
        Phase.REVISING,
        first,
        iteration=done,
        rounds=rounds,
        attempts=1,
        builder_feedback=to_builder,
        verifier_feedback=to_verifier,
        message=f"revising {len(errors)} defect(s)",
    )


def revised_verifier(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(
        s,
        Phase.EXECUTING,
        RunStage("detector"),
        attempts=1,
        builder_feedback=[],
        verifier_feedback=[],
        message="executing",
    )


def released(s: LoopStatus, e: Event, b: Budget) -> Decision:
    return _go(s, Phase.RELEASED, attempts=0, message="released")


def stage_failed(s: LoopStatus, e: Event, b: Budget) -> Decision:
    assert isinstance(e, StageFailed)
    if e.retryable and s.attempts < MAX_STAGE_ATTEMPTS:
        feedback = {"builder": s.builder_feedback, "verifier": s.verifier_feedback}
        again = RunStage(e.stage, list(feedback.get(e.stage, [])))
        return _go(s, s.phase, again, attempts=s.attempts + 1, message=f"retrying: {e.message}")
    return _go(
        s,
        Phase.FAILED,
        attempts=0,
        builder_feedback=[],
        verifier_feedback=[],
        failed_stage=e.stage,
        message=f"{e.stage} failed: {e.message}",
    )


# (phase, event kind, stage) → handler. One comment per edge.
TRANSITIONS: dict[tuple[Phase, str, Stage | None], Handler] = {
    # A new environment starts with the Builder.
    (Phase.PENDING, "Start", None): start,
    # The Builder's output is complete: the Verifier Constructor reads it (read-only).
    (Phase.BUILDING, "StageSucceeded", "builder"): built,
    # A Builder crash or timeout: retried once, then the environment fails.
    (Phase.BUILDING, "StageFailed", "builder"): stage_failed,
    # Both outputs exist: the Issue Detector executes the package.
    (Phase.CONSTRUCTING_VERIFIER, "StageSucceeded", "verifier"): verifier_built,
    (Phase.CONSTRUCTING_VERIFIER, "StageFailed", "verifier"): stage_failed,
    # The Detector's verdict: release, revise (defects routed to owners) or reject (budget).
    (Phase.EXECUTING, "Executed", None): executed,
    # The Detector itself could not run (infrastructure): retried, never scored.
    (Phase.EXECUTING, "StageFailed", "detector"): stage_failed,
    # The Builder repaired its defects: the verifier is rebuilt on the new output.
    (Phase.REVISING, "StageSucceeded", "builder"): revised_builder,
    # The Verifier Constructor repaired its defects: execute again.
    (Phase.REVISING, "StageSucceeded", "verifier"): revised_verifier,
    (Phase.REVISING, "StageFailed", "builder"): stage_failed,
    (Phase.REVISING, "StageFailed", "verifier"): stage_failed,
    # The package is in the release store.
    (Phase.RELEASING, "StageSucceeded", "release"): released,
    # The store was unreachable: retried once, then the environment fails (nothing lost:
    # the next reconcile of a restarted controller starts the release again).
    (Phase.RELEASING, "StageFailed", "release"): stage_failed,
}


class InvalidTransition(Exception):
    pass


def step(status: LoopStatus, event: Event, budget: Budget) -> Decision:
    stage = getattr(event, "stage", None)
    handler = TRANSITIONS.get((status.phase, type(event).__name__, stage))
    if handler is None:
        raise InvalidTransition(
            f"{type(event).__name__}({stage}) is not expected in {status.phase}"
        )
    return handler(status, event, budget)

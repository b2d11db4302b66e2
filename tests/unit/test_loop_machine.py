"""The loop state machine: every edge of the transition table, routing and budgets."""

from __future__ import annotations

import pytest

from coworkgym.detector.defects import Defect, DefectCode
from coworkgym.loop.machine import (
    MAX_STAGE_ATTEMPTS,
    TRANSITIONS,
    Budget,
    Event,
    Executed,
    InvalidTransition,
    LoopStatus,
    Phase,
    RunStage,
    StageFailed,
    StageSucceeded,
    Start,
    step,
)

LEAK = Defect.of(DefectCode.LEAK_REFERENCE_OUTPUT, "summary.json already in s0")
LOOSE = Defect.of(DefectCode.VERIFIER_PERMISSIVE_CHECK, "tolerance 90%")
HINT = Defect.of(DefectCode.EXECUTION_UNSUPPORTED, "RUN skipped", severity="warning")


THREE_ROUNDS = Budget(3)


def drive(events: list[Event], budget: Budget = THREE_ROUNDS) -> tuple[LoopStatus, list[RunStage]]:
    status, actions = LoopStatus(), []
    for event in events:
        decision = step(status, event, budget)
        status, actions = decision.status, decision.actions
    return status, actions


def ok(stage: str) -> StageSucceeded:
    return StageSucceeded(stage)  # type: ignore[arg-type]


CLEAN_RUN: list[Event] = [Start(), ok("builder"), ok("verifier"), Executed([HINT]), ok("release")]


def test_a_clean_run_is_released_after_one_iteration() -> None:
    status, actions = drive(CLEAN_RUN)
    assert status.phase is Phase.RELEASED and status.phase.is_terminal()
    assert status.iteration == 1 and actions == []
    assert status.defects == [HINT]  # warnings are recorded, never block a release


def test_verifier_defects_rerun_only_the_verifier() -> None:
    status, actions = drive([Start(), ok("builder"), ok("verifier"), Executed([LOOSE])])
    assert status.phase is Phase.REVISING
    assert actions == [RunStage("verifier", [LOOSE])]
    status, actions = drive(
        [Start(), ok("builder"), ok("verifier"), Executed([LOOSE]), ok("verifier")]
    )
    assert status.phase is Phase.EXECUTING and actions == [RunStage("detector")]


def test_builder_defects_rerun_the_builder_then_the_verifier_with_its_own_feedback() -> None:
    events: list[Event] = [Start(), ok("builder"), ok("verifier"), Executed([LEAK, LOOSE])]
    status, actions = drive(events)
    assert actions == [RunStage("builder", [LEAK])]
    status, actions = drive([*events, ok("builder")])
    assert status.phase is Phase.REVISING and actions == [RunStage("verifier", [LOOSE])]
    status, _ = drive([*events, ok("builder"), ok("verifier"), Executed([]), ok("release")])
    assert status.phase is Phase.RELEASED and status.iteration == 2


def test_budget_exhaustion_rejects_with_the_defects() -> None:
    rounds: list[Event] = [Start(), ok("builder"), ok("verifier"), Executed([LOOSE])]
    rounds += [ok("verifier"), Executed([LOOSE])]
    status, actions = drive(rounds, Budget(2))
    assert status.phase is Phase.REJECTED and actions == []
    assert status.defects == [LOOSE] and len(status.rounds) == 2


def test_a_retryable_stage_failure_is_retried_once_then_fails() -> None:
    crash = StageFailed("builder", "sandbox OOM")
    status, actions = drive([Start(), crash])
    assert status.phase is Phase.BUILDING and actions == [RunStage("builder")]
    assert status.attempts == MAX_STAGE_ATTEMPTS
    status, actions = drive([Start(), crash, crash])
    assert status.phase is Phase.FAILED and "sandbox OOM" in status.message


def test_a_permanent_failure_fails_at_once() -> None:
    status, _ = drive([Start(), StageFailed("builder", "no such family", retryable=False)])
    assert status.phase is Phase.FAILED


def test_unexpected_events_are_refused() -> None:
    with pytest.raises(InvalidTransition):
        step(LoopStatus(), Executed([]), Budget())
    released, _ = drive(CLEAN_RUN)
    with pytest.raises(InvalidTransition):
        step(released, Start(), Budget())


# Every edge of the table, reached from the start by a real event sequence.
EDGE_WALKS: dict[tuple[Phase, str, str | None], list[Event]] = {
    (Phase.PENDING, "Start", None): [Start()],
    (Phase.BUILDING, "StageSucceeded", "builder"): [Start(), ok("builder")],
    (Phase.BUILDING, "StageFailed", "builder"): [Start(), StageFailed("builder", "x")],
    (Phase.CONSTRUCTING_VERIFIER, "StageSucceeded", "verifier"): CLEAN_RUN[:3],
    (Phase.CONSTRUCTING_VERIFIER, "StageFailed", "verifier"): [
        *CLEAN_RUN[:2],
        StageFailed("verifier", "x"),
    ],
    (Phase.EXECUTING, "Executed", None): [*CLEAN_RUN[:3], Executed([LOOSE])],
    (Phase.EXECUTING, "StageFailed", "detector"): [*CLEAN_RUN[:3], StageFailed("detector", "x")],
    (Phase.REVISING, "StageSucceeded", "builder"): [
        *CLEAN_RUN[:3],
        Executed([LEAK]),
        ok("builder"),
    ],
    (Phase.REVISING, "StageSucceeded", "verifier"): [
        *CLEAN_RUN[:3],
        Executed([LOOSE]),
        ok("verifier"),
    ],
    (Phase.REVISING, "StageFailed", "builder"): [
        *CLEAN_RUN[:3],
        Executed([LEAK]),
        StageFailed("builder", "x"),
    ],
    (Phase.REVISING, "StageFailed", "verifier"): [
        *CLEAN_RUN[:3],
        Executed([LOOSE]),
        StageFailed("verifier", "x"),
    ],
    (Phase.RELEASING, "StageSucceeded", "release"): CLEAN_RUN,
    (Phase.RELEASING, "StageFailed", "release"): [*CLEAN_RUN[:4], StageFailed("release", "x")],
}


def test_the_walks_cover_the_whole_transition_graph() -> None:
    assert set(EDGE_WALKS) == set(TRANSITIONS)
    reachable = {Phase.PENDING}
    for edge, events in EDGE_WALKS.items():
        status = LoopStatus()
        for event in events[:-1]:
            status = step(status, event, Budget()).status
        assert (status.phase, type(events[-1]).__name__, getattr(events[-1], "stage", None)) == edge
        last = events[-1]
        variants = [last]
        if isinstance(last, StageFailed):  # a permanent failure makes Failed reachable
            variants.append(StageFailed(last.stage, last.message, retryable=False))
        for event in variants:
            for budget in (Budget(1), Budget(3)):  # a budget of one makes Rejected reachable
                reachable.add(step(status, event, budget).status.phase)
    assert reachable == set(Phase)  # every phase, terminal ones included, is reachable


def test_a_failure_names_its_stage_and_no_feedback_outlives_the_loop() -> None:
    crash = StageFailed("verifier", "bad output", retryable=False)
    events: list[Event] = [Start(), ok("builder"), ok("verifier"), Executed([LEAK, LOOSE])]
    failed, _ = drive([*events, ok("builder"), crash])
    assert failed.phase is Phase.FAILED and failed.failed_stage == "verifier"
    assert failed.builder_feedback == [] and failed.verifier_feedback == []
    released, _ = drive([*events, ok("builder"), ok("verifier"), Executed([]), ok("release")])
    assert released.builder_feedback == [] and released.verifier_feedback == []
    rejected, _ = drive([Start(), ok("builder"), ok("verifier"), Executed([LOOSE])], Budget(1))
    assert rejected.phase is Phase.REJECTED and rejected.verifier_feedback == []

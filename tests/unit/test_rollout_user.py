"""The stateful user: triggers on observed progress, the knowledge boundary and signal plan,
authorized patches only (never through a planted symlink), and fault detection on what an
LLM user says."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import httpx
import openai
import pytest

from coworkgym.package.cowork import FileUpdate, Signal, Trigger, TurnPatch, UserState
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.user import (
    ScriptedVoice,
    UserSimulator,
    VoiceContext,
    answered,
    contradiction,
    leaked,
    matches,
    near_verbatim,
)
from coworkgym.runtime.workspace import materialize
from tests.support.builders import good_package

DATA = "data/weather.csv"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def pkg() -> EnvironmentPackage:
    return good_package("weather_report", turns=2, seed=7)


def with_turns(pkg: EnvironmentPackage, *triggers: Trigger) -> EnvironmentPackage:
    """The package with its later turns re-planned: the same patch, other triggers."""
    base = pkg.patches[0]
    patches = [base.model_copy(update={"turn": i, "trigger": t}) for i, t in enumerate(triggers, 1)]
    files = dict(pkg.files)
    for turn in range(2, len(triggers) + 1):  # later turns reuse turn 1's files
        for rel, content in pkg.patch_files(1).items():
            files[f".patch/turn-{turn:02d}/files/{rel}"] = content
    return replace(pkg, files=files, patches=patches)


def simulator(pkg: EnvironmentPackage, tmp_path: Path, **kwargs: object) -> UserSimulator:
    workspace = tmp_path / "ws"
    materialize(pkg, workspace)
    return UserSimulator(pkg, workspace, **kwargs)  # type: ignore[arg-type]


# ---- words ------------------------------------------------------------------------------
def test_a_signal_trigger_matches_questions_on_its_subject_only() -> None:
    assert matches("Which units is the precipitation in?", "agent asks about units")
    assert matches("Is that unit mm?", "agent asks about units")
    assert not matches("What should the total row be called?", "agent asks about units")
    assert not matches("Can you ask about it?", "agent asks about units")  # filler words only


def test_near_verbatim_catches_copies_not_topics() -> None:
    goal = "The brief is read by managers; month order and a clear total matter most."
    assert near_verbatim(goal, f"Sure. {goal}")
    assert near_verbatim(
        goal, "fyi the brief is read by managers, month order and a clear total matter"
    )
    assert not near_verbatim(goal, "Managers will read it, so please keep it tidy.")
    assert near_verbatim("mm", "it is in mm") and not near_verbatim("mm", "hmm, not sure")
    assert leaked("I can't say.", [goal]) == []


def test_a_turn_message_must_name_and_not_deny_its_patched_files(pkg: EnvironmentPackage) -> None:
    patch = (
        next(p for p in pkg.patches if p.updates) if any(p.updates for p in pkg.patches) else None
    )
    patch = patch or TurnPatch(
        turn=1,
        trigger=Trigger(kind="after_agent_turn", agent_turn=1),
        message="New data arrived.",
        kind="input_replaced",
        updates=[FileUpdate(op="write", path=DATA, source="weather.csv")],
    )
    assert contradiction(f"I replaced {DATA}; please redo it.", patch) is None
    assert contradiction("I replaced weather.csv; please redo it.", patch) is None  # file name
    assert "does not mention" in (contradiction("Please redo the report.", patch) or "")
    assert "denies" in (contradiction(f"I didn't change {DATA}, redo it anyway.", patch) or "")


# ---- the scripted voice and the knowledge boundary -----------------------------------
def test_scripted_answers_reveal_only_what_the_signal_plan_allows(tmp_path: Path) -> None:
    pkg = good_package("weather_report", turns=1, seed=7)
    user = simulator(pkg, tmp_path)
    assert pkg.user is not None and pkg.user.signal_plan
    signal = pkg.user.signal_plan[0]
    subject = sorted(w for w in signal.trigger.split() if w not in {"agent", "asks", "about"})[0]
    answer = user.answer(f"Quick question on the {subject}?")
    assert signal.reveals.lower() in answer.text.lower()
    assert answer.revealed == [signal.reveals] and answer.speaker == "scripted"
    unrelated = user.answer("Should the sheet have a chart?")
    assert unrelated.revealed == [] and "don't know" in unrelated.text
    assert "report.xlsx" in unrelated.text  # restates the request
    for goal in pkg.user.latent_goals:
        assert goal not in unrelated.text
    assert user.faults == []


def test_a_question_past_the_knowledge_boundary_gets_i_dont_know() -> None:
    state = UserState(
        persona="A facilities coordinator.",
        role="coordinator",
        latent_goals=["a tidy brief"],
        knowledge_boundary=["does not know how the station computes its readings"],
    )
    ctx = VoiceContext(state, "Make the report.", "Make the report.")
    text = ScriptedVoice().answer("How does the station compute readings?", [], ctx)
    assert text == "I'm afraid I don't know that."


# ---- triggers on observed progress ------------------------------------------------------
def test_appeared_fires_when_the_deliverable_is_created_not_before(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="artifact_appeared", artifact="report.xlsx"))
    user = simulator(pkg, tmp_path)
    assert user.after_tool_call() is None
    (user.workspace / "report.xlsx").write_bytes(b"first version")
    due = user.after_tool_call()
    assert due is not None and due.trigger == "artifact_appeared" and due.patch.turn == 1
    assert (
        due.detail
        == "report.xlsx appeared: absent when turn 0 began (after 2 tool calls in turn 0)"
    )


def test_the_old_name_artifact_exists_means_appeared(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="artifact_exists", artifact="report.xlsx"))
    user = simulator(pkg, tmp_path)
    (user.workspace / "report.xlsx").write_bytes(b"first version")
    due = user.after_tool_call()
    assert due is not None and due.trigger == "artifact_appeared"


def test_appeared_never_fires_for_a_file_that_was_there_when_the_turn_began(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="artifact_appeared", artifact="README.md"))
    user = simulator(pkg, tmp_path)
    assert user.after_tool_call() is None  # s0's README.md is not the agent's work
    (user.workspace / "README.md").write_text("edited by the agent\n")
    assert user.after_tool_call() is None  # modified, not created
    (user.workspace / "README.md").unlink()
    assert user.after_tool_call() is None
    (user.workspace / "README.md").write_text("recreated\n")  # absent at the start? no
    assert user.after_tool_call() is None


def test_changed_compares_digests_with_the_turns_start(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(
        pkg,
        Trigger(kind="after_agent_turn", agent_turn=1),
        Trigger(kind="artifact_changed", artifact="report.xlsx"),
    )
    user = simulator(pkg, tmp_path)
    (user.workspace / "report.xlsx").write_bytes(b"turn 0's version")
    first = user.after_agent_turn(claimed_done=True)
    assert first is not None
    user.fire(first)  # turn 1 begins with report.xlsx already there
    assert user.after_tool_call() is None  # untouched: the agent is only looking
    (user.workspace / "report.xlsx").write_bytes(b"turn 0's version")  # same bytes again
    assert user.after_tool_call() is None
    (user.workspace / "report.xlsx").write_bytes(b"turn 1's version")
    due = user.after_tool_call()
    assert due is not None and due.trigger == "artifact_changed"
    assert due.detail == "report.xlsx changed since turn 1 began (after 3 tool calls in turn 1)"


def test_a_mid_turn_trigger_waits_for_the_calls_its_plan_gives(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(
        pkg, Trigger(kind="artifact_appeared", artifact="report.xlsx", min_tool_calls=3)
    )
    user = simulator(pkg, tmp_path)
    (user.workspace / "report.xlsx").write_bytes(b"written by the first call")
    assert user.after_tool_call() is None
    assert user.after_tool_call() is None
    due = user.after_tool_call()
    assert due is not None and "after 3 tool calls" in due.detail


def test_tool_calls_trigger_counts_calls_in_the_current_turn(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(
        pkg, Trigger(kind="tool_calls", tool_calls=2), Trigger(kind="tool_calls", tool_calls=2)
    )
    user = simulator(pkg, tmp_path)
    assert user.after_tool_call() is None
    first = user.after_tool_call()
    assert first is not None and first.trigger == "tool_calls"
    user.fire(first)
    assert user.after_tool_call() is None  # the count starts again in turn 1
    assert user.after_tool_call() is not None


def test_ending_a_turn_fires_the_next_one_and_the_last_ends_the_episode(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(
        pkg,
        Trigger(kind="after_agent_turn", agent_turn=1),
        Trigger(kind="artifact_appeared", artifact="summary.json"),
    )
    user = simulator(pkg, tmp_path)
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None and due.trigger == "agent_claimed_done"
    assert (
        due.detail
        == "the agent finished in turn 0 after 0 tool calls: its turn 1 ended, as planned"
    )
    user.fire(due)
    moved_on = user.after_agent_turn(claimed_done=False)  # summary.json never appeared
    assert moved_on is not None and moved_on.trigger == "agent_ended_turn"
    assert "without producing summary.json" in moved_on.detail
    user.fire(moved_on)
    assert user.remaining == 0 and user.after_agent_turn(claimed_done=True) is None


def test_the_recorded_text_says_when_the_plan_moved(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    """Turn 1 fires mid-turn, so the agent's first end of turn comes in turn 1: the text of
    turn 2 (planned after the agent's turn 2) says what happened, not the plan alone."""
    pkg = with_turns(
        pkg,
        Trigger(kind="artifact_appeared", artifact="report.xlsx"),
        Trigger(kind="after_agent_turn", agent_turn=2),
    )
    user = simulator(pkg, tmp_path)
    (user.workspace / "report.xlsx").write_bytes(b"draft")
    mid = user.after_tool_call()
    assert mid is not None
    user.fire(mid)
    user.after_tool_call()
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    assert due.detail == (
        "the agent finished in turn 1 after 1 tool calls: its turn 1 ended; the plan said "
        "after its turn 2, and the user never leaves a planned turn unsaid"
    )


# ---- patches ----------------------------------------------------------------------------
def test_a_fired_turn_applies_its_update_and_names_what_it_invalidates(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="after_agent_turn", agent_turn=1))
    patch = pkg.patches[0]
    user = simulator(pkg, tmp_path)
    before = (user.workspace / DATA).read_bytes()
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    fired = user.fire(due)
    after = (user.workspace / DATA).read_bytes()
    if patch.updates:
        assert after == pkg.patch_files(1)[patch.updates[0].source or ""]
        change = fired.files[0]
        assert (change.path, change.change) == (DATA, "modified")
        assert (change.sha256_before, change.sha256_after) == (sha(before), sha(after))
        assert {"report.xlsx", "summary.json"} <= set(fired.invalidates)  # the artifact graph
    assert fired.message == patch.message and user.turn == 1


def test_an_update_to_an_undeclared_path_is_refused_and_recorded(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    rogue = TurnPatch(
        turn=1,
        trigger=Trigger(kind="after_agent_turn", agent_turn=1),
        message="I also rewrote your report.xlsx for you.",
        kind="input_edited",
        updates=[FileUpdate(op="write", path="report.xlsx", source="weather.csv")],
    )
    files = {**pkg.files, ".patch/turn-01/files/weather.csv": b"x\n"}
    pkg = replace(pkg, files=files, patches=[rogue])
    user = simulator(pkg, tmp_path)
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    fired = user.fire(due)
    assert not (user.workspace / "report.xlsx").exists() and fired.files == []
    assert [f.kind for f in user.faults] == ["unauthorized_update"]
    assert "not a declared input" in user.faults[0].detail


def test_a_patch_never_writes_through_a_symlink_the_agent_planted(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="after_agent_turn", agent_turn=1))
    if not pkg.patches[0].updates:
        pytest.skip("this seed's first later turn changes no file")
    user = simulator(pkg, tmp_path)
    victim = tmp_path / "host-file.txt"
    victim.write_text("host data\n")
    target = user.workspace / DATA
    target.unlink()
    target.symlink_to(victim)  # what `ln -s` in the agent's sandbox could leave behind
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    user.fire(due)
    assert victim.read_text() == "host data\n"
    assert not target.is_symlink() and target.read_bytes() == pkg.patch_files(1)["weather.csv"]


# ---- an LLM voice's faults ------------------------------------------------------------
class Says:
    """A voice that says fixed words (an LLM user that misbehaves in a known way)."""

    speaker = "llm"

    def __init__(self, turn: str = "", answer: str = "", fail: bool = False) -> None:
        self.turn, self.said, self.fail = turn, answer, fail

    def turn_message(self, patch: TurnPatch, ctx: VoiceContext) -> str:
        if self.fail:
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1/v1"))
        return self.turn

    def answer(self, question: str, allowed: Sequence[Signal], ctx: VoiceContext) -> str:
        return self.said


def test_an_llm_user_that_leaks_private_state_is_recorded(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    assert pkg.user is not None
    goal = pkg.user.latent_goals[0]
    user = simulator(pkg, tmp_path, voice=Says(answer=f"Honestly? {goal}"))
    answer = user.answer("Anything else I should know?")
    assert answer.speaker == "llm"
    assert [f.kind for f in user.faults] == ["private_state_leaked"]
    assert goal in user.faults[0].detail


def test_an_llm_user_may_say_a_signal_once_its_trigger_held(tmp_path: Path) -> None:
    pkg = good_package("weather_report", turns=1, seed=7)
    assert pkg.user is not None
    signal = pkg.user.signal_plan[0]
    user = simulator(pkg, tmp_path, voice=Says(answer=signal.reveals))
    user.answer("What's the weather like?")  # not the signal's subject: a leak
    assert [f.kind for f in user.faults] == ["private_state_leaked"]
    subject = sorted(w for w in signal.trigger.split() if w not in {"agent", "asks", "about"})[0]
    user.answer(f"About the {subject}?")  # its trigger holds: allowed
    assert len(user.faults) == 1


def test_an_llm_turn_message_that_contradicts_the_patch_is_recorded(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="after_agent_turn", agent_turn=1))
    if not pkg.patches[0].updates:
        pytest.skip("this seed's first later turn changes no file")
    user = simulator(pkg, tmp_path, voice=Says(turn="Looks good, nothing changed on my side."))
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    fired = user.fire(due)
    assert fired.speaker == "llm"
    assert [f.kind for f in user.faults] == ["contradicts_patch"]


def test_the_user_answers_each_thing_asked_with_the_signals_that_fit_it_best() -> None:
    plan = [
        Signal(
            trigger="agent asks about something posted twice: a duplicate line or entry",
            reveals="only the first statement line of a trade counts",
        ),
        Signal(trigger="agent asks about the overdraft interest", reveals="Interest expense"),
        Signal(trigger="agent asks about the units of the amounts", reveals="euros"),
    ]

    def said(question: str) -> list[str]:
        return [s.reveals for s in answered(question, plan)]

    # one thing asked, brushing against another subject ("two lines", "posted"): one answer
    # (a blind player got the duplicate-line rule bundled into this reply)
    asked = "There are two overdraft interest lines posted; which account should they go to?"
    assert matches(asked, plan[0].trigger) and said(asked) == ["Interest expense"]
    # two things asked in one message: an answer to each, in the plan's order
    both = "1) Which units are the amounts in? 2) The overdraft interest: which account?"
    assert said(both) == ["Interest expense", "euros"]
    assert said("Is a duplicate line posted twice a bank error?") == [plan[0].reveals]
    assert said("What is the deadline?") == []


def test_a_question_that_fits_two_subjects_alike_gets_both_answers() -> None:
    plan = [
        Signal(
            trigger="agent asks which dates, days or lines the period or the close covers",
            reveals="the close follows policy.md to the letter",
        ),
        Signal(
            trigger="agent asks about an unsettled trade 60 days old",
            reveals="that trade fell through: reverse it",
        ),
    ]
    # a blind player's question (seed 24): three words of the first subject, two of the
    # second; answering only the first left it no way to learn what the trade was
    asked = (
        "Book entry TX4228 has still not been settled by the bank at the period end, more "
        "than 60 days after its date. How should it be listed?"
    )
    assert [s.reveals for s in answered(asked, plan)] == [p.reveals for p in plan]


def test_a_failing_user_model_falls_back_to_the_script_and_is_recorded(
    pkg: EnvironmentPackage, tmp_path: Path
) -> None:
    pkg = with_turns(pkg, Trigger(kind="after_agent_turn", agent_turn=1))
    user = simulator(pkg, tmp_path, voice=Says(fail=True))
    due = user.after_agent_turn(claimed_done=True)
    assert due is not None
    fired = user.fire(due)
    assert fired.message == pkg.patches[0].message and fired.speaker == "scripted"
    assert [f.kind for f in user.faults] == ["simulator_error"]

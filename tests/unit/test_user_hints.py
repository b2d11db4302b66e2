"""The user answers what it is asked and never gives a trap away (issue 25: asked about
something else, the scripted user of calendar_scheduling said "a stamp ending in Z is UTC").
Families declare their traps; the Issue Detector plays the scripted user against them, and
the user simulator records any reply that says one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from coworkgym.detector.audit import audit
from coworkgym.detector.defects import DefectCode
from coworkgym.detector.user_hints import (
    OFF_SUBJECT,
    answers_stay_on_subject,
    scripted_replies,
    traps_kept,
)
from coworkgym.families import FAMILIES
from coworkgym.families.base import FamilyParams
from coworkgym.package.cowork import Signal, TurnPatch
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.user import ScriptedVoice, UserSimulator, VoiceContext, matches
from coworkgym.runtime.workspace import materialize
from tests.support.builders import good_package

OLD_HINT = "office time is UTC+01:00 all week; a stamp ending in Z is UTC"


@pytest.fixture(scope="module")
def calendar() -> EnvironmentPackage:
    return good_package("calendar_scheduling", turns=3, seed=3, difficulty="hard")


def test_a_question_on_another_subject_reveals_nothing() -> None:
    subject = "agent asks about the time zone of the calendars"
    assert matches("What time zone are the calendars in?", subject)
    assert matches("Which time zone does the office use?", subject)
    assert not matches("Which calendar file should I read first?", subject)  # one word
    assert not matches("What time should the first meeting start?", subject)
    assert matches("Which units is the precipitation in?", "agent asks about units")


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_family_lets_its_user_give_a_trap_away(family: str, difficulty: str) -> None:
    """Every reply the scripted user can make, at every difficulty, against the traps."""
    fam = FAMILIES[family]
    draft = fam.draft(FamilyParams(seed=3, difficulty=difficulty, turns=3))  # type: ignore[arg-type]
    ctx = VoiceContext(draft.user, draft.instruction, draft.instruction)
    voice = ScriptedVoice()
    said = [voice.answer(s.trigger, [s], ctx) for s in draft.user.signal_plan]
    said += [voice.answer("Anything else before I start?", [], ctx)]
    said += [t.patch.message for t in draft.turns]
    given = [
        (trap.name, text)
        for trap in fam.traps
        if not trap.given_away(draft.instruction)  # the task states it: no trap here
        for text in said
        if trap.given_away(text)
    ]
    assert given == []


def test_the_detector_flags_a_user_who_gives_a_trap_away(calendar: EnvironmentPackage) -> None:
    assert [d for d in audit(calendar) if d.code == DefectCode.USER_GIVES_AWAY_TRAP] == []
    assert calendar.user is not None
    signals = [
        Signal(trigger=s.trigger, reveals=OLD_HINT) if "time zone" in s.trigger else s
        for s in calendar.user.signal_plan
    ]
    hinting = replace(calendar, user=calendar.user.model_copy(update={"signal_plan": signals}))
    [defect] = [d for d in audit(hinting) if d.code == DefectCode.USER_GIVES_AWAY_TRAP]
    assert defect.owner == "builder" and defect.evidence["trap"] == "utc_export"
    assert "time zone" in str(defect.evidence["where"])


def test_a_turn_message_that_gives_a_trap_away_is_flagged_too(
    calendar: EnvironmentPackage,
) -> None:
    patches: Sequence[TurnPatch] = [
        p.model_copy(update={"message": f"{p.message} Note: Ben's export is in UTC."})
        for p in calendar.patches
    ]
    hinting = replace(calendar, patches=list(patches))
    found = list(traps_kept(hinting))
    assert {d.evidence["where"] for d in found} == {f"turn {p.turn}'s message" for p in patches}
    assert any(
        w == "the answer to a question it cannot answer" for w, _ in scripted_replies(hinting)
    )


class Hints:
    """A user model that says a giveaway whatever it is asked."""

    speaker = "llm"

    def turn_message(self, patch: TurnPatch, ctx: VoiceContext) -> str:
        return patch.message

    def answer(self, question: str, allowed: Sequence[Signal], ctx: VoiceContext) -> str:
        return "Careful: a stamp ending in Z is UTC."


def test_the_simulator_records_a_reply_that_gives_a_trap_away(
    calendar: EnvironmentPackage, tmp_path: Path
) -> None:
    materialize(calendar, tmp_path / "ws")
    user = UserSimulator(calendar, tmp_path / "ws", Hints())  # type: ignore[arg-type]
    user.answer("Which calendar should I read first?")
    assert [(f.kind, f.detail.split(":")[0]) for f in user.faults] == [
        ("trap_given_away", "utc_export")
    ]
    scripted = UserSimulator(calendar, tmp_path / "ws")
    answer = scripted.answer("What time zone are the calendars in?")
    assert "UTC+01:00" in answer.text and scripted.faults == []


# inbox_triage hard's hours subject as a blind player met it (issue 25): its numbers and
# "count" made a question about two contacts rows, one "updated 2026-01-09", and a question
# the user cannot answer ("a message dated 15:02, after the 15:00 export: does it count?")
# both get the business hours' answer.
OLD_HOURS_SUBJECT = (
    "agent asks which business or service hours count for the response targets: 08:00 to "
    "18:00 or 09:00 to 17:00, opening and closing times"
)


@pytest.fixture(scope="module")
def inbox() -> EnvironmentPackage:
    return good_package("inbox_triage", turns=3, seed=0, difficulty="hard")


def _with_trigger(pkg: EnvironmentPackage, word: str, trigger: str) -> EnvironmentPackage:
    assert pkg.user is not None
    signals = [
        Signal(trigger=trigger, reveals=s.reveals) if word in s.trigger else s
        for s in pkg.user.signal_plan
    ]
    assert signals != pkg.user.signal_plan
    return replace(pkg, user=pkg.user.model_copy(update={"signal_plan": signals}))


def test_the_detector_flags_an_answer_to_a_question_the_user_cannot_answer(
    inbox: EnvironmentPackage,
) -> None:
    assert list(answers_stay_on_subject(inbox)) == []
    old = _with_trigger(inbox, "hours", OLD_HOURS_SUBJECT)
    [defect] = [d for d in audit(old) if d.code == DefectCode.USER_VOLUNTEERS_ANSWER]
    assert defect.owner == "builder" and defect.evidence["question"] == OFF_SUBJECT
    assert defect.evidence["volunteered"] == OLD_HOURS_SUBJECT
    # the replies checked against the traps are the ones a rollout gives (the simulator's
    # choice of signals), so the hours' answer is among them
    assert any("08:00 to 18:00" in text for where, text in scripted_replies(old)
               if "cannot answer" in where)  # fmt: skip


def test_the_detector_flags_a_question_on_one_subject_answered_with_another(
    inbox: EnvironmentPackage,
) -> None:
    """Two subjects in the same words: a question on either matches both equally well, and
    gets both answers (the user answers each thing asked with its best-matching signal, so
    only a tie still bundles)."""
    assert inbox.user is not None
    [contacts] = [s.trigger for s in inbox.user.signal_plan if "contacts rows" in s.trigger]
    same_words = " ".join(reversed(contacts.split()))  # the hours answer, on the same words
    bundling = _with_trigger(inbox, "hours", same_words)
    found = {
        (d.evidence["where"], d.evidence["volunteered"]) for d in answers_stay_on_subject(bundling)
    }
    assert (f"the answer to {contacts!r}", same_words) in found

"""The user never gives a trap away, and answers only what it is asked.

A family declares its traps (``TaskFamily.traps``): what the agent must notice in the data
itself, with the phrases that would hand it over. This rule plays the package's scripted
user — its answer to a question on each signal's subject, its answers to questions it cannot
answer, and every later turn's message — and raises USER_GIVES_AWAY_TRAP (for the Builder, who
writes the user) for each of those texts that says a trap's giveaway. A phrase the
instruction itself states is no trap of this task and is not flagged.

The answers are chosen as the user simulator chooses them (``matches``: every signal whose
subject shares two content words with the question), not one signal at a time, so the
check sees what a rollout would say. A signal's answer is a trap's answer too: said to a
question on another signal's subject, or to a question the user cannot answer, it is
volunteered — USER_VOLUNTEERS_ANSWER (issue 25: asked which of two contacts rows counts,
one of them "updated 2026-01-09", inbox_triage's user also said which business hours count,
because its hours subject held "09" and "count"). The questions it cannot answer carry a
date, clock times and everyday words, as an agent's questions do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..package.cowork import Signal
from ..package.package import EnvironmentPackage
from .defects import Defect, DefectCode

UNANSWERABLE = "Is there anything else I should know before I start?"
# Off every subject, in an agent's words (a blind player's question, issue 25): a date, clock
# times, "message", "export", "count".
OFF_SUBJECT = (
    "One message is dated 2026-01-09 15:02, after the 15:00 export was taken. Does it count?"
)
CANNOT_ANSWER = "a question it cannot answer"


def answered_signals(pkg: EnvironmentPackage, question: str) -> list[Signal]:
    """The signals the user simulator answers ``question`` with."""
    from ..rollout.user import answered  # with the scripted user's module: on need

    if pkg.user is None:
        return []
    return answered(question, pkg.user.signal_plan)


def questions(pkg: EnvironmentPackage) -> list[tuple[str, str, Signal | None]]:
    """(where, question, the signal it is about) for each question the rules put to the user:
    one on each signal's subject (its trigger), and the ones it cannot answer (None)."""
    if pkg.user is None:
        return []
    asked: list[tuple[str, str, Signal | None]] = [
        (f"the answer to {s.trigger!r}", s.trigger, s) for s in pkg.user.signal_plan
    ]
    asked.append((f"the answer to {CANNOT_ANSWER}", UNANSWERABLE, None))
    asked.append((f"the answer to {CANNOT_ANSWER}: {OFF_SUBJECT!r}", OFF_SUBJECT, None))
    return asked


def scripted_replies(pkg: EnvironmentPackage) -> list[tuple[str, str]]:
    """(where, text) for everything the scripted user of ``pkg`` can say."""
    # The simulator module brings the LLM client (the `llm` extra); the operator imports the
    # detector without it, so the scripted user is loaded on need.
    from ..rollout.user import ScriptedVoice, VoiceContext

    if pkg.user is None:
        return []
    voice = ScriptedVoice()
    ctx = VoiceContext(pkg.user, pkg.instruction, pkg.instruction)
    said = [
        (where, voice.answer(question, answered_signals(pkg, question), ctx))
        for where, question, _about in questions(pkg)
    ]
    said += [(f"turn {p.turn}'s message", p.message) for p in pkg.patches]
    return said


def answers_stay_on_subject(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """A question gets its own signal's answer and no other."""
    for where, question, about in questions(pkg):
        for signal in answered_signals(pkg, question):
            if about is not None and signal.trigger == about.trigger:
                continue
            subject = "" if about is None else f" (about {about.trigger!r})"
            yield Defect.with_evidence(
                DefectCode.USER_VOLUNTEERS_ANSWER,
                f"the scripted user volunteers {signal.reveals[:80]!r} in {where}{subject}: "
                f"the question shares two words with the subject {signal.trigger!r}; fix: "
                "give each signal only its subject's own words (no numbers, no words that "
                "questions on other subjects say)",
                {"question": question, "volunteered": signal.trigger, "where": where},
            )


def traps_kept(pkg: EnvironmentPackage) -> Iterable[Defect]:
    from ..families import FAMILIES  # the families are heavy (openpyxl, docx): on need

    cowork = pkg.config.cowork
    if cowork is None or cowork.family not in FAMILIES:
        return
    traps = FAMILIES[cowork.family].traps
    for where, text in scripted_replies(pkg):
        for trap in traps:
            phrase = trap.given_away(text)
            if phrase is None or re.search(phrase, pkg.instruction, re.IGNORECASE):
                continue
            yield Defect.with_evidence(
                DefectCode.USER_GIVES_AWAY_TRAP,
                f"the scripted user gives away the trap {trap.name!r} ({trap.what}) in "
                f"{where}: {text[:120]!r}; fix: let the user say only what they know, "
                "never how to read the data",
                {"trap": trap.name, "phrase": phrase, "where": where, "text": text},
            )


__all__ = ["answered_signals", "answers_stay_on_subject", "scripted_replies", "traps_kept"]

"""The user never gives a trap away.

A family declares its traps (``TaskFamily.traps``): what the agent must notice in the data
itself, with the phrases that would hand it over. This rule plays the package's scripted
user — its answer to each signal it may reveal, its answer to a question it cannot answer,
and every later turn's message — and raises USER_GIVES_AWAY_TRAP (for the Builder, who
writes the user) for each of those texts that says a trap's giveaway. A phrase the
instruction itself states is no trap of this task and is not flagged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..package.package import EnvironmentPackage
from .defects import Defect, DefectCode

UNANSWERABLE = "Is there anything else I should know before I start?"


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
        (f"the answer to {s.trigger!r}", voice.answer(s.trigger, [s], ctx))
        for s in pkg.user.signal_plan
    ]
    said.append(("the answer to a question it cannot answer", voice.answer(UNANSWERABLE, [], ctx)))
    said += [(f"turn {p.turn}'s message", p.message) for p in pkg.patches]
    return said


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


__all__ = ["scripted_replies", "traps_kept"]

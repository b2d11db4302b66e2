"""No open answers: every value the verifier checks is determined by the instruction and the
data.

A procedural family declares, for its checked values, the readings a careful reader could
take (``TaskFamily.readings``: ties in an argmax, rounding, inclusive or exclusive bounds).
This rule recomputes them from the package's own final inputs (s0 with every user turn's
updates applied) and asks, for each value whose readings differ on this data, whether a
sentence of the instruction or of a user turn that names the value chooses one:

- none does: the answer is open — ANSWER_AMBIGUOUS for the Builder, who writes the text;
- several readings are chosen: the text contradicts itself — the same, for the Builder;
- one is, but the verifier expects another reading's value — ANSWER_AMBIGUOUS for the
  Verifier Constructor.

Each defect carries the component, the readings and their values as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..families import FAMILIES
from ..families.base import Reading
from ..package.package import EnvironmentPackage
from .defects import Defect, DefectCode

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`(\"'*-])")


def answers_determined(pkg: EnvironmentPackage) -> Iterable[Defect]:
    cowork = pkg.config.cowork
    if cowork is None or cowork.family not in FAMILIES or pkg.artifacts is None:
        return
    readings = FAMILIES[cowork.family].readings(final_inputs(pkg), pkg.patches)
    sentences = _sentences([pkg.instruction, *(p.message for p in pkg.patches)])
    expected = _expected_values(pkg)
    for reading in readings:
        if not _differ(reading):
            continue
        naming = [s for s in sentences if reading.subject.casefold() in s.casefold()]
        chosen = [
            name
            for name, phrase in reading.phrases.items()
            if any(re.search(phrase, s, re.IGNORECASE) for s in naming)
        ]
        evidence: dict[str, object] = {
            "component": reading.component,
            "subject": reading.subject,
            "readings": dict(reading.values),
        }
        if not chosen:
            yield Defect.with_evidence(
                DefectCode.ANSWER_AMBIGUOUS,
                f"{reading.subject} (component {reading.component}) has {len(reading.values)} "
                f"answers on this data — {_listing(reading.values)} — and no sentence of the "
                f"instruction or of a user turn that names {reading.subject!r} says which; "
                "fix: state the rule (e.g. which of tied values to give) where it is asked for",
                evidence,
            )
        elif len(chosen) > 1:
            yield Defect.with_evidence(
                DefectCode.ANSWER_AMBIGUOUS,
                f"{reading.subject} (component {reading.component}): the text chooses "
                f"{' and '.join(chosen)} at once — {_listing(reading.values)}; fix: state one rule",
                {**evidence, "chosen": chosen},
            )
        elif reading.component in expected:
            want = reading.values[chosen[0]]
            got = expected[reading.component]
            if not _same(got, want, reading.tolerance):
                yield Defect(
                    code=DefectCode.ANSWER_AMBIGUOUS,
                    owner="verifier",
                    message=f"{reading.subject} (component {reading.component}): the text "
                    f"chooses the {chosen[0]} reading ({want!r}) but the verifier expects "
                    f"{got!r}; fix: expect the value of the reading the text chooses",
                    evidence={**evidence, "chosen": chosen[0], "expected": got},
                )


def final_inputs(pkg: EnvironmentPackage) -> dict[str, bytes]:
    """The declared inputs after every user turn, from the package's own files."""
    assert pkg.artifacts is not None
    s0 = pkg.workspace()
    files = {a.path: s0[a.path] for a in pkg.artifacts.inputs if a.path in s0}
    for patch in pkg.patches:
        sources = pkg.patch_files(patch.turn)
        for update in patch.updates:
            if update.op == "delete":
                files.pop(update.path, None)
            elif update.source is not None and update.source in sources:
                files[update.path] = sources[update.source]
    return files


def _sentences(texts: Iterable[str]) -> list[str]:
    """Sentences of Markdown text, lines of a paragraph joined (instructions wrap)."""
    out: list[str] = []
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            joined = " ".join(paragraph.split())
            out += [s for s in _SENTENCE_END.split(joined) if s]
    return out


def _differ(reading: Reading) -> bool:
    values = list(reading.values.values())
    return any(not _same(values[0], v, reading.tolerance) for v in values[1:])


def _same(a: object, b: object, tolerance: float) -> bool:
    if _number(a) and _number(b):
        return abs(float(a) - float(b)) <= tolerance  # type: ignore[arg-type]
    return a == b


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _listing(values: Mapping[str, object]) -> str:
    return ", ".join(f"{name}: {value!r}" for name, value in values.items())


def _expected_values(pkg: EnvironmentPackage) -> dict[str, object]:
    """component id → the single value it expects, for checks that expect one."""
    if pkg.verifier is None:
        return {}
    found = {}
    for component in pkg.verifier.components:
        expected = getattr(component.check, "expected", None)
        if expected is not None:
            found[component.id] = expected
    return found


__all__ = ["answers_determined", "final_inputs"]

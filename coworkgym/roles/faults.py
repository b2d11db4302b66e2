"""Fault injection: realistic defects the procedural constructors emit on purpose, so the
Issue Detector and the revise loop are exercised on every run that asks for it.

Each fault knows which role owns it, how to inject it, and which defect codes reveal it.
A role's revise step, given defects with those codes, drops the fault (the repair).
"""

from __future__ import annotations

import random
from dataclasses import replace

from ..detector.defects import DefectCode
from ..package.assemble import BuilderOutput, VerifierOutput
from ..spec import FaultKind
from ..verifier.spec import Component, VerifierSpec

BUILDER_FAULTS: tuple[FaultKind, ...] = ("leak",)
VERIFIER_FAULTS: tuple[FaultKind, ...] = ("permissive_check", "wrong_reference", "missing_red_line")

REVEALED_BY: dict[FaultKind, set[DefectCode]] = {
    # a leaked deliverable can also break the reference solution that expects to create it
    "leak": {
        DefectCode.LEAK_REFERENCE_OUTPUT,
        DefectCode.LEAK_EXPECTED_VALUE,
        DefectCode.SOLUTION_FAILED,
    },
    "permissive_check": {
        DefectCode.VERIFIER_PERMISSIVE_CHECK,
        DefectCode.ACCEPTS_CORRUPTED_ARTIFACT,
    },
    "wrong_reference": {DefectCode.REFERENCE_REJECTED},
    "missing_red_line": {DefectCode.VERIFIER_NO_RED_LINE, DefectCode.ACCEPTS_DAMAGED_INPUTS},
}


def choose(
    rng: random.Random, probability: float, allowed: list[FaultKind], owned: tuple[FaultKind, ...]
) -> list[FaultKind]:
    return [f for f in owned if f in allowed and rng.random() < probability]


def repaired(active: list[FaultKind], feedback_codes: set[DefectCode]) -> list[FaultKind]:
    """The faults still present after a revise step that was shown ``feedback_codes``."""
    return [f for f in active if not (REVEALED_BY[f] & feedback_codes)]


def inject_leak(built: BuilderOutput, reference: dict[str, bytes]) -> BuilderOutput:
    """A reference deliverable left in s0, as if the Builder forgot to restore the workspace."""
    outputs = [a for a in built.artifacts.outputs if a.path in reference]
    if not outputs:
        return built
    # a report-like deliverable (what a forgetful Builder would leave behind), not moved files
    documents = [a for a in outputs if a.format in ("json", "xlsx", "csv", "md", "docx")]
    leaked = (documents or outputs)[0].path
    return replace(built, workspace={**built.workspace, leaked: reference[leaked]})


def inject_permissive(spec: VerifierSpec) -> VerifierSpec:
    """Loosen the first value check until it accepts wrong numbers."""
    components = []
    loosened = False
    for component in spec.components:
        check = component.check
        expected = getattr(check, "expected", None)
        if not loosened and isinstance(expected, int | float) and not isinstance(expected, bool):
            component = _with_check(component, rel_tolerance=0.9)
            loosened = True
        elif not loosened and check.type == "aggregate":
            component = _with_check(component, tolerance=1e9)
            loosened = True
        components.append(component)
    return spec.model_copy(update={"components": components})


def inject_wrong_reference(spec: VerifierSpec) -> VerifierSpec:
    """An expected value computed from the wrong data: the reference completion fails."""
    components = []
    done = False
    for component in spec.components:
        expected = getattr(component.check, "expected", None)
        if not done and expected is not None and not isinstance(expected, bool):
            wrong = expected * 1.1 + 1 if isinstance(expected, int | float) else f"{expected}-x"
            component = _with_check(component, expected=wrong)
            done = True
        components.append(component)
    return spec.model_copy(update={"components": components})


def inject_missing_red_line(spec: VerifierSpec) -> VerifierSpec:
    return spec.model_copy(update={"red_lines": []})


def _with_check(component: Component, **changes: object) -> Component:
    check = component.check.model_copy(update=changes)
    return component.model_copy(update={"check": check})


VERIFIER_INJECTORS = {
    "permissive_check": inject_permissive,
    "wrong_reference": inject_wrong_reference,
    "missing_red_line": inject_missing_red_line,
}


def apply_verifier_faults(
    output: VerifierOutput, faults: list[FaultKind]
) -> tuple[VerifierOutput, list[FaultKind]]:
    """The output with the faults injected, and the faults that took: a verifier with
    nothing to loosen (no numeric check, no red line) carries no such fault."""
    spec, applied = output.spec, []
    for fault in faults:
        changed = VERIFIER_INJECTORS[fault](spec)
        if changed != spec:
            spec = changed
            applied.append(fault)
    return replace(output, spec=spec), applied

"""Procedural task families, each grounded in bundled real resources.

``family_for`` chooses the family that builds a spec and refuses labels no family can make
true: a task's scenario leaf and every capability it is labelled with must be cells the
family serves (``TaskFamily.serves``) at the spec's number of user turns.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Cell, FamilyDraft, FamilyParams, TaskFamily
from .calendar_scheduling import CalendarScheduling
from .code_review import CodeReview
from .contract_revision import ContractRevision
from .fix_failing_function import FixFailingFunction
from .folder_organize import FolderOrganize
from .formula_repair import FormulaRepair
from .inbox_triage import InboxTriage
from .lead_cleanup import LeadCleanup
from .ledger_reconciliation import LedgerReconciliation
from .meeting_notes import MeetingNotes
from .report_figures import ReportFigures
from .weather_report import WeatherReport

FAMILIES: dict[str, TaskFamily] = {
    f.name: f
    for f in (
        WeatherReport(),
        MeetingNotes(),
        LedgerReconciliation(),
        FolderOrganize(),
        FixFailingFunction(),
        ReportFigures(),
        CalendarScheduling(),
        InboxTriage(),
        FormulaRepair(),
        ContractRevision(),
        LeadCleanup(),
        CodeReview(),
    )
}


class UnservedLabels(ValueError):
    """The spec's labels describe work that the chosen (or any) family does not do. Not
    worth retrying: the same labels are refused again; the spec must change."""


def family_named(name: str) -> TaskFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        known = ", ".join(sorted(FAMILIES))
        raise KeyError(f"unknown task family {name!r}; known families: {known}") from None


def family_for(
    scenario: str,
    capabilities: Sequence[str],
    turns: int,
    *,
    family: str | None = None,
    seed: int = 0,
) -> TaskFamily:
    """The family that builds a task labelled ``scenario`` × ``capabilities`` with ``turns``
    user turns: the named one, or one of those that serve every label (by seed). Raises
    ``UnservedLabels`` naming the label, the turns and the fix when none serves them."""
    if family is not None:
        chosen = family_named(family)
        problems = _unserved(chosen, scenario, capabilities, turns)
        if problems:
            raise UnservedLabels(
                f"task.family {family!r} does not serve these labels: {'; '.join(problems)}; "
                f"fix: label the task with cells it serves ({_cells_text(chosen, turns)}), or "
                "leave task.family empty to choose a family that serves the labels"
            )
        return chosen
    fitting = [
        f
        for f in sorted(FAMILIES.values(), key=lambda f: f.name)
        if not _unserved(f, scenario, capabilities, turns)
    ]
    if fitting:
        return fitting[seed % len(fitting)]
    primary = capabilities[0] if capabilities else ""
    near = sorted(f.name for f in FAMILIES.values() if scenario in f.scenarios)
    raise UnservedLabels(
        f"labels.scenario {scenario!r} with labels.capabilities {list(capabilities)} and "
        f"{turns} turn(s): no procedural family serves them"
        + (f" (families serving the scenario: {', '.join(near)})" if near else "")
        + f"; fix: draw specs with the taxonomy sampler (it draws only served cells), pick "
        f"cells listed by `cowork-gym coverage --families`, or build {primary!r} tasks with "
        "the LLM Builder"
    )


def family_for_scenario(scenario: str, seed: int) -> TaskFamily:
    """A family serving the scenario (or its top-level domain, else any); deterministic by
    seed. A display guess only (e.g. a metrics label): the Builder uses ``family_for``,
    which also checks the capabilities and refuses labels no family serves."""
    exact = [f for f in FAMILIES.values() if scenario in f.scenarios]
    domain = scenario.split("/")[0]
    near = [f for f in FAMILIES.values() if any(s.split("/")[0] == domain for s in f.scenarios)]
    pool = exact or near or sorted(FAMILIES.values(), key=lambda f: f.name)
    return sorted(pool, key=lambda f: f.name)[seed % len(pool)]


def served_cells(turns: int = 3) -> dict[Cell, list[str]]:
    """Every (scenario leaf, capability) cell some family serves with ``turns`` user turns,
    and the families serving it."""
    cells: dict[Cell, list[str]] = {}
    for f in sorted(FAMILIES.values(), key=lambda f: f.name):
        for cell in f.cells(turns):
            cells.setdefault(cell, []).append(f.name)
    return cells


def _unserved(
    family: TaskFamily, scenario: str, capabilities: Sequence[str], turns: int
) -> list[str]:
    problems = []
    if scenario not in family.scenarios:
        problems.append(f"labels.scenario {scenario!r} is not one of {list(family.scenarios)}")
    if not 1 <= turns <= family.max_turns:
        problems.append(f"task.turns {turns} is outside 1–{family.max_turns}")
    served = family.capabilities_at(turns)
    for index, capability in enumerate(capabilities):
        if capability not in served:
            why = (
                f"needs {family.full_turns} turns"
                if capability in family.capabilities
                else "is not exercised"
            )
            problems.append(f"labels.capabilities[{index}] {capability!r} {why}")
    return problems


def _cells_text(family: TaskFamily, turns: int) -> str:
    capabilities = list(family.capabilities_at(turns))
    return f"scenarios {list(family.scenarios)} × capabilities {capabilities}"


__all__ = [
    "FAMILIES",
    "Cell",
    "FamilyDraft",
    "FamilyParams",
    "TaskFamily",
    "UnservedLabels",
    "family_for",
    "family_for_scenario",
    "family_named",
    "served_cells",
]

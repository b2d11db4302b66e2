"""Procedural task families, each grounded in bundled real resources."""

from __future__ import annotations

from .base import FamilyDraft, FamilyParams, TaskFamily
from .fix_failing_function import FixFailingFunction
from .folder_organize import FolderOrganize
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
    )
}


def family_named(name: str) -> TaskFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        known = ", ".join(sorted(FAMILIES))
        raise KeyError(f"unknown task family {name!r}; known families: {known}") from None


def family_for_scenario(scenario: str, seed: int) -> TaskFamily:
    """A family serving the scenario (or its top-level domain); deterministic by seed."""
    exact = [f for f in FAMILIES.values() if scenario in f.scenarios]
    domain = scenario.split("/")[0]
    near = [f for f in FAMILIES.values() if any(s.split("/")[0] == domain for s in f.scenarios)]
    pool = exact or near or sorted(FAMILIES.values(), key=lambda f: f.name)
    return sorted(pool, key=lambda f: f.name)[seed % len(pool)]


__all__ = [
    "FAMILIES",
    "FamilyDraft",
    "FamilyParams",
    "TaskFamily",
    "family_for_scenario",
    "family_named",
]

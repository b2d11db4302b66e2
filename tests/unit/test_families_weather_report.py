"""The weather-report family: drafts from the station year whose weather labels follow the
rain gauge, and a reference solution the verifier scores 1.0 through every kind of turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.base import parse_csv
from coworkgym.families.weather_report import DATA, WeatherReport
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = WeatherReport()


def test_registered() -> None:
    assert isinstance(FAMILIES["weather_report"], WeatherReport)


@pytest.mark.parametrize("seed", range(12))
def test_every_month_of_a_draft_has_rain_days_to_count(seed: int) -> None:
    """A month without a `rain` label would leave rainy_days without a source group (the
    verifier failed on 2014 drafts: the export stops labelling rain in spring 2013)."""
    built = built_of(FAMILY, FamilyParams(seed=seed, difficulty="hard", turns=3))
    rows = parse_csv(built.final_inputs()[DATA])
    months = {r["date"][:7] for r in rows}
    rainy = {r["date"][:7] for r in rows if r["weather"] == "rain"}
    assert rainy == months and len(months) == 12


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (4, "easy", 2), (3, "medium", 3), (9, "hard", 3), (124167909, "easy", 2)],
)
def test_the_reference_scores_full_marks(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path)
    assert reward(FAMILY, built, params, workspace, tmp_path) == 1.0

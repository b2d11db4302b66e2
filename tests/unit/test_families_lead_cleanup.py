"""The lead-cleanup family: the style guide's rules (names, E.164 phones, day-first
dates), duplicates merged across exports, and a reference the verifier agrees with."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.lead_cleanup import CLEAN, LeadCleanup, clean, e164, name_case
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = LeadCleanup()


def test_registered() -> None:
    assert isinstance(FAMILIES["lead_cleanup"], LeadCleanup)


def test_the_guides_rules() -> None:
    assert name_case("  VAN DER  berg") == "van der Berg"
    assert name_case("o'neill smith-JONES") == "O'Neill Smith-Jones"
    assert e164("020 7946 0123", "GB") == "+442079460123"
    assert e164("912 345 678", "ES") == "+34912345678"  # no trunk zero to drop
    assert e164("0049301234567", "DE") == "+49301234567"
    assert e164("+353 1 234 5678", "GB") == "+35312345678"  # its own code wins


def test_duplicates_merge_across_exports() -> None:
    draft = FAMILY.draft(FamilyParams(seed=3, difficulty="hard"))
    inputs = {p: c for p, c in draft.workspace.items() if p.startswith("exports/")}
    result = clean(inputs, strip=False)
    assert result.merged >= 2 and result.no_email == 1 and result.invalid_email == 1
    assert len({r["email"] for r in result.rows}) == len(result.rows)


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
)
def test_reference_passes_and_month_first_dates_fail(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    rows = list(csv.DictReader(io.StringIO((workspace / CLEAN).read_text())))
    for row in rows:  # every date read month first where it could be
        year, month, day = row["first_contact"].split("-")
        row["first_contact"] = f"{year}-{day}-{month}" if int(day) <= 12 else row["first_contact"]
        row["phone"] = row["phone"].replace("+", "00", 1)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (workspace / CLEAN).write_text(buffer.getvalue())
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    untouched = tmp_path / "untouched"
    for rel, content in built.workspace.items():
        (untouched / rel).parent.mkdir(parents=True, exist_ok=True)
        (untouched / rel).write_bytes(content)
    assert reward(FAMILY, built, params, untouched, tmp_path / "u") < 0.5
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

"""The formula-repair family: planted faults are found by what each cell's own formula
computes, the verifier recomputes the agent's formulas, and typed-in numbers fail."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.formula_repair import (
    BOOK,
    CSV,
    REPAIRED,
    REPAIRS,
    FormulaRepair,
    plan_from,
    read_book,
    repairs_needed,
)
from coworkgym.families.formulas import FormulaError, evaluate
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = FormulaRepair()


def test_registered() -> None:
    assert isinstance(FAMILIES["formula_repair"], FormulaRepair)


def test_the_evaluator_follows_references_and_refuses_broken_ones() -> None:
    book: dict[str, dict[str, object]] = {
        "A": {"A1": 2, "A2": 4, "A3": "=SUM(A1:A2)*2", "A4": "=A3/$A$1-B!C1", "A5": "=A6"},
        "B": {"C1": "=AVERAGE(A!A1:A2)", "C2": "=SUM(A1:#REF!)"},
    }
    book["A"]["A6"] = "=A5"
    assert evaluate(book, "A", "A4") == 3.0
    for sheet, cell in (("B", "C2"), ("A", "A5")):
        with pytest.raises(FormulaError):
            evaluate(book, sheet, cell)


@pytest.mark.parametrize(
    ("seed", "difficulty"),
    [(4, "easy"), (4, "medium"), (4, "hard"), (1715612398, "medium")],  # the last: a budget
)  # figure equal in two years, so a misaligned row first computed the right value
def test_every_planted_fault_is_a_repair(seed: int, difficulty: str) -> None:
    draft = FAMILY.draft(FamilyParams(seed=seed, difficulty=difficulty))  # type: ignore[arg-type]
    book = read_book(draft.workspace[BOOK])
    needed = repairs_needed(book, plan_from(book, draft.workspace[CSV]))
    faults = {"easy": 2, "medium": 3, "hard": 6}[difficulty]  # hard: a mistyped figure too
    assert len(needed) == faults


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
)
def test_reference_passes_and_typed_values_fail(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    listed = json.loads((workspace / REPAIRS).read_text())["repaired"]
    # the right numbers typed in where the formulas belong
    workbook = openpyxl.load_workbook(workspace / REPAIRED)
    computed = openpyxl.load_workbook(workspace / REPAIRED)
    book = {s.title: {c.coordinate: c.value for r in s.iter_rows() for c in r} for s in computed}
    for key in listed:
        sheet, cell = key.split("!")
        if isinstance(workbook[sheet][cell].value, str):
            workbook[sheet][cell] = evaluate(book, sheet, cell)
    workbook.save(workspace / REPAIRED)
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    (workspace / REPAIRED).write_bytes(built.workspace[BOOK])  # the damaged copy as is
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.7
    untouched = tmp_path / "untouched"
    for rel, content in built.workspace.items():
        (untouched / rel).parent.mkdir(parents=True, exist_ok=True)
        (untouched / rel).write_bytes(content)
    assert reward(FAMILY, built, params, untouched, tmp_path / "u") < 0.5
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

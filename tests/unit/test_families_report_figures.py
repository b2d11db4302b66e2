"""The figure-extraction family: a deterministic DOCX brief that reads back to the data it
was built from, revised editions and a peak-month requirement as later turns, and
expectations computed from the final brief."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.report_figures import (
    CSV,
    EXPECTED,
    JSON,
    REPORT,
    SECTORS,
    ReportFigures,
    _brief,
    read_report,
    render_report,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = ReportFigures()


def test_registered() -> None:
    assert isinstance(FAMILIES["report_figures"], ReportFigures)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_draft_is_deterministic_by_seed(difficulty: str) -> None:
    params = FamilyParams(seed=17, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    a, b = FAMILY.draft(params), FAMILY.draft(params)
    assert a.workspace == b.workspace  # DOCX bytes included: member timestamps are fixed
    assert [(t.patch, t.files) for t in a.turns] == [(t.patch, t.files) for t in b.turns]
    other = FAMILY.draft(FamilyParams(seed=18, difficulty=difficulty))  # type: ignore[arg-type]
    assert other.workspace[REPORT] != a.workspace[REPORT]


@pytest.mark.parametrize(
    ("difficulty", "size"), [("easy", 3 * 4), ("medium", 6 * 5), ("hard", 12 * 6)]
)
def test_the_brief_reads_back_to_its_data(difficulty: str, size: int) -> None:
    params = FamilyParams(seed=1, difficulty=difficulty)  # type: ignore[arg-type]
    brief = _brief(params, params.rng("figures"))
    figures, sectors = read_report(render_report(brief))
    assert sum(len(m) for m in figures.values()) == size
    assert figures["nonfarm"] == brief.nonfarm and figures["nonfarm_change"] == brief.change
    assert sectors == [SECTORS[s] for s in brief.sectors]
    for header in brief.sectors:
        assert figures[SECTORS[header]] == brief.table[header]


def test_later_turns_revise_the_brief_or_ask_for_peaks() -> None:
    kinds = set()
    for seed in range(6):
        draft = FAMILY.draft(FamilyParams(seed=seed, turns=3))
        before, _ = read_report(draft.workspace[REPORT])
        for turn in draft.turns:
            kinds.add(turn.patch.kind)
            if turn.patch.kind == "input_replaced":
                after, _ = read_report(turn.files["employment-brief.docx"])
                assert set(turn.patch.invalidates) == {CSV, JSON}
                assert all(
                    after[m][k] != before[m][k]
                    for m in before
                    for k in before[m]
                    if m != "nonfarm_change"
                )
            else:
                assert "peak" in turn.patch.message and not turn.patch.updates
    assert kinds == {"input_replaced", "requirement_changed"}


def test_expectations_follow_the_final_brief() -> None:
    for seed in range(10):
        params = FamilyParams(seed=seed, turns=2)
        built = built_of(FAMILY, params)
        if built.turns[0].patch.kind == "input_replaced":
            break
    else:
        pytest.fail("no seed with a revised brief")
    output = FAMILY.verifier(built, params)
    expected = json.loads(output.private_files[EXPECTED])["figures"]
    final, _ = read_report(built.turns[0].files["employment-brief.docx"])
    assert expected == final != read_report(built.workspace[REPORT])[0]
    # swap in yet another edition: the expectations move with it
    brief = _brief(params, params.rng("figures"))
    other = replace(brief, nonfarm={m: v + 1000 for m, v in brief.nonfarm.items()})
    built.turns[0].files["employment-brief.docx"] = render_report(other)
    moved = FAMILY.verifier(built, params)
    figures = json.loads(moved.private_files[EXPECTED])["figures"]
    assert figures["nonfarm"] == other.nonfarm


@pytest.mark.parametrize(("turns", "difficulty"), [(1, "easy"), (3, "hard")])
def test_reference_passes_and_shortcuts_fail(tmp_path: Path, turns: int, difficulty: str) -> None:
    params = FamilyParams(seed=9, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    lines = (workspace / CSV).read_text().splitlines()
    (workspace / CSV).write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

"""The code-review family: the patch applies to the repository, the planted defects are
found from the final diff alone, and harmless rewrites are not findings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.code_review import (
    PATCH,
    REVIEW,
    CodeReview,
    expected_findings,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = CodeReview()


def test_registered() -> None:
    assert isinstance(FAMILIES["code_review"], CodeReview)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_the_patch_applies_and_the_defects_are_its_own(difficulty: str, tmp_path: Path) -> None:
    draft = FAMILY.draft(FamilyParams(seed=6, difficulty=difficulty))  # type: ignore[arg-type]
    for rel, content in draft.workspace.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    subprocess.run(["patch", "-p1", "-d", str(tmp_path / "repo"), "-i", str(tmp_path / PATCH)],
                   check=True, capture_output=True)
    found = expected_findings(draft.workspace[PATCH], False)
    assert len(found) == {"easy": 2, "medium": 3, "hard": 4}[difficulty]
    for f in found:  # each flagged line is where the patched file has it
        lines = (tmp_path / "repo" / f.file).read_text().splitlines()
        assert lines[f.line - 1].strip()
    if difficulty == "hard":
        assert "api_mismatch" in {f.kind for f in found}
    docs = expected_findings(draft.workspace[PATCH], True)
    assert [f.kind for f in docs if f not in found] == ["missing_docstring"]


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
)
def test_reference_passes_and_flagging_everything_fails(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    review = json.loads((workspace / REVIEW).read_text())
    # every added line flagged, with the right kinds among them: imprecise
    patch = (workspace / PATCH).read_text().splitlines()
    extra = [{"file": f["file"], "line": f["line"] + 1, "kind": "off_by_one", "message": "?"}
             for f in review["findings"]]
    review["findings"] += extra
    (workspace / REVIEW).write_text(json.dumps(review))
    assert patch and reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    review["findings"] = []  # an empty review approving the change
    review["verdict"] = "approve"
    (workspace / REVIEW).write_text(json.dumps(review))
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.5
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

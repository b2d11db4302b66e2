"""The contract-revision family: the change request decides which paragraphs change (the
liability cap follows the fees), every other paragraph must stay as it was."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.contract_revision import (
    AGREEMENT,
    CHANGES,
    REQUEST,
    REVISED,
    ContractRevision,
    apply,
    parse_request,
    render,
    terms_of,
)
from coworkgym.families.office import docx_body
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = ContractRevision()


def test_registered() -> None:
    assert isinstance(FAMILIES["contract_revision"], ContractRevision)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_the_document_reads_back_as_drafted(difficulty: str) -> None:
    draft = FAMILY.draft(FamilyParams(seed=2, difficulty=difficulty))  # type: ignore[arg-type]
    terms = terms_of(draft.workspace[AGREEMENT])
    paragraphs, tables = docx_body(draft.workspace[AGREEMENT])
    assert [(s, " ".join(t.split())) for s, t in paragraphs] == render(terms)
    assert len(tables) == 1
    agreed = apply(terms, parse_request(draft.workspace[REQUEST], terms))
    assert agreed.cap != terms.cap  # a rate always changes, so the cap moves with it
    if difficulty == "hard":
        text = draft.workspace[REQUEST].decode()
        assert "withdrawn" in text and "same number of days" in text
        assert agreed.notice == agreed.pay


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
)
def test_reference_passes_and_a_missed_cap_fails(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    # the liability clause left as it was (the cap not recomputed)
    original = docx.Document(str(workspace / AGREEMENT))
    revised = docx.Document(str(workspace / REVISED))
    for old, new in zip(original.paragraphs, revised.paragraphs, strict=True):
        if "limited to" in old.text:
            for run in new.runs[1:]:
                run._element.getparent().remove(run._element)
            new.runs[0].text = old.text
    revised.save(str(workspace / REVISED))
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    # the original copied as the revision, with the right JSON
    (workspace / REVISED).write_bytes(built.workspace[AGREEMENT])
    assert json.loads((workspace / CHANGES).read_text())["changed_clauses"]
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.7
    untouched = tmp_path / "untouched"
    for rel, content in built.workspace.items():
        (untouched / rel).parent.mkdir(parents=True, exist_ok=True)
        (untouched / rel).write_bytes(content)
    assert reward(FAMILY, built, params, untouched, tmp_path / "u") < 0.5
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

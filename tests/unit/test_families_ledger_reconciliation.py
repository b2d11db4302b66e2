"""The ledger-reconciliation family: deterministic ledgers with the planted differences, a
later statement or a stale-entry requirement as later turns, and expectations computed from
the final ledgers."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.base import parse_csv
from coworkgym.families.ledger_reconciliation import (
    BANK,
    BOOKS,
    JSON,
    XLSX,
    LedgerReconciliation,
    reconcile,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = LedgerReconciliation()


def test_registered() -> None:
    assert isinstance(FAMILIES["ledger_reconciliation"], LedgerReconciliation)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_draft_is_deterministic_by_seed(difficulty: str) -> None:
    params = FamilyParams(seed=21, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    a, b = FAMILY.draft(params), FAMILY.draft(params)
    assert a.workspace == b.workspace and a.solve_sh == b.solve_sh
    assert [(t.patch, t.files) for t in a.turns] == [(t.patch, t.files) for t in b.turns]
    other = FAMILY.draft(FamilyParams(seed=22, difficulty=difficulty))  # type: ignore[arg-type]
    assert other.workspace[BANK] != a.workspace[BANK]


@pytest.mark.parametrize(
    ("difficulty", "planted"), [("easy", (1, 1, 1)), ("medium", (2, 2, 2)), ("hard", (3, 3, 3))]
)
def test_planted_differences_scale_with_difficulty(
    difficulty: str, planted: tuple[int, int, int]
) -> None:
    draft = FAMILY.draft(FamilyParams(seed=3, difficulty=difficulty))  # type: ignore[arg-type]
    unmatched, matched, net = reconcile(draft.workspace[BANK], draft.workspace[BOOKS])
    found = tuple(sum(1 for u in unmatched if u.source == s) for s in ("bank", "books", "mismatch"))
    assert found == planted and matched > 0
    # net = bank-only − books-only + mismatches, so the listed amounts add up to it
    listed = sum(u.amount for u in unmatched)
    books_only = sum(u.amount for u in unmatched if u.source == "books")
    assert listed == pytest.approx(net + 2 * books_only, abs=0.01)
    if difficulty == "hard":  # the statement splits debits and credits
        assert "debit" in parse_csv(draft.workspace[BANK])[0]


def test_later_turns_replace_the_statement_or_change_the_requirement() -> None:
    kinds = set()
    for seed in range(6):
        draft = FAMILY.draft(FamilyParams(seed=seed, turns=3))
        for turn in draft.turns:
            kinds.add(turn.patch.kind)
            assert set(turn.patch.invalidates) == {XLSX, JSON}
            if turn.patch.kind == "input_replaced":
                assert turn.files["bank.csv"] != draft.workspace[BANK]
            else:
                assert "Stale" in turn.patch.message and not turn.patch.updates
    assert kinds == {"input_replaced", "requirement_changed"}


def test_expectations_follow_the_final_statement() -> None:
    for seed in range(10):
        params = FamilyParams(seed=seed, turns=2)
        built = built_of(FAMILY, params)
        if built.turns[0].patch.kind == "input_replaced":
            break
    else:
        pytest.fail("no seed with a replaced statement")
    spec = FAMILY.verifier(built, params).spec
    expected = {c.id: getattr(c.check, "expected", None) for c in spec.components}
    s0 = reconcile(built.workspace[BANK], built.workspace[BOOKS])
    final = reconcile(built.final_inputs()[BANK], built.final_inputs()[BOOKS])
    assert expected["books_only_count"] == sum(1 for u in final[0] if u.source == "books")
    assert expected["net_difference"] == final[2] != s0[2]
    # a statement with one more fee moves the net difference by exactly that fee
    extra = built.turns[0].files["bank.csv"] + b"BK9999,2099-01-01,Extra fee,-5.00\n"
    built.turns[0].files["bank.csv"] = extra
    moved = {
        c.id: getattr(c.check, "expected", None)
        for c in FAMILY.verifier(built, params).spec.components
    }
    assert moved["net_difference"] == pytest.approx(final[2] - 5.0)
    assert moved["bank_only_count"] == expected["bank_only_count"] + 1


@pytest.mark.parametrize(("turns", "difficulty"), [(1, "hard"), (2, "easy"), (3, "medium")])
def test_reference_passes_and_shortcuts_fail(tmp_path: Path, turns: int, difficulty: str) -> None:
    params = FamilyParams(seed=5, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    (workspace / JSON).write_text('{"matched": 0}')
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99


def test_hard_statement_posts_a_trade_twice_and_asking_settles_it(tmp_path: Path) -> None:
    """Hard: a year of trades; the statement carries one trade a second time (the rules do
    not settle it; the instruction says to ask); the user, asked about it, names the
    source `bank_error`; the next statement does it again to another trade; no answer or
    turn message gives the trap away; a workbook that leaves the repeat out fails."""
    from openpyxl import load_workbook

    from coworkgym.rollout.user import matches

    params = FamilyParams(seed=4, difficulty="hard", turns=3)
    draft = FAMILY.draft(params)
    assert len(parse_csv(draft.workspace[BANK])) > 140  # too many to reconcile by eye
    unmatched = reconcile(draft.workspace[BANK], draft.workspace[BOOKS])[0]
    [error] = [u for u in unmatched if u.source == "bank_error"]
    assert [r["id"] for r in parse_csv(draft.workspace[BANK])].count(error.id) == 2
    assert "ask me" in draft.instruction
    asked = f"{error.id} appears twice on the statement: is that a duplicate posting?"
    [answer] = [s.reveals for s in draft.user.signal_plan if matches(asked, s.trigger)]
    assert "`bank_error`" in answer
    off_topic = "Which sign do amounts leaving the account have?"
    assert all("bank_error" not in s.reveals for s in draft.user.signal_plan
               if matches(off_topic, s.trigger))  # fmt: skip
    spoken = [s.reveals for s in draft.user.signal_plan] + [t.patch.message for t in draft.turns]
    assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]
    statement = next(t for t in draft.turns if t.patch.kind == "input_replaced").files[BANK]
    later = reconcile(statement, draft.workspace[BOOKS])[0]
    assert len([u for u in later if u.source == "bank_error"]) == 2
    easy = FAMILY.draft(FamilyParams(seed=4, difficulty="easy", turns=3))
    assert len(easy.user.signal_plan) == 1 and "ask me" not in easy.instruction

    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    book = load_workbook(workspace / XLSX)
    sheet = book["Unmatched"]
    for row in range(sheet.max_row, 1, -1):
        if sheet.cell(row, 2).value == "bank_error":
            sheet.delete_rows(row)
    book.save(workspace / XLSX)
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99

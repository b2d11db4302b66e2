"""The ledger-reconciliation family: deterministic ledgers with the planted differences, a
later statement or a stale-entry requirement as later turns, and expectations computed from
the final ledgers. Hard is a year-end close under a policy whose three turns build on each
other: each of its traps changes the expected answer, and a solver that misses it fails."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openpyxl import load_workbook

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.base import Difficulty, parse_csv, write_csv
from coworkgym.families.ledger_reconciliation import (
    BANK,
    BOOKS,
    JSON,
    XLSX,
    LedgerReconciliation,
    reconcile,
)
from coworkgym.families.ledger_reconciliation_hard import (
    ACCOUNTS,
    ADJUSTMENTS,
    POLICY,
    UNMATCHED,
    Reconciliation,
    reconcile_close,
    terms,
)
from coworkgym.package.assemble import BuilderOutput
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


@pytest.mark.parametrize(("difficulty", "planted"), [("easy", (1, 1, 1)), ("medium", (2, 2, 2))])
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
    expected: dict[str, Any] = {c.id: getattr(c.check, "expected", None) for c in spec.components}
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


def _close(files: dict[str, bytes]) -> Reconciliation:
    return reconcile_close(files[BANK], files[BOOKS], terms(files[POLICY], files[ACCOUNTS]))


HARD = FamilyParams(seed=4, difficulty="hard", turns=3)


def test_hard_is_a_period_close_under_a_policy_with_every_kind_of_difference() -> None:
    """A year of trades (too many to reconcile by eye), a policy and a chart of accounts;
    the statement opens with a line without an id, and both files run past the period end;
    each kind of difference is planted, and the reconciliation statement balances."""
    draft = FAMILY.draft(HARD)
    assert {BANK, BOOKS, POLICY, ACCOUNTS} <= set(draft.workspace)
    statement = parse_csv(draft.workspace[BANK])
    assert len(statement) > 150 and statement[0]["id"] == "" and "," in statement[0]["balance"]
    end = terms(draft.workspace[POLICY], draft.workspace[ACCOUNTS]).end
    for name in (BANK, BOOKS):
        assert sum(1 for row in parse_csv(draft.workspace[name]) if row["date"] > end) >= 3
    result = _close(draft.workspace)
    kinds = [d.source for d in result.differences]
    assert (kinds.count("bank"), kinds.count("book_error"), kinds.count("bank_error")) == (4, 3, 2)
    assert kinds.count("books") >= 3 and result.matched > 130
    assert result.adjusted_bank_balance == result.adjusted_book_balance
    assert len(result.adjustments) == 7  # the 4 bank charges and the 3 book errors


def test_each_hard_trap_changes_the_expected_answer() -> None:
    """Without the period end, with one line per id, or blaming the books for every
    difference, the numbers differ: each trap is something the verifier sees."""
    draft = FAMILY.draft(HARD)
    result = _close(draft.workspace)
    # the period end: reconciling every line (the easy tiers' rule) matches more ids
    # and leaves the post-period fee unmatched
    whole = reconcile(draft.workspace[BANK], draft.workspace[BOOKS])
    assert whole[1] != result.matched
    assert sum(1 for u in whole[0] if u.source == "bank") > 4
    # the bank's own error: the books agree with the deal, the statement does not
    lines = [r["id"] for r in parse_csv(draft.workspace[BANK])]
    bank_errors = [d for d in result.differences if d.source == "bank_error"]
    [mistyped] = [d for d in bank_errors if lines.count(d.id) == 1]
    booked = next(r for r in parse_csv(draft.workspace[BOOKS]) if r["id"] == mistyped.id)
    side, shares, _symbol, _at, price = booked["description"].split()
    deal = round(int(shares) * float(price), 2) * (-1 if side == "BUY" else 1)
    assert float(booked["amount"]) == pytest.approx(deal) and mistyped.amount != 0
    # turn 3: the posted books give ids two lines; one line per id would see differences
    posted = draft.turns[1].files[BOOKS]
    ids = [r["id"] for r in parse_csv(posted)]
    assert len(ids) - len(set(ids)) == 2  # two trade corrections posted under their ids
    final = _close({**draft.workspace, BOOKS: posted})
    last_line: dict[str, dict[str, object]] = {r["id"]: dict(r) for r in parse_csv(posted)}
    kept_last = write_csv(
        list(last_line.values()), ["id", "date", "account", "description", "amount"]
    )
    assert _close({**draft.workspace, BOOKS: kept_last}).matched < final.matched


def test_hard_turns_build_on_each_other_and_the_last_needs_re_reading() -> None:
    """Turn 2 asks for the adjusting entries built from turn 1's differences; turn 3 posts
    them (one held back for the broker, one bank charge keyed with the wrong sign, which the
    message does not say), so the final close has the held-back correction and the slip as
    book errors, and both as the only adjusting entries."""
    draft = FAMILY.draft(HARD)
    assert [t.patch.kind for t in draft.turns] == ["requirement_changed", "input_replaced"]
    assert ADJUSTMENTS in draft.turns[0].patch.message
    posted = draft.turns[1].files[BOOKS]
    s0, final = _close(draft.workspace), _close({**draft.workspace, BOOKS: posted})
    [held] = re.findall(r"correction to (TX\d+)", draft.turns[1].patch.message)
    errors = {d.id: d for d in final.differences if d.source == "book_error"}
    assert held in errors and len(errors) == 2
    [slip] = [d for key, d in errors.items() if key != held]
    fee = next(d for d in s0.differences if d.id == slip.id)
    assert fee.source == "bank" and slip.amount == pytest.approx(2 * fee.amount)
    assert {a.id for a in final.adjustments} == {held, slip.id}
    assert final.count("bank") == 0 and final.adjusted_bank_balance == final.adjusted_book_balance
    assert final.bank_balance == s0.bank_balance and final.book_balance != s0.book_balance


def test_hard_user_answers_when_asked_and_gives_nothing_away() -> None:
    from coworkgym.rollout.user import matches

    draft = FAMILY.draft(HARD)
    repeated = next(d for d in _close(draft.workspace).differences if d.source == "bank_error")
    asked = f"{repeated.id} appears twice on the statement: is that a duplicate posting?"
    [answer] = [s.reveals for s in draft.user.signal_plan if matches(asked, s.trigger)]
    assert "`bank_error`" in answer and "ask me" in draft.instruction
    period = "Do the statement lines dated after the period end belong to the close?"
    [rule] = [s.reveals for s in draft.user.signal_plan if matches(period, s.trigger)]
    assert "policy.md" in rule
    spoken = [s.reveals for s in draft.user.signal_plan] + [t.patch.message for t in draft.turns]
    assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]
    lower: tuple[Difficulty, ...] = ("easy", "medium")
    for difficulty in lower:  # the lower tiers say no hard trap either
        other = FAMILY.draft(FamilyParams(seed=4, difficulty=difficulty, turns=3))
        said = [s.reveals for s in other.user.signal_plan] + [t.patch.message for t in other.turns]
        assert not [t.name for t in FAMILY.traps for text in said if t.given_away(text)]


def _solve_with(built: BuilderOutput, old: str, new: str) -> BuilderOutput:
    """The reference solution with one rule dropped (``old`` → ``new``), and without its
    own check that the adjusted balances agree, so it delivers whatever it computed."""
    check = (
        '    assert summary["adjusted_bank_balance"] == summary["adjusted_book_balance"], summary\n'
    )
    assert old in built.solve_sh and check in built.solve_sh
    return replace(built, solve_sh=built.solve_sh.replace(old, new).replace(check, ""))


@pytest.mark.parametrize(
    ("mistake", "old", "new"),
    [
        ("no period end", 'if row["date"] > end:', "if False:"),
        ("one book line per id", 'books.get(row["id"], 0.0) + ', ""),
        ("the books always wrong", "if true is not None and round(amount - true, 2) != 0:",
         "if False:"),
        ("the repeated line ignored", 'repeats.append((row["id"], "bank_error", amount))',
         "pass"),
    ],
)  # fmt: skip
def test_hard_reference_passes_and_a_solver_missing_one_rule_fails(
    tmp_path: Path, mistake: str, old: str, new: str
) -> None:
    built = built_of(FAMILY, HARD)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, HARD, workspace, tmp_path / "ref") == 1.0
    attempt = run_reference(_solve_with(built, old, new), tmp_path / "careless")
    assert reward(FAMILY, built, HARD, attempt, tmp_path / "careless") <= 0.5, mistake


def test_hard_work_left_at_an_earlier_turn_fails(tmp_path: Path) -> None:
    built = built_of(FAMILY, HARD)
    for upto in (0, 1):  # the adjustments never made; the posted books never re-read
        stale = run_reference(built, tmp_path / f"stale{upto}", upto=upto)
        assert reward(FAMILY, built, HARD, stale, tmp_path / f"stale{upto}") <= 0.5
    workspace = run_reference(built, tmp_path / "ref")
    book = load_workbook(workspace / XLSX)
    for row in book[UNMATCHED].iter_rows(min_row=2):
        if row[1].value == "book_error" and str(row[0].value).startswith("BK"):
            row[1].value = "bank_error"  # the slip blamed on the bank
    book.save(workspace / XLSX)
    assert reward(FAMILY, built, HARD, workspace, tmp_path / "ref") <= 0.5

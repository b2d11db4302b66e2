"""The ledger-reconciliation family: deterministic ledgers with the planted differences, a
later statement or a stale-entry requirement as later turns, and expectations computed from
the final ledgers. Hard is a year-end close under a policy whose three turns build on each
other, with different problems per seed, two or three of them settled only by asking: each
trap changes the expected answer, and a solver that misses it fails."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from datetime import date, timedelta
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
from coworkgym.families.ledger_reconciliation_close import JOURNAL, journal_lines
from coworkgym.families.ledger_reconciliation_hard import (
    ACCOUNTS,
    ADJUSTMENTS,
    IMPORT_SPEC,
    NOTES,
    OPEN_PROBLEMS,
    POLICY,
    UNMATCHED,
    Reconciliation,
    draw_close,
    final_truth,
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


def _close(files: dict[str, bytes], params: FamilyParams, revised: bool = False) -> Reconciliation:
    """The close of these files, the statement read as the desks' notes say (the truth)."""
    statement = final_truth(params, revised).statement
    return reconcile_close(statement, files[BOOKS], terms(files[POLICY], files[ACCOUNTS]))


def _final(draft: Any) -> dict[str, bytes]:
    return {**draft.workspace, **{k: v for turn in draft.turns for k, v in turn.files.items()}}


def _hard(seed: int) -> FamilyParams:
    return FamilyParams(seed=seed, difficulty="hard", turns=3)


def _problems(seed: int) -> tuple[str, ...]:
    return draw_close(_hard(seed).rng("ledger")).plan.open_problems


HARD = _hard(2)  # a commission, a line the policy's table does not list, a fallen-through trade
REPEATING = _hard(3)  # a repeated posting, an unlisted line, a fallen-through trade
assert set(_problems(2)) == {"commission", "unlisted", "fell_through"}
assert set(_problems(3)) == {"repeated", "unlisted", "fell_through"}


def test_hard_is_a_period_close_under_a_policy_with_every_kind_of_difference() -> None:
    """A year of trades (too many to reconcile by eye), a policy, a chart of accounts and an
    import format; the statement opens with a line without an id, and both files run past
    the period end; each kind of difference is there, and the reconciliation statement
    balances."""
    draft = FAMILY.draft(HARD)
    assert {BANK, BOOKS, POLICY, ACCOUNTS, IMPORT_SPEC} <= set(draft.workspace)
    statement = parse_csv(draft.workspace[BANK])
    assert len(statement) > 100 and statement[0]["id"] == "" and "," in statement[0]["balance"]
    end = terms(draft.workspace[POLICY], draft.workspace[ACCOUNTS]).end
    for name in (BANK, BOOKS):
        assert sum(1 for row in parse_csv(draft.workspace[name]) if row["date"] > end) >= 3
    result = _close(draft.workspace, HARD)
    assert {d.source for d in result.differences} == {"bank", "books", "book_error", "bank_error"}
    assert result.adjusted_bank_balance == result.adjusted_book_balance
    assert {a.id for a in result.adjustments} == {
        d.id for d in result.differences if d.source in ("bank", "book_error")
    }


def test_hard_seeds_differ_in_what_they_plant() -> None:
    """No one script fits every seed: the open problems, the counts of each kind of
    difference and the size of the ledgers all vary."""
    problems, counts, sizes = set(), set(), set()
    for seed in range(10):
        draft = FAMILY.draft(_hard(seed))
        result = _close(draft.workspace, _hard(seed))
        problems.add(_problems(seed))
        counts.add(tuple(result.count(s) for s in ("bank", "books", "book_error", "bank_error")))
        sizes.add(len(parse_csv(draft.workspace[BANK])))
        assert 2 <= len(_problems(seed)) <= 3
    assert len(problems) >= 4 and len(counts) >= 6 and len(sizes) >= 6
    assert set().union(*problems) == set(OPEN_PROBLEMS)


def test_each_hard_trap_changes_the_expected_answer() -> None:
    """Without the period end, with one line per id, or blaming the books for every
    difference, the numbers differ: each trap is something the verifier sees."""
    draft = FAMILY.draft(HARD)
    result = _close(draft.workspace, HARD)
    # the period end: reconciling every line (the easy tiers' rule) matches more ids
    whole = reconcile(draft.workspace[BANK], draft.workspace[BOOKS])
    assert whole[1] != result.matched
    # the bank's own errors: the books agree with the deal, the statement does not
    bank_errors = [d for d in result.differences if d.source == "bank_error"]
    assert len(bank_errors) >= 2
    for mistyped in bank_errors:
        booked = next(r for r in parse_csv(draft.workspace[BOOKS]) if r["id"] == mistyped.id)
        side, shares, _symbol, _at, price = booked["description"].split()
        deal = round(int(shares) * float(price), 2) * (-1 if side == "BUY" else 1)
        assert float(booked["amount"]) == pytest.approx(deal) and mistyped.amount != 0
    # turn 3: the posted books give ids several lines; one line per id would see differences
    posted = draft.turns[1].files[BOOKS]
    ids = [r["id"] for r in parse_csv(posted)]
    assert len(ids) - len(set(ids)) >= 2
    final = _close(_final(draft), HARD, revised=True)
    last_line: dict[str, dict[str, object]] = {r["id"]: dict(r) for r in parse_csv(posted)}
    kept_last = write_csv(
        list(last_line.values()), ["id", "date", "account", "description", "amount"]
    )
    assert _close({**_final(draft), BOOKS: kept_last}, HARD, True).matched < final.matched


def test_what_only_the_user_knows_is_still_open_at_the_end() -> None:
    """The commission, the fallen-through trade (held back from posting), the repeated line
    and a new line the policy's table does not list are all in the final close, so a
    question not asked in turn 1 still costs at the end."""
    for params, present in ((HARD, ("commission", "fell_through")), (REPEATING, ("repeated",))):
        draft = FAMILY.draft(params)
        close = draw_close(params.rng("ledger"))
        final = _close(_final(draft), params, revised=True)
        codes = terms(_final(draft)[POLICY], _final(draft)[ACCOUNTS]).codes
        errors = {d.id: d for d in final.differences if d.source == "book_error"}
        adjusted = {a.id: a for a in final.adjustments}
        if "commission" in present:
            assert adjusted[close.netted].account == codes["Broker commissions"]
            assert errors[close.netted].amount < 0  # the commission, money out
        if "fell_through" in present:
            booked = sum(float(r["amount"]) for r in parse_csv(_final(draft)[BOOKS])
                         if r["id"] == close.fell_through)  # fmt: skip
            assert errors[close.fell_through].amount == pytest.approx(-booked)
        if "repeated" in present:
            repeats = [d for d in final.differences if d.source == "bank_error"]
            lines = [r["id"] for r in parse_csv(_final(draft)[BANK])]
            assert [d for d in repeats if lines.count(d.id) == 2]
        unlisted = [a for a in final.adjustments if a.id.startswith("BK") and a.account in (
            codes[close.unlisted],)]  # fmt: skip
        assert unlisted and close.unlisted not in _final(draft)[POLICY].decode()


def test_hard_turns_build_on_each_other_and_the_last_needs_re_reading() -> None:
    """Turn 2 asks for the adjusting entries and the journal built from turn 1's differences;
    turn 3 posts them (some held back for the broker, one bank fee keyed with the wrong sign,
    which the message does not say), replaces the statement with the bank's revision (one of
    its errors corrected, an interest credit added) and amends the policy (interest now goes
    to another account): the final entries are the held ones, the slip and the new lines."""
    draft = FAMILY.draft(HARD)
    assert [t.patch.kind for t in draft.turns] == ["requirement_changed", "input_replaced"]
    assert ADJUSTMENTS in draft.turns[0].patch.message and JOURNAL in draft.turns[0].patch.message
    assert set(draft.turns[1].files) == {BANK, BOOKS, POLICY, NOTES}
    s0, final = _close(draft.workspace, HARD), _close(_final(draft), HARD, revised=True)
    held = set(re.findall(r"TX\d+", draft.turns[1].patch.message))
    errors = {d.id: d for d in final.differences if d.source == "book_error"}
    assert held < set(errors) and len(held) >= 2
    [slip] = [d for key, d in errors.items() if key not in held]
    fee = next(d for d in s0.differences if d.id == slip.id)
    assert fee.source == "bank" and slip.amount == pytest.approx(2 * fee.amount)
    # the revision: one bank error now matches, and a new interest credit is a bank line
    was = {d.id for d in s0.differences if d.source == "bank_error"}
    now = {d.id for d in final.differences if d.source == "bank_error"}
    assert len(was - now) == 1 and now < was
    codes = terms(_final(draft)[POLICY], _final(draft)[ACCOUNTS]).codes
    before = terms(draft.workspace[POLICY], draft.workspace[ACCOUNTS]).codes
    interest = [d for d in final.differences if d.source == "bank" and d.amount > 0]
    [credit] = [a for a in final.adjustments if a.id == interest[0].id]
    assert credit.account == codes["Interest credit"] != before["Interest credit"]
    assert final.adjusted_bank_balance == final.adjusted_book_balance
    assert final.bank_balance != s0.bank_balance and final.book_balance != s0.book_balance


def test_the_journal_follows_the_import_spec() -> None:
    """Two lines an entry, the entry's account first and cash second, balanced, money in
    debiting cash."""
    draft = FAMILY.draft(HARD)
    close = terms(draft.workspace[POLICY], draft.workspace[ACCOUNTS])
    result = _close(draft.workspace, HARD)
    lines = journal_lines(result, close)
    assert len(lines) == 2 * len(result.adjustments)
    entries = list(zip(lines[::2], lines[1::2], strict=True))
    for adjustment, (first, cash) in zip(result.adjustments, entries, strict=True):
        assert first.account == adjustment.account
        assert cash.account == close.codes["Cash at bank"]
        assert first.debit + cash.debit == first.credit + cash.credit == abs(adjustment.amount)
        assert (cash.debit > 0) == (adjustment.amount > 0) and first.memo == adjustment.id
    assert "`JE001-1`" in draft.workspace[IMPORT_SPEC].decode()


def test_hard_user_answers_when_asked_and_gives_nothing_away() -> None:
    from coworkgym.rollout.user import matches

    questions = {
        "repeated": "TX1234 appears twice on the statement: is that a duplicate posting?",
        "commission": "The settlement of TX1234 is less commission 12.50: whose error is it?",
        "unlisted": "Which account takes the {subject} fee? policy.md does not list it.",
        "fell_through": "TX1234 is still unsettled after 200 days: how do I list it?",
    }
    for seed in (2, 3):
        draft, close = FAMILY.draft(_hard(seed)), draw_close(_hard(seed).rng("ledger"))
        for problem, question in questions.items():
            subject = close.unlisted.lower().removesuffix(" fee")
            asked = question.format(subject=subject)
            answers = [s.reveals for s in draft.user.signal_plan if matches(asked, s.trigger)]
            assert bool(answers) == (problem in close.plan.open_problems), (seed, problem)
        assert "ask me" in draft.instruction
    draft = FAMILY.draft(HARD)
    period = "Do the statement lines dated after the period end belong to the close?"
    [rule] = [s.reveals for s in draft.user.signal_plan if matches(period, s.trigger)]
    assert "policy.md" in rule
    for seed in range(6):
        draft = FAMILY.draft(_hard(seed))
        spoken = [s.reveals for s in draft.user.signal_plan] + [
            t.patch.message for t in draft.turns
        ]
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
    ("params", "mistake", "old", "new"),
    [
        (HARD, "no period end", 'if row["date"] > end:', "if False:"),
        (HARD, "one book line per id", 'books.get(row["id"], 0.0) + ', ""),
        (HARD, "the books always wrong",
         "elif true is not None and round(amount - true, 2) != 0:", "elif False:"),
        (HARD, "the commission taken as the bank's error", 'if "commission" in description:',
         "if False:"),
        (HARD, "the fallen-through trade left outstanding",
         "if first_day[key] < unsettled_before:", "if False:"),
        (HARD, "the amended policy not re-read", "chart = openpyxl",
         'names["Interest credit"] = "Interest income"\nchart = openpyxl'),
        (HARD, "the journal's sides swapped", "cash_debit = size if amount > 0 else 0.0",
         "cash_debit = size if amount < 0 else 0.0"),
        (REPEATING, "the repeated line ignored",
         'repeats.append((key, "bank_error", amount))', "pass"),
    ],
)  # fmt: skip
def test_hard_reference_passes_and_a_solver_missing_one_rule_fails(
    tmp_path: Path, params: FamilyParams, mistake: str, old: str, new: str
) -> None:
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    attempt = run_reference(_solve_with(built, old, new), tmp_path / "careless")
    assert reward(FAMILY, built, params, attempt, tmp_path / "careless") <= 0.5, mistake


def test_hard_unlisted_line_booked_to_a_guessed_account_fails(tmp_path: Path) -> None:
    """Not asking which account takes the line the policy does not list, and guessing the
    nearest one the table names, leaves the final entries wrong."""
    close = draw_close(HARD.rng("ledger"))
    built = built_of(FAMILY, HARD)
    guessed = replace(
        built,
        solve_sh=built.solve_sh.replace(
            "chart = openpyxl", f'names["{close.unlisted}"] = "Custody fees"\nchart = openpyxl'
        ),
    )
    attempt = run_reference(guessed, tmp_path / "guess")
    assert reward(FAMILY, built, HARD, attempt, tmp_path / "guess") < 0.99


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
    assert reward(FAMILY, built, HARD, workspace, tmp_path / "ref") < 0.99


# ---- the desks' notes: meaning, not keywords ---------------------------------------------


def _notes_of(draft: Any) -> list[str]:
    """``notes.md``'s messages, oldest first."""
    text: str = draft.workspace[NOTES].decode()
    return text.split("\n---\n")[1:]


def _keyword_reading(params: FamilyParams, pick: str) -> float:
    """A grep-and-script reader of ``notes.md``: for each transfer, the last message naming
    it, the trade ids in it in order (less the id the statement shows, when others are
    named), the first or the last one (two where the message says two or both). Returns the
    share of the Settlements rows it gets right."""
    draft, truth = FAMILY.draft(params), final_truth(params, revised=False)
    notes = _notes_of(draft)
    shown = {row["ref"]: row["id"] for row in parse_csv(draft.workspace[BANK])}
    right = 0
    for ref, ids in truth.settled.items():
        last = [m for m in notes if ref in m][-1]
        named = list(dict.fromkeys(re.findall(r"\bTX\d{4}\b", last)))
        named = [i for i in named if i != shown[ref]] or named
        k = 2 if re.search(r"\b(two|both)\b|as well as|\bplus\b", last) else 1
        guess = named[:k] if pick == "first" else named[-k:]
        right += " ".join(sorted(guess)) == ids
    return right / len(truth.settled)


def _refund_keyword_reading(params: FamilyParams) -> float:
    """The same reader for the refunds: the first charge the bank's message names."""
    from coworkgym.families.ledger_reconciliation_notes import FEES

    draft, close = FAMILY.draft(params), draw_close(params.rng("ledger"))
    notes = _notes_of(draft)
    right = 0
    for ref, refund in close.desk.refunds.items():
        last = [m for m in notes if ref in m][-1].lower()
        named = sorted((last.index(f.lower()), f) for f in FEES if f.lower() in last)
        right += named[0][1] == refund.charge
    return right / len(close.desk.refunds)


def _amount_matching(params: FamilyParams) -> float:
    """The share of the Settlements rows that amounts and dates alone settle: one trade
    without a statement line of its own whose deal gives the transfer's amount, booked in
    the four days before it."""
    from coworkgym.families.ledger_reconciliation_close import deal_amount

    draft, truth = FAMILY.draft(params), final_truth(params, revised=False)
    statement = parse_csv(draft.workspace[BANK])
    settled = {r["id"] for r in statement if r["description"].startswith("Settlement")}
    open_trades = [
        (b["id"], deal_amount(b["description"]), date.fromisoformat(b["date"]))
        for b in parse_csv(draft.workspace[BOOKS])
        if b["id"].startswith("TX") and b["id"] not in settled
    ]
    single = 0
    for row in statement:
        if row["ref"] not in truth.settled:
            continue
        amount = round(float((row["credit"] or "0").replace(",", ""))
                       - float((row["debit"] or "0").replace(",", "")), 2)  # fmt: skip
        day = date.fromisoformat(row["date"])
        found = [
            key for key, deal, booked in open_trades
            if deal == amount and day - timedelta(days=4) <= booked < day
        ]  # fmt: skip
        single += found == [truth.settled[row["ref"]]]
    return single / len(truth.settled)


def test_amounts_and_dates_alone_leave_many_transfers_open() -> None:
    """Two trades in five repeat a deal of their month a day or two later, both
    transfers of many such pairs have no id, and some transfers pay two trades: matching
    amounts within the settlement days settles at most about half of the rows."""
    shares = [_amount_matching(_hard(seed)) for seed in range(6)]
    assert max(shares) <= 0.6, shares


def test_a_keyword_reader_of_the_notes_fails_every_seed() -> None:
    """Grep and a script are not enough: taking the first or the last trade id a transfer's
    latest message names gets a fifth or more of the Settlements rows wrong on every seed
    (the package fails on any one), while the refunds' first-named charge is often wrong."""
    shares = {
        pick: [_keyword_reading(_hard(seed), pick) for seed in range(6)]
        for pick in ("first", "last")
    }
    for pick, scores in shares.items():
        assert sum(score <= 0.8 for score in scores) >= 4, (pick, scores)
        assert max(scores) < 1.0, (pick, scores)
    refunds = [_refund_keyword_reading(_hard(seed)) for seed in range(6)]
    assert sum(refunds) / len(refunds) < 0.9, refunds


def test_every_note_states_its_meaning_plainly() -> None:
    """Fairness: the desk's last message on each transfer contains one sentence that names
    the transfer and exactly the trades it settles, and the bank's message on each refund one
    that names the charge; the text is written from the truth, before and after turn 3."""
    from coworkgym.families.ledger_reconciliation_draw import RUNS_ON
    from coworkgym.families.ledger_reconciliation_notes import messages

    for seed in range(6):
        params = _hard(seed)
        close = draw_close(params.rng("ledger"))
        revised_on = close.end + timedelta(days=RUNS_ON + 2)
        for desk, notes in (
            (close.desk, messages(close.desk, close.statement, params.rng("notes"))),
            (
                close.desk.revised(),
                messages(
                    close.desk, close.statement, params.rng("notes"), close.desk.revised(),
                    revised_on,
                ),
            ),
        ):  # fmt: skip
            for note in notes:
                assert note.plain in note.body
            for ref, remittance in desk.remittances.items():
                last = [n for n in notes if n.ref == ref][-1]
                named = set(re.findall(r"\bTX\d{4}\b", last.plain))
                assert ref in last.plain and set(remittance.trades) <= named, (seed, last)
                assert len(named - set(remittance.trades)) <= 1  # at most the wrong one, denied
            for ref, refund in desk.refunds.items():
                [note] = [n for n in notes if n.ref == ref]
                assert refund.charge.lower() in note.plain and ref in note.plain


def test_the_readable_corpus_is_far_beyond_one_tool_output() -> None:
    from coworkgym.llm.tools import MAX_TOOL_OUTPUT

    for seed in range(8):
        draft = FAMILY.draft(_hard(seed))
        corpus = sum(len(draft.workspace[name]) for name in (BANK, BOOKS, NOTES))
        assert corpus > 10 * MAX_TOOL_OUTPUT, (seed, corpus)
        settled = final_truth(_hard(seed), revised=False).settled
        assert len(settled) >= 60 and len(_notes_of(draft)) >= 80
        assert len(parse_csv(draft.workspace[BANK])) >= 200


def test_the_notes_vary_by_seed() -> None:
    """Other transfers, other phrasings and another mix of distractors in every seed."""
    mixes, texts, refs = set(), [], []
    for seed in range(6):
        close = draw_close(_hard(seed).rng("ledger"))
        remittances = close.desk.remittances.values()
        mixes.add(
            (
                tuple(sorted(Counter(r.story for r in remittances).items())),
                sum(bool(r.shown) for r in remittances),
                sum(bool(r.withdrawn) for r in remittances),
                sum(len(r.trades) == 2 for r in remittances),
                len(close.desk.swaps),
            )
        )
        texts.append(set(_notes_of(FAMILY.draft(_hard(seed)))))
        refs.append(set(close.desk.remittances))
    assert len(mixes) == 6
    assert all(not (a & b) for i, a in enumerate(refs) for b in refs[i + 1 :])
    first_lines = [{m.split("\n\n")[2] for m in notes if m.count("\n\n") > 2} for notes in texts]
    assert all(len(a & b) < len(a) / 4 for i, a in enumerate(first_lines) for b in first_lines[:i])


def test_settlements_read_from_the_statement_or_one_wrong_row_fail(tmp_path: Path) -> None:
    """The Settlements sheet is graded row by row: one transfer given its twin's trade (the
    same amount) fails the package, and so does the last turn's desk corrections ignored."""
    built = built_of(FAMILY, HARD)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, HARD, workspace, tmp_path / "ref") == 1.0
    close = draw_close(HARD.rng("ledger"))
    a = close.desk.swaps[0][0]
    book = load_workbook(workspace / XLSX)
    for row in book["Settlements"].iter_rows(min_row=2):
        if row[0].value == a:  # what the desk said before its correction
            row[1].value = close.desk.remittances[a].trades[0]
    book.save(workspace / XLSX)
    assert reward(FAMILY, built, HARD, workspace, tmp_path / "ref") <= 0.5


def test_the_last_turn_notes_correct_transfers_only_re_reading_finds() -> None:
    """Turn 3's new messages give two same-amount transfers each other's trades: the
    Settlements rows change for exactly those, and each is booked before its new transfer."""
    for seed in range(6):
        params = _hard(seed)
        close = draw_close(params.rng("ledger"))
        before = final_truth(params, revised=False).settled
        after = final_truth(params, revised=True).settled
        swapped = {ref for pair in close.desk.swaps for ref in pair}
        assert swapped and {ref for ref in before if before[ref] != after.get(ref)} == swapped
        notes = FAMILY.draft(params).turns[1].files[NOTES].decode()
        assert all(after[ref] in notes.split(ref)[-1] for ref in swapped)
        booked = {line.id: line.day for line in close.books}
        days = {line.ref: line.day for line in close.statement}
        assert all(booked[after[ref]] < days[ref] for ref in swapped)

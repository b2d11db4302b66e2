"""The files of ledger_reconciliation's ``hard`` close, written from the seed's close:
``bank.csv``, ``books.csv``, ``accounts.xlsx`` (the chart), ``policy.md`` and its turn-3
amendment, ``import_spec.md``, the README, and the books after the user posted the journal
(turn 3)."""

from __future__ import annotations

import io
import random
from collections.abc import Mapping, Sequence
from datetime import timedelta

import openpyxl

from .base import write_csv
from .ledger_reconciliation_close import (
    ACCOUNTS,
    BANK,
    BOOKS,
    COMMISSION,
    IMPORT_SPEC,
    JOURNAL_COLUMNS,
    POLICY,
    Reconciliation,
    reconcile_close,
    terms,
)
from .ledger_reconciliation_draw import (
    BANK_CHARGES,
    INTEREST,
    RUNS_ON,
    UNSETTLED_DAYS,
    Close,
)
from .ledger_reconciliation_notes import NOTES, STATEMENT_COLUMNS, Line, statement_rows
from .office import stable_office_bytes

AMENDED_INTEREST_ACCOUNT = "Other income"  # turn 3's amendment
# The chart of accounts besides the investment accounts: (code, name, type, status).
CHART = (
    (1010, "Cash at bank", "asset", "active"),
    (2100, "Accrued expenses", "liability", "active"),
    (4100, "Realised gains", "income", "active"),
    (4210, "Interest income", "income", "active"),
    (4290, "Other income", "income", "active"),
    (6100, "Bank charges", "expense", "closed"),
    (6110, "Bank service charges", "expense", "active"),
    (6120, "Wire transfer fees", "expense", "active"),
    (6130, "Custody fees", "expense", "active"),
    (6140, COMMISSION, "expense", "active"),
    (6150, "Interest expense", "expense", "active"),
)
INVESTMENTS_FROM = 1510  # the first investment account's code; one per symbol, 10 apart


def _money(amount: float) -> str:
    return f"{amount:,.2f}"


def statement_csv(close: Close, lines: Sequence[Line] | None = None, truth: bool = False) -> bytes:
    """The statement as the agent reads it (``truth=False``: refs, blank or wrong ids where
    the desks write, one row per transfer) or as the verifier reads it (every trade's own
    id, deal and amount on its own row), with the running balance."""
    desk = None if truth else close.desk
    rows = statement_rows(
        close.statement if lines is None else lines, close.opening, close.start, desk
    )
    return write_csv(rows, STATEMENT_COLUMNS)


def books_csv(books: Sequence[Line]) -> bytes:
    rows: list[dict[str, object]] = [
        {
            "id": b.id,
            "date": b.day.isoformat(),
            "account": b.account,
            "description": b.description,
            "amount": f"{b.amount:.2f}",
        }
        for b in sorted(books, key=lambda b: (b.day, b.id))
    ]
    return write_csv(rows, ["id", "date", "account", "description", "amount"])


def chart(symbols: Sequence[str]) -> list[tuple[int, str, str, str]]:
    investments = [
        (INVESTMENTS_FROM + 10 * i, f"Investments:{s}", "asset", "active")
        for i, s in enumerate(symbols)
    ]
    return sorted([*CHART, *investments])


def accounts_xlsx(symbols: Sequence[str]) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Accounts"
    sheet.append(["code", "name", "type", "status"])
    for row in chart(symbols):
        sheet.append(list(row))
    buffer = io.BytesIO()
    book.save(buffer)
    return stable_office_bytes(buffer.getvalue())


def policy_md(close: Close, accounts: Mapping[str, str] = BANK_CHARGES, amended: str = "") -> str:
    table = "\n".join(f"| {text} | {account} |" for text, account in accounts.items())
    return f"""\
# Cash reconciliation policy

The auditors check every close of the fund's cash account against these rules.

## 1. The period

This close covers {close.start.isoformat()} to {close.end.isoformat()}: the period ends on \
{close.end.isoformat()}. A statement line or a book entry belongs to the period when it is \
dated on or before that day. Both files may run on for some days; lines dated later belong \
to the following close and are left out of every list, count and balance of this one, \
whatever they settle.

## 2. Balances

The books and the statement agreed at the last close: the cash balance before the \
period's first entry was {_money(close.opening)} on both. The statement's balance at the \
period end is the `balance` of its last line dated on or before the period end. The books' \
balance at the period end is that opening balance plus every book amount of the period.

## 3. Matching

A book entry and a statement line are the same transaction when they share an `id`. The \
statement's `ref` is the bank's reference of a transfer. A transfer whose `id` is blank, or \
whose `id` the broker's settlement desk says is wrong, settles the trade or trades the \
desk's messages in `{NOTES}` say it settles; where the desk corrects what it wrote before, \
the correction stands. A transfer that settles several trades counts as one statement line \
per trade, each at that trade's amount. In \
the books, a correcting entry carries the id of the entry it corrects: an id's book amount \
is the sum of its lines of the period. An id whose statement amount and book amount agree \
to the cent is matched. An id whose book lines sum to zero and that the statement does not \
show is closed: it is neither matched nor a difference.

## 4. Differences

Every other id of the period is a difference, listed once:

- only on the statement: `bank` (the bank's own charges and interest);
- only in the books: `books` (not yet settled by the bank; these clear by themselves). A \
book entry the statement has still not settled more than {UNSETTLED_DAYS} days after its \
date is no ordinary outstanding item: raise it with the accountant before you list it;
- on both, with different amounts: whichever side disagrees with the transaction is in \
error. A trade's deal is in the books' description (`BUY 120 IBM @ 81.23`) and in the \
statement's where it shows one: its true amount is the shares times the price, rounded to \
the cent, negative for a BUY. If the books disagree the \
difference is a `book_error`, if the statement does a `bank_error`. A line the bank \
originates (a charge, interest) is right as the statement shows it.

Two cases this policy does not settle; raise each with the accountant before you list it: \
a trade the statement shows on more than one line, and a settlement the statement shows \
net of a broker's commission.

## 5. Adjusting entries

Our books correct the `bank` and `book_error` differences, and only those: outstanding \
items clear by themselves and bank errors are the bank's to reverse. An adjusting entry is \
booked against the account its statement description names here:

| statement description | account |
|---|---|
{table}

A trade's correction is booked against the trade's own investment account (the books' \
`account`). A refund from the bank is booked against the account of the charge it returns \
(the bank's message in `{NOTES}` says which). Use the account's code from `accounts.xlsx`; \
a closed account takes no entries. \
An adjusting entry's amount is the difference's amount: positive when it brings money into \
the cash account.
{amended}
## 6. The reconciliation statement

- adjusted bank balance = the statement's balance at the period end + the `books` \
differences − the `bank_error` differences;
- adjusted book balance = the books' balance at the period end + the `bank` differences + \
the `book_error` differences;

each difference at its signed amount as listed. The two must agree to the cent; until they \
do the close is not finished.
"""


def amended_policy(close: Close) -> str:
    accounts = {**BANK_CHARGES, INTEREST: AMENDED_INTEREST_ACCOUNT}
    note = (
        f"\nAmended {(close.end + timedelta(days=RUNS_ON + 4)).isoformat()} by the auditors, "
        "for this close and later ones: the table above is the one in force; entries "
        "already posted stand.\n"
    )
    return policy_md(close, accounts, note)


def import_spec_md() -> str:
    columns = ", ".join(f"`{c}`" for c in JOURNAL_COLUMNS)
    return f"""\
# Journal import format

The ledger system posts adjusting entries from a CSV file (comma separated, a header row) \
with these columns, in this order: {columns}.

- Entries are numbered `JE001`, `JE002`, … in the order of the ids of the differences they \
correct (`entry`).
- Each entry has exactly two lines: first the line on the entry's account, whose `line` is \
the entry number followed by `-1` (`JE001-1`), then the line on Cash at bank, `-2` \
(`JE001-2`).
- `date` is the posting date, `YYYY-MM-DD`: the last day of the period closed.
- `account` is the account's numeric code from the chart of accounts.
- `debit` and `credit` are amounts with two decimals and no thousands separators, never \
negative; a line carries its amount on one side and `0.00` on the other, and an entry's two \
lines balance.
- An entry that brings money into the cash account debits Cash at bank and credits the \
entry's account; an entry that takes money out credits Cash at bank and debits the entry's \
account.
- `memo` is the id of the difference the entry corrects, on both lines.

Files that break these rules are rejected whole.
"""


def readme_md(close: Close) -> str:
    """The workspace's README.md: what each file is."""
    return (
        f"# Cash account, {close.start:%Y-%m} to {close.end:%Y-%m}\n\n`{BANK}` is the custodian "
        f"bank's statement, `{BOOKS}` our ledger export, `{POLICY}` the close policy, "
        f"`{ACCOUNTS}` the chart of accounts and `{IMPORT_SPEC}` the ledger system's journal "
        "import format. Trades are at the month's closing price.\n"
    )


def _close_of(files: Mapping[str, bytes]) -> Reconciliation:
    return reconcile_close(files[BANK], files[BOOKS], terms(files[POLICY], files[ACCOUNTS]))


def posted_books(
    close: Close, workspace: Mapping[str, bytes], rng: random.Random
) -> tuple[bytes, list[str]]:
    """The books after the user posted turn 2's journal, dated the period end: every entry
    but the trade corrections held back for the broker (one of the books' keying errors, and
    the commission and the fallen-through trade where planted, so that what only the user
    settles is still graded at the end), and one bank fee keyed with the wrong sign. Returns
    the export and the held-back ids."""
    result = _close_of(workspace)
    held = sorted({rng.choice(close.book_side_errors), close.netted, close.fell_through} - {""})
    descriptions = {s.id: s.description for s in close.statement}
    fees = [a.id for a in result.adjustments if a.amount < 0 and descriptions.get(a.id, "") in
            BANK_CHARGES]  # fmt: skip
    slipped = rng.choice(fees)
    names = {code: name for code, name, _k, _s in chart(close.symbols)}
    entries = []
    for adjustment in result.adjustments:
        if adjustment.id in held:
            continue
        trade = adjustment.id.startswith("TX")
        entries.append(
            Line(
                adjustment.id,
                close.end,
                f"Correction of {adjustment.id}" if trade else _booked_as(close, adjustment.id),
                -adjustment.amount if adjustment.id == slipped else adjustment.amount,
                names[adjustment.account],
            )
        )
    return books_csv([*close.books, *entries]), held


def _booked_as(close: Close, key: str) -> str:
    """How the books describe a bank line's entry: a refund by what it refunds."""
    refund = next((r for r in close.desk.refunds.values() if r.id == key), None)
    if refund is not None:
        return f"Refund of {refund.charge.lower()}"
    return next(s.description for s in close.statement if s.id == key)

"""The ``hard`` tier of ledger_reconciliation: a year-end close of the fund's cash account
under a written policy, in three turns that build on each other, where which trade a
transfer settles is decided by what the brokers' settlement desks *say*, and a different set
of problems in every seed.

The workspace: ``bank.csv`` (the custodian's statement: an opening line, the bank's ``ref``
per transfer, debit/credit columns with thousands separators, a running balance, lines that
run ten days past the period end), ``notes.md`` (about a hundred messages from the desks
and the bank, ``ledger_reconciliation_notes``), ``books.csv`` (our ledger export, which runs
as far), ``policy.md`` (the period, the opening balance, how ids match and what the notes
decide, how differences are classified, the limit past which an unsettled entry goes to the
accountant, which account each adjusting entry goes to, the reconciliation statement),
``accounts.xlsx`` (the chart of accounts, a closed account among the active ones) and
``import_spec.md`` (the ledger system's journal import format). Four or five symbols traded
five to seven times a month (more often with four): 250 to 450 statement lines.

What only reading settles (``ledger_reconciliation_notes``): 70 to 90 transfers show a blank
id or another trade's id and the broker's name instead of the deal; the desk's message says
which trade(s) each settles, in phrasings drawn per message (``ledger_reconciliation_texts``),
framed by distractors a keyword script trips on — another trade named first only to be
denied, a slip corrected after it, a past trade in a PS, an old question quoted above the
answer, a forwarded message below it, an earlier note withdrawn by a later one. Amounts do
not settle it: two trades in five repeat an earlier deal of their month a day or two later
(the same amount in the same settlement days), both transfers of 16 to 22 such pairs have
no id, a few transfers pay two trades, the bank mistypes some amounts; matching amounts and
dates settles about half the transfers (the tests show). The bank's refunds
show only "Refund" and the like; its message says which charge each returns (the entry's
account), sometimes denying another. Every meaning is stated plainly in its message and
drawn before the text is written; the verifier and the reference solution take it from the
seed (``final_truth``), never from the text.

What else varies by seed (``draw_plan``): how many trades and symbols; how many of the
books' amounts are mistyped (digits transposed) or keyed with the side reversed; two or
three statement lines at an amount the deal does not give (the bank's error); one to four
trades booked in the last days (outstanding) and some after the end; which bank charges
occur and how often; and two or three of four problems that ``policy.md`` leaves open and
only the user settles, each visible in the data to a careful reader and each a separate
question:

- the statement posts a trade a second time (the later line is the bank's error);
- a settlement "less commission" (by the policy's letter a bank error; the user: the
  broker's charge is ours, a ``book_error`` booked to Broker commissions);
- a bank line the policy's table does not list (the user names its account);
- a trade in the books still unsettled past the policy's limit (the policy says to raise it;
  the user: it fell through, the books reverse it as a ``book_error``).

Why hard is hard — what a careful agent must do (the tool calls estimated by reading a
hard:3 package as the agent receives it; the readable corpus is over ten times a tool
result's limit, so seeing it takes many calls and the agent must track what it has read):

- **Turn 1** (the Unmatched and Settlements sheets, counts, both period-end balances): read
  the policy, the statement's and the books' heads, then ``notes.md`` in eight or more
  slices, judging each transfer's message (which trade, or two; a wrong id on the
  statement; a later correction) and writing the mapping down; a script keyed on the first
  or the last trade id a message names gets a quarter or more of the rows wrong (the tests
  show), so the judgement is the agent's. Then the close as before: the period end, the
  deals (now from the books' descriptions where the statement shows the broker), the open
  problems asked one by one. About 17–22 calls.
- **Turn 2** (builds on turn 1): the Adjustments sheet (a refund to the account of the
  charge its message names, a commission to Broker commissions, an unlisted line to the
  account the user named), the adjusted balances (which agree only if turn 1 was right) and
  ``journal.csv`` in ``import_spec.md``'s format. About 7–9 calls: re-read the refunds'
  messages, read the spec, edit, run, check the journal and the statement, finish.
- **Turn 3** (invalidates all three deliverables in ways only re-reading shows): the journal
  posted (all but the entries the user names as waiting; one bank fee keyed with the wrong
  sign, which the message does not say), a revised statement (one of the bank's mistyped
  lines corrected, an interest credit added, another unlisted line where the seed has one),
  an amended ``policy.md`` (interest to another account) and new messages in ``notes.md``:
  the desk had two transfers of the same amount the wrong way round (nothing else changes,
  so only reading the new messages finds it). About 7–10 calls: compare the four files with
  the old ones, read the new messages and the amendment, rerun, find the slip, check,
  regenerate the journal, finish.

Together about 31–41 tool calls for a careful agent; each Settlements row, each unasked
question and each misread refund costs the final grade (one wrong item fails the package).

Each difficulty is stated in the instruction, ``policy.md``, ``notes.md`` or
``import_spec.md``, or answered by the user when asked; each trap is declared on the family
(``TaskFamily.traps``) and checked by the verifier with exact values.
"""

from __future__ import annotations

import calendar
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

import openpyxl

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, UserState
from ..verifier.spec import (
    Component,
    CsvValue,
    VerifierSpec,
    XlsxValue,
)
from .base import NEVER, FamilyDraft, FamilyParams, Trap, read_csv_resource, write_csv
from .common import (
    Format,
    after_reply,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    requirement_turn,
    rubric,
    table_shape,
    verifier_output,
)
from .ledger_reconciliation_close import (
    ACCOUNTS,
    ADJUSTMENTS,
    BANK,
    BANK_ERROR,
    BOOK_ERROR,
    BOOKS,
    COMMISSION,
    IMPORT_SPEC,
    JOURNAL,
    JOURNAL_COLUMNS,
    JSON,
    POLICY,
    SOLVE,
    UNMATCHED,
    USER_ACCOUNTS,
    XLSX,
    Difference,
    Reconciliation,
    Terms,
    journal_lines,
    reconcile_close,
    terms,
)
from .ledger_reconciliation_notes import (
    NOTES,
    SETTLEMENTS,
    STATEMENT_COLUMNS,
    Desk,
    Line,
    messages,
    notes_md,
    plant_desk,
    plant_refunds,
    settlements,
    statement_rows,
)
from .office import stable_office_bytes

MONTHS = 12
TWIN_SHARE = 0.4  # trades that repeat an earlier deal of their month and symbol
SETTLEMENT_DAYS = (1, 4)  # a trade reaches the statement this many days after it is booked
RUNS_ON = 10  # days past the period end that the statement and the books' export run
UNSETTLED_DAYS = 60  # policy.md: an entry unsettled longer goes to the accountant
MONTH_ABBR = tuple(calendar.month_abbr[1:])  # "Jan 1 2004" in stocks.csv

# Lines only the bank originates, with the account the policy books them against.
BANK_CHARGES = {
    "Account maintenance fee": "Bank service charges",
    "Wire fee": "Wire transfer fees",
    "Custody fee": "Custody fees",
    "Interest credit": "Interest income",
}
INTEREST = "Interest credit"
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

# The problems policy.md leaves open, each settled only by asking; a seed has two or three.
REPEATED, COMMISSION_NETTED, UNLISTED, FELL_THROUGH = (
    "repeated",
    "commission",
    "unlisted",
    "fell_through",
)
OPEN_PROBLEMS = (REPEATED, COMMISSION_NETTED, UNLISTED, FELL_THROUGH)
# How an unlisted bank line is named in a question (two words, both needed to match).
UNLISTED_SUBJECT = {
    "Wire recall fee": "wire recall",
    "Returned payment fee": "returned payment",
    "Statement reprint fee": "statement reprint",
    "Overdraft interest": "overdraft interest",
}

TRAPS = (
    Trap(
        "period_cutoff",
        "the statement and the books run past the period end (hard): later lines belong "
        "to the next period, and trades booked in the last days are outstanding",
        # not "cut-off": the lower tiers' stale-entries turn is about a cut-off date
        (r"\b(after|past|beyond) the period end", r"\bnot (in|part of) (the|this) period\b"),
    ),
    Trap(
        "bank_side_error",
        "a statement line settles a trade at an amount its deal does not give (hard): "
        "the bank, not the books, is wrong",
        (r"\bbank (is|was) wrong\b", r"\bbank'?s? (mistake|typo|keying)", r"\bdeal ticket"),
    ),
    Trap(
        "reversed_side",
        "the books key a trade with its side reversed (hard): a BUY as money in",
        (r"\b(side|sign) (is |was )?reversed\b", r"\bopposite (side|sign)\b", r"\bbackwards\b"),
    ),
    Trap(
        "commission_netted",
        "a settlement is less the broker's commission (hard): not the bank's error",
        (r"\bless commission\b", r"\bnet of\b", r"\bnetted\b"),
    ),
    Trap(
        "unlisted_bank_line",
        "a bank line the policy's account table does not list (hard)",
        (
            r"\bunlisted\b",
            r"\bnot (in|on) (the |policy\.md'?s? )?(policy|table)",
            r"\bnot listed\b",
        ),
    ),
    Trap(
        "fell_through",
        "a trade in the books unsettled past the policy's limit (hard)",
        (r"\bunsettled for\b", r"\b60 days\b", r"\bnever (settled|cleared)\b"),
    ),
    Trap(
        "wrong_reference",
        "a transfer's statement id names another trade; the desk's message gives the right "
        "one (hard)",
        (r"\bwrong (id|reference|trade number)\b", r"\b(id|reference) (is|was) wrong\b"),
    ),
    Trap(
        "note_withdrawn",
        "a later message of the desk withdraws an earlier one; in the last turn the desk "
        "corrects two transfers it had the wrong way round (hard)",
        (
            r"\b(later|latest) (note|message)",
            r"\bwithdr[ae]w",
            r"\bswapp?ed\b",
            r"\bwrong way round\b",
        ),
    ),
    Trap(
        "posting_slip",
        "the books of the last turn post one bank charge with the wrong sign (hard)",
        (r"\bwrong sign\b", r"\bsign (is|was) wrong\b", r"\bflipped\b", r"\bas a credit\b"),
    ),
    Trap(
        "statement_revised",
        "the revised statement of the last turn corrects the bank's mistyped lines and adds "
        "an interest credit (hard)",
        (r"\bcorrected (its|the|their) (error|amount|mistake)", r"\bleft out\b", r"\bomitted\b"),
    ),
    Trap(
        "policy_amended",
        "the amended policy of the last turn books interest to another account (hard)",
        (r"\bother income\b", r"\binterest (now|is now|goes)\b"),
    ),
)


# ---- what a seed plants ------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How many of each kind a seed plants, and which open problems it has."""

    symbols: int
    trades_per_month: int
    transposed: int
    reversed_side: int
    bank_mistyped: int
    late_trades: int
    next_period_trades: int
    open_problems: tuple[str, ...]


def draw_plan(rng: random.Random) -> Plan:
    book_side = rng.choice([(1, 1), (2, 0), (2, 1), (1, 2), (3, 0), (3, 1)])
    return Plan(
        symbols=rng.randint(4, 5),
        trades_per_month=rng.randint(5, 7),
        transposed=book_side[0],
        reversed_side=book_side[1],
        bank_mistyped=rng.randint(2, 3),
        late_trades=rng.randint(1, 4),
        next_period_trades=rng.randint(2, 4),
        open_problems=tuple(sorted(rng.sample(OPEN_PROBLEMS, k=rng.choice([2, 3, 3])))),
    )


@dataclass
class Close:
    """A period close: the period, the opening balance both sides agreed, and the lines."""

    start: date
    end: date
    opening: float
    statement: list[Line]
    books: list[Line]
    symbols: list[str]  # every symbol the chart has an investment account for
    plan: Plan
    book_side_errors: list[str] = field(default_factory=list)  # transposed or reversed ids
    bank_mistyped: dict[str, float] = field(default_factory=dict)  # id → the deal's amount
    unlisted: str = ""  # the bank line the policy's table does not list, if planted
    netted: str = ""  # the trade settled less commission, if planted
    fell_through: str = ""  # the trade the statement never settles, if planted
    next_id: int = 0  # the first BK number nothing uses yet
    desk: Desk = field(default_factory=lambda: Desk({}, {}))  # what notes.md says


def monthly_prices() -> dict[tuple[str, str], float]:
    """(symbol, "YYYY-MM") → the month's closing price (bundled ``stocks.csv``)."""
    prices: dict[tuple[str, str], float] = {}
    for row in read_csv_resource("data/stocks.csv"):
        abbr, _day, year_text = row["date"].split()
        prices[(row["symbol"], f"{year_text}-{MONTH_ABBR.index(abbr) + 1:02d}")] = float(
            row["price"]
        )
    return prices


def mistype(amount: float, rng: random.Random) -> float:
    """A keying error: two adjacent different digits of the whole part swapped (a swap in
    the cents would make a difference too small to check with a cent's tolerance)."""
    text = f"{abs(amount):.2f}"
    whole = text.index(".")
    digits = [i for i in range(whole - 1) if text[i] != text[i + 1]]
    if not digits:  # e.g. 111.11: no swap changes it, so a slipped key instead
        return round(amount + 90.0, 2)
    i = rng.choice(digits)
    typed = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    return round(float(typed) * (1 if amount >= 0 else -1), 2)


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _add_months(year: int, month: int, count: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + count
    return index // 12, index % 12 + 1


def draw_close(rng: random.Random) -> Close:
    """A year of trades at the months' closing prices, settled a few days after booking,
    with the seed's planted differences (``draw_plan``), the bank's own charges, and lines
    past the period end on both sides."""
    plan = draw_plan(rng)
    prices = monthly_prices()
    year, first = rng.randint(2001, 2008), rng.randint(1, 12)
    months = [_add_months(year, first, k) for k in range(MONTHS + 1)]  # and the next one
    start, end = date(year, first, 1), _month_end(*months[MONTHS - 1])
    symbols = sorted(
        {s for s, _m in prices if all((s, f"{y}-{m:02d}") in prices for y, m in months)}
    )
    chosen = sorted(rng.sample(symbols, k=min(plan.symbols, len(symbols))))  # 4 before 2004
    seq = rng.randint(1000, 6000)
    booked: list[tuple[Line, date]] = []  # (the books' line, the day it settles)

    def trade(
        day: date, symbol: str, settles: date | None = None, deal: tuple[int, str] | None = None
    ) -> tuple[int, str]:
        nonlocal seq
        price = prices[(symbol, f"{day.year}-{day.month:02d}")]
        shares, side = deal or (rng.randint(10, 400), rng.choice(["BUY", "SELL"]))
        amount = round(shares * price, 2) * (-1 if side == "BUY" else 1)
        seq += rng.randint(1, 3)
        line = Line(
            f"TX{seq:04d}",
            day,
            f"{side} {shares} {symbol} @ {price:.2f}",
            round(amount, 2),
            f"Investments:{symbol}",
        )
        booked.append((line, settles or day + timedelta(days=rng.randint(*SETTLEMENT_DAYS))))
        return shares, side

    for y, m in months[:MONTHS]:
        last = calendar.monthrange(y, m)[1]
        for symbol in chosen:
            deals: list[tuple[int, tuple[int, str]]] = []  # (day, (shares, side))
            # fewer symbols (four before 2004) trade more often: the statement stays as long
            for _n in range(plan.trades_per_month + 5 - len(chosen)):
                # a repeat of an earlier deal of the month, booked a day or two after it,
                # settles at the same amount in the same days: amounts and dates alone
                # cannot tell the two apart
                repeated_deal: tuple[int, str] | None = None
                if deals and rng.random() < TWIN_SHARE:
                    on, repeated_deal = rng.choice(deals)
                    on = min(on + rng.randint(0, 2), last, 28)
                else:
                    on = rng.randint(1, min(last, 28))
                deals.append((on, trade(date(y, m, on), symbol, None, repeated_deal)))
    for _n in range(plan.late_trades):  # booked in the last three days, settled after the end
        day, symbol = end - timedelta(days=rng.randint(0, 2)), rng.choice(chosen)
        trade(day, symbol, end + timedelta(days=rng.randint(*SETTLEMENT_DAYS)))
    for _n in range(plan.next_period_trades):
        trade(end + timedelta(days=rng.randint(1, RUNS_ON - 4)), rng.choice(chosen))
    booked.sort(key=lambda pair: (pair[0].day, pair[0].id))
    horizon = end + timedelta(days=RUNS_ON)

    # the planted differences, each on its own trade settled well inside the period
    settled_early = [line for line, settles in booked if settles <= end - timedelta(days=5)]
    old = [line for line in settled_early if line.day < end - timedelta(days=UNSETTLED_DAYS + 15)]
    fell_through = rng.choice(old) if FELL_THROUGH in plan.open_problems else None
    pool = [line for line in settled_early if line is not fell_through]
    counts = (plan.transposed, plan.reversed_side, plan.bank_mistyped)
    planted = rng.sample(pool, k=sum(counts) + 2)
    transposed, reversed_side = planted[: counts[0]], planted[counts[0] : sum(counts[:2])]
    mistyped_bank = planted[sum(counts[:2]) : sum(counts)]
    repeated, netted = planted[-2], planted[-1]
    wrong = {line.id: mistype(line.amount, rng) for line in transposed}
    wrong.update({line.id: -line.amount for line in reversed_side})
    books = [replace(line, amount=wrong.get(line.id, line.amount)) for line, _s in booked]

    bank_wrong = {line.id: mistype(line.amount, rng) for line in mistyped_bank}
    statement: list[Line] = []
    for line, settles in booked:
        if settles > horizon or line is fell_through:
            continue
        settled = replace(
            line,
            day=settles,
            description=f"Settlement {line.description}",
            amount=bank_wrong.get(line.id, line.amount),
            account="",
        )
        if COMMISSION_NETTED in plan.open_problems and line is netted:
            commission = round(rng.uniform(4, 30), 2)
            settled = replace(
                settled,
                description=f"{settled.description} less commission {commission:.2f}",
                amount=round(settled.amount - commission, 2),
            )
        statement.append(settled)
    if REPEATED in plan.open_problems:
        posted = next(s for s in statement if s.id == repeated.id)
        statement.append(replace(posted, day=posted.day + timedelta(days=rng.randint(1, 3))))
    bank_id = seq + 11
    present = sorted(rng.sample(sorted(BANK_CHARGES), k=rng.randint(3, 4)))
    if "Account maintenance fee" not in present:  # a fee is always there for turn 3's slip
        present = sorted([*present[1:], "Account maintenance fee"])
    for text in present:
        for y, m in sorted(rng.sample(months[:MONTHS], k=rng.randint(1, 3))):
            statement.append(Line(f"BK{bank_id:04d}", _charge_day(y, m), text, _charge(text, rng)))
            bank_id += rng.randint(1, 4)
    unlisted = ""
    if UNLISTED in plan.open_problems:
        unlisted = rng.choice(sorted(USER_ACCOUNTS))
        y, m = rng.choice(months[1 : MONTHS - 1])
        statement.append(Line(f"BK{bank_id:04d}", date(y, m, rng.randint(3, 26)), unlisted,
                              -round(rng.uniform(8, 60), 2)))  # fmt: skip
        bank_id += 2
    statement.append(  # the next period's first charge
        Line(f"BK{bank_id:04d}", end + timedelta(days=5), present[0], _charge(present[0], rng))
    )
    statement.sort(key=lambda s: (s.day, s.id))
    keep_out = {repeated.id, netted.id, fell_through.id if fell_through else ""}
    booked_on = {line.id: line.day for line, _settles in booked}
    statement, desk = plant_desk(statement, end, keep_out, booked_on, rng)
    statement, desk.refunds = plant_refunds(statement, start, end, bank_id + 20, rng)
    opening = round(rng.uniform(1_500_000, 2_500_000), 2)
    return Close(
        start,
        end,
        opening,
        statement,
        books,
        symbols,
        plan,
        sorted(wrong),
        {line.id: line.amount for line in mistyped_bank},
        unlisted,
        netted.id if COMMISSION_NETTED in plan.open_problems else "",
        fell_through.id if fell_through else "",
        bank_id + 3,
        desk,
    )


def _charge_day(year: int, month: int) -> date:
    return date(year, month, min(28, calendar.monthrange(year, month)[1]))


def _charge(text: str, rng: random.Random) -> float:
    if text == INTEREST:
        return round(rng.uniform(3, 12), 2)
    if text == "Custody fee":
        return -round(rng.uniform(40, 95), 2)
    return {"Account maintenance fee": -25.0, "Wire fee": -15.0}[text]


# ---- the files -------------------------------------------------------------------------


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


# ---- the task ------------------------------------------------------------------------------


def resolved(lines: Sequence[Line], desk: Desk) -> list[Line]:
    """The statement lines with the trade each transfer settles as ``desk`` says (after turn
    3's corrections two transfers of the same amount exchange their trades)."""
    return [
        replace(s, id=desk.remittances[s.ref].trades[0])
        if s.ref in desk.remittances and len(desk.remittances[s.ref].trades) == 1
        else s
        for s in lines
    ]


def _settled(lines: Sequence[Line], desk: Desk) -> dict[str, list[list[object]]]:
    """For the reference solution: each transfer the desks write about → [trade id, its
    amount on the statement] per trade it settles."""
    return {
        ref: [[s.id, s.amount] for s in lines if s.ref == ref] for ref in sorted(desk.remittances)
    }


@dataclass(frozen=True)
class Truth:
    """What the final statement means: every trade's own line, and the Settlements sheet."""

    statement: bytes
    settled: dict[str, str]


def final_truth(params: FamilyParams, revised: bool) -> Truth:
    """The truth behind the final ``bank.csv`` and ``notes.md`` (turn 3's when ``revised``),
    drawn again from the seed: the text is never read back."""
    close = draw_close(params.rng("ledger"))
    desk, lines = close.desk, close.statement
    if revised:
        desk, lines = desk.revised(), revised_statement(close, params.rng("revision"))
    lines = resolved(lines, desk)
    return Truth(statement_csv(close, lines, truth=True), settlements(desk, close.end, lines))


def draft(params: FamilyParams) -> FamilyDraft:
    close = draw_close(params.rng("ledger"))
    workspace = {
        BANK: statement_csv(close),
        NOTES: notes_md(messages(close.desk, close.statement, params.rng("notes"))).encode(),
        BOOKS: books_csv(close.books),
        POLICY: policy_md(close).encode(),
        ACCOUNTS: accounts_xlsx(close.symbols),
        IMPORT_SPEC: import_spec_md().encode(),
        "README.md": _readme(close).encode(),
    }
    # Turn 2 asks for what builds on turn 1; turn 3 (the posted journal) needs turn 2's.
    kinds = ["requirement_changed", "input_replaced"][: params.turns - 1]
    turns: list[UserTurn] = []
    if "requirement_changed" in kinds:
        turns.append(requirement_turn(1, _ADJUSTMENTS_REQUEST, [XLSX, JSON]))
    if "input_replaced" in kinds:
        truth = {**workspace, BANK: statement_csv(close, truth=True)}
        posted, held = posted_books(close, truth, params.rng("posting"))
        revised = revised_statement(close, params.rng("revision"))
        notes = notes_md(
            messages(
                close.desk,
                close.statement,
                params.rng("notes"),
                close.desk.revised(),
                close.end + timedelta(days=RUNS_ON + 2),
            )
        )
        turns.append(
            input_turn(
                2,
                after_reply(2),
                f"I posted your journal, all but the entries for {_listed(held)}, which "
                f"wait for the broker's confirmation; `{BOOKS}` is the new ledger export. The bank "
                f"also sent a revised statement for the period, now in `{BANK}`, and the "
                f"auditors amended `{POLICY}`; the desks' new messages are in `{NOTES}`. "
                "Please bring everything up to date: all three sheets, "
                f"`{JOURNAL}` (what remains to post) and the summary.",
                {
                    BOOKS: posted,
                    BANK: statement_csv(close, revised),
                    POLICY: amended_policy(close).encode(),
                    NOTES: notes.encode(),
                },
                reason="journal posted, statement revised, policy amended, new notes",
                invalidates=[XLSX, JSON, JOURNAL],
            )
        )
    period = f"{close.start:%Y-%m}-to-{close.end:%Y-%m}"
    adjusting = "requirement_changed" in kinds
    outputs: dict[str, Format] = {XLSX: "xlsx", JSON: "json"}
    if adjusting:
        outputs[JOURNAL] = "csv"
    inputs = [BANK, BOOKS, NOTES, POLICY, ACCOUNTS, IMPORT_SPEC]
    revising = "input_replaced" in kinds
    final = resolved(revised if revising else close.statement,
                     close.desk.revised() if revising else close.desk)  # fmt: skip
    solve = fill_template(
        SOLVE,
        adjustments_from_turn=1 if adjusting else NEVER,
        notes_revised_from_turn=2 if revising else NEVER,
        settled=repr(_settled(resolved(close.statement, close.desk), close.desk)),
        settled_revised=repr(_settled(final, close.desk)),
        refunds=repr({ref: r.charge for ref, r in sorted(close.desk.refunds.items())}),
    )
    return FamilyDraft(
        slug=f"ledger-reconciliation-{period}-{params.seed}",
        title=f"Close the fund's cash account, {period}",
        instruction=instruction(adjusting),
        workspace=workspace,
        solve_sh=solve,
        user=user(close),
        inputs=input_artifacts(
            {
                BANK: "csv",
                BOOKS: "csv",
                NOTES: "md",
                POLICY: "md",
                ACCOUNTS: "xlsx",
                IMPORT_SPEC: "md",
            }
        ),
        outputs=output_artifacts(outputs, inputs),
        turns=turns,
        agent_timeout_sec=2400.0,
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


def revised_statement(close: Close, rng: random.Random) -> list[Line]:
    """The bank's revision of the period: one of its mistyped settlements at the deal's
    amount (that trade now matches; the others stay the bank's errors), an interest credit
    in the last month that the first statement did not carry, and, where the statement has
    a line the policy's table does not list, another such line."""
    fixed = rng.choice(sorted(close.bank_mistyped))
    lines = [
        replace(s, amount=close.bank_mistyped[fixed]) if s.id == fixed else s
        for s in close.statement
    ]
    day = close.end - timedelta(days=rng.randint(1, 8))
    later = [
        Line(
            f"BK{close.next_id:04d}",
            day,
            INTEREST,
            round(rng.uniform(3, 12), 2),
            ref=f"FT{day:%y%m%d}9001",
        )
    ]
    if close.unlisted:
        day = close.end - timedelta(days=rng.randint(9, 20))
        later.append(
            Line(
                f"BK{close.next_id + 2:04d}",
                day,
                close.unlisted,
                -round(rng.uniform(8, 60), 2),
                ref=f"FT{day:%y%m%d}9002",
            )
        )
    return sorted([*lines, *later], key=lambda s: (s.day, s.ref, s.id))


def _listed(ids: Sequence[str]) -> str:
    return ids[0] if len(ids) == 1 else f"{', '.join(ids[:-1])} and {ids[-1]}"


_ADJUSTMENTS_REQUEST = (
    "Thanks. The auditors now want the adjusting entries and the reconciliation statement, "
    "and I will post the entries through the ledger system's import. Add a sheet "
    f"`{ADJUSTMENTS}` to the workbook with the columns `id`, `account`, `amount`: one row per "
    "difference our books must correct, as policy.md says, sorted by id, with `account` the "
    f"account's code from `{ACCOUNTS}` and `amount` the entry's amount. Add "
    "`adjusted_bank_balance` and `adjusted_book_balance` to the JSON, as policy.md defines "
    f"them, rounded to cents. And write the same entries as `{JOURNAL}` in the format "
    f"`{IMPORT_SPEC}` describes (columns " + ", ".join(f"`{c}`" for c in JOURNAL_COLUMNS) + ")."
)


def instruction(journal: bool) -> str:
    later = ""
    if journal:
        later = (
            f"\nLater I will post adjusting entries from a `{JOURNAL}` in the format "
            f"`{IMPORT_SPEC}`\ndescribes; I will say when.\n"
        )
    return f"""\
Please close our fund's cash account for the period. The bank statement is `{BANK}`, our
books are `{BOOKS}`, `{POLICY}` is the reconciliation policy the auditors hold us to (it
decides the period, what matches and how each difference is classified) and `{ACCOUNTS}`
is our chart of accounts. A statement line and a book entry share an `id` when they are the
same transaction; where the statement's `id` is blank or wrong, the brokers' settlement
desks say in `{NOTES}` which trade(s) a transfer (the statement's `ref`) settles, and the
bank says there what its refunds return. The statement has separate `debit` (money out) and
`credit` (money in) columns written with thousands separators, and a running `balance`; the
books have one signed `amount`.

Create:

1. `{XLSX}` with a sheet named `{UNMATCHED}` and the columns `id`, `source`,
   `amount`: one row per difference of the period, sorted by id. `source` is `bank`,
   `books`, `book_error` or `bank_error`, as policy.md classifies it; `amount` is the
   entry's signed amount for `bank` and `books` rows, and the statement's amount minus
   the books' amount for `book_error` and `bank_error` rows. `id` is the trade's id, also
   where the statement's is blank or wrong.
   A second sheet `{SETTLEMENTS}` with the columns `ref`, `ids`: one row per transfer of the
   period that the desks' messages say settles trades, sorted by `ref`, with `ids` the
   trade id(s) it settles, ascending, separated by one space (`TX1201 TX1207`).
2. `{JSON}` with the keys `matched` (how many ids of the period match),
   `bank_only`, `books_only`, `book_errors` and `bank_errors` (how many `{UNMATCHED}` rows
   have each source), `bank_balance` (the statement's balance at the period end) and
   `book_balance` (our books' balance at the period end), amounts rounded to cents.

Do not modify the input files. Where the files and the policy do not settle how to list
something, ask me before you finish: I know the trades and the bank's lines.
{later}"""


def user(close: Close) -> UserState:
    """The accountant: the answers every close needs, and one per open problem this seed has
    (asked about anything else, the user says nothing of them)."""
    signals = [
        Signal(
            trigger="agent asks about the sign of amounts",
            reveals="money leaving the account is a debit on the statement and negative "
            "in the books",
        ),
        Signal(
            trigger="agent asks which dates, days or lines the period or the close covers",
            reveals="the close follows policy.md to the letter: the auditors check it "
            "against the policy",
        ),
        Signal(
            trigger="agent asks what a bank transfer with a blank or mistyped reference pays for",
            reveals=f"the brokers' desks know their transfers better than I do: go by what "
            f"they wrote in {NOTES}",
        ),
        Signal(
            trigger="agent asks which charge or fee a refund gives back",
            reveals=f"the bank's message in {NOTES} says; I know nothing more about it",
        ),
        Signal(
            trigger="agent asks whether to edit, change or post entries in the books",
            reveals="never edit the ledgers yourself: I post the entries, you list what "
            "our books must correct",
        ),
    ]
    problems = close.plan.open_problems
    if REPEATED in problems:
        signals.append(
            Signal(
                # in the words players used: "appears/shown/paid twice", "a duplicate
                # debit"; none of the generic ones (statement, trade) that every question has
                trigger="agent asks about an id that appears, is shown or is paid twice: a "
                "double, duplicate, duplicated or repeated posting, line or entry",
                # about the statement only: the books' correcting lines follow policy.md
                reveals=f"on the statement only the first line of a trade counts; a later "
                f"statement line for that trade is a bank error: list it in {UNMATCHED} with "
                f"source `{BANK_ERROR}` and its own amount, and keep the trade itself matched "
                "(our books' correcting entries follow policy.md)",
            )
        )
    if COMMISSION_NETTED in problems:
        signals.append(
            Signal(
                # players write "less commission" and rarely "broker" (issue 25)
                trigger="agent asks about a commission: a broker's commission netted, "
                "deducted or taken from a settlement (less commission)",
                reveals="the broker's commission is a real cost that our books missed, not "
                f"the bank's error: list that trade as `{BOOK_ERROR}` (the statement's amount "
                f"minus ours) and correct it against {COMMISSION}",
            )
        )
    if UNLISTED in problems:
        account = USER_ACCOUNTS[close.unlisted]
        signals.append(
            Signal(
                trigger=f"agent asks about the {UNLISTED_SUBJECT[close.unlisted]}",
                reveals=f"the {close.unlisted.lower()} is the bank's own line, right as the "
                f"statement shows it; book it against {account}",
            )
        )
    if FELL_THROUGH in problems:
        signals.append(
            Signal(
                # players wrote "never settled", "still not settled … 60 days": not "old"
                trigger="agent asks about an entry never settled: unsettled, outstanding or "
                "not settled after 60 days, raised with the accountant",
                reveals="that trade fell through with the broker and will not settle: our "
                f"books must reverse it. List it as `{BOOK_ERROR}` at minus its book amount "
                "and correct it against the trade's investment account",
            )
        )
    return UserState(
        persona="Fund accountant who closes the cash account at each period end.",
        role="accountant",
        latent_goals=["Every difference must be explainable to the auditors line by line."],
        knowledge_boundary=["does not know how the bank's posting system works inside"],
        signal_plan=signals,
    )


def _readme(close: Close) -> str:
    return (
        f"# Cash account, {close.start:%Y-%m} to {close.end:%Y-%m}\n\n`{BANK}` is the custodian "
        f"bank's statement, `{BOOKS}` our ledger export, `{POLICY}` the close policy, "
        f"`{ACCOUNTS}` the chart of accounts and `{IMPORT_SPEC}` the ledger system's journal "
        "import format. Trades are at the month's closing price.\n"
    )


# ---- the verifier --------------------------------------------------------------------------


def _cents(amount: float) -> float:
    """Half a cent, for rounding; none for amounts so small that it would be lax."""
    return 0.005 if abs(amount) >= 0.05 else 0.0


def _slug(key: str) -> str:
    return key.lower().replace("-", "_")


def verifier(built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
    inputs = built.final_inputs()
    close = terms(inputs[POLICY], inputs[ACCOUNTS])
    revised = any(t.patch.kind == "input_replaced" for t in built.turns)
    truth = final_truth(params, revised)
    result = reconcile_close(truth.statement, inputs[BOOKS], close)
    components = [
        *table_shape(
            "settlements",
            XLSX,
            ["ref", "ids"],
            len(truth.settled),
            "Settlements sheet columns",
            f"one row per transfer the desks' messages in {NOTES} say settles trades",
            sheet=SETTLEMENTS,
        ),
        *table_shape(
            "unmatched",
            XLSX,
            ["id", "source", "amount"],
            len(result.differences),
            "Unmatched sheet columns",
            "one row per difference of the period (policy.md's period end)",
            sheet=UNMATCHED,
        ),
        json_value("matched_count", JSON, "/matched", result.matched, "ids of the period matched"),
        json_value(
            "bank_balance",
            JSON,
            "/bank_balance",
            result.bank_balance,
            "the statement's balance at the period end",
            weight=2,
            tolerance=0.005,
        ),
        json_value(
            "book_balance",
            JSON,
            "/book_balance",
            result.book_balance,
            "the books' balance at the period end, from policy.md's opening balance",
            weight=2,
            tolerance=0.005,
        ),
    ]
    for key, source in (
        ("bank_only", "bank"),
        ("books_only", "books"),
        ("book_errors", BOOK_ERROR),
        ("bank_errors", BANK_ERROR),
    ):
        components.append(
            json_value(f"{key}_count", JSON, f"/{key}", result.count(source), f"{key} count")
        )
    for d in result.differences:
        components += _unmatched_components(d)
    for ref, ids in truth.settled.items():
        components.append(
            Component(
                id=f"settlement_{_slug(ref)}_ids",
                weight=1,
                check=XlsxValue(
                    path=XLSX,
                    sheet=SETTLEMENTS,
                    key_column="ref",
                    key=ref,
                    column="ids",
                    expected=ids,
                ),
                requirement=f"{ref}: the trades the desks' messages say it settles",
            )
        )
    if any(t.patch.kind == "requirement_changed" for t in built.turns):
        components += _adjustment_components(result)
        components += _journal_components(result, close)
    inputs_kept = {
        path: inputs[path] for path in (BANK, BOOKS, NOTES, POLICY, ACCOUNTS, IMPORT_SPEC)
    }
    spec = VerifierSpec(
        components=components,
        red_lines=[
            inputs_unmodified(
                "inputs_unmodified",
                "the statement, the books, the notes, the policy, the chart and the import "
                "format are evidence and must not change",
                inputs_kept,
            )
        ],
        rubric=rubric(
            "auditable",
            "An auditor can follow the workbook: rows are sorted by id, each source follows "
            "policy.md, amounts keep their sign, and adjusting entries use active accounts.",
            [XLSX, JSON],
        ),
    )
    return verifier_output(spec, inputs_kept)


def _unmatched_components(d: Difference) -> list[Component]:
    cells = (("amount", d.amount), ("source", d.source))
    what = f"the {d.source} difference"
    return _row_components("unmatched", UNMATCHED, d.id, d.amount, cells, what)


def _row_components(
    prefix: str,
    sheet: str,
    key: str,
    amount: float,
    cells: Sequence[tuple[str, object]],
    what: str,
) -> list[Component]:
    """One check per cell of the workbook row ``key`` (column ``id``) on ``sheet``; an
    ``amount`` cell may be off by the row's rounding (``_cents``), any other must match."""
    return [
        Component(
            id=f"{prefix}_{_slug(key)}_{column}",
            weight=1,
            check=XlsxValue(
                path=XLSX,
                sheet=sheet,
                key_column="id",
                key=key,
                column=column,
                expected=expected,
                tolerance=_cents(amount) if column == "amount" else 0.0,
            ),
            requirement=f"{key}: {what}'s {column}",
        )
        for column, expected in cells
    ]


def _adjustment_components(result: Reconciliation) -> list[Component]:
    components = [
        *table_shape(
            "adjustments",
            XLSX,
            ["id", "account", "amount"],
            len(result.adjustments),
            "Adjustments sheet columns",
            "one adjusting entry per bank and book_error difference",
            sheet=ADJUSTMENTS,
        ),
        json_value(
            "adjusted_bank_balance",
            JSON,
            "/adjusted_bank_balance",
            result.adjusted_bank_balance,
            "policy.md's adjusted bank balance",
            weight=2,
            tolerance=0.005,
        ),
        json_value(
            "adjusted_book_balance",
            JSON,
            "/adjusted_book_balance",
            result.adjusted_book_balance,
            "policy.md's adjusted book balance",
            weight=2,
            tolerance=0.005,
        ),
    ]
    for a in result.adjustments:
        cells = (("account", a.account), ("amount", a.amount))
        components += _row_components(
            "adjustment", ADJUSTMENTS, a.id, a.amount, cells, "the adjusting entry"
        )
    return components


def _journal_components(result: Reconciliation, close: Terms) -> list[Component]:
    lines = journal_lines(result, close)
    components = table_shape(
        "journal",
        JOURNAL,
        JOURNAL_COLUMNS,
        len(lines),
        "import_spec.md's columns",
        "two lines per adjusting entry",
    )
    for j in lines:
        checked: list[tuple[str, object]] = [("account", j.account), ("debit", j.debit),
                                             ("credit", j.credit)]  # fmt: skip
        if j.line.endswith("-1"):
            checked += [("memo", j.memo), ("date", j.day)]
        components += [
            Component(
                id=f"journal_{_slug(j.line)}_{column}",
                weight=1,
                check=CsvValue(
                    path=JOURNAL,
                    key_column="line",
                    key=j.line,
                    column=column,
                    expected=expected,
                    tolerance=0.005 if column in ("debit", "credit") else 0.0,
                ),
                requirement=f"{j.line}: the journal line's {column}, as {IMPORT_SPEC} says",
            )
            for column, expected in checked
        ]
    return components


__all__ = [
    "ACCOUNTS",
    "ADJUSTMENTS",
    "BANK",
    "BANK_ERROR",
    "BOOKS",
    "BOOK_ERROR",
    "IMPORT_SPEC",
    "JOURNAL",
    "JSON",
    "NOTES",
    "OPEN_PROBLEMS",
    "POLICY",
    "TRAPS",
    "UNMATCHED",
    "XLSX",
    "Close",
    "Line",
    "Plan",
    "Reconciliation",
    "Terms",
    "Truth",
    "draft",
    "draw_close",
    "draw_plan",
    "final_truth",
    "mistype",
    "monthly_prices",
    "reconcile_close",
    "terms",
    "verifier",
]

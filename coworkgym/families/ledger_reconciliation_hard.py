"""The ``hard`` tier of ledger_reconciliation: a year-end close of the fund's cash account
under a written policy, in three turns that build on each other.

The workspace: ``bank.csv`` (the custodian's statement: an opening line, debit/credit
columns with thousands separators, a running balance, and lines that run ten days past the
period end), ``books.csv`` (our ledger export, which runs as far), ``policy.md`` (the
period, the opening balance, how ids match, how differences are classified, which account
each adjusting entry goes to, the reconciliation statement) and ``accounts.xlsx`` (the
chart of accounts, a closed account among the active ones). About 150 trades a side: too
many to reconcile by eye.

Why hard is hard — what a careful agent must do:

- **Turn 1** (the Unmatched sheet, counts, both period-end balances): read the policy
  before the data (the period end and the opening balance are only there); parse the
  split debit/credit columns and skip the opening line; leave out everything dated after
  the period end, on both sides (trades booked in the last days settle after it: they are
  outstanding, not matched; the post-period fee and trades belong to the next period);
  classify each amount difference by recomputing the trade from its description (shares ×
  price): usually the books are wrong (``book_error``), once the bank is (``bank_error``);
  notice that the statement posts one trade twice, which the policy does not settle, and
  ask (the user: the later line is a ``bank_error`` at its amount, the trade is matched);
  read the period-end balance off the statement and compute the books' from the opening
  balance. Every one of these is a silent wrong number if skipped.
- **Turn 2** (builds on turn 1): the adjusting entries for the items our books must correct
  (``bank`` and ``book_error`` rows of turn 1's sheet, never outstanding items or bank
  errors), each mapped to an account code in two hops (the policy's table names the
  account for a statement description, the chart gives its active code; a trade
  correction goes to the trade's investment account), and the reconciliation statement:
  both adjusted balances, which agree only if turn 1 was right — the agent's own check.
- **Turn 3** (invalidates turns 1 and 2 in a way only re-reading shows): the user posted
  the adjusting entries (all but one trade correction, which waits for the broker) and
  replaces ``books.csv``. Correcting entries share the id of the entry they correct, so an
  id now has two book lines and the policy's rule (sum them) matters for the first time; a
  script that keeps one line per id finds differences that are not there. The user also
  posted one bank charge with the wrong sign and does not say so: only re-reconciling
  shows it, and the policy (a bank-originated line is right as the statement shows it)
  makes it a ``book_error`` that needs a new adjusting entry. Every deliverable changes.

A careful agent needs about ten tool calls in turn 1 (list the files, read the policy, look
at both ledgers and the chart, script, run, find the repeated id, ask, rerun, check), five
or six in turn 2 and five to seven in turn 3 (look at the new books, rerun, find the slip,
check, finish).

Each difficulty is stated in the instruction or ``policy.md``, or answered by the user when
asked (the repeated posting); each trap is declared on the family (``TaskFamily.traps``)
and checked by the verifier with exact values from the final inputs.
"""

from __future__ import annotations

import calendar
import io
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

import openpyxl

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, UserState
from ..verifier.spec import Component, RowCount, TableColumns, VerifierSpec, XlsxValue
from .base import NEVER, FamilyDraft, FamilyParams, Trap, parse_csv, read_csv_resource, write_csv
from .common import (
    after_reply,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    python_solution,
    requirement_added,
    requirement_turn,
    rubric,
    verifier_output,
)
from .office import stable_office_bytes

# The files of every tier of the family; the hard tier adds the policy and the chart.
BANK, BOOKS = "bank.csv", "books.csv"
XLSX, JSON = "reconciliation.xlsx", "reconciliation.json"
POLICY, ACCOUNTS = "policy.md", "accounts.xlsx"
UNMATCHED, ADJUSTMENTS = "Unmatched", "Adjustments"

MONTHS, SYMBOLS, TRADES_PER_MONTH = 12, 4, 3
SETTLEMENT_DAYS = (1, 4)  # a trade reaches the statement this many days after it is booked
RUNS_ON = 10  # days past the period end that the statement and the books' export run
LATE_TRADES = 3  # booked in the period's last three days: they settle after its end
NEXT_PERIOD_TRADES = 3  # booked after the period end
BOOK_ERRORS = 3  # trades keyed into the books at a wrong amount
MONTH_ABBR = tuple(calendar.month_abbr[1:])  # "Jan 1 2004" in stocks.csv

# Lines only the bank originates, with the account the policy books them against.
BANK_CHARGES = {
    "Account maintenance fee": "Bank service charges",
    "Wire fee": "Wire transfer fees",
    "Custody fee": "Custody fees",
    "Interest credit": "Interest income",
}
SLIPPED = "Account maintenance fee"  # the charge the user posts with the wrong sign (turn 3)
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
    (6140, "Broker commissions", "expense", "active"),
)
INVESTMENTS_FROM = 1510  # the first investment account's code; one per symbol, 10 apart

# A later statement line for a trade already posted: the user names it when asked.
BANK_ERROR = "bank_error"
BOOK_ERROR = "book_error"
DEAL = re.compile(r"\b(BUY|SELL) (\d+) ([A-Z]+) @ (\d+\.\d{2})\b")

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
        "one statement line settles a trade at an amount its deal does not give (hard): "
        "the bank, not the books, is wrong",
        (r"\bbank (is|was) wrong\b", r"\bbank'?s? (mistake|typo|keying)", r"\bdeal ticket"),
    ),
    Trap(
        "posting_slip",
        "the books of the last turn post one bank charge with the wrong sign (hard)",
        (r"\bwrong sign\b", r"\bsign (is|was) wrong\b", r"\bflipped\b", r"\bas a credit\b"),
    ),
)


# ---- the ledgers -------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One statement line or book entry."""

    id: str
    day: date
    description: str
    amount: float
    account: str = ""  # the books' account (a trade's investment account)


@dataclass
class Close:
    """A period close: the period, the opening balance both sides agreed, and the lines."""

    start: date
    end: date
    opening: float
    statement: list[Line]
    books: list[Line]
    symbols: list[str]  # every symbol the chart has an investment account for
    book_errors: list[str] = field(default_factory=list)  # ids mistyped in the books


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
    with the planted differences: mistyped book amounts, a bank line at a wrong amount, a
    trade posted twice, the bank's own charges, and lines past the period end on both sides."""
    prices = monthly_prices()
    year, first = rng.randint(2001, 2008), rng.randint(1, 12)
    months = [_add_months(year, first, k) for k in range(MONTHS + 1)]  # and the next one
    start = date(year, first, 1)
    end = _month_end(*months[MONTHS - 1])
    symbols = sorted(
        {s for s, _m in prices if all((s, f"{y}-{m:02d}") in prices for y, m in months)}
    )
    chosen = sorted(rng.sample(symbols, k=SYMBOLS))
    seq = rng.randint(1000, 6000)
    booked: list[tuple[Line, date]] = []  # (the books' line, the day it settles)

    def trade(day: date, symbol: str, settles: date | None = None) -> None:
        nonlocal seq
        price = prices[(symbol, f"{day.year}-{day.month:02d}")]
        shares, side = rng.randint(10, 400), rng.choice(["BUY", "SELL"])
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

    for y, m in months[:MONTHS]:
        last = calendar.monthrange(y, m)[1]
        for symbol in chosen:
            for _n in range(TRADES_PER_MONTH):
                trade(date(y, m, rng.randint(1, min(last, 28))), symbol)
    for _n in range(LATE_TRADES):  # booked in the last three days, settled after the end
        day, symbol = end - timedelta(days=rng.randint(0, 2)), rng.choice(chosen)
        trade(day, symbol, end + timedelta(days=rng.randint(*SETTLEMENT_DAYS)))
    for _n in range(NEXT_PERIOD_TRADES):
        trade(end + timedelta(days=rng.randint(1, RUNS_ON - 4)), rng.choice(chosen))
    booked.sort(key=lambda pair: (pair[0].day, pair[0].id))
    horizon = end + timedelta(days=RUNS_ON)

    # the planted differences, on trades settled well inside the period
    settled_early = [line for line, settles in booked if settles <= end - timedelta(days=5)]
    planted = rng.sample(settled_early, k=BOOK_ERRORS + 2)
    book_errors, bank_error, repeated = planted[:BOOK_ERRORS], planted[-2], planted[-1]
    wrong = {line.id: mistype(line.amount, rng) for line in book_errors}
    books = [replace(line, amount=wrong.get(line.id, line.amount)) for line, _s in booked]

    statement = [
        replace(line, day=settles, description=f"Settlement {line.description}", account="")
        for line, settles in booked
        if settles <= horizon
    ]
    statement = [
        replace(s, amount=mistype(s.amount, rng)) if s.id == bank_error.id else s for s in statement
    ]
    posted = next(s for s in statement if s.id == repeated.id)
    statement.append(replace(posted, day=posted.day + timedelta(days=rng.randint(1, 3))))
    charge_months = rng.sample(months[:MONTHS], k=len(BANK_CHARGES))
    for n, (text, (y, m)) in enumerate(zip(BANK_CHARGES, sorted(charge_months), strict=True)):
        statement.append(Line(f"BK{seq + 11 + n:04d}", _charge_day(y, m), text, _charge(text, rng)))
    statement.append(  # the next period's first charge
        Line(f"BK{seq + 19:04d}", end + timedelta(days=5), SLIPPED, _charge(SLIPPED, rng))
    )
    statement.sort(key=lambda s: (s.day, s.id))
    opening = round(rng.uniform(1_500_000, 2_500_000), 2)
    return Close(start, end, opening, statement, books, symbols, sorted(wrong))


def _charge_day(year: int, month: int) -> date:
    return date(year, month, min(28, calendar.monthrange(year, month)[1]))


def _charge(text: str, rng: random.Random) -> float:
    if text == "Interest credit":
        return round(rng.uniform(3, 12), 2)
    if text == "Custody fee":
        return -round(rng.uniform(40, 95), 2)
    return {"Account maintenance fee": -25.0, "Wire fee": -15.0}[text]


# ---- the files -------------------------------------------------------------------------


def _money(amount: float) -> str:
    return f"{amount:,.2f}"


def statement_csv(close: Close) -> bytes:
    """The statement: an opening line without an id, then each line with its running balance."""
    balance = close.opening
    rows: list[dict[str, object]] = [
        {
            "date": close.start.isoformat(),
            "description": "Opening balance",
            "balance": _money(balance),
        }
    ]
    for s in close.statement:
        balance = round(balance + s.amount, 2)
        rows.append(
            {
                "date": s.day.isoformat(),
                "id": s.id,
                "description": s.description,
                "debit": _money(-s.amount) if s.amount < 0 else "",
                "credit": _money(s.amount) if s.amount >= 0 else "",
                "balance": _money(balance),
            }
        )
    return write_csv(rows, ["date", "id", "description", "debit", "credit", "balance"])


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


PERIOD_END_RE = re.compile(r"the period ends on (\d{4}-\d{2}-\d{2})")
OPENING_RE = re.compile(r"balance before the period's first entry was (-?[\d,]+\.\d{2})")
ACCOUNT_ROW_RE = re.compile(r"^\| ([A-Z][^|]*?) \| ([A-Z][^|]*?) \|$", re.M)


def policy_md(close: Close) -> str:
    table = "\n".join(f"| {text} | {account} |" for text, account in BANK_CHARGES.items())
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

A book entry and a statement line are the same transaction when they share an `id`. In \
the books, a correcting entry carries the id of the entry it corrects: an id's book amount \
is the sum of its lines of the period. An id whose statement amount and book amount agree \
to the cent is matched.

## 4. Differences

Every other id of the period is a difference, listed once:

- only on the statement: `bank` (the bank's own charges and interest);
- only in the books: `books` (not yet settled by the bank; these clear by themselves);
- on both, with different amounts: whichever side disagrees with the transaction is in \
error. A trade's description is its deal (`BUY 120 IBM @ 81.23`): its true amount is the \
shares times the price, rounded to the cent, negative for a BUY. If the books disagree the \
difference is a `book_error`, if the statement does a `bank_error`. A line the bank \
originates (a charge, interest) is right as the statement shows it.

## 5. Adjusting entries

Our books correct the `bank` and `book_error` differences, and only those: outstanding \
items clear by themselves and bank errors are the bank's to reverse. An adjusting entry is \
booked against the account its statement description names here:

| statement description | account |
|---|---|
{table}

A trade's correction is booked against the trade's own investment account (the books' \
`account`). Use the account's code from `accounts.xlsx`; a closed account takes no entries.

## 6. The reconciliation statement

- adjusted bank balance = the statement's balance at the period end + the `books` \
differences − the `bank_error` differences;
- adjusted book balance = the books' balance at the period end + the `bank` differences + \
the `book_error` differences;

each difference at its signed amount as listed. The two must agree to the cent; until they \
do the close is not finished.
"""


# ---- the verifier's reading of the files --------------------------------------------------


@dataclass(frozen=True)
class Difference:
    id: str
    source: str  # bank | books | book_error | bank_error
    amount: float  # the entry's amount (bank, books, a repeated line), else statement − books


@dataclass(frozen=True)
class Adjustment:
    id: str
    account: int
    amount: float


@dataclass
class Reconciliation:
    differences: list[Difference]
    matched: int
    bank_balance: float
    book_balance: float
    adjustments: list[Adjustment]

    def count(self, source: str) -> int:
        return sum(1 for d in self.differences if d.source == source)

    def total(self, *sources: str) -> float:
        return sum(d.amount for d in self.differences if d.source in sources)

    @property
    def adjusted_bank_balance(self) -> float:
        return round(self.bank_balance + self.total("books") - self.total(BANK_ERROR), 2)

    @property
    def adjusted_book_balance(self) -> float:
        return round(self.book_balance + self.total("bank", BOOK_ERROR), 2)


@dataclass(frozen=True)
class Terms:
    """What ``policy.md`` and ``accounts.xlsx`` fix: the period end, the opening balance,
    and the account code for each statement description and each books account."""

    end: str
    opening: float
    codes: Mapping[str, int]  # statement description or books account → code


def terms(policy: bytes, accounts: bytes) -> Terms:
    text = policy.decode()
    end, opening = PERIOD_END_RE.search(text), OPENING_RE.search(text)
    if end is None or opening is None:
        raise ValueError(f"{POLICY} states no period end or opening balance")
    sheet = openpyxl.load_workbook(io.BytesIO(accounts), read_only=True)["Accounts"]
    rows = list(sheet.iter_rows(min_row=2, values_only=True))
    active = {str(name): int(str(code)) for code, name, _kind, status in rows if status == "active"}
    codes = dict(active)
    codes.update({line: active[name] for line, name in ACCOUNT_ROW_RE.findall(text)})
    return Terms(end[1], float(opening[1].replace(",", "")), codes)


def _number(text: str | None) -> float:
    return float(text.replace(",", "")) if text and text.strip() else 0.0


def _deal_amount(description: str) -> float | None:
    deal = DEAL.search(description)
    if deal is None:
        return None
    side, shares, _symbol, price = deal.groups()
    amount = round(int(shares) * float(price), 2)
    return -amount if side == "BUY" else amount


def reconcile_close(bank: bytes, books: bytes, close: Terms) -> Reconciliation:
    """The close as ``policy.md`` defines it, with the user's answer for a trade the statement
    posts twice (its later lines are ``bank_error`` at their amounts; the trade is matched)."""
    statement: dict[str, tuple[float, str]] = {}  # id → (first line's amount, description)
    differences: list[Difference] = []
    bank_balance = close.opening
    for row in parse_csv(bank):
        if row["date"] > close.end:
            continue
        bank_balance = _number(row["balance"])
        key = row["id"].strip()
        if not key:  # the opening line
            continue
        amount = round(_number(row["credit"]) - _number(row["debit"]), 2)
        if key in statement:
            differences.append(Difference(key, BANK_ERROR, amount))
        else:
            statement[key] = (amount, row["description"])
    ledger: dict[str, float] = {}
    accounts: dict[str, str] = {}
    for row in parse_csv(books):
        if row["date"] > close.end:
            continue
        key = row["id"].strip()
        ledger[key] = round(ledger.get(key, 0.0) + _number(row["amount"]), 2)
        accounts.setdefault(key, row["account"])
    matched = 0
    adjustments: list[Adjustment] = []
    for key in sorted(set(statement) | set(ledger)):
        if key not in ledger:
            amount, description = statement[key]
            differences.append(Difference(key, "bank", amount))
            adjustments.append(Adjustment(key, close.codes[description], amount))
        elif key not in statement:
            differences.append(Difference(key, "books", ledger[key]))
        elif abs(statement[key][0] - ledger[key]) > 0.005:
            amount, description = statement[key]
            true = _deal_amount(description)
            source = BANK_ERROR if true is not None and abs(amount - true) > 0.005 else BOOK_ERROR
            gap = round(amount - ledger[key], 2)
            differences.append(Difference(key, source, gap))
            if source == BOOK_ERROR:
                account = accounts[key] if true is not None else description
                adjustments.append(Adjustment(key, close.codes[account], gap))
        else:
            matched += 1
    differences.sort(key=lambda d: d.id)
    book_balance = round(close.opening + sum(ledger.values()), 2)
    return Reconciliation(differences, matched, round(bank_balance, 2), book_balance, adjustments)


# ---- the task ------------------------------------------------------------------------------

SOLVE = python_solution(
    "close the cash account under policy.md (hard).",
    r"""import csv
import json
import os
import re
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
adjusting = turn >= int(os.environ["ADJUSTMENTS_FROM_TURN"])
policy = open("policy.md", encoding="utf-8").read()
end = re.search(r"period ends on (\d{4}-\d{2}-\d{2})", policy).group(1)

def number(text):
    return float(text.replace(",", "")) if text and text.strip() else 0.0

opening = number(re.search(r"first entry was ([-\d,.]+\d)", policy).group(1))
names = dict(re.findall(r"^\| ([A-Z][^|]*?) \| ([A-Z][^|]*?) \|$", policy, re.M))
chart = openpyxl.load_workbook("accounts.xlsx")["Accounts"]
rows = chart.iter_rows(min_row=2, values_only=True)
code_of = {name: int(code) for code, name, _kind, status in rows if status == "active"}

def deal(description):
    found = re.search(r"(BUY|SELL) (\d+) [A-Z]+ @ (\d+\.\d\d)", description)
    if not found:
        return None
    value = round(int(found.group(2)) * float(found.group(3)), 2)
    return -value if found.group(1) == "BUY" else value

bank, repeats, bank_balance = {}, [], opening
with open("bank.csv", newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        if row["date"] > end:
            continue
        bank_balance = number(row["balance"])
        if not row["id"]:
            continue
        amount = round(number(row["credit"]) - number(row["debit"]), 2)
        if row["id"] in bank:  # the user: a later line for a posted trade is the bank's error
            repeats.append((row["id"], "bank_error", amount))
        else:
            bank[row["id"]] = (amount, row["description"])

books, account_of = {}, {}
with open("books.csv", newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        if row["date"] > end:
            continue
        books[row["id"]] = round(books.get(row["id"], 0.0) + float(row["amount"]), 2)
        account_of.setdefault(row["id"], row["account"])

unmatched, adjustments, matched = list(repeats), [], 0
for key in sorted(set(bank) | set(books)):
    if key not in books:
        amount, description = bank[key]
        unmatched.append((key, "bank", amount))
        adjustments.append((key, code_of[names[description]], amount))
    elif key not in bank:
        unmatched.append((key, "books", books[key]))
    elif round(bank[key][0] - books[key], 2) != 0:
        amount, description = bank[key]
        diff = round(amount - books[key], 2)
        true = deal(description)
        if true is not None and round(amount - true, 2) != 0:
            unmatched.append((key, "bank_error", diff))
        else:
            unmatched.append((key, "book_error", diff))
            name = account_of[key] if true is not None else names[description]
            adjustments.append((key, code_of[name], diff))
    else:
        matched += 1
unmatched.sort()

def total(*sources):
    return sum(u[2] for u in unmatched if u[1] in sources)

book_balance = round(opening + sum(books.values()), 2)
wb = openpyxl.Workbook()
ws = wb.active
ws.title = "Unmatched"
ws.append(["id", "source", "amount"])
for row in unmatched:
    ws.append(list(row))
summary = {
    "matched": matched,
    "bank_only": sum(1 for u in unmatched if u[1] == "bank"),
    "books_only": sum(1 for u in unmatched if u[1] == "books"),
    "book_errors": sum(1 for u in unmatched if u[1] == "book_error"),
    "bank_errors": sum(1 for u in unmatched if u[1] == "bank_error"),
    "bank_balance": round(bank_balance, 2),
    "book_balance": book_balance,
}
if adjusting:
    sheet = wb.create_sheet("Adjustments")
    sheet.append(["id", "account", "amount"])
    for row in sorted(adjustments):
        sheet.append(list(row))
    summary["adjusted_bank_balance"] = round(bank_balance + total("books") - total("bank_error"), 2)
    summary["adjusted_book_balance"] = round(book_balance + total("bank", "book_error"), 2)
    assert summary["adjusted_bank_balance"] == summary["adjusted_book_balance"], summary
wb.save("reconciliation.xlsx")
with open("reconciliation.json", "w") as f:
    json.dump(summary, f, indent=2)
""",
    "ADJUSTMENTS_FROM_TURN",
)


def draft(params: FamilyParams) -> FamilyDraft:
    close = draw_close(params.rng("ledger"))
    workspace = {
        BANK: statement_csv(close),
        BOOKS: books_csv(close.books),
        POLICY: policy_md(close).encode(),
        ACCOUNTS: accounts_xlsx(close.symbols),
        "README.md": _readme(close).encode(),
    }
    # Turn 2 asks for what builds on turn 1; turn 3 (the posted entries) needs turn 2's.
    kinds = ["requirement_changed", "input_replaced"][: params.turns - 1]
    turns: list[UserTurn] = []
    if "requirement_changed" in kinds:
        turns.append(requirement_turn(1, _ADJUSTMENTS_REQUEST, [XLSX, JSON]))
    if "input_replaced" in kinds:
        posted, held = posted_books(close, workspace, params.rng("posting"))
        turns.append(
            input_turn(
                2,
                after_reply(2),
                f"I posted your adjusting entries, all but the correction to {held}, which "
                f"waits for the broker's confirmation. `{BOOKS}` is the new ledger export "
                f"(the adjusting entries are dated {close.end.isoformat()}, the period end). "
                "Please bring the workbook, both sheets, and the summary up to date.",
                {BOOKS: posted},
                reason="adjusting entries posted",
                invalidates=[XLSX, JSON],
            )
        )
    period = f"{close.start:%Y-%m}-to-{close.end:%Y-%m}"
    return FamilyDraft(
        slug=f"ledger-reconciliation-{period}-{params.seed}",
        title=f"Close the fund's cash account, {period}",
        instruction=INSTRUCTION,
        workspace=workspace,
        solve_sh=fill_template(
            SOLVE, adjustments_from_turn=1 if "requirement_changed" in kinds else NEVER
        ),
        user=user(),
        inputs=input_artifacts({BANK: "csv", BOOKS: "csv", POLICY: "md", ACCOUNTS: "xlsx"}),
        outputs=output_artifacts({XLSX: "xlsx", JSON: "json"}, [BANK, BOOKS, POLICY, ACCOUNTS]),
        turns=turns,
        agent_timeout_sec=1800.0,
    )


def posted_books(
    close: Close, workspace: Mapping[str, bytes], rng: random.Random
) -> tuple[bytes, str]:
    """The books after the user posted turn 2's adjusting entries, dated the period end:
    every one but a trade correction held back for the broker, and the maintenance fee
    keyed with the wrong sign. Returns the export and the held-back id."""
    result = reconcile_close(
        workspace[BANK], workspace[BOOKS], terms(workspace[POLICY], workspace[ACCOUNTS])
    )
    held = rng.choice([d.id for d in result.differences if d.source == BOOK_ERROR])
    descriptions = {s.id: s.description for s in close.statement}
    accounts = {b.id: b.account for b in close.books}
    names = {code: name for code, name, _k, _s in chart(close.symbols)}
    entries = []
    for adjustment in result.adjustments:
        if adjustment.id == held:
            continue
        trade = adjustment.id in accounts
        description = descriptions[adjustment.id]
        amount = adjustment.amount
        if description == SLIPPED:
            amount = -amount
        entries.append(
            Line(
                adjustment.id,
                close.end,
                f"Correction of {adjustment.id}" if trade else description,
                amount,
                accounts[adjustment.id] if trade else names[adjustment.account],
            )
        )
    return books_csv([*close.books, *entries]), held


_ADJUSTMENTS_REQUEST = (
    "Thanks. The auditors now want the adjusting entries and the reconciliation statement. "
    f"Add a sheet `{ADJUSTMENTS}` to the workbook with the columns `id`, `account`, `amount`: "
    "one row per difference our books must correct, as policy.md says, sorted by id, with "
    f"`account` the account's code from `{ACCOUNTS}` and `amount` the difference's amount as "
    f"in `{UNMATCHED}`. Add `adjusted_bank_balance` and `adjusted_book_balance` to the JSON, "
    "as policy.md defines them, rounded to cents."
)

INSTRUCTION = f"""\
Please close our fund's cash account for the period. The bank statement is `{BANK}`, our
books are `{BOOKS}`, `{POLICY}` is the reconciliation policy the auditors hold us to (it
decides the period, what matches and how each difference is classified) and `{ACCOUNTS}`
is our chart of accounts. A statement line and a book entry share an `id` when they are the
same transaction. The statement has separate `debit` (money out) and `credit` (money in)
columns written with thousands separators, and a running `balance`; the books have one
signed `amount`.

Create:

1. `{XLSX}` with a sheet named `{UNMATCHED}` and the columns `id`, `source`,
   `amount`: one row per difference of the period, sorted by id. `source` is `bank`,
   `books`, `book_error` or `bank_error`, as policy.md classifies it; `amount` is the
   entry's signed amount for `bank` and `books` rows, and the statement's amount minus
   the books' amount for `book_error` and `bank_error` rows.
2. `{JSON}` with the keys `matched` (how many ids of the period match),
   `bank_only`, `books_only`, `book_errors` and `bank_errors` (how many `{UNMATCHED}` rows
   have each source), `bank_balance` (the statement's balance at the period end) and
   `book_balance` (our books' balance at the period end), amounts rounded to cents.

Do not modify the input files. The statement is the bank's record, not ours: if it holds
lines these rules do not settle, ask me how to list them before you finish.
"""


def user() -> UserState:
    return UserState(
        persona="Fund accountant who closes the cash account at each period end.",
        role="accountant",
        latent_goals=["Every difference must be explainable to the auditors line by line."],
        knowledge_boundary=["does not know how the bank's posting system works inside"],
        signal_plan=[
            Signal(
                trigger="agent asks about the sign of amounts",
                reveals="money leaving the account is a debit on the statement and negative "
                "in the books",
            ),
            Signal(
                trigger="agent asks about a trade or transaction id posted twice: a double, "
                "duplicate, duplicated or repeated posting, line, entry or entries",
                # about the statement only: the books' correcting lines follow policy.md
                reveals=f"on the statement only the first line of a trade counts; a later "
                f"statement line for that trade is a bank error: list it in {UNMATCHED} with "
                f"source `{BANK_ERROR}` and its own amount, and keep the trade itself matched "
                "(our books' correcting entries follow policy.md)",
            ),
            Signal(
                trigger="agent asks which dates, days or lines the period or the close covers",
                reveals="the close follows policy.md to the letter: the auditors check it "
                "against the policy",
            ),
            Signal(
                trigger="agent asks whether to edit, change or post entries in the books",
                reveals="never edit the ledgers yourself: I post the entries, you list what "
                "our books must correct",
            ),
        ],
    )


def _readme(close: Close) -> str:
    return (
        f"# Cash account, {close.start:%Y-%m} to {close.end:%Y-%m}\n\n`{BANK}` is the custodian "
        f"bank's statement, `{BOOKS}` our ledger export, `{POLICY}` the close policy and "
        f"`{ACCOUNTS}` the chart of accounts. Trades are at the month's closing price.\n"
    )


# ---- the verifier --------------------------------------------------------------------------


def _cents(amount: float) -> float:
    """Half a cent, for rounding; none for amounts so small that it would be lax."""
    return 0.005 if abs(amount) >= 0.05 else 0.0


def _slug(key: str) -> str:
    return key.lower().replace("-", "_")


def verifier(built: BuilderOutput) -> VerifierOutput:
    inputs = built.final_inputs()
    result = reconcile_close(inputs[BANK], inputs[BOOKS], terms(inputs[POLICY], inputs[ACCOUNTS]))
    components = [
        Component(
            id="unmatched_layout",
            weight=1,
            check=TableColumns(path=XLSX, sheet=UNMATCHED, columns=["id", "source", "amount"]),
            requirement="Unmatched sheet columns",
        ),
        Component(
            id="unmatched_rows",
            weight=2,
            check=RowCount(path=XLSX, sheet=UNMATCHED, equals=len(result.differences)),
            requirement="one row per difference of the period (policy.md's period end)",
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
        components += [
            Component(
                id=f"unmatched_{_slug(d.id)}_amount",
                weight=1,
                check=XlsxValue(
                    path=XLSX,
                    sheet=UNMATCHED,
                    key_column="id",
                    key=d.id,
                    column="amount",
                    expected=d.amount,
                    tolerance=_cents(d.amount),
                ),
                requirement=f"{d.id}: amount of the {d.source} difference",
            ),
            Component(
                id=f"unmatched_{_slug(d.id)}_source",
                weight=1,
                check=XlsxValue(
                    path=XLSX,
                    sheet=UNMATCHED,
                    key_column="id",
                    key=d.id,
                    column="source",
                    expected=d.source,
                ),
                requirement=f"{d.id}: classified as policy.md says",
            ),
        ]
    if requirement_added(built):
        components += _adjustment_components(result)
    inputs_kept = {path: inputs[path] for path in (BANK, BOOKS, POLICY, ACCOUNTS)}
    spec = VerifierSpec(
        components=components,
        red_lines=[
            inputs_unmodified(
                "inputs_unmodified",
                "the statement, the books, the policy and the chart are evidence and must "
                "not change",
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


def _adjustment_components(result: Reconciliation) -> list[Component]:
    components = [
        Component(
            id="adjustments_layout",
            weight=1,
            check=TableColumns(path=XLSX, sheet=ADJUSTMENTS, columns=["id", "account", "amount"]),
            requirement="Adjustments sheet columns",
        ),
        Component(
            id="adjustments_rows",
            weight=2,
            check=RowCount(path=XLSX, sheet=ADJUSTMENTS, equals=len(result.adjustments)),
            requirement="one adjusting entry per bank and book_error difference",
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
        components += [
            Component(
                id=f"adjustment_{_slug(a.id)}_{column}",
                weight=1,
                check=XlsxValue(
                    path=XLSX,
                    sheet=ADJUSTMENTS,
                    key_column="id",
                    key=a.id,
                    column=column,
                    expected=expected,
                    tolerance=_cents(a.amount) if column == "amount" else 0.0,
                ),
                requirement=f"{a.id}: the adjusting entry's {column}",
            )
            for column, expected in (("account", a.account), ("amount", a.amount))
        ]
    return components


__all__ = [
    "ACCOUNTS",
    "ADJUSTMENTS",
    "BANK",
    "BANK_ERROR",
    "BOOKS",
    "BOOK_ERROR",
    "JSON",
    "POLICY",
    "TRAPS",
    "UNMATCHED",
    "XLSX",
    "Close",
    "Reconciliation",
    "Terms",
    "draft",
    "draw_close",
    "mistype",
    "monthly_prices",
    "reconcile_close",
    "terms",
    "verifier",
]

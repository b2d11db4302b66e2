"""The hard ledger close as ``policy.md`` and the user's answers define it: the verifier's
reading of the files (``reconcile_close``), the journal the ledger system imports
(``journal_lines``, as ``import_spec.md`` says) and the reference solution, which follows
the same rules in the task's own workspace.

The rules only the user knows (``policy.md`` leaves them open, the workspace shows the
conflict, the user answers when asked) are constants here, because the verifier grades by
them whatever the seed: a trade the statement posts again (the later line is the bank's
error), a settlement less the broker's commission (ours to book), a bank line the policy's
table does not list (``USER_ACCOUNTS``) and a trade unsettled past the policy's limit (it
fell through: our books reverse it).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

import openpyxl

from .base import parse_csv
from .common import python_solution

BANK, BOOKS = "bank.csv", "books.csv"
XLSX, JSON, JOURNAL = "reconciliation.xlsx", "reconciliation.json", "journal.csv"
POLICY, ACCOUNTS, IMPORT_SPEC = "policy.md", "accounts.xlsx", "import_spec.md"
UNMATCHED, ADJUSTMENTS = "Unmatched", "Adjustments"
BANK_ERROR, BOOK_ERROR = "bank_error", "book_error"
CASH = "Cash at bank"
COMMISSION = "Broker commissions"  # where the user books a commission taken from a settlement
JOURNAL_COLUMNS = ["line", "entry", "date", "account", "debit", "credit", "memo"]

# Bank lines policy.md's table does not list, and the account the user names when asked.
USER_ACCOUNTS = {
    "Wire recall fee": "Wire transfer fees",
    "Returned payment fee": "Bank service charges",
    "Statement reprint fee": "Bank service charges",
    "Overdraft interest": "Interest expense",
}

DEAL = re.compile(r"\b(BUY|SELL) (\d+) ([A-Z]+) @ (\d+\.\d{2})\b")
PERIOD_END_RE = re.compile(r"the period ends on (\d{4}-\d{2}-\d{2})")
OPENING_RE = re.compile(r"balance before the period's first entry was (-?[\d,]+\.\d{2})")
UNSETTLED_RE = re.compile(r"more than (\d+) days after its date")
ACCOUNT_ROW_RE = re.compile(r"^\| ([A-Z][^|]*?) \| ([A-Z][^|]*?) \|$", re.M)


@dataclass(frozen=True)
class Difference:
    id: str
    source: str  # bank | books | book_error | bank_error
    amount: float  # the entry's amount (bank, books, a repeated line), else statement − books


@dataclass(frozen=True)
class Adjustment:
    id: str
    account: int
    amount: float  # signed as cash sees it: positive brings money into the account


@dataclass(frozen=True)
class JournalLine:
    line: str
    entry: str
    day: str
    account: int
    debit: float
    credit: float
    memo: str


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
    the limit past which an unsettled book entry goes to the user, and the account code for
    each statement description and each books account (with the user's answers)."""

    end: str
    opening: float
    unsettled_days: int
    codes: Mapping[str, int]  # statement description or account name → code

    @property
    def unsettled_before(self) -> str:
        """Book entries dated before this day and still unsettled are past the limit."""
        return (date.fromisoformat(self.end) - timedelta(days=self.unsettled_days)).isoformat()


def terms(policy: bytes, accounts: bytes) -> Terms:
    text = policy.decode()
    end, opening = PERIOD_END_RE.search(text), OPENING_RE.search(text)
    unsettled = UNSETTLED_RE.search(text)
    if end is None or opening is None or unsettled is None:
        raise ValueError(f"{POLICY} states no period end, opening balance or unsettled limit")
    sheet = openpyxl.load_workbook(io.BytesIO(accounts), read_only=True)["Accounts"]
    rows = list(sheet.iter_rows(min_row=2, values_only=True))
    active = {str(name): int(str(code)) for code, name, _kind, status in rows if status == "active"}
    codes = dict(active)
    codes.update({line: active[name] for line, name in USER_ACCOUNTS.items()})
    codes.update({line: active[name] for line, name in ACCOUNT_ROW_RE.findall(text)})
    return Terms(end[1], float(opening[1].replace(",", "")), int(unsettled[1]), codes)


def _number(text: str | None) -> float:
    return float(text.replace(",", "")) if text and text.strip() else 0.0


def deal_amount(description: str) -> float | None:
    deal = DEAL.search(description)
    if deal is None:
        return None
    side, shares, _symbol, price = deal.groups()
    amount = round(int(shares) * float(price), 2)
    return -amount if side == "BUY" else amount


def reconcile_close(bank: bytes, books: bytes, close: Terms) -> Reconciliation:
    """The close as ``policy.md`` defines it, with the user's answers where it is silent."""
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
        if key in statement:  # the user: a later line for a posted trade is the bank's error
            differences.append(Difference(key, BANK_ERROR, amount))
        else:
            statement[key] = (amount, row["description"])
    ledger: dict[str, float] = {}
    first_day: dict[str, str] = {}
    accounts: dict[str, str] = {}
    for row in parse_csv(books):
        if row["date"] > close.end:
            continue
        key = row["id"].strip()
        ledger[key] = round(ledger.get(key, 0.0) + _number(row["amount"]), 2)
        accounts.setdefault(key, row["account"])
        first_day[key] = min(first_day.get(key, row["date"]), row["date"])
    matched = 0
    adjustments: list[Adjustment] = []

    def book_error(key: str, gap: float, account: str) -> None:
        differences.append(Difference(key, BOOK_ERROR, gap))
        adjustments.append(Adjustment(key, close.codes[account], gap))

    for key in sorted(set(statement) | set(ledger)):
        if key not in ledger:
            amount, description = statement[key]
            differences.append(Difference(key, "bank", amount))
            adjustments.append(Adjustment(key, close.codes[description], amount))
        elif key not in statement:
            if abs(ledger[key]) < 0.005:  # reversed in full: closed, nothing to list
                continue
            if first_day[key] < close.unsettled_before:  # the user: it fell through
                book_error(key, round(-ledger[key], 2), accounts[key])
            else:
                differences.append(Difference(key, "books", ledger[key]))
        elif abs(statement[key][0] - ledger[key]) > 0.005:
            amount, description = statement[key]
            gap = round(amount - ledger[key], 2)
            true = deal_amount(description)
            if "commission" in description:  # the user: the broker's charge is ours to book
                book_error(key, gap, COMMISSION)
            elif true is not None and abs(amount - true) > 0.005:
                differences.append(Difference(key, BANK_ERROR, gap))
            else:
                book_error(key, gap, accounts[key] if true is not None else description)
        else:
            matched += 1
    differences.sort(key=lambda d: (d.id, d.source))
    adjustments.sort(key=lambda a: a.id)
    book_balance = round(close.opening + sum(ledger.values()), 2)
    return Reconciliation(differences, matched, round(bank_balance, 2), book_balance, adjustments)


def journal_lines(result: Reconciliation, close: Terms) -> list[JournalLine]:
    """``import_spec.md``'s journal: per adjusting entry (in id order) the entry's account
    line, then the cash line; money in debits cash, money out credits it."""
    cash = close.codes[CASH]
    lines: list[JournalLine] = []
    for number, adjustment in enumerate(result.adjustments, start=1):
        entry, size = f"JE{number:03d}", round(abs(adjustment.amount), 2)
        into_cash = adjustment.amount > 0
        for side, account in ((1, adjustment.account), (2, cash)):
            debit = size if (side == 2) == into_cash else 0.0  # money in debits cash
            lines.append(
                JournalLine(
                    f"{entry}-{side}",
                    entry,
                    close.end,
                    account,
                    debit,
                    round(size - debit, 2),
                    adjustment.id,
                )
            )
    return lines


def journal_csv(lines: list[JournalLine]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(JOURNAL_COLUMNS)
    for j in lines:
        writer.writerow(
            [j.line, j.entry, j.day, j.account, f"{j.debit:.2f}", f"{j.credit:.2f}", j.memo]
        )
    return out.getvalue().encode()


# ---- the reference solution ----------------------------------------------------------------

SOLVE = python_solution(
    "close the cash account under policy.md and the user's answers (hard).",
    r"""import csv
import json
import os
import re
from datetime import date, timedelta
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
adjusting = turn >= int(os.environ["ADJUSTMENTS_FROM_TURN"])
policy = open("policy.md", encoding="utf-8").read()
end = re.search(r"period ends on (\d{4}-\d{2}-\d{2})", policy).group(1)
limit = int(re.search(r"more than (\d+) days after its date", policy).group(1))
unsettled_before = (date.fromisoformat(end) - timedelta(days=limit)).isoformat()

def number(text):
    return float(text.replace(",", "")) if text and text.strip() else 0.0

opening = number(re.search(r"first entry was ([-\d,.]+\d)", policy).group(1))
# the user's answers for the bank lines the policy's table does not list
names = {"Wire recall fee": "Wire transfer fees", "Returned payment fee": "Bank service charges",
         "Statement reprint fee": "Bank service charges", "Overdraft interest": "Interest expense"}
names.update(dict(re.findall(r"^\| ([A-Z][^|]*?) \| ([A-Z][^|]*?) \|$", policy, re.M)))
chart = openpyxl.load_workbook("accounts.xlsx")["Accounts"]
rows = chart.iter_rows(min_row=2, values_only=True)
code_of = {name: int(code) for code, name, _kind, status in rows if status == "active"}

def deal(description):
    found = re.search(r"(BUY|SELL) (\d+) [A-Z]+ @ (\d+\.\d\d)", description)
    if not found:
        return None
    value = round(int(found.group(2)) * float(found.group(3)), 2)
    return -value if found.group(1) == "BUY" else value

# what the desks' messages in notes.md say: transfer ref -> [trade id, amount] per trade
# it settles (after the last turn's corrections from then on), and what each refund returns
revised = turn >= int(os.environ["NOTES_REVISED_FROM_TURN"])
settled = __SETTLED_REVISED__ if revised else __SETTLED__
refunds = __REFUNDS__
bank, repeats, bank_balance, transfers = {}, [], opening, []
with open("bank.csv", newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        if row["date"] > end:
            continue
        bank_balance = number(row["balance"])
        if not row["ref"]:  # the opening line
            continue
        amount = round(number(row["credit"]) - number(row["debit"]), 2)
        description = refunds.get(row["ref"], row["description"])
        if row["ref"] in settled:
            transfers.append(row["ref"])
        for key, amount in settled.get(row["ref"], [[row["id"], amount]]):
            if key in bank:  # the user: a later line for a posted trade is the bank's error
                repeats.append((key, "bank_error", amount))
            else:
                bank[key] = (amount, description)

books, account_of, first_day, book_text = {}, {}, {}, {}
with open("books.csv", newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        if row["date"] > end:
            continue
        books[row["id"]] = round(books.get(row["id"], 0.0) + float(row["amount"]), 2)
        account_of.setdefault(row["id"], row["account"])
        book_text.setdefault(row["id"], row["description"])
        first_day[row["id"]] = min(first_day.get(row["id"], row["date"]), row["date"])

unmatched, adjustments, matched = list(repeats), [], 0
for key in sorted(set(bank) | set(books)):
    if key not in books:
        amount, description = bank[key]
        unmatched.append((key, "bank", amount))
        adjustments.append((key, code_of[names[description]], amount))
    elif key not in bank:
        if round(books[key], 2) == 0:
            continue
        if first_day[key] < unsettled_before:  # the user: it fell through, reverse it
            unmatched.append((key, "book_error", round(-books[key], 2)))
            adjustments.append((key, code_of[account_of[key]], round(-books[key], 2)))
        else:
            unmatched.append((key, "books", books[key]))
    elif round(bank[key][0] - books[key], 2) != 0:
        amount, description = bank[key]
        diff = round(amount - books[key], 2)
        true = deal(description) or deal(book_text[key])  # the deal, where either shows it
        if "commission" in description:  # the user: the broker's charge is ours to book
            unmatched.append((key, "book_error", diff))
            adjustments.append((key, code_of["Broker commissions"], diff))
        elif true is not None and round(amount - true, 2) != 0:
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
transfers_sheet = wb.create_sheet("Settlements")
transfers_sheet.append(["ref", "ids"])
for ref in sorted(transfers):
    transfers_sheet.append([ref, " ".join(sorted(key for key, _amount in settled[ref]))])
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
    adjustments.sort()
    for row in adjustments:
        sheet.append(list(row))
    summary["adjusted_bank_balance"] = round(bank_balance + total("books") - total("bank_error"), 2)
    summary["adjusted_book_balance"] = round(book_balance + total("bank", "book_error"), 2)
    assert summary["adjusted_bank_balance"] == summary["adjusted_book_balance"], summary
    with open("journal.csv", "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["line", "entry", "date", "account", "debit", "credit", "memo"])
        for n, (key, code, amount) in enumerate(adjustments, start=1):
            size = round(abs(amount), 2)
            cash_debit = size if amount > 0 else 0.0  # money in debits cash
            entry = f"JE{n:03d}"
            out.writerow([f"{entry}-1", entry, end, code, f"{size - cash_debit:.2f}",
                          f"{cash_debit:.2f}", key])
            out.writerow([f"{entry}-2", entry, end, code_of["Cash at bank"], f"{cash_debit:.2f}",
                          f"{size - cash_debit:.2f}", key])
wb.save("reconciliation.xlsx")
with open("reconciliation.json", "w") as f:
    json.dump(summary, f, indent=2)
""",
    "ADJUSTMENTS_FROM_TURN",
    "NOTES_REVISED_FROM_TURN",
)

__all__ = [
    "ACCOUNTS",
    "ADJUSTMENTS",
    "BANK",
    "BANK_ERROR",
    "BOOKS",
    "BOOK_ERROR",
    "CASH",
    "COMMISSION",
    "DEAL",
    "IMPORT_SPEC",
    "JOURNAL",
    "JOURNAL_COLUMNS",
    "JSON",
    "POLICY",
    "SOLVE",
    "UNMATCHED",
    "USER_ACCOUNTS",
    "XLSX",
    "Adjustment",
    "Difference",
    "JournalLine",
    "Reconciliation",
    "Terms",
    "deal_amount",
    "journal_csv",
    "journal_lines",
    "reconcile_close",
    "terms",
]

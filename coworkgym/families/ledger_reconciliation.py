"""Reconciling a bank statement against the books: an XLSX of unmatched entries plus a JSON
summary.

Grounded in real monthly closing prices (bundled ``stocks.csv``): the account is a small
investment fund's cash account, each entry a trade of a few hundred shares at the month's
close. Deliberate differences: entries only on the statement (fees, interest), entries only
in the books (trades not yet cleared), and amounts mistyped in the books.

Easy and medium: later user turns either replace ``bank.csv`` with a later statement (some
outstanding trades have cleared, a new fee arrived) or add a requirement: list unmatched
entries older than a cut-off date in a ``Stale`` sheet.

Hard is a different task, a year-end close under a written policy with a chart of accounts,
whose turns build on each other (``ledger_reconciliation_hard``, which says why it is hard).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, TurnPatch, UserState
from ..verifier.spec import (
    Component,
    RowCount,
    TableColumns,
    VerifierSpec,
    XlsxValue,
)
from . import ledger_reconciliation_hard as hard
from .base import Trap
from .common import (
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    parse_csv,
    plan_turns,
    python_solution,
    requirement_added,
    requirement_turn,
    rubric,
    table_shape,
    verifier_output,
    when_delivered,
    write_csv,
)
from .ledger_reconciliation_hard import (
    BANK,
    BANK_ERROR,
    BOOKS,
    JSON,
    XLSX,
    Line,
    mistype,
    monthly_prices,
)

SIZES = {  # months of trading, symbols traded, then bank-only, books-only, mistyped entries
    "easy": (3, 2, 1, 1, 1),
    "medium": (6, 2, 2, 2, 2),
}
BANK_ONLY = (("Account maintenance fee", -25.0), ("Interest credit", 4.17), ("Wire fee", -15.0))

SOLVE = python_solution(
    "reconcile bank.csv against books.csv.",
    r"""import csv
import json
import os
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
stale = turn >= int(os.environ["STALE_FROM_TURN"])
cutoff = os.environ["CUTOFF"]

def number(text):
    return float(text.replace(",", "")) if text and text.strip() else 0.0

def load(path):
    entries, repeats, total = {}, [], 0.0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if "amount" in row:
                amount = number(row["amount"])
            else:  # a statement with debit/credit columns
                amount = number(row["credit"]) - number(row["debit"])
            key = row["id"].strip()
            total += amount
            if key in entries:  # the user: a later line for a trade is the bank's error
                repeats.append((key, "bank_error", round(amount, 2), row["date"]))
            else:
                entries[key] = (row["date"], round(amount, 2))
    return entries, repeats, round(total, 2)

bank, repeats, bank_total = load("bank.csv")
books, _, books_total = load("books.csv")
unmatched = list(repeats)
matched = 0
for key in sorted(set(bank) | set(books)):
    if key not in books:
        unmatched.append((key, "bank", bank[key][1], bank[key][0]))
    elif key not in bank:
        unmatched.append((key, "books", books[key][1], books[key][0]))
    elif abs(bank[key][1] - books[key][1]) > 0.005:
        unmatched.append((key, "mismatch", round(bank[key][1] - books[key][1], 2), books[key][0]))
    else:
        matched += 1
unmatched.sort(key=lambda u: u[0])

wb = openpyxl.Workbook()
ws = wb.active
ws.title = "Unmatched"
ws.append(["id", "source", "amount"])
for key, source, amount, _day in unmatched:
    ws.append([key, source, amount])
old = [u for u in unmatched if u[3] < cutoff]
if stale:
    sheet = wb.create_sheet("Stale")
    sheet.append(["id", "source", "amount", "date"])
    for key, source, amount, day in old:
        sheet.append([key, source, amount, day])
wb.save("reconciliation.xlsx")

summary = {
    "matched": matched,
    "bank_only": sum(1 for u in unmatched if u[1] == "bank"),
    "books_only": sum(1 for u in unmatched if u[1] == "books"),
    "mismatched": sum(1 for u in unmatched if u[1] == "mismatch"),
    "net_difference": round(bank_total - books_total, 2),
}
if stale:
    summary["stale"] = len(old)
with open("reconciliation.json", "w") as f:
    json.dump(summary, f, indent=2)
""",
    "STALE_FROM_TURN",
    "CUTOFF",
)


@dataclass
class Ledgers:
    bank: list[Line]
    books: list[Line]


@dataclass(frozen=True)
class Unmatched:
    id: str
    source: str  # bank | books | mismatch | bank_error (a statement's repeated line)
    amount: float  # the entry's amount, or bank − books for a mismatch
    day: str


class LedgerReconciliation(TaskFamily):
    name = "ledger_reconciliation"
    scenarios = ("finance/accounting/reconciliation", "finance/accounting/ledger_close")
    capabilities = (
        "reconciliation",
        "spreadsheet_authoring",
        "requirement_tracking",
        "dependency_tracking",
    )
    deliverables = ("xlsx", "json")
    modalities = ("tabular",)
    safety = ("financial_data",)
    # with 3 turns both later turns come: the stale-entries requirement and the next statement
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    traps = (
        Trap(
            "repeated_posting",
            "the statement (hard) carries one trade a second time under its id",
            (r"\btwice\b", r"\bduplicat", r"more than once", r"double[- ]?post", r"\bsame id\b"),
        ),
        *hard.TRAPS,
    )

    def draft(self, params: FamilyParams) -> FamilyDraft:
        if params.difficulty == "hard":
            return hard.draft(params)
        rng = params.rng("ledger")
        ledgers, period = _ledgers(params, rng)
        s0 = ledgers  # the workspace keeps these; `ledgers` moves on with each later turn
        cutoff = _cutoff(reconcile(_bank_csv(ledgers), _books_csv(ledgers)))
        turn_kinds, stale_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                ledgers = _later_statement(ledgers, params.rng(f"statement{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(JSON, index),
                        "The bank just sent the next statement, which runs a few weeks further. "
                        f"I replaced {BANK} with it; please redo the reconciliation workbook and "
                        "the summary against it.",
                        {BANK: _bank_csv(ledgers)},
                        reason="later bank statement",
                        invalidates=[XLSX, JSON],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "The auditors want to see old differences. Add a sheet `Stale` to the "
                        f"workbook listing every unmatched entry dated before {cutoff} (columns "
                        "id, source, amount, date; the date as in the files), and a `stale` key "
                        "to the JSON with how many there are.",
                        [XLSX, JSON],
                    )
                )
        return FamilyDraft(
            slug=f"ledger-reconciliation-{period}-{params.seed}",
            title=f"Reconcile the fund's cash account, {period}",
            instruction=_instruction(),
            workspace={
                BANK: _bank_csv(s0),
                BOOKS: _books_csv(s0),
                "README.md": _readme(period).encode(),
            },
            solve_sh=fill_template(SOLVE, stale_from_turn=stale_from, cutoff=cutoff),
            user=_user(),
            inputs=input_artifacts({BANK: "csv", BOOKS: "csv"}),
            outputs=output_artifacts({XLSX: "xlsx", JSON: "json"}, [BANK, BOOKS]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        if params.difficulty == "hard":
            return hard.verifier(built, params)
        inputs = built.final_inputs()
        bank, books = inputs[BANK], inputs[BOOKS]
        unmatched, matched, net = reconcile(bank, books)
        # The cut-off a requirement turn states is a function of the s0 ledgers (``_cutoff``),
        # recomputed here rather than read back from the message.
        stale_cutoff = None
        if requirement_added(built):
            stale_cutoff = _cutoff(reconcile(built.workspace[BANK], built.workspace[BOOKS]))
        counts = {
            "bank_only": sum(1 for u in unmatched if u.source == "bank"),
            "books_only": sum(1 for u in unmatched if u.source == "books"),
            "mismatched": sum(1 for u in unmatched if u.source == "mismatch"),
        }
        components = [
            *table_shape(
                "unmatched",
                XLSX,
                ["id", "source", "amount"],
                len(unmatched),
                "Unmatched sheet columns",
                "one row per unmatched entry",
                sheet="Unmatched",
            ),
            json_value("matched_count", JSON, "/matched", matched, "reconciliation.json matched"),
            json_value(
                "net_difference",
                JSON,
                "/net_difference",
                net,
                "reconciliation.json net_difference (bank − books)",
                weight=2,
                tolerance=_cents(net),
            ),
        ]
        components += [
            json_value(f"{key}_count", JSON, f"/{key}", value, f"reconciliation.json {key}")
            for key, value in counts.items()
        ]
        for item in unmatched:
            slug = item.id.lower().replace("-", "_")
            components += [
                Component(
                    id=f"unmatched_{slug}_amount",
                    weight=1,
                    check=XlsxValue(
                        path=XLSX,
                        sheet="Unmatched",
                        key_column="id",
                        key=item.id,
                        column="amount",
                        expected=item.amount,
                        tolerance=_cents(item.amount),
                    ),
                    requirement=f"{item.id}: amount of the {item.source} difference",
                ),
                Component(
                    id=f"unmatched_{slug}_source",
                    weight=0.5,
                    check=XlsxValue(
                        path=XLSX,
                        sheet="Unmatched",
                        key_column="id",
                        key=item.id,
                        column="source",
                        expected=item.source,
                    ),
                    requirement=f"{item.id}: where the difference comes from",
                ),
            ]
        if stale_cutoff is not None:
            old = [u for u in unmatched if u.day < stale_cutoff]
            components += [
                json_value(
                    "stale_count",
                    JSON,
                    "/stale",
                    len(old),
                    "reconciliation.json stale (turn requirement)",
                ),
                Component(
                    id="stale_rows",
                    weight=2,
                    check=RowCount(path=XLSX, sheet="Stale", equals=len(old)),
                    requirement="Stale sheet: unmatched entries before the cut-off",
                ),
                Component(
                    id="stale_layout",
                    weight=1,
                    check=TableColumns(
                        path=XLSX, sheet="Stale", columns=["id", "source", "amount", "date"]
                    ),
                    requirement="Stale sheet columns",
                ),
            ]
            components += [
                Component(
                    id=f"stale_{u.id.lower().replace('-', '_')}_date",
                    weight=0.5,
                    check=XlsxValue(
                        path=XLSX,
                        sheet="Stale",
                        key_column="id",
                        key=u.id,
                        column="date",
                        expected=u.day,
                    ),
                    requirement=f"{u.id} is listed as stale",
                )
                for u in old
            ]
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "ledgers_unmodified",
                    "the statement and the books are evidence and must not change",
                    {BANK: bank, BOOKS: books},
                )
            ],
            rubric=rubric(
                "auditable",
                "An auditor can follow the workbook: unmatched rows are sorted by id, the source "
                "column says where each difference comes from, and amounts keep their sign.",
                [XLSX, JSON],
            ),
        )
        return verifier_output(spec, {BANK: bank, BOOKS: books})

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """The stale cut-off bound, exclusive or inclusive, for the turn that asks for it."""
        asked = [m for t in turns if (m := CUTOFF_RE.search(t.message))]
        if not asked:
            return []
        cutoff = asked[0][1]
        unmatched = reconcile(inputs[BANK], inputs[BOOKS])[0]
        return [
            Reading(
                component="stale_count",
                subject="Stale",
                values={
                    "before": sum(1 for u in unmatched if u.day < cutoff),
                    "on or before": sum(1 for u in unmatched if u.day <= cutoff),
                },
                phrases={
                    "before": r"(?<!or )\bbefore \d{4}-\d{2}-\d{2}",
                    "on or before": r"\b(on or before|up to and including) \d{4}-\d{2}-\d{2}",
                },
            )
        ]


CUTOFF_RE = re.compile(r"dated (?:on or )?before (\d{4}-\d{2}-\d{2})")


# ---- generating the ledgers ----------------------------------------------------------------


def _ledgers(params: FamilyParams, rng: random.Random) -> tuple[Ledgers, str]:
    months, symbol_count, bank_only, books_only, typos = SIZES[params.difficulty]
    prices = monthly_prices()
    year = rng.randint(2001, 2009)
    first = rng.randint(1, 13 - months)
    symbols = sorted({s for s, _m in prices if (s, f"{year}-01") in prices})
    chosen = rng.sample(symbols, k=symbol_count)
    seq = rng.randint(1000, 7000)
    trades: list[Line] = []
    for month in range(first, first + months):
        for symbol in chosen:
            price = prices[(symbol, f"{year}-{month:02d}")]
            shares = rng.randint(10, 400)
            side = rng.choice(["BUY", "SELL"])
            amount = round(shares * price, 2) * (-1 if side == "BUY" else 1)
            seq += rng.randint(1, 3)
            trades.append(
                Line(
                    id=f"TX{seq:04d}",
                    day=date(year, month, rng.randint(2, 26)),
                    description=f"{side} {shares} {symbol} @ {price:.2f}",
                    amount=round(amount, 2),
                    account=f"Investments:{symbol}",
                )
            )
    trades.sort(key=lambda e: (e.day, e.id))
    # The last trades have not cleared yet: they are in the books only.
    cleared = trades[:-books_only]
    typo_ids = {e.id for e in rng.sample(cleared, k=typos)}
    books = [replace(e, amount=mistype(e.amount, rng)) if e.id in typo_ids else e for e in trades]
    fees = []
    fee_days = rng.sample(range(first, first + months), k=bank_only)
    for n, (month, (text, amount)) in enumerate(zip(sorted(fee_days), BANK_ONLY, strict=False)):
        fees.append(
            Line(
                id=f"BK{seq + 10 + n:04d}",
                day=date(year, month, 28),
                description=text,
                amount=amount,
            )
        )
    bank = sorted([*cleared, *fees], key=lambda e: (e.day, e.id))
    period = f"{year}-{first:02d}-to-{year}-{first + months - 1:02d}"
    return Ledgers(bank, books), period


def _cents(amount: float) -> float:
    """Half a cent, for rounding; none for amounts so small that it would be lax."""
    return 0.005 if abs(amount) >= 0.05 else 0.0


def _later_statement(ledgers: Ledgers, rng: random.Random) -> Ledgers:
    """The next statement: some outstanding trades cleared, and a new month's fee."""
    bank_ids = {e.id for e in ledgers.bank}
    books_by_id = {e.id: e for e in ledgers.books}
    pending = [e for e in ledgers.books if e.id not in bank_ids]
    cleared = rng.sample(pending, k=max(1, len(pending) // 2 + len(pending) % 2))
    last = max(e.day for e in ledgers.bank + ledgers.books)
    posted = [
        replace(books_by_id[e.id], day=last + timedelta(days=rng.randint(1, 4))) for e in cleared
    ]
    # a cleared trade posts at the amount actually traded; a mistyped book entry stays wrong
    fee = Line(
        id=f"BK{max(int(e.id[2:]) for e in ledgers.bank + ledgers.books) + 7:04d}",
        day=last + timedelta(days=9),
        description="Account maintenance fee",
        amount=-25.0,
    )
    return replace(ledgers, bank=[*ledgers.bank, *posted, fee])


def _cutoff(result: tuple[list[Unmatched], int, float]) -> str:
    """A date with unmatched entries on both sides; only entries that no later statement can
    clear (bank-only and mistyped ones) decide it, so some stay stale after every turn."""
    days = sorted({u.day for u in result[0] if u.source != "books"})
    first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    return (first + (last - first) // 2 + timedelta(days=1)).isoformat()


def _bank_csv(ledgers: Ledgers) -> bytes:
    plain: list[dict[str, object]] = [
        {
            "id": e.id,
            "date": e.day.isoformat(),
            "description": e.description,
            "amount": f"{e.amount:.2f}",
        }
        for e in ledgers.bank
    ]
    return write_csv(plain, ["id", "date", "description", "amount"])


def _books_csv(ledgers: Ledgers) -> bytes:
    rows: list[dict[str, object]] = [
        {
            "id": e.id,
            "date": e.day.isoformat(),
            "account": e.account,
            "description": e.description,
            "amount": f"{e.amount:.2f}",
        }
        for e in ledgers.books
    ]
    return write_csv(rows, ["id", "date", "account", "description", "amount"])


# ---- the verifier's own reading of the final ledgers ---------------------------------------


def _number(text: str | None) -> float:
    return float(text.replace(",", "")) if text and text.strip() else 0.0


def _entries(data: bytes) -> tuple[dict[str, tuple[str, float]], list[Unmatched], float]:
    """(id → (date, amount) of its first line, the later lines of an id already seen, the
    sum of every line's amount)."""
    entries: dict[str, tuple[str, float]] = {}
    repeats, total = [], 0.0
    for row in parse_csv(data):
        if "amount" in row:
            amount = _number(row["amount"])
        else:
            amount = _number(row["credit"]) - _number(row["debit"])
        key = row["id"].strip()
        total += amount
        if key in entries:
            repeats.append(Unmatched(key, BANK_ERROR, round(amount, 2), row["date"]))
        else:
            entries[key] = (row["date"], round(amount, 2))
    return entries, repeats, total


def reconcile(bank_csv: bytes, books_csv: bytes) -> tuple[list[Unmatched], int, float]:
    """(unmatched entries sorted by id, matched count, net difference bank − books). A
    statement line for an id already on the statement is the bank's error (``bank_error``,
    as the user says when asked); every line counts in the net difference."""
    bank, repeats, bank_total = _entries(bank_csv)
    books, _repeats, books_total = _entries(books_csv)
    unmatched: list[Unmatched] = list(repeats)
    matched = 0
    for key in sorted(set(bank) | set(books)):
        if key not in books:
            unmatched.append(Unmatched(key, "bank", bank[key][1], bank[key][0]))
        elif key not in bank:
            unmatched.append(Unmatched(key, "books", books[key][1], books[key][0]))
        elif abs(bank[key][1] - books[key][1]) > 0.005:
            diff = round(bank[key][1] - books[key][1], 2)
            unmatched.append(Unmatched(key, "mismatch", diff, books[key][0]))
        else:
            matched += 1
    unmatched.sort(key=lambda u: u.id)
    return unmatched, matched, round(bank_total - books_total, 2)


def _user() -> UserState:
    signals = [
        Signal(
            trigger="agent asks about the sign of amounts",
            reveals="money leaving the account is negative in both files",
        )
    ]
    return UserState(
        persona="Fund accountant who closes the cash account at each period end.",
        role="accountant",
        latent_goals=["Every difference must be explainable to the auditors line by line."],
        knowledge_boundary=["does not know why the bank posts fees without references"],
        signal_plan=signals,
    )


def _instruction() -> str:
    amounts = "Both files have a signed `amount` (money leaving the account is negative)."
    return f"""\
Please reconcile our fund's cash account for the period close. The bank statement is
`{BANK}` and our books are `{BOOKS}`; entries share an `id` when they are the same
transaction. {amounts}

An entry is *matched* when its id is in both files with the same amount (to the cent).
Everything else is unmatched: ids only on the statement (source `bank`), ids only in the
books (source `books`), and ids in both whose amounts differ (source `mismatch`).

Create:

1. `{XLSX}` with a sheet named `Unmatched` and the columns `id`, `source`, `amount`, one row
   per unmatched id, sorted by id. `amount` is the entry's signed amount for `bank` and
   `books` rows, and the statement's amount minus the books' amount for `mismatch` rows.
2. `{JSON}` with the keys `matched`, `bank_only`, `books_only`, `mismatched` (counts of ids)
   and `net_difference`: the sum of all statement amounts minus the sum of all book
   amounts, rounded to cents.

Do not modify `{BANK}` or `{BOOKS}`.
"""


def _readme(period: str) -> str:
    return (
        f"# Cash account, {period.replace('-to-', ' to ')}\n\n`{BANK}` is the custodian bank's "
        f"statement, `{BOOKS}` our ledger export. Trades are at the month's closing price.\n"
    )


__all__ = ["BANK", "BOOKS", "JSON", "XLSX", "LedgerReconciliation", "reconcile"]

"""The year ledger_reconciliation's ``hard`` close draws from a seed (``draw_close``): a
year of trades at the months' closing prices, what the seed plants (``draw_plan``: keying
errors on both sides, late trades, the bank's charges, the open problems only the user
settles) and the bank's revised statement of the last turn."""

from __future__ import annotations

import calendar
import random
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from .base import read_csv_resource
from .ledger_reconciliation_close import USER_ACCOUNTS
from .ledger_reconciliation_notes import Desk, Line, plant_desk, plant_refunds

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

# The problems policy.md leaves open, each settled only by asking; a seed has two or three.
REPEATED, COMMISSION_NETTED, UNLISTED, FELL_THROUGH = (
    "repeated",
    "commission",
    "unlisted",
    "fell_through",
)
OPEN_PROBLEMS = (REPEATED, COMMISSION_NETTED, UNLISTED, FELL_THROUGH)


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

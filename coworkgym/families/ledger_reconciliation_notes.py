"""What the hard ledger close's ``notes.md`` decides: which trade(s) a statement transfer
settles when its id is blank or wrong, and which charge a bank refund returns.

The truth is structured and drawn first (``plant_desk``: a ``Remittance`` per transfer the
brokers' desks write about, a ``Refund`` per credit the bank writes about); the statement
the agent reads (``statement_rows`` with a ``Desk``) hides it — a blank or wrong id, the
broker's name instead of the deal, two trades in one transfer, a refund as "Refund" — and
``notes_md`` writes it out in words (``ledger_reconciliation_texts``). The verifier and the
reference solution use the truth (``true_statement``, ``settlements``); nothing is parsed
back out of the text.

Amounts alone do not settle it: trades of the same symbol, side and size in one month
(``twins``) settle at the same amount, a transfer may pay two trades, the books mistype
some amounts, and the desk's messages name other trades in passing.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta

from . import ledger_reconciliation_texts as texts

NOTES = "notes.md"
SETTLEMENTS = "Settlements"
REMITTANCES = (76, 90)  # transfers the desks write about, per seed
COMBINED = (3, 5)  # of them, transfers paying two trades
TWIN_PAIRS = (16, 22)  # of them, both transfers of a pair of same-amount trades
REFUNDS = (3, 5)
SWAPS = (1, 2)  # turn 3: pairs of transfers whose trades the desk had the wrong way round
FEES = ("Account maintenance fee", "Wire fee", "Custody fee")
REFUND_WORDS = ("Refund", "Fee reversal", "Credit adjustment", "Goodwill credit")
BANK_NAME = "Northgate Custody Bank"
BANK_SENDERS = ("Client service", "Fees team", "Relationship office")
# How the story of a message is drawn: plain about a third of the time.
STORY_WEIGHTS = {
    texts.PLAIN: 3,
    texts.DENIED: 2,
    texts.CORRECTED: 2,
    texts.POSTSCRIPT: 2,
    texts.QUOTED: 1,
    texts.FORWARDED: 1,
}
WRONG_REFERENCE_SHARE = 0.18  # transfers whose statement id names another trade
WITHDRAWN_SHARE = 0.10  # transfers an earlier note got wrong and a later one corrects


@dataclass(frozen=True)
class Line:
    """One statement line or book entry; ``ref`` is the bank's reference of a statement
    line (two trades paid in one transfer share it)."""

    id: str
    day: date
    description: str
    amount: float
    account: str = ""  # the books' account (a trade's investment account)
    ref: str = ""


@dataclass(frozen=True)
class Remittance:
    """A transfer the desk writes about: what it settles and how the text frames it."""

    ref: str
    trades: tuple[str, ...]  # the truth, in id order
    shown: str  # the statement's id column: "" or another trade's id
    story: str  # texts.STORIES: the distractor framing the plain statement
    other: str  # the trade the story names besides the truth
    withdrawn: str = ""  # the trade an earlier note named wrongly ("" if none)
    firm: str = ""  # the broker, under the name the statement shows


@dataclass(frozen=True)
class Refund:
    """A bank credit that returns part of a charge; the statement says only ``shown``."""

    ref: str
    id: str
    charge: str  # the charge it returns (its account is that charge's)
    other: str  # another charge the message denies ("" if none)
    shown: str


@dataclass
class Desk:
    """The truth behind ``notes.md``, and turn 3's corrections (``swaps``)."""

    remittances: dict[str, Remittance]
    refunds: dict[str, Refund]
    swaps: list[tuple[str, str]] = field(default_factory=list)

    def revised(self) -> Desk:
        """The desk after turn 3's corrections: each swapped pair's trades exchanged."""
        remittances = dict(self.remittances)
        for a, b in self.swaps:
            remittances[a] = replace(self.remittances[a], trades=self.remittances[b].trades)
            remittances[b] = replace(self.remittances[b], trades=self.remittances[a].trades)
        return Desk(remittances, self.refunds, [])


def settlements(desk: Desk, end: date, lines: Iterable[Line]) -> dict[str, str]:
    """The ``Settlements`` sheet: each transfer of the period the desk writes about → the
    trade ids it settles, ascending, separated by a space."""
    days = {s.ref: s.day for s in lines}
    return {
        ref: " ".join(sorted(r.trades))
        for ref, r in sorted(desk.remittances.items())
        if ref in days and days[ref] <= end
    }


def _twins(lines: Sequence[Line]) -> dict[str, list[str]]:
    """id → the other trades whose statement line has the same amount."""
    by_amount: dict[float, list[str]] = {}
    for s in lines:
        by_amount.setdefault(s.amount, []).append(s.id)
    return {i: [j for j in ids if j != i] for ids in by_amount.values() for i in ids}


def plant_desk(
    statement: list[Line],
    end: date,
    keep_out: set[str],
    booked_on: Mapping[str, date],
    rng: random.Random,
) -> tuple[list[Line], Desk]:
    """Draw the transfers the desks write about among the period's trade settlements (not
    ``keep_out``: the lines the open problems plant), merge a few pairs into one transfer,
    and draw every message's framing. Returns the statement with its lines' refs and
    combined days, and the desk. ``booked_on`` (id → the day the trade was booked) keeps
    turn 3's corrections plausible: a transfer is never said to settle a trade booked after
    it."""
    ids = [s.id for s in statement]
    eligible = [
        s
        for s in statement
        if s.id.startswith("TX")
        and s.day <= end - timedelta(days=2)
        and s.id not in keep_out
        and ids.count(s.id) == 1
    ]
    twins = _twins(eligible)
    by_id = {s.id: s for s in eligible}
    # turn 3's corrections: pairs of same-amount trades, each booked before the other's
    # transfer, that the desk first gives the wrong way round
    swappable = [
        (a, b)
        for a in sorted(twins)
        for b in twins[a]
        if a < b and booked_on[a] < by_id[b].day and booked_on[b] < by_id[a].day
    ]
    rng.shuffle(swappable)
    swapped: list[tuple[str, str]] = []
    wanted = rng.randint(*SWAPS)
    for a, b in swappable:
        if len(swapped) < wanted and not {a, b} & {i for p in swapped for i in p}:
            swapped.append((a, b))
    chosen: set[str] = {i for pair in swapped for i in pair}
    # both trades of a same-amount pair: the statement's other lines cannot single one out
    pairs = [(a, b) for a in sorted(twins) for b in twins[a] if a < b]
    rng.shuffle(pairs)
    wanted_pairs = rng.randint(*TWIN_PAIRS)
    for a, b in pairs:
        if len(chosen) < 2 * wanted_pairs and not {a, b} & chosen:
            chosen |= {a, b}
    combined: list[tuple[str, str]] = []
    pool = sorted(set(by_id) - chosen)
    rng.shuffle(pool)
    wanted = rng.randint(*COMBINED)
    for first in pool:
        if len(combined) >= wanted or first in chosen:
            continue
        near = [
            s.id
            for s in eligible
            if s.id not in chosen and s.id != first and abs((s.day - by_id[first].day).days) <= 3
        ]
        if near:
            second = rng.choice(sorted(near))
            combined.append(tuple(sorted((first, second))))  # type: ignore[arg-type]
            chosen |= {first, second}
    rest = sorted(set(by_id) - chosen)
    count = rng.randint(*REMITTANCES) - len(chosen) + len(combined)
    chosen |= set(rng.sample(rest, k=max(0, min(len(rest), count))))

    # a combined transfer is dated by its later trade; each transfer gets the bank's ref
    pair_of = {i: pair for pair in combined for i in pair}
    merged_day = {i: max(by_id[j].day for j in pair_of[i]) for i in pair_of}
    lines = [replace(s, day=merged_day.get(s.id, s.day)) for s in statement]
    lines.sort(key=lambda s: (s.day, min(pair_of.get(s.id, (s.id,))), s.id))
    refs: dict[str, str] = {}  # a combined pair's first id → its transfer's ref
    number = rng.randint(100, 400)
    numbered: list[Line] = []
    for s in lines:
        group = min(pair_of[s.id]) if s.id in pair_of else ""
        if group not in refs:  # a line of its own (a repeated posting too) or a pair's first
            number += rng.randint(1, 9)
            ref = f"FT{s.day:%y%m%d}{number:04d}"
            if group:
                refs[group] = ref
        numbered.append(replace(s, ref=refs.get(group, ref)))
    lines = numbered
    ref_of = {s.id: s.ref for s in lines}
    settled_on = {s.id: s.day for s in lines if s.id.startswith("TX")}

    remittances: dict[str, Remittance] = {}
    stories, weights = list(STORY_WEIGHTS), list(STORY_WEIGHTS.values())
    everyone = sorted(i for i in settled_on if i not in keep_out)
    for key in sorted(chosen):
        ref = ref_of[key]
        if ref in remittances:
            continue
        trades = pair_of.get(key, (key,))
        day = settled_on[key]
        # the trade named besides the truth: its twin where it has one, else one settled before
        earlier = [t for t in everyone if settled_on[t] < day and t not in trades]
        candidates = [t for t in twins.get(key, []) if t in earlier] or earlier
        other = rng.choice(candidates[:40]) if candidates else ""
        single = len(trades) == 1
        shown = other if single and other and rng.random() < WRONG_REFERENCE_SHARE else ""
        shown = "" if key in {i for pair in swapped for i in pair} else shown
        withdrawn = (
            other if single and other and not shown and rng.random() < WITHDRAWN_SHARE else ""
        )
        story = rng.choices(stories, weights)[0] if other else texts.PLAIN
        if not single and story == texts.CORRECTED:  # "it is X" would name one of the two
            story = texts.DENIED
        remittances[ref] = Remittance(
            ref, tuple(sorted(trades)), shown, story, other, withdrawn, texts.firm_name(rng)
        )

    swaps = [(ref_of[a], ref_of[b]) for a, b in swapped]
    return lines, Desk(remittances, {}, swaps)


def plant_refunds(
    statement: list[Line], start: date, end: date, first_id: int, rng: random.Random
) -> tuple[list[Line], dict[str, Refund]]:
    """Add the bank's refunds: credits of part of a charge the statement carries, shown
    only as "Refund" and the like."""
    charged = sorted({s.description for s in statement if s.description in FEES})
    refunds: dict[str, Refund] = {}
    lines = list(statement)
    span = (end - start).days - 6
    for n in range(rng.randint(*REFUNDS)):
        charge = rng.choice(charged)
        day = start + timedelta(days=rng.randint(10, span))
        ref = f"FT{day:%y%m%d}{8000 + n * 7:04d}"
        key = f"BK{first_id + n:04d}"
        others = [f for f in FEES if f != charge]
        other = rng.choice(others) if rng.random() < 0.6 else ""
        refunds[ref] = Refund(ref, key, charge, other, rng.choice(REFUND_WORDS))
        lines.append(Line(key, day, charge, round(rng.uniform(3, 20), 2), ref=ref))
    lines.sort(key=lambda s: (s.day, s.ref, s.id))
    return lines, refunds


# ---- the files -----------------------------------------------------------------------------


def statement_rows(
    lines: Sequence[Line], opening: float, start: date, desk: Desk | None
) -> list[dict[str, object]]:
    """The statement's rows: an opening line, then one row per transfer with its running
    balance. With ``desk`` as the agent reads it (a transfer paying two trades is one row,
    a transfer the desk writes about shows the broker's name and a blank or wrong id, a
    refund only its kind); without, the truth (one row per trade, ids and deals shown)."""
    rows: list[dict[str, object]] = [
        {"date": start.isoformat(), "description": "Opening balance", "balance": _money(opening)}
    ]
    balance = opening
    grouped: list[list[Line]] = []
    for s in lines:
        if desk is not None and grouped and grouped[-1][0].ref == s.ref and s.ref:
            grouped[-1].append(s)
        else:
            grouped.append([s])
    for group in grouped:
        amount = round(sum(s.amount for s in group), 2)
        balance = round(balance + amount, 2)
        head = group[0]
        key, description = head.id, head.description
        if desk is not None and head.ref in desk.remittances:
            remittance = desk.remittances[head.ref]
            key = remittance.shown
            description = f"Transfer {'to' if amount < 0 else 'from'} {remittance.firm}"
        elif desk is not None and head.ref in desk.refunds:
            description = desk.refunds[head.ref].shown
        rows.append(
            {
                "date": head.day.isoformat(),
                "ref": head.ref,
                "id": key,
                "description": description,
                "debit": _money(-amount) if amount < 0 else "",
                "credit": _money(amount) if amount >= 0 else "",
                "balance": _money(balance),
            }
        )
    return rows


STATEMENT_COLUMNS = ["date", "ref", "id", "description", "debit", "credit", "balance"]


def _money(amount: float) -> str:
    return f"{amount:,.2f}"


@dataclass(frozen=True)
class Note:
    """One message of ``notes.md``; ``plain`` is the sentence of ``body`` that states its
    meaning without a distractor ("" for a message about nothing), ``ref`` the transfer."""

    when: datetime
    sender: str
    firm: str
    subject: str
    body: str
    ref: str = ""
    plain: str = ""


def _at(day: date, rng: random.Random) -> datetime:
    return datetime.combine(day, time(rng.randint(8, 17), rng.randint(0, 59)))


def messages(
    desk: Desk,
    lines: Sequence[Line],
    rng: random.Random,
    revised: Desk | None = None,
    revised_on: date | None = None,
) -> list[Note]:
    """Every message of ``notes.md``, oldest first. With ``revised``, turn 3's corrections
    (``Desk.swaps``) follow, dated ``revised_on``."""
    by_ref: dict[str, list[Line]] = {}
    for s in lines:
        by_ref.setdefault(s.ref, []).append(s)
    settled_on = {s.id: s.day for s in lines}
    notes: list[Note] = []
    last_note: dict[str, date] = {}  # ref → the day of the desk's latest word on it
    for ref, r in sorted(desk.remittances.items()):
        group = by_ref[ref]
        day, amount = group[0].day, sum(s.amount for s in group)
        sender = rng.choice(texts.SENDERS)
        then = settled_on.get(r.other, day - timedelta(days=rng.randint(5, 40)))
        written = day + timedelta(days=rng.randint(0, 3))
        if r.withdrawn:
            earlier = texts.SETTLES_ONE[rng.randrange(len(texts.SETTLES_ONE))].format(
                ref=ref, amount=f"{abs(amount):,.2f}", day=texts.long_day(day), trade=r.withdrawn
            )
            notes.append(
                Note(
                    _at(written, rng),
                    sender,
                    r.firm,
                    f"Transfer {ref}",
                    texts.wrap(rng, earlier, sender, r.firm),
                    ref,
                    earlier,
                )
            )
            later = written + timedelta(days=rng.randint(2, 9))
            middle = texts.withdrawal_message(
                rng, ref=ref, trade=r.trades[0], was=r.withdrawn, then=written
            )
            notes.append(
                Note(
                    _at(later, rng),
                    sender,
                    r.firm,
                    f"Correction: {ref}",
                    texts.wrap(rng, middle, sender, r.firm),
                    ref,
                    middle,
                )
            )
            last_note[ref] = later
            continue
        middle, plain = texts.remittance_message(
            rng,
            ref=ref,
            trades=r.trades,
            shown=r.shown,
            story=r.story,
            other=r.other,
            day=day,
            amount=amount,
            then=then,
        )
        subject = rng.choice(
            (
                f"Transfer {ref}",
                f"Re: {ref}",
                "Settlement query",
                f"Allocation of {ref}",
                "Your statement",
                f"Ref {ref}",
            )
        )
        notes.append(
            Note(
                _at(written, rng),
                sender,
                r.firm,
                subject,
                texts.wrap(rng, middle, sender, r.firm, ref, day, amount),
                ref,
                plain,
            )
        )
        last_note[ref] = written
    for ref, refund in sorted(desk.refunds.items()):
        [line] = by_ref[ref]
        sender = f"{rng.choice(BANK_SENDERS)}, {BANK_NAME}"
        middle, plain = texts.refund_message(
            rng,
            ref=ref,
            charge=refund.charge,
            other=refund.other,
            day=line.day,
            amount=line.amount,
        )
        notes.append(
            Note(
                _at(line.day + timedelta(days=rng.randint(0, 2)), rng),
                sender,
                BANK_NAME,
                f"{refund.shown} {ref}",
                texts.wrap(rng, middle, sender, BANK_NAME),
                ref,
                plain,
            )
        )
    days = sorted(s.day for s in lines)
    for _n in range(rng.randint(18, 24)):
        sender, firm = rng.choice(texts.SENDERS), texts.firm_name(rng)
        day = days[rng.randrange(len(days))]
        notes.append(
            Note(
                _at(day, rng),
                sender,
                firm,
                "Information",
                texts.wrap(rng, texts.filler(rng), sender, firm),
            )
        )
    if revised is not None and revised_on is not None:
        for a, b in desk.swaps:
            for ref in (a, b):
                r = desk.remittances[ref]
                sender = rng.choice(texts.SENDERS)
                middle = texts.withdrawal_message(
                    rng,
                    ref=ref,
                    trade=revised.remittances[ref].trades[0],
                    was=r.trades[0],
                    then=last_note[ref],
                )
                notes.append(
                    Note(
                        _at(revised_on, rng),
                        sender,
                        r.firm,
                        f"Correction: {ref}",
                        texts.wrap(rng, middle, sender, r.firm),
                        ref,
                        middle,
                    )
                )
    notes.sort(key=lambda n: n.when)
    return notes


def notes_md(notes: Sequence[Note]) -> str:
    parts = [
        "# Settlement notes\n\nMessages from the brokers' settlement desks and from the bank "
        "about lines of the statement, oldest first.\n"
    ]
    for note in notes:
        parts.append(
            f"---\n\n**Date:** {note.when:%Y-%m-%d %H:%M}  \n**From:** {note.sender} "
            f"({note.firm})  \n**To:** Fund accounting <fund.accounting@fund.example>  \n"
            f"**Subject:** {note.subject}\n\n{note.body}\n"
        )
    return "\n".join(parts)


__all__ = [
    "NOTES",
    "SETTLEMENTS",
    "STATEMENT_COLUMNS",
    "Desk",
    "Line",
    "Note",
    "Refund",
    "Remittance",
    "messages",
    "notes_md",
    "plant_desk",
    "plant_refunds",
    "settlements",
    "statement_rows",
]

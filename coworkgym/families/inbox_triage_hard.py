"""The ``hard`` tier of inbox_triage: a support inbox that must be *read*, too large to see
at once, a policy whose rules chain into one another, and three turns that build on each
other.

What the agent gets: ``inbox.mbox`` (56 customer threads and 3 newsletters, about 150
messages, shuffled, from customers in five time zones; bodies in plain text,
quoted-printable, base64 and multipart/alternative with HTML; replies quote the whole
message they answer; two messages exported twice; out-of-office replies; some customers set
``Reply-To``), ``contacts.csv`` (12 customers with an ``updated`` date),
``triage_policy.md`` and ``rota.csv`` (who works the early and the late shift, and each
day's lead).

Meaning, not keywords. Three fields of every thread are decided by what the customer
*means*, and every text is written from a structured truth (``Meaning``, kept by the draft
and never derived from the text; phrasing banks in ``inbox_triage_texts``, eight or more
paraphrases per meaning, drawn per seed):

- the category: what the first message asks of us now (security, incident, refund,
  billing, request). Around the plain statement sit distractors a keyword script takes
  for the category: another category denied ("I'm not asking for my money back"), a past
  event mentioned in passing, an older mail forwarded below the new question, a
  signature line or a company footer ("treat any such request as phishing");
- the order the thread concerns (``NW-`` and five digits): an earlier order mentioned in
  passing, a customer account in a signature, a forwarded mail's number, and corrections
  in a later message ("sorry, wrong number: it is …") replace the first one;
- whether the thread waits: a customer closes the matter in one of nine phrasings ("please
  ignore this one, we sorted it out"), while follow-ups that say "resolved" or "closed"
  ("is this resolved on your side?") and our quoted "should be resolved now" close
  nothing.

The decoded bodies come to 180-215 thousand characters, 15 to 18 times what one tool
result shows (``MAX_TOOL_OUTPUT``); without the quotes and the second copies still 80-90
thousand. Reading them takes a dozen calls or more, and the agent must keep track of what
it has read. A keyword script, naive or careful (quotes,
forwards and signatures cut away), gets a tenth to a half of the threads fully right; the
package needs all of them (the tests measure it).

The chain on top, as before: priority from the category and the tier → escalation of
chased threads → when the thread started waiting → the due time in business hours (a
closed day) → breached at the export's time → the draft (``Reply-To``, ``In-Reply-To``,
``References``). Two contradictions only the user settles, never volunteered: the policy
gives the business hours twice (08:00-18:00 and 09:00-17:00), and ``contacts.csv`` lists a
gold customer twice, the older row last.

Turns, and the fewest tool calls a careful agent needs (estimated by reading a package as
the agent sees it):

1. *First request* (``triage.json`` with the category, order, priority, due and breached of
   every thread, and ``drafts.mbox``): list and read the policy, the contacts and the rota
   (3); inspect the mbox with a parser (1); read every thread, decoded, in twelve or more
   slices (12+); ask the two questions (2); write down the judged fields per thread, script
   the chain, run it, spot-check and finish (5): about 23.
2. *The handover* (a changed requirement on turn 1's output): ``queue.csv`` from the
   triage, each waiting thread assigned by the rota to the shift in which it falls due or,
   breached, to the day's lead; gold customers' account managers in ``Cc``. Re-read the
   handover section and the rota (2), extend the script (1), run (1), check the queue
   against the triage (2), finish (1): about 7.
3. *Later exports* (input replaced; the user says only that the inbox and the contacts
   were exported again): find the new messages by Message-ID and read them (3) — a thread
   closed by its customer (in base64), one chased again, an order number corrected, one
   answered by a colleague, an auto-reply, a new thread whose forwarded older mail is of
   another category — notice the upgraded customer's newer row last in the contacts (1),
   update the judged fields (1), rerun (1), check (1), finish (1): about 8.

Every rule is stated in the instruction or the policy, or answered by the user when asked;
the verifier recomputes each value from the final inputs and the truth (``hard_triage``)
and checks every thread's six fields, every draft and every queue row.
"""

from __future__ import annotations

import email
import email.policy
import functools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from email.message import EmailMessage
from email.utils import format_datetime, parsedate_to_datetime

from ..package.assemble import UserTurn
from ..package.cowork import Signal, UserState
from . import inbox_triage_texts as texts
from .base import Reading
from .common import (
    NEVER,
    FamilyParams,
    after_reply,
    input_turn,
    parse_csv,
    requirement_turn,
    write_csv,
)
from .inbox_triage_hard_scripts import CHECK_QUEUE, SOLVE, expected_queue

INBOX, CONTACTS, POLICY, ROTA = "inbox.mbox", "contacts.csv", "triage_policy.md", "rota.csv"
TRIAGE, DRAFTS, QUEUE = "triage.json", "drafts.mbox", "queue.csv"
US = "support@northwind-it.example"
OFFICE = timezone(timedelta(hours=1))
OPENING, CLOSING = 8, 18  # the service hours the user confirms
OUTDATED_HOURS = "09:00 to 17:00"  # what the policy's targets section still says
LATE_SHIFT_FROM = 13
TARGET_HOURS = {"P1": 4, "P2": 8, "P3": 16}
QUEUE_COLUMNS = ["thread", "company", "priority", "due", "assignee"]
STAFF = ("Mara Quist", "Jon Bell", "Ada Brandt", "Luis Ortega")
MANAGERS = (
    "lena.vogt@northwind-it.example",
    "omar.haddad@northwind-it.example",
    "ada.brandt@northwind-it.example",
)
CUSTOMERS = (  # domain, company, tier, account manager, contact
    ("alderbank.example", "Alder Bank", "gold", MANAGERS[0], "Priya Nair"),
    ("brightlaw.example", "Bright & Co Law", "standard", MANAGERS[1], "Tom Reyes"),
    ("cedarclinic.example", "Cedar Clinic", "gold", MANAGERS[1], "Ines Moreau"),
    ("dunmore.example", "Dunmore Freight", "standard", MANAGERS[0], "Kwame Asante"),
    ("elmgrove.example", "Elmgrove Schools", "gold", MANAGERS[0], "Sofia Rossi"),
    ("fernway.example", "Fernway Hotels", "standard", MANAGERS[1], "Ravi Menon"),
    ("galwayport.example", "Galway Port Authority", "standard", MANAGERS[2], "Niamh Walsh"),
    ("harbourvets.example", "Harbour Vets", "gold", MANAGERS[1], "Jonas Berg"),
    ("ironleaf.example", "Ironleaf Studio", "standard", MANAGERS[2], "Mei Lin"),
    ("juniperdental.example", "Juniper Dental", "gold", MANAGERS[2], "Carlos Ruiz"),
    ("kestrel.example", "Kestrel Logistics", "standard", MANAGERS[1], "Fatima Zahra"),
    ("lumenarch.example", "Lumen Architects", "standard", MANAGERS[0], "Erik Olsen"),
)
ZONES = (OFFICE, UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=-8)),
         timezone(timedelta(hours=5, minutes=30)))
THREADS = 56  # customer threads; three newsletters besides
# every special shape at least once, the rest drawn: a quoted "should be resolved", an
# auto-reply, escalations, customers closing the matter
SHAPES = ("quoted", "auto", "chased_twice", "nudged", "resolved", "resolved", "resolved",
          "chased", "chased", "answered", "answered", "alone", "alone", "alone")
DRAWN_SHAPES = ("alone", "answered", "chased", "nudged", "resolved", "chased_twice", "quoted")
CATEGORY_TRAPS = ("denial", "past", "forwarded", "signature")
ORDER_TRAPS = ("earlier", "signature", "forwarded")
CORRECTED = 5  # first messages whose order number a later message corrects
NEWSLETTERS = (
    ("Cloud Weekly <news@cloudweekly.example>", "Cloud Weekly: the outage that wasn't",
     "This week: a regional outage, an error budget primer, and a down-to-earth guide to "
     "invoices for cloud services."),
    ("SecureNow Digest <digest@securenow.example>", "SecureNow: phishing season again",
     "Phishing kits now copy invoice mails; how to spot a breach before it spreads."),
    ("Vendor Billing <billing@vendorhub.example>", "Your vendor portal statement",
     "Your payment is due; download the invoice from the portal."),
)
SUBJECTS = {  # a subject says little: the customer's text decides the category
    "security": ("Urgent: accounts", "Something odd on our side", "Please help today"),
    "incident": ("Urgent: please help", "Problem this morning", "Something odd on our side"),
    "refund": ("Order question", "About our order", "Quick question"),
    "billing": ("Order question", "About our order", "Quick question"),
    "request": ("Small request", "About our order", "Quick question"),
}
CLOSED_REASON = "team training day"


@dataclass(frozen=True)
class Meaning:
    """What a message means, the truth its text is written from: the category of a
    thread's first message, the order number a message gives (a first message's or a
    correction's), and whether a customer closes the matter in it."""

    category: str = ""
    order: str = ""
    closes: bool = False


@dataclass(frozen=True)
class Mail:
    id: str
    sender: str  # "Name <addr>"
    sent: datetime  # aware
    subject: str
    body: str
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    newsletter: bool = False
    reply_to: str = ""
    auto: bool = False
    encoding: str = "7bit"  # of the text/plain part
    html: bool = False  # also an HTML alternative
    meaning: Meaning = Meaning()  # the hard tier's truth; the text is written from it


@dataclass(frozen=True)
class Clock:
    """When the exports were taken (office time) and the office's closed day."""

    first: datetime
    later: datetime
    closed: date


@dataclass(frozen=True)
class Thread:
    root: str
    category: str
    order: str | None  # the order the customer's concern is about, corrected if they did
    priority: str
    reply_needed: bool
    due: str | None  # UTC, ISO with Z
    breached: bool
    last: str
    reply_to: str
    references: tuple[str, ...]
    subject: str
    tier: str
    manager: str
    company: str
    domain: str


# ---- the mbox ---------------------------------------------------------------------------


def mbox(mails: Sequence[Mail]) -> bytes:
    return b"".join(_entry(m) for m in mails)


@functools.lru_cache(maxsize=4096)  # a draft writes each message into several exports
def _entry(mail: Mail) -> bytes:
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = mail.sender
    message["To"] = US if not mail.newsletter else "it-team@northwind-it.example"
    message["Subject"] = mail.subject
    message["Date"] = format_datetime(mail.sent)
    message["Message-ID"] = mail.id
    if mail.reply_to:
        message["Reply-To"] = mail.reply_to
    if mail.in_reply_to:
        message["In-Reply-To"] = mail.in_reply_to
        message["References"] = " ".join(mail.references)
    if mail.newsletter:
        message["List-Unsubscribe"] = "<mailto:leave@list.example>"
    if mail.auto:
        message["Auto-Submitted"] = "auto-replied"
    message.set_content(mail.body, cte=mail.encoding)
    if mail.html:
        paragraphs = "".join(f"<p>{p}</p>" for p in mail.body.split("\n") if p)
        message.add_alternative(f"<html><body>{paragraphs}</body></html>", subtype="html")
        # the library draws a random boundary; a fixed one keeps the export the same per seed
        message.set_boundary("=_part_" + "".join(c for c in mail.id if c.isalnum()))
    return _mbox_record(message, mail.sender, mail.sent)


def _mbox_record(message: EmailMessage, sender: str, sent: datetime) -> bytes:
    from .inbox_triage import mbox_record  # the easier tiers' writer; one mbox format

    return mbox_record(message, sender, sent)


def _parse_mbox(data: bytes) -> list[email.message.Message]:
    from .inbox_triage import parse_mbox  # the easier tiers' reader; one mbox format

    return parse_mbox(data)


# ---- the policy, as the verifier applies it ---------------------------------------------


def plain_text(message: email.message.Message) -> str:
    """The decoded text/plain part."""
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                return payload.decode(part.get_content_charset() or "utf-8", "replace")
    return ""


def truth_of(mails: Sequence[Mail]) -> dict[str, Meaning]:
    """Each message's meaning by Message-ID (the messages that carry one)."""
    return {m.id: m.meaning for m in mails if m.meaning != Meaning()}


def _automatic(message: email.message.Message) -> bool:
    return str(message.get("Auto-Submitted", "no")).strip().lower() != "no"


def _address(value: object) -> str:
    return email.utils.parseaddr(str(value))[1].lower()


def current_accounts(contacts: bytes) -> dict[str, dict[str, str]]:
    """Each domain's row updated last (the user's answer when asked)."""
    accounts: dict[str, dict[str, str]] = {}
    for row in parse_csv(contacts):
        held = accounts.get(row["domain"])
        if held is None or row["updated"] >= held["updated"]:
            accounts[row["domain"]] = row
    return accounts


def business_due(start: datetime, hours: int, closed: date) -> datetime:
    """``hours`` business hours after ``start``: Monday to Friday, OPENING to CLOSING office
    time, never on the closed day; a due time on closing time stays on that day."""
    moment = start.astimezone(OFFICE)
    remaining = timedelta(hours=hours)
    while True:
        opens = moment.replace(hour=OPENING, minute=0, second=0, microsecond=0)
        closes = moment.replace(hour=CLOSING, minute=0, second=0, microsecond=0)
        if moment.weekday() >= 5 or moment.date() == closed or moment >= closes:
            moment = opens + timedelta(days=1)
            continue
        moment = max(moment, opens)
        if remaining <= closes - moment:
            return moment + remaining
        remaining -= closes - moment
        moment = opens + timedelta(days=1)


def utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def thread_messages(inbox: bytes, *, by_time: bool = True
                    ) -> dict[str, list[email.message.Message]]:
    """Each thread's messages by its root Message-ID: a message exported twice once,
    automatic replies left out, in the order they were sent (``by_time=False``: in file
    order, a reading the instruction rules out)."""
    messages: dict[str, tuple[int, email.message.Message]] = {}
    for position, message in enumerate(_parse_mbox(inbox)):
        messages.setdefault(str(message["Message-ID"]).strip(), (position, message))
    threads: dict[str, list[tuple[int, email.message.Message]]] = {}
    for mid, (position, message) in messages.items():
        refs = str(message.get("References", "") or message.get("In-Reply-To", "")).split()
        root = refs[0] if refs and refs[0] in messages else mid
        if not _automatic(message):
            threads.setdefault(root, []).append((position, message))
    for items in threads.values():
        if by_time:
            items.sort(key=lambda pm: parsedate_to_datetime(str(pm[1]["Date"])))
        else:
            items.sort(key=lambda pm: pm[0])
    return {root: [m for _p, m in items] for root, items in threads.items()}


def readings(inputs: Mapping[str, bytes]) -> list[Reading]:
    """Which message is a thread's latest — the last sent (by Date, offsets included) or the
    last in the file — decides the reply's In-Reply-To (checked by ``reply_drafts``), and
    whether the thread waits at all."""
    by_time = thread_messages(inputs[INBOX])
    by_file = thread_messages(inputs[INBOX], by_time=False)
    return [
        Reading(
            component="reply_drafts",
            subject="latest message",
            values={"by time": str(by_time[root][-1]["Message-ID"]).strip(),
                    "by file order": str(by_file[root][-1]["Message-ID"]).strip()},
            phrases={
                "by time": r"latest message[^.]*\bby (its|the) `?Date",
                "by file order": r"latest message is the (one|message) last in the file",
            },
        )
        for root in sorted(by_time)
    ]


def hard_triage(
    inbox: bytes,
    contacts: bytes,
    export: datetime,
    closed: date,
    truth: Mapping[str, Meaning],
    *,
    by_time: bool = True,
) -> dict[str, Thread]:
    """Threads by root Message-ID, triaged by the hard policy; what the customers mean
    (category, order, closing the matter) comes from ``truth``, the structure the texts
    were written from. ``by_time=False`` takes a thread's latest message to be its last in
    the file (a reading the instruction rules out)."""
    accounts = current_accounts(contacts)
    out = {}
    for root, items in thread_messages(inbox, by_time=by_time).items():
        first, last = items[0], items[-1]
        newsletter = bool(first.get("List-Unsubscribe"))
        category = "newsletter" if newsletter else truth[root].category
        ids = [str(m["Message-ID"]).strip() for m in items]
        orders = [truth[i].order for i in ids if i in truth and truth[i].order]
        domain = _address(first["From"]).split("@")[1]
        account = accounts.get(domain, {})
        tier = account.get("tier", "standard")
        ours = [n for n, m in enumerate(items) if _address(m["From"]) == US]
        since = items[ours[-1] + 1 :] if ours else items
        closes = ids[-1] in truth and truth[ids[-1]].closes
        needed = not newsletter and _address(last["From"]) != US and not closes
        priority, due, breached = "none", None, False
        if needed:
            priority = _priority(category, tier, chased=len(since) >= 2)
            waiting = parsedate_to_datetime(str(since[0]["Date"]))
            moment = business_due(waiting, TARGET_HOURS[priority], closed)
            due, breached = utc_text(moment), moment < export
        subject = str(first["Subject"])
        out[root] = Thread(
            root=root,
            category=category,
            order=orders[-1] if orders else None,
            priority=priority,
            reply_needed=needed,
            due=due,
            breached=breached,
            last=ids[-1],
            reply_to=_address(last.get("Reply-To") or last["From"]),
            references=tuple(ids),
            subject=subject if subject.lower().startswith("re:") else f"Re: {subject}",
            tier=tier,
            manager=account.get("account_manager", ""),
            company=account.get("company", ""),
            domain=domain,
        )
    return out


def _priority(category: str, tier: str, *, chased: bool) -> str:
    if category == "security" or (category, tier) == ("incident", "gold"):
        base = 1
    elif category == "incident" or tier == "gold":
        base = 2
    else:
        base = 3
    return f"P{max(1, base - 1) if chased else base}"


def queue_rows(
    threads: Mapping[str, Thread], rota: bytes, export: datetime
) -> list[list[str]]:
    """The handover queue: waiting threads by due time (then name), each with its assignee."""
    days = {row["date"]: row for row in parse_csv(rota)}
    lead = days[export.astimezone(OFFICE).date().isoformat()]["lead"]
    rows = []
    for t in threads.values():
        if not t.reply_needed or t.due is None:
            continue
        if t.breached:
            assignee = lead
        else:
            due = datetime.fromisoformat(t.due.replace("Z", "+00:00")).astimezone(OFFICE)
            shift = "late" if due.hour >= LATE_SHIFT_FROM else "early"
            assignee = days[due.date().isoformat()][shift]
        rows.append([t.root, t.company, t.priority, t.due, assignee])
    return sorted(rows, key=lambda r: (r[3], r[0]))


# ---- drafting ---------------------------------------------------------------------------


def clock(params: FamilyParams) -> Clock:
    rng = params.rng("hard-clock")
    first = datetime(2026, 3, rng.randint(10, 13), 12, 0, tzinfo=OFFICE)  # Tuesday to Friday
    # the next working day is closed: dues that run past today skip it
    closed = first.date() + timedelta(days=3 if first.weekday() == 4 else 1)
    return Clock(first, first + timedelta(hours=3), closed)


class _Ids:
    def __init__(self, rng: random.Random, start: int) -> None:
        self.rng, self.serial = rng, start

    def __call__(self) -> str:
        self.serial += self.rng.randint(1, 9)
        return f"<{self.serial}.{self.rng.randint(100, 999)}@mail.example>"


@dataclass(frozen=True)
class _Writer:
    """Who writes a thread's customer messages, and how their mail client writes them."""

    name: str
    company: str
    domain: str
    zone: tzinfo
    reply_to: str = ""

    @property
    def sender(self) -> str:
        return f"{self.name} <{self.name.split()[0].lower()}@{self.domain}>"


OUR_DESK = _Writer("Northwind IT support", "Northwind IT", "northwind-it.example", OFFICE)


def _reply(thread: Sequence[Mail], writer: _Writer, sent: datetime, text: str, new_id: str,
           rng: random.Random, *, sender: str = "", subject: str = "",
           style: tuple[str, bool] = ("7bit", False), meaning: Meaning = Meaning(),
           auto: bool = False) -> Mail:
    """A reply to the thread's latest message, quoting it below its own text."""
    previous = thread[-1]
    body = text if auto else texts.reply_body(
        rng, text, writer.name, writer.company, writer.domain, previous.body, previous.sender,
        staff=writer.domain == OUR_DESK.domain)
    return Mail(
        new_id, sender or writer.sender, sent, subject or f"Re: {thread[0].subject}", body,
        in_reply_to=previous.id, references=tuple(m.id for m in thread),
        reply_to="" if auto or sender else writer.reply_to, auto=auto, encoding=style[0],
        html=style[1], meaning=meaning,
    )


def _staff(thread: Sequence[Mail], name: str, sent: datetime, text: str, new_id: str,
           rng: random.Random) -> Mail:
    writer = replace(OUR_DESK, name=name)
    return _reply(thread, writer, sent, text, new_id, rng, sender=f"{name} <{US}>")


def _style(rng: random.Random) -> tuple[str, bool]:
    """How a customer's mail client writes a message: the body's encoding, an HTML part."""
    return rng.choice(("7bit", "quoted-printable", "base64")), rng.random() < 0.4


def _dealt(rng: random.Random, required: Sequence[str], drawn: Sequence[str],
           count: int) -> list[str]:
    """``required`` once each, the rest drawn from ``drawn``, shuffled."""
    out = list(required) + [rng.choice(drawn) for _ in range(count - len(required))]
    rng.shuffle(out)
    return out


def first_inbox(params: FamilyParams, when: Clock) -> list[Mail]:
    """The morning's export: THREADS customer threads, each written from its truth (a
    category, an order, maybe a corrected number, a shape), and the newsletters."""
    rng = params.rng("hard-inbox")
    ids = _Ids(rng, rng.randint(1000, 8000))
    customers = list(CUSTOMERS)
    rng.shuffle(customers)
    zone_of = {c[0]: ZONES[rng.randrange(len(ZONES))] for c in customers}
    replies_to = {c[0]: f"helpdesk@{c[0]}" for c in customers[:3]}  # their client sets one
    kinds = _dealt(rng, texts.CATEGORIES * 6, texts.CATEGORIES, THREADS)
    shapes = _dealt(rng, SHAPES, DRAWN_SHAPES, THREADS)
    category_traps = _dealt(rng, CATEGORY_TRAPS * 6, (*CATEGORY_TRAPS, "", ""), THREADS)
    order_traps = _dealt(rng, ORDER_TRAPS * 3, ("", "", "", *ORDER_TRAPS), THREADS)
    numbers = [f"NW-{n}" for n in rng.sample(range(10000, 99999), 3 * THREADS + 8)]
    can_correct = [n for n in range(THREADS) if shapes[n] in ("alone", "answered", "chased")]
    corrected = set(rng.sample(can_correct, min(CORRECTED, len(can_correct))))
    mails: list[Mail] = []
    for n in range(THREADS):
        domain, company, _tier, _manager, contact = customers[n % len(customers)]
        writer = _Writer(contact, company, domain, zone_of[domain], replies_to.get(domain, ""))
        order, other, wrong = numbers[3 * n : 3 * n + 3]
        stated = wrong if n in corrected else order
        body = texts.first_body(
            rng, category=kinds[n], order=stated, contact=contact, company=company,
            domain=domain, category_trap=category_traps[n], other=other,
            order_trap=order_traps[n])
        start = when.first - timedelta(hours=rng.randint(1, 40),
                                       minutes=rng.choice((0, 7, 23, 41, 52)))
        encoding, html = _style(rng)
        thread = [Mail(ids(), writer.sender, start.astimezone(writer.zone),
                       rng.choice(SUBJECTS[kinds[n]]), body, reply_to=writer.reply_to,
                       encoding=encoding, html=html,
                       meaning=Meaning(category=kinds[n], order=stated))]
        shape = shapes[n]

        def after(low: int, high: int, to: tzinfo = writer.zone,
                  chain: list[Mail] = thread) -> datetime:
            """Some minutes after the thread's latest message, in the zone ``to``."""
            return (chain[-1].sent + timedelta(minutes=rng.randint(low, high))).astimezone(to)

        if n in corrected:
            text = rng.choice(texts.CORRECTIONS).format(new=order, old=wrong)
            thread.append(_reply(thread, writer, after(5, 50), text, ids(), rng,
                                 style=_style(rng), meaning=Meaning(order=order)))
        if shape in ("answered", "chased", "chased_twice", "resolved", "quoted", "auto"):
            text = texts.STAFF_FIX if shape == "quoted" else rng.choice(texts.STAFF_REPLIES)
            thread.append(_staff(thread, rng.choice(STAFF[:2]), after(60, 240, OFFICE), text,
                                 ids(), rng))
        if shape in ("chased", "chased_twice", "nudged"):
            subject = "Still not fixed" if rng.random() < 0.3 else ""
            thread.append(_reply(thread, writer, after(60, 180), rng.choice(texts.FOLLOW_UPS),
                                 ids(), rng, subject=subject, style=_style(rng)))
        if shape == "chased_twice":
            thread.append(_reply(thread, writer, after(60, 180),
                                 rng.choice(texts.SECOND_CHASES), ids(), rng, style=_style(rng)))
        if shape == "resolved":
            thread.append(_reply(thread, writer, after(20, 120), rng.choice(texts.CLOSINGS),
                                 ids(), rng, style=_style(rng), meaning=Meaning(closes=True)))
        if shape == "quoted":
            thread.append(_reply(thread, writer, after(20, 120), texts.NOT_FIXED, ids(), rng,
                                 style=("quoted-printable", False)))
        if shape == "auto":
            thread.append(_reply(thread, writer, after(1, 30), texts.OUT_OF_OFFICE, ids(), rng,
                                 subject=f"Automatic reply: {thread[0].subject}", auto=True))
        overshoot = thread[-1].sent - (when.first - timedelta(minutes=20))
        if overshoot > timedelta(0):  # everything sent before the export
            thread = [replace(m, sent=m.sent - overshoot - timedelta(hours=1)) for m in thread]
        mails += thread
    for n, (sender, subject, text) in enumerate(NEWSLETTERS):
        sent = when.first - timedelta(hours=10 + 17 * n)
        mails.append(Mail(ids(), sender, sent, subject, text, newsletter=True, html=True))
    exported = mails + [rng.choice(mails[:-3]) for _ in range(2)]  # two exported twice
    rng.shuffle(exported)
    return exported


def later_inbox(
    mails: Sequence[Mail], when: Clock, contacts: bytes, upgraded: str, params: FamilyParams
) -> list[Mail]:
    """The afternoon's export: a waiting thread closed by its customer, one chased again,
    one whose order the customer corrects, one answered by a colleague, an auto-reply on an
    answered thread, a new thread."""
    rng = params.rng("hard-later")
    ids = _Ids(rng, rng.randint(90000, 99000))
    threads = hard_triage(mbox(mails), contacts, when.first, when.closed, truth_of(mails))
    by_id = {m.id: m for m in mails}
    spare = sorted(r for r, t in threads.items() if t.reply_needed and t.domain != upgraded)
    rng.shuffle(spare)
    single = [r for r in spare if len(threads[r].references) == 1]
    chased = single[0] if single else spare[0]
    uncorrected = [r for r in spare if r != chased and by_id[r].meaning.order == threads[r].order]
    corrected = uncorrected[0]
    closed, answered = [r for r in spare if r not in (chased, corrected)][:2]
    new: list[Mail] = []
    # four messages and an auto-reply between the two exports, the last by 14:35 when the
    # later export is taken at 15:00: an export holds nothing sent after it was taken
    stamp = when.first + timedelta(minutes=30)
    numbers = iter(f"NW-{n}" for n in rng.sample(range(10000, 99999), 4))
    for root, kind in ((closed, "closed"), (chased, "chased"), (corrected, "corrected"),
                       (answered, "answered")):
        chain = [by_id[i] for i in threads[root].references]
        customer = chain[0]
        writer = _Writer(customer.sender.split(" <")[0], threads[root].company,
                         threads[root].domain, customer.sent.tzinfo or OFFICE,
                         customer.reply_to)
        stamp += timedelta(minutes=rng.randint(10, 30))
        if kind == "answered":
            new.append(_staff(chain, STAFF[2], stamp, rng.choice(texts.STAFF_REPLIES), ids(),
                              rng))
            continue
        meaning, style = Meaning(), ("7bit", False)
        if kind == "closed":
            text, meaning, style = rng.choice(texts.CLOSINGS), Meaning(closes=True), (
                "base64", False)
        elif kind == "chased":
            text = rng.choice(texts.SECOND_CHASES)
        else:
            right = next(numbers)
            text = rng.choice(texts.CORRECTIONS).format(new=right, old=threads[root].order)
            meaning = Meaning(order=right)
        new.append(_reply(chain, writer, stamp.astimezone(writer.zone), text, ids(), rng,
                          style=style, meaning=meaning))
    quiet = sorted(r for r, t in threads.items() if not t.reply_needed and
                   t.category != "newsletter" and t.last != r)
    if quiet:
        chain = [by_id[i] for i in threads[rng.choice(quiet)].references]
        writer = _Writer(chain[0].sender.split(" <")[0], "", "", OFFICE)
        new.append(_reply(chain, writer, stamp + timedelta(minutes=5), texts.OUT_OF_OFFICE,
                          ids(), rng, sender=chain[0].sender,
                          subject=f"Automatic reply: {chain[0].subject}", auto=True))
    domain, company, _t, _m, contact = next(c for c in CUSTOMERS if c[2] == "standard"
                                            and c[0] != upgraded)
    category = rng.choice(texts.CATEGORIES)
    order, other = next(numbers), next(numbers)
    body = texts.first_body(rng, category=category, order=order, contact=contact,
                            company=company, domain=domain, category_trap="forwarded",
                            other=other, order_trap="")
    new.append(Mail(ids(), f"{contact} <{contact.split()[0].lower()}@{domain}>",
                    when.later - timedelta(minutes=35), rng.choice(SUBJECTS[category]), body,
                    encoding="base64", meaning=Meaning(category=category, order=order)))
    exported = [*mails, *new]
    rng.shuffle(exported)
    return exported


def _contact_rows() -> list[dict[str, object]]:
    return [
        {"domain": d, "company": c, "tier": t, "account_manager": m,
         "updated": f"2026-01-{5 + 2 * n:02d}"}
        for n, (d, c, t, m, _contact) in enumerate(CUSTOMERS)
    ]


CONTACT_COLUMNS = ["domain", "company", "tier", "account_manager", "updated"]


def contacts_csv(conflicting: str, upgraded: str | None = None) -> bytes:
    """The customers; ``conflicting`` a second time in an older row with the other tier and
    manager, last in the file; ``upgraded`` (the later export) a second time too: a newer
    gold row with a new manager, after everything."""
    rows = _contact_rows()
    held = next(r for r in rows if r["domain"] == conflicting)
    stale = {**held, "tier": "standard" if held["tier"] == "gold" else "gold",
             "account_manager": next(m for m in MANAGERS if m != held["account_manager"]),
             "updated": "2025-06-30"}
    rows.append(stale)
    if upgraded is not None:
        old = next(r for r in rows if r["domain"] == upgraded)
        rows.append({**old, "tier": "gold", "updated": "2026-03-02",
                     "account_manager": next(m for m in MANAGERS
                                             if m != old["account_manager"])})
    return write_csv(rows, CONTACT_COLUMNS)


def rota_csv(when: Clock, params: FamilyParams) -> bytes:
    rng = params.rng("hard-rota")
    rows: list[dict[str, object]] = []
    day = when.first.date() - timedelta(days=14)
    while day <= when.first.date() + timedelta(days=14):
        if day.weekday() < 5 and day != when.closed:
            early, late, lead = rng.sample(STAFF, 3)
            rows.append({"date": day.isoformat(), "early": early, "late": late, "lead": lead})
        day += timedelta(days=1)
    return write_csv(rows, ["date", "early", "late", "lead"])


def _pick(threads: Mapping[str, Thread], tier: str, rng: random.Random) -> str:
    """A domain of ``tier`` with a waiting thread, drawn by ``rng``."""
    domains = sorted({t.domain for t in threads.values() if t.reply_needed and t.tier == tier})
    return rng.choice(domains or sorted(c[0] for c in CUSTOMERS if c[2] == tier))


@dataclass(frozen=True)
class HardDraft:
    workspace: dict[str, bytes]
    turns: list[UserTurn]
    instruction: str
    solve_sh: str
    user: UserState
    queue_from: int  # the turn from which the queue and the Cc are asked for
    truth: dict[str, Meaning]  # what every message means, by Message-ID (never shown)


def draft_hard(params: FamilyParams) -> HardDraft:
    when = clock(params)
    mails = first_inbox(params, when)
    plain = write_csv(_contact_rows(), CONTACT_COLUMNS)
    first = hard_triage(mbox(mails), plain, when.first, when.closed, truth_of(mails))
    kinds = ["requirement_changed", "input_replaced"][: params.turns - 1]
    queue_from = 1 + kinds.index("requirement_changed") if "requirement_changed" in kinds else NEVER
    export_from = 1 + kinds.index("input_replaced") if "input_replaced" in kinds else NEVER
    picks = params.rng("hard-picks")
    upgraded = _pick(first, "standard", picks)
    later = later_inbox(mails, when, plain, upgraded, params)
    truth = truth_of(later)  # the later export holds every message of the first
    final = hard_triage(mbox(later), plain, when.later, when.closed, truth) \
        if export_from != NEVER else first
    # a gold customer that waits at the start and at the end: its stale row moves a
    # priority, a due time and the Cc of a draft in every turn
    waiting_gold = {t.domain for t in first.values() if t.reply_needed and t.tier == "gold"}
    both = {r: t for r, t in final.items() if t.domain in waiting_gold}
    conflicting = _pick(both if any(t.reply_needed for t in both.values()) else final, "gold",
                        picks)
    contacts = contacts_csv(conflicting)
    turns: list[UserTurn] = []
    for index, kind in enumerate(kinds, start=1):
        if kind == "requirement_changed":
            turns.append(requirement_turn(index, _HANDOVER, [QUEUE, DRAFTS]))
        else:
            turns.append(input_turn(
                index, after_reply(index),
                f"It is {when.later:%H:%M} now and I have put this afternoon's exports in "
                f"place: `{INBOX}` from our mail server and `{CONTACTS}` from the CRM, both "
                f"taken at {when.later:%H:%M} office time. Please bring "
                + ("everything you produced" if queue_from < index else f"`{TRIAGE}` and "
                   f"`{DRAFTS}`")
                + " up to date against them.",
                {INBOX: mbox(later), CONTACTS: contacts_csv(conflicting, upgraded)},
                reason="the afternoon's exports of the inbox and the CRM",
                invalidates=[TRIAGE, DRAFTS, QUEUE],
            ))
    workspace = {INBOX: mbox(mails), CONTACTS: contacts, POLICY: policy(when).encode(),
                 ROTA: rota_csv(when, params)}
    solve = SOLVE.replace("__FIRST_EXPORT__", when.first.isoformat())
    solve = solve.replace("__LATER_EXPORT__", when.later.isoformat())
    solve = solve.replace("__CLOSED__", when.closed.isoformat())
    solve = solve.replace("__QUEUE_FROM_TURN__", str(queue_from))
    solve = solve.replace("__EXPORT_FROM_TURN__", str(export_from))
    solve = solve.replace("__TRUTH__", json.dumps(
        {mid: [m.category, m.order, m.closes] for mid, m in sorted(truth.items())}))
    return HardDraft(workspace, turns, instruction(when, queue=queue_from != NEVER), solve,
                     user(), queue_from, truth)


def final_export(params: FamilyParams) -> tuple[datetime, date]:
    """The export time the final inputs were taken at, and the closed day."""
    when = clock(params)
    return (when.later if params.turns >= 3 else when.first), when.closed


# ---- texts --------------------------------------------------------------------------------


_HANDOVER = (
    "Thanks. Two things for the shift handover. First, please write `queue.csv` from your "
    "triage, as the policy's \"Handover queue\" section describes, with `rota.csv`. Second, "
    "the account managers want to see what we tell their gold customers: from now on every "
    "reply draft to a thread whose customer is gold must have that customer's account "
    f"manager (from `{CONTACTS}`) in `Cc`; other drafts have no Cc. Please update the drafts."
)


def policy(when: Clock) -> str:
    return f"""\
# Support inbox triage policy

## Threads
Messages belong to one thread when they are linked by `In-Reply-To` / `References`
headers, whatever their subjects say. A thread is named by the `Message-ID` of its first
message (the one the others refer back to). A message that appears twice counts once.
Automatic replies (messages with an `Auto-Submitted` header whose value is not `no`) are
ignored entirely: they count as no message of the thread for any rule below, and a reply
does not reference them. A message's text is its `text/plain` part, decoded.

## Category (what the customer asks of us in the thread's first message)
Read what the customer wants from us now; every first message asks one thing, stated
plainly. Words alone do not decide it: a category the customer says the message is *not*
about, something that happened before and is mentioned in passing, an older mail forwarded
below the new question, and a signature do not count.
- `newsletter`: the message has a `List-Unsubscribe` header;
- `security`: they report a suspected compromise: a phishing mail someone fell for, sign-ins
  or accounts they do not recognise, a stolen device, data shared or taken by someone else;
- `incident`: something we run or support for them is not working now;
- `refund`: they want money back (a refund, a charge paid back, a credit of what they paid);
- `billing`: a question about, or a correction of, an invoice or a payment, without asking
  for money back;
- `request`: they ask for a change or something new (accounts, access, set-up, a visit).

## Order
Every customer's first message names the order its concern is about (`NW-` and five
digits). When the customer corrects that number in a later message of the thread, the
corrected number is the thread's order. Other numbers (an earlier order mentioned in passing,
a customer account in a signature, a forwarded older mail's order) are not.

## Waiting for a reply
A thread waits for a reply unless it is a newsletter, its latest message was sent by
us ({US}), or in its latest message the customer tells us
they need nothing more from us on this matter (it works again, they sorted it out, we may
close it). Quoted lines (starting with `>`, below "… wrote:") repeat an earlier message
and do not count; a customer who asks whether it is resolved, or says it is still not
fixed, still waits.

## Priority
Only threads waiting for a reply have one; the others have priority `none`.
- `P1`: a security thread (any customer), or an incident from a gold customer;
- `P2`: an incident from a standard customer, or a refund, billing or request thread from
  a gold customer;
- `P3`: every other waiting thread.
A customer's tier comes from `contacts.csv` by the domain of the first message's sender;
a domain not listed there is a standard customer.

A customer who has written two messages or more since our latest message in the thread
(since its start, if we have not written) has chased us: the thread's priority goes up one
level (`P3` to `P2`, `P2` to `P1`; `P1` stays).

## Service hours
We answer Monday to Friday, 08:00 to 18:00 office time (UTC+01:00). The office is closed on
{when.closed.isoformat()} ({CLOSED_REASON}); a closed day has no service hours.

## Response targets
A waiting thread started waiting at the first customer message since our latest message in
the thread (its first message, if we have not written). It is due a reply this many
business hours later; business hours are our service hours, counted Monday to Friday,
{OUTDATED_HOURS} office time:
- `P1`: {TARGET_HOURS["P1"]} hours; `P2`: {TARGET_HOURS["P2"]} hours; `P3`: \
{TARGET_HOURS["P3"]} hours.
Counting starts when the thread started waiting, or at the next opening time if that was
outside business hours; a due time that falls on closing time stays on that day. A thread is
breached when its due time is before the time the export was taken.

## Replies
Address a reply to the `Reply-To` address of the thread's latest message when it has one,
otherwise to its sender.

## Handover queue
`queue.csv` has the columns `thread,company,priority,due,assignee`, one row per thread
waiting for a reply, ordered by `due` (earliest first), then by `thread`. `thread` is the
thread's name, `company` comes from `contacts.csv`, `priority` and `due` are those of the
triage. `assignee`: a breached thread goes to the `lead` in `rota.csv` on the day the export
was taken; any other thread to the person in `rota.csv` on the shift in which it falls due:
`early` from 08:00 until before 13:00, `late` from 13:00 to 18:00 (both included), office
time: a thread due at exactly 13:00 is the late shift's.
"""


def instruction(when: Clock, *, queue: bool) -> str:
    later = (
        f"\n`{ROTA}` is our shift rota: it is for the handover queue, `{QUEUE}`, which I\n"
        "will ask for later; do not write it yet.\n" if queue else "\n"
    )
    return f"""\
Please triage our support inbox. The export is `{INBOX}` (an mbox file, taken at
{when.first:%Y-%m-%d %H:%M} office time, UTC+01:00), our customers and their tiers are
in `{CONTACTS}`, and the rules are in `{POLICY}`: follow them exactly. A thread's
latest message is the one sent last by its `Date` header (time zones included), not the
one last in the file.

Create:
1. `{TRIAGE}`: {{"threads": {{"<Message-ID of the thread's first message>": {{"category":
   …, "order": "NW-…" or null (a newsletter), "priority": "P1"|"P2"|"P3"|"none",
   "reply_needed": true|false, "due": "YYYY-MM-DDTHH:MM:SSZ" or null, "breached":
   true|false}}, …}}}}, one entry per thread,
   the key written exactly as the `Message-ID` header (angle brackets included); `due` is
   the time a reply is due by the policy's response targets, in UTC, null for a thread
   that waits for nothing (whose `breached` is false).
2. `{DRAFTS}`: our drafts folder, an mbox file holding one reply draft per thread waiting
   for a reply: `From: {US}`, `To:` the address the policy says to
   reply to, `Subject:` "Re: " and the first message's subject (no second "Re:"),
   `In-Reply-To:` the latest message's `Message-ID`, and `References:` every message of
   the thread, oldest first. No drafts for other threads.
{later}
Do not modify `{INBOX}`, `{CONTACTS}`, `{POLICY}` or `{ROTA}`. If our files
contradict each other, or a file contradicts itself, in a way the policy does not settle,
ask me which to trust before you decide.
"""


def user() -> UserState:
    return UserState(
        persona="Support lead at a small IT services firm who reviews the drafts and the "
        "handover queue before the shift changes.",
        role="manager",
        latent_goals=[
            "No customer waiting for an answer may be missed, nobody gets a reply twice, and "
            "the next shift knows exactly who owes which reply by when."
        ],
        knowledge_boundary=[
            "does not know how the mail client threads messages",
            "does not know how the mail server took the exports, message by message",
        ],
        # A scripted answer goes to every signal whose subject shares two content words with
        # the question, so a trigger holds only its subject's own words: no numbers (a date
        # such as 2026-01-09 or a time such as 15:00 in any question would bring in "09" or
        # "00") and no everyday words ("count", "time", "use") that questions on other
        # subjects say too.
        signal_plan=[
            Signal(
                trigger="agent asks which time zone",
                reveals="the office is on UTC+01:00",
            ),
            Signal(
                # "alderbank.example is listed twice in contacts.csv, in two rows: which?"
                trigger="agent asks about duplicate or conflicting contacts rows or entries "
                "listed twice: gold or standard",
                reveals="when a domain has more than one row in contacts.csv, the row with "
                "the latest `updated` date is current; older rows are history",
            ),
            Signal(
                # "the policy gives 08:00-18:00 as service hours but 09:00-17:00 for targets"
                trigger="agent asks which business hours or service hours the response targets "
                "apply: opening and closing hours",
                reveals="we answer from 08:00 to 18:00 on weekdays since January; the "
                "response targets count those hours",
            ),
        ],
    )


__all__ = [
    "CHECK_QUEUE",
    "QUEUE",
    "ROTA",
    "HardDraft",
    "Meaning",
    "Thread",
    "business_due",
    "draft_hard",
    "expected_queue",
    "final_export",
    "hard_triage",
    "queue_rows",
    "readings",
    "thread_messages",
    "truth_of",
]

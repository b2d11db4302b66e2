"""Triage of a shared support inbox (an mbox) into a thread table (JSON) and reply drafts
(an mbox drafts folder), by a written policy.

Grounded in an inbox this family writes itself (CC0): customers of a small IT services
firm report incidents, ask for changes and query invoices; a vendor newsletter mentions an
outage; the firm's own staff have answered some threads. The agent must thread the
messages by their headers (not their subjects), classify each thread by the policy's
precedence, set its priority from the customer's tier (``contacts.csv``), and draft a reply
to exactly the threads still waiting for one — on the latest message, by the time it was
sent. The medium variant sends from several time zones (a wall-clock comparison picks the
wrong latest message) and closes threads with a customer's "resolved".

Later user turns either replace the mbox with a later export (a thread resolved, a new
incident) or add a requirement: replies to gold customers copy their account manager.

The ``hard`` tier is its own design (``inbox_triage_hard``, which says why it is hard): an
inbox too large to see at once whose category, order and closing are decided by what the
customers mean (not by keywords), response targets in business hours, a handover queue
built on the triage, contradictions settled only by asking, and later exports that change
what only re-reading shows.
"""

from __future__ import annotations

import email
import email.policy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime, parsedate_to_datetime

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, TurnPatch, UserState
from ..verifier.spec import Component, CustomScript, VerifierSpec
from . import inbox_triage_hard as hard_tier
from .base import Trap
from .common import (
    CHECK_PRELUDE,
    NEVER,
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    expectations,
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
    verifier_output,
    when_delivered,
    write_csv,
)
from .inbox_triage_hard import Mail  # one message; the hard tier's extra fields stay off here

INBOX, CONTACTS, POLICY = "inbox.mbox", "contacts.csv", "triage_policy.md"
TRIAGE, DRAFTS = "triage.json", "drafts.mbox"
EXPECTED = "expected_replies.json"
US = "support@northwind-it.example"
STAFF = ("Mara Quist <support@northwind-it.example>", "Jon Bell <support@northwind-it.example>")
CUSTOMERS = (  # domain, company, tier, account manager, contact
    ("alderbank.example", "Alder Bank", "gold", "lena.vogt@northwind-it.example", "Priya Nair"),
    ("brightlaw.example", "Bright & Co Law", "standard", "omar.haddad@northwind-it.example",
     "Tom Reyes"),
    ("cedarclinic.example", "Cedar Clinic", "gold", "omar.haddad@northwind-it.example",
     "Ines Moreau"),
    ("dunmore.example", "Dunmore Freight", "standard", "lena.vogt@northwind-it.example",
     "Kwame Asante"),
    ("elmgrove.example", "Elmgrove Schools", "gold", "lena.vogt@northwind-it.example",
     "Sofia Rossi"),
    ("fernway.example", "Fernway Hotels", "standard", "omar.haddad@northwind-it.example",
     "Ravi Menon"),
)
NEWSLETTER = ("Cloud Weekly <news@cloudweekly.example>", "Cloud Weekly: the outage that wasn't")
# Each category's opening message: (subject, body); no keyword of a higher category appears
# unless the trap is meant (``TRAPS``).
OPENERS = {
    "incident": (
        ("Portal unavailable", "Since 8:00 the customer portal shows an error page for all "
         "of our staff. Could you look into it?"),
        ("VPN drops every few minutes", "Our VPN connection has been down repeatedly this "
         "morning; remote staff cannot work."),
        ("Mail server outage?", "We are seeing an outage on outbound mail: messages queue "
         "and never leave."),
    ),
    "billing": (
        ("Question about last month", "The invoice for February lists two licences we "
         "cancelled in January. Can you check?"),
        ("Payment reference", "We made the payment on Friday but forgot the reference; "
         "please match it to our account."),
    ),
    "request": (
        ("New starters on Monday", "Please set up accounts for two new starters joining on "
         "Monday, with the standard laptop image."),
        ("Printer on the second floor", "Could you add the new second-floor printer to "
         "everyone's machines this week?"),
        ("Shared mailbox", "Please create a shared mailbox for our reception team."),
    ),
}
FOLLOW_UPS = (
    "Any news on this? It is still affecting us.",
    "Adding a screenshot from this morning, in case it helps.",
)
RESOLVED = "Never mind — it works again on our side. Resolved, thanks."
STAFF_REPLY = "Thanks, we are on it and will update you shortly."
SIZES = {"easy": 4, "medium": 6}  # threads, the newsletter included (hard: its own module)
ZONES = (UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-5)),
         timezone(timedelta(hours=-8)), timezone(timedelta(hours=5, minutes=30)))
PRIORITY_FOR = {  # (category, tier) → priority of a thread that waits for a reply
    ("incident", "gold"): "P1",
    ("incident", "standard"): "P2",
    ("billing", "gold"): "P2",
    ("request", "gold"): "P2",
}

SOLVE = python_solution(
    "thread the mbox, triage each thread by the policy and draft the replies.",
    r"""import csv, json, mailbox, os, re
from email.utils import parsedate_to_datetime, getaddresses
from email.message import EmailMessage

turn = int(os.environ.get("COWORK_TURN", "0"))
cc_managers = turn >= int(os.environ["CC_FROM_TURN"])
US = "support@northwind-it.example"
contacts = {}
for r in csv.DictReader(open("contacts.csv", newline="")):
    # the user, asked about a domain in two rows: the row updated last is current
    if r["domain"] not in contacts or r.get("updated", "") >= contacts[r["domain"]].get(
            "updated", ""):
        contacts[r["domain"]] = r

messages = {}
for m in mailbox.mbox("inbox.mbox"):
    messages.setdefault(m["Message-ID"].strip(), m)
parent = {}
for mid, m in messages.items():
    refs = (m["References"] or "").split() or (m["In-Reply-To"] or "").split()
    parent[mid] = refs[0] if refs else mid
def root(mid):
    while parent.get(mid, mid) != mid and parent[mid] in messages:
        mid = parent[mid]
    return mid
threads = {}
for mid in messages:
    threads.setdefault(root(mid), []).append(messages[mid])

def text(m):
    body = m.get_payload(decode=True) or b""
    return (m["Subject"] or "") + "\n" + body.decode("utf-8", "replace")

result = {}
if os.path.exists("drafts.mbox"):
    os.remove("drafts.mbox")
drafts = mailbox.mbox("drafts.mbox")
for rid, msgs in sorted(threads.items()):
    msgs.sort(key=lambda m: parsedate_to_datetime(m["Date"]))
    first, last = msgs[0], msgs[-1]
    words = text(first).lower()
    if first["List-Unsubscribe"]:
        category = "newsletter"
    elif re.search(r"\b(error|down|outage)\b", words):
        category = "incident"
    elif re.search(r"\b(invoice|payment|refund)\b", words):
        category = "billing"
    else:
        category = "request"
    sender = getaddresses([first["From"]])[0][1]
    contact = contacts.get(sender.split("@")[1], {})
    tier = contact.get("tier", "standard")
    last_from = getaddresses([last["From"]])[0][1]
    resolved = re.search(r"\bresolved\b", text(last).lower().split("\n", 1)[1]) is not None
    needs = category != "newsletter" and last_from != US and not resolved
    if not needs:
        priority = "none"
    elif category == "incident":
        priority = "P1" if tier == "gold" else "P2"
    else:
        priority = "P2" if tier == "gold" else "P3"
    result[rid] = {"category": category, "priority": priority, "reply_needed": needs}
    if needs:
        reply = EmailMessage()
        reply["From"] = US
        reply["To"] = last["Reply-To"] or last["From"]
        if cc_managers and tier == "gold":
            reply["Cc"] = contact["account_manager"]
        subject = first["Subject"]
        reply["Subject"] = subject if subject.lower().startswith("re:") else "Re: " + subject
        reply["In-Reply-To"] = last["Message-ID"]
        reply["References"] = " ".join(m["Message-ID"] for m in msgs)
        reply.set_content("Hello,\n\nThank you for your message; we are looking into it.\n")
        drafts.add(reply)
drafts.flush()

json.dump({"threads": result}, open("triage.json", "w"), indent=2)
""",
    "CC_FROM_TURN",
)


@dataclass
class Inbox:
    mails: list[Mail] = field(default_factory=list)
    shuffled: bool = False

    def mbox(self) -> bytes:
        order = self.mails if self.shuffled else sorted(self.mails, key=lambda m: m.sent)
        return b"".join(_mbox_entry(m) for m in order)


def _mbox_entry(mail: Mail) -> bytes:
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = mail.sender
    message["To"] = US if not mail.newsletter else "it-team@northwind-it.example"
    message["Subject"] = mail.subject
    message["Date"] = format_datetime(mail.sent)
    message["Message-ID"] = mail.id
    if mail.in_reply_to:
        message["In-Reply-To"] = mail.in_reply_to
        message["References"] = " ".join(mail.references)
    if mail.newsletter:
        message["List-Unsubscribe"] = "<mailto:leave@cloudweekly.example>"
    message.set_content(mail.body)
    return mbox_record(message, mail.sender, mail.sent)


def mbox_record(message: EmailMessage, sender: str, sent: datetime) -> bytes:
    """One mbox entry, as ``parse_mbox`` reads it back: the envelope's ``From`` line (the
    sender's address, the time in UTC), the message with LF line ends and its own lines
    starting "From " quoted, then a blank line."""
    address = email.utils.parseaddr(sender)[1]
    envelope = sent.astimezone(UTC).strftime("%a %b %d %H:%M:%S %Y")
    text = message.as_bytes().replace(b"\r\n", b"\n")
    text = b"\n".join(b">" + line if line.startswith(b"From ") else line
                      for line in text.split(b"\n"))
    return f"From {address} {envelope}\n".encode() + text.rstrip(b"\n") + b"\n\n"


# ---- the policy, as the verifier applies it -------------------------------------------------


@dataclass(frozen=True)
class Thread:
    root: str
    category: str
    priority: str
    reply_needed: bool
    last: str  # the latest message's Message-ID
    reply_to: str  # its sender's address
    references: tuple[str, ...]  # every message of the thread, by time
    subject: str  # of the reply
    tier: str
    manager: str


def parse_mbox(data: bytes) -> list[email.message.Message]:
    chunks, current = [], []  # type: ignore[var-annotated]
    for line in data.split(b"\n"):
        if line.startswith(b"From ") and (not current or current[-1] == b""):
            if current:
                chunks.append(current)
            current = []
            continue
        current.append(line[1:] if line.startswith(b">From ") else line)
    if current:
        chunks.append(current)
    return [email.message_from_bytes(b"\n".join(c)) for c in chunks]


def triage(inbox: bytes, contacts: bytes, *, by_time: bool = True) -> dict[str, Thread]:
    """Threads by root Message-ID, each triaged by the policy; ``by_time=False`` takes the
    latest message to be the last in the file (a reading the policy rules out)."""
    accounts = current_accounts(contacts)
    messages: dict[str, tuple[int, email.message.Message]] = {}
    for position, message in enumerate(parse_mbox(inbox)):
        messages.setdefault(str(message["Message-ID"]).strip(), (position, message))
    threads: dict[str, list[tuple[int, email.message.Message]]] = {}
    for mid, (position, message) in messages.items():
        refs = str(message.get("References", "") or message.get("In-Reply-To", "")).split()
        root = refs[0] if refs and refs[0] in messages else mid
        threads.setdefault(root, []).append((position, message))
    out = {}
    for root, items in threads.items():
        items.sort(key=lambda pm: parsedate_to_datetime(str(pm[1]["Date"])))
        first = items[0][1]
        last = (max(items, key=lambda pm: pm[0]) if not by_time else items[-1])[1]
        category = _category(first)
        sender = email.utils.parseaddr(str(first["From"]))[1]
        account = accounts.get(sender.split("@")[1], {})
        tier = account.get("tier", "standard")
        last_from = email.utils.parseaddr(str(last["From"]))[1]
        resolved = "resolved" in _words(_body(last))
        needed = category != "newsletter" and last_from != US and not resolved
        priority = "none"
        if needed:
            priority = PRIORITY_FOR.get((category, tier), "P3")
        subject = str(first["Subject"])
        out[root] = Thread(
            root=root,
            category=category,
            priority=priority,
            reply_needed=needed,
            last=str(last["Message-ID"]).strip(),
            reply_to=last_from,
            references=tuple(str(m["Message-ID"]).strip() for _p, m in items),
            subject=subject if subject.lower().startswith("re:") else f"Re: {subject}",
            tier=tier,
            manager=account.get("account_manager", ""),
        )
    return out


def current_accounts(contacts: bytes) -> dict[str, dict[str, str]]:
    """Each domain's current row: the one updated last (the user's answer, hard); without
    an ``updated`` column, the last row."""
    accounts: dict[str, dict[str, str]] = {}
    for row in parse_csv(contacts):
        held = accounts.get(row["domain"])
        if held is None or row.get("updated", "") >= held.get("updated", ""):
            accounts[row["domain"]] = row
    return accounts


def _body(message: email.message.Message) -> str:
    payload = message.get_payload(decode=True)
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""


def _words(text: str) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in text.lower()).split())


def _category(first: email.message.Message) -> str:
    words = _words(f"{first['Subject']} {_body(first)}")
    if first.get("List-Unsubscribe"):
        return "newsletter"
    if words & {"error", "down", "outage"}:
        return "incident"
    if words & {"invoice", "payment", "refund"}:
        return "billing"
    return "request"


# ---- the family -----------------------------------------------------------------------------


class InboxTriage(TaskFamily):
    name = "inbox_triage"
    scenarios = (
        "office_productivity/email/inbox_triage",
        "office_productivity/email/reply_drafting",
        "customer_support/tickets/triage",
    )
    capabilities = (
        "classification",
        "communication",
        "information_extraction",
        "requirement_tracking",
        "dependency_tracking",
    )
    # with 3 turns both later turns come: the Cc requirement and the later export
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("json",)  # the drafts folder is an mbox, a format the taxonomy lacks
    modalities = ("text", "tabular")
    safety = ("external_communication",)
    traps = (
        Trap(
            "sender_time_zones",
            "messages are sent from several time zones: the latest is by the instant sent, "
            "not the wall-clock time",
            (
                r"\boffsets?\b",
                r"wall[- ]clock",
                r"convert\w* [^.]*\bto (?:UTC|office time)",
                r"\btime zones? (?:differ|vary)",
            ),
        ),
        Trap(
            "stale_contact_row",
            "contacts.csv (hard) lists one customer twice, the last row stale",
            (r"\btwice\b", r"\bduplicat", r"more than once", r"\bstale\b", r"last row"),
        ),
        Trap(
            "business_hours_conflict",
            "the hard policy gives the service hours as 08:00-18:00 and, for the response "
            "targets, as 09:00-17:00",
            (r"09:00", r"17:00", r"\boutdated\b", r"\bconflict", r"\binconsisten",
             r"two (different )?(sets of )?(business |service |opening )?hours"),
        ),
        Trap(
            "quoted_resolved",
            "a customer's latest message quotes our line saying the issue should be "
            "resolved; a quoted line does not close the thread",
            (r"\bquot(e|ed|es|ing)\b", r"lines? starting with >"),
        ),
        Trap(
            "meaning_not_keywords",
            "(hard) a first message's category is what the customer asks now: a category "
            "denied, a past event, a forwarded older mail or a signature line does not count",
            (r"\bnot about\b", r"\bkeywords?\b", r"\bforwarded\b", r"\bin passing\b",
             r"\bsignatures?\b", r"\bfooters?\b"),
        ),
        Trap(
            "corrected_order",
            "(hard) a customer corrects the order number of the first message in a later one",
            (r"\bcorrect(s|ed|ion)\b[^.]*\b(order|number)", r"wrong (order )?number",
             r"\btypo\b", r"\bmistyped\b"),
        ),
        Trap(
            "encoded_bodies",
            "bodies in base64 and quoted-printable: a search of the raw file misses words",
            (r"base ?64", r"quoted-printable", r"\bencod\w*", r"\bdecod\w*"),
        ),
        Trap(
            "automatic_replies",
            "out-of-office replies arrive after our answer and are not the latest message",
            (r"auto(matic)?[- ]?(repl|submitted)", r"out[- ]of[- ](the )?office"),
        ),
    )

    def draft(self, params: FamilyParams) -> FamilyDraft:
        if params.difficulty == "hard":
            return _hard_draft(params)
        rng = params.rng("inbox")
        inbox, now = _inbox(params, rng)
        turn_kinds, cc_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        later = inbox
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                later, now = _later_export(later, now, params.rng(f"later{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(TRIAGE, index),
                        f"More mail came in since. I replaced {INBOX} with a fresh export of "
                        "the inbox; please redo the triage and the reply drafts against it.",
                        {INBOX: later.mbox()},
                        reason="later export of the inbox",
                        invalidates=[TRIAGE, DRAFTS],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "The account managers want to see what we tell their gold customers. "
                        "From now on, every reply draft to a thread whose customer is gold "
                        f"must have that customer's account manager (from {CONTACTS}) in `Cc`; "
                        "other replies have no Cc. Please update the drafts.",
                        [DRAFTS],
                    )
                )
        return FamilyDraft(
            slug=f"inbox-triage-{params.difficulty}-{params.seed}",
            title="Triage the support inbox and draft the replies",
            instruction=_instruction(),
            workspace={INBOX: inbox.mbox(), CONTACTS: _contacts(), POLICY: _policy().encode()},
            solve_sh=fill_template(SOLVE, cc_from_turn=cc_from),
            user=_user(),
            inputs=input_artifacts({INBOX: "other", CONTACTS: "csv", POLICY: "md"}),
            outputs=output_artifacts({TRIAGE: "json", DRAFTS: "other"}, [INBOX, CONTACTS]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        if params.difficulty == "hard":
            return _hard_verifier(built, params)
        inputs = built.final_inputs()
        threads = triage(inputs[INBOX], inputs[CONTACTS])
        cc = requirement_added(built)
        components: list[Component] = []
        for n, root in enumerate(sorted(threads), start=1):
            components += _thread_components(n, root, threads[root], "priority from the tier")
        components.append(_reply_drafts(threads))
        expected = _expected_replies(threads, cc)
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "inbox_unmodified",
                    "the inbox export, the contacts and the policy must not change",
                    inputs,
                )
            ],
            rubric=rubric(
                "replies_sendable",
                "Each reply draft is polite, addresses what the customer wrote and promises "
                "nothing the policy does not allow.",
                [DRAFTS],
            ),
        )
        private = {EXPECTED: expectations(expected), "check_replies.py": CHECK_REPLIES.encode()}
        return verifier_output(spec, inputs, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """Which message is a thread's latest: the last sent (by Date, offsets included) or
        the last in the file — they differ on a shuffled export."""
        if hard_tier.ROTA in inputs:
            return hard_tier.readings(inputs)
        by_time, by_file = _replies_needed(inputs, by_time=True), _replies_needed(inputs)
        return [
            Reading(
                component=f"thread_{n:02d}_reply_needed",
                subject="latest message",
                values={"by time": by_time[root], "by file order": by_file[root]},
                phrases={
                    "by time": r"latest message[^.]*\bby (its|the) `?Date",
                    "by file order": r"latest message is the (one|message) last in the file",
                },
            )
            for n, root in enumerate(sorted(by_time), start=1)
        ]


def _replies_needed(inputs: Mapping[str, bytes], *, by_time: bool = False) -> dict[str, bool]:
    """Whether each thread waits, its latest message taken by time or by file order."""
    easier = triage(inputs[INBOX], inputs[CONTACTS], by_time=by_time)
    return {root: t.reply_needed for root, t in easier.items()}


# ---- the hard tier (its design: inbox_triage_hard) ---------------------------------------


def _hard_draft(params: FamilyParams) -> FamilyDraft:
    drafted = hard_tier.draft_hard(params)
    outputs = {TRIAGE: "json", DRAFTS: "other"}
    if drafted.queue_from != NEVER:
        outputs[hard_tier.QUEUE] = "csv"
    return FamilyDraft(
        slug=f"inbox-triage-hard-{params.seed}",
        title="Triage the support inbox, draft the replies and hand the queue over",
        instruction=drafted.instruction,
        workspace=drafted.workspace,
        solve_sh=drafted.solve_sh,
        user=drafted.user,
        inputs=input_artifacts(
            {INBOX: "other", CONTACTS: "csv", POLICY: "md", hard_tier.ROTA: "csv"}
        ),
        outputs=output_artifacts(outputs, [INBOX, CONTACTS, POLICY, hard_tier.ROTA]),  # type: ignore[arg-type]
        turns=drafted.turns,
    )


def _thread_pointer(root: str) -> str:
    """The JSON pointer of a thread in triage.json (its root Message-ID, escaped)."""
    return f"/threads/{root.replace('~', '~0').replace('/', '~1')}"


def _thread_components(
    n: int, root: str, t: Thread | hard_tier.Thread, priority_requirement: str
) -> list[Component]:
    """The checks of a thread's category, priority and reply_needed, every tier's."""
    pointer = _thread_pointer(root)
    return [
        json_value(f"thread_{n:02d}_category", TRIAGE, f"{pointer}/category",
                   t.category, f"{root}: category by the policy's precedence"),
        json_value(f"thread_{n:02d}_priority", TRIAGE, f"{pointer}/priority",
                   t.priority, f"{root}: {priority_requirement}"),
        json_value(f"thread_{n:02d}_reply_needed", TRIAGE, f"{pointer}/reply_needed",
                   t.reply_needed, f"{root}: waits for a reply"),
    ]  # fmt: skip


def _reply_drafts(threads: Mapping[str, Thread | hard_tier.Thread]) -> Component:
    return Component(
        id="reply_drafts",
        weight=max(3, len(threads) // 2),
        check=CustomScript(script="check_replies.py"),
        requirement="one reply draft per waiting thread, on its latest message",
    )


def _expected_replies(
    threads: Mapping[str, Thread | hard_tier.Thread], cc_managers: bool
) -> dict[str, dict[str, object]]:
    """check_replies.py's expectations: per waiting thread's latest message, the reply's
    recipient, subject and references, and (``cc_managers``) a gold customer's manager."""
    return {
        t.last: {
            "to": t.reply_to,
            "subject": t.subject,
            "references": list(t.references),
            "cc": t.manager if cc_managers and t.tier == "gold" else "",
        }
        for t in threads.values()
        if t.reply_needed
    }


def _hard_verifier(built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
    """Every thread's fields (``due`` where it waits), every draft (with the Cc once asked
    for) and every row of the handover queue (once asked for), from the final inputs."""
    inputs = built.final_inputs()
    export, closed = hard_tier.final_export(params)
    truth = hard_tier.draft_hard(params).truth  # what the texts were written to mean
    threads = hard_tier.hard_triage(inputs[INBOX], inputs[CONTACTS], export, closed, truth)
    handover = requirement_added(built)
    components: list[Component] = []
    for n, root in enumerate(sorted(threads), start=1):
        t = threads[root]
        pointer = _thread_pointer(root)
        components += _thread_components(n, root, t, "priority from the tier, raised when chased")
        components += [
            json_value(f"thread_{n:02d}_breached", TRIAGE, f"{pointer}/breached",
                       t.breached, f"{root}: due before the export was taken"),
        ]
        if t.order is not None:  # a null expected value is no check the engine can run
            components.append(
                json_value(f"thread_{n:02d}_order", TRIAGE, f"{pointer}/order", t.order,
                           f"{root}: the order the customer means, as corrected")
            )
        if t.due is not None:
            components.append(
                json_value(f"thread_{n:02d}_due", TRIAGE, f"{pointer}/due", t.due,
                           f"{root}: due by the response targets in service hours")
            )
    components.append(_reply_drafts(threads))
    private = {
        EXPECTED: expectations(_expected_replies(threads, handover)),
        "check_replies.py": CHECK_REPLIES.encode(),
    }
    if handover:
        components.append(
            Component(
                id="handover_queue",
                weight=max(3, len(threads) // 2),
                check=CustomScript(script="check_queue.py"),
                requirement="the handover queue: waiting threads by due time, each assigned "
                "by the rota",
            )
        )
        rows = hard_tier.queue_rows(threads, inputs[hard_tier.ROTA], export)
        private["expected_queue.json"] = hard_tier.expected_queue(rows)
        private["check_queue.py"] = hard_tier.CHECK_QUEUE.encode()
    spec = VerifierSpec(
        components=components,
        red_lines=[
            inputs_unmodified(
                "inbox_unmodified",
                "the inbox export, the contacts, the policy and the rota must not change",
                inputs,
            )
        ],
        rubric=rubric(
            "replies_sendable",
            "Each reply draft is polite, addresses what the customer wrote and promises "
            "nothing the policy does not allow.",
            [DRAFTS],
        ),
    )
    return verifier_output(spec, inputs, private)


# ---- drafting -------------------------------------------------------------------------------


def _inbox(params: FamilyParams, rng: random.Random) -> tuple[Inbox, datetime]:
    count = SIZES[params.difficulty]
    now = datetime(2026, 3, rng.randint(9, 13), 12, 0, tzinfo=timezone(timedelta(hours=1)))
    customers = list(CUSTOMERS)
    rng.shuffle(customers)
    customers.sort(key=lambda c: c[2] != "gold")  # a gold customer first: one always waits
    kinds = ["incident", "billing", "request"] * 3
    rng.shuffle(kinds)
    mails: list[Mail] = []
    serial = rng.randint(1000, 8000)

    def mid() -> str:
        nonlocal serial
        serial += rng.randint(1, 9)
        return f"<{serial}.{rng.randint(100, 999)}@mail.example>"

    opened = set()
    for n in range(count - 1):
        domain, _company, _tier, _manager, contact = customers[n % len(customers)]
        kind = kinds[n]
        pool = OPENERS[kind]
        subject, body = pool[rng.randrange(len(pool))]
        while subject in opened:
            kind = rng.choice(sorted(OPENERS))
            subject, body = rng.choice(OPENERS[kind])
        opened.add(subject)
        zone = ZONES[rng.randrange(len(ZONES))] if params.difficulty != "easy" else ZONES[1]
        start = now - timedelta(hours=rng.randint(20, 70), minutes=rng.choice((0, 15, 40)))
        sender = f"{contact} <{contact.split()[0].lower()}@{domain}>"
        signed = f"Hello,\n\n{body}\n\n{contact}"
        root = Mail(mid(), sender, start.astimezone(zone), subject, signed)
        thread = [root]
        shapes = ("alone", "chased") if n == 0 else ("alone", "answered", "chased", "resolved")
        shape = rng.choice(shapes)
        if shape in ("answered", "chased", "resolved"):
            t = root.sent + timedelta(hours=rng.randint(1, 5))
            thread.append(_reply(thread, rng.choice(STAFF), t.astimezone(ZONES[1]),
                                 STAFF_REPLY, mid()))
        if shape in ("chased", "resolved"):
            # the customer writes 30 minutes after our reply, from their own zone: by the
            # wall clock it may look earlier than our reply
            t = thread[-1].sent + timedelta(minutes=30)
            text = RESOLVED if shape == "resolved" else rng.choice(FOLLOW_UPS)
            thread.append(_reply(thread, sender, t.astimezone(zone), text, mid()))
        mails += thread
    mails.append(
        Mail(mid(), NEWSLETTER[0], now - timedelta(hours=30), NEWSLETTER[1],
             "This week: a regional outage, an error budget primer, and a down-to-earth "
             "guide to invoices for cloud services.", newsletter=True)
    )
    return Inbox(mails), now


def _reply(
    thread: Sequence[Mail], sender: str, sent: datetime, body: str, new_id: str,
    subject: str | None = None,
) -> Mail:
    first = thread[0]
    return Mail(
        new_id,
        sender,
        sent,
        subject or f"Re: {first.subject}",
        f"Hello,\n\n{body}\n",
        in_reply_to=thread[-1].id,
        references=tuple(m.id for m in thread),
    )


def _later_export(inbox: Inbox, now: datetime, rng: random.Random) -> tuple[Inbox, datetime]:
    """Two new messages: a waiting thread is resolved, and a gold customer reports an
    incident."""
    later = now + timedelta(hours=5)
    threads = triage(inbox.mbox(), _contacts())
    waiting = sorted(r for r, t in threads.items() if t.reply_needed)
    by_id = {m.id: m for m in inbox.mails}
    new: list[Mail] = []
    serial = rng.randint(90000, 99000)
    if waiting:
        t = threads[rng.choice(waiting)]
        chain = [by_id[i] for i in t.references]
        last = chain[-1]
        sender = next(m.sender for m in chain if US not in m.sender)
        new.append(_reply(chain, sender, later.astimezone(last.sent.tzinfo), RESOLVED,
                          f"<{serial}.1@mail.example>"))
    gold = next(c for c in CUSTOMERS if c[2] == "gold")
    subject, body = OPENERS["incident"][rng.randrange(3)]
    contact = gold[4]
    new.append(
        Mail(f"<{serial}.2@mail.example>", f"{contact} <{contact.split()[0].lower()}@{gold[0]}>",
             later + timedelta(minutes=20), f"URGENT: {subject}",
             f"Hello,\n\n{body}\n\n{contact}")
    )
    return replace(inbox, mails=[*inbox.mails, *new]), later + timedelta(hours=1)


def _contacts() -> bytes:
    rows: list[dict[str, object]] = [
        {"domain": d, "company": c, "tier": t, "account_manager": m}
        for d, c, t, m, _contact in CUSTOMERS
    ]
    return write_csv(rows, ["domain", "company", "tier", "account_manager"])


def _user() -> UserState:
    signals = [
        Signal(
            trigger="agent asks which time zone the messages use",
            # how to read the headers is past this user's knowledge (the trap)
            reveals="the office is on UTC+01:00",
        )
    ]
    return UserState(
        persona="Support lead at a small IT services firm who reviews the drafts before "
        "they are sent.",
        role="manager",
        latent_goals=[
            "No customer waiting for an answer may be missed, and nobody gets a reply twice."
        ],
        knowledge_boundary=["does not know how the mail client threads messages"],
        signal_plan=signals,
    )


def _policy() -> str:
    return """\
# Support inbox triage policy

## Threads
Messages belong to one thread when they are linked by `In-Reply-To` / `References`
headers, whatever their subjects say. A thread is named by the `Message-ID` of its first
message (the one the others refer back to). A message that appears twice counts once.

## Category (from the thread's first message: its subject and body)
Apply the first rule that matches (whole words, any case):
1. `newsletter` — the message has a `List-Unsubscribe` header;
2. `incident` — it contains "error", "down" or "outage";
3. `billing` — it contains "invoice", "payment" or "refund";
4. `request` — anything else.

## Waiting for a reply
A thread waits for a reply unless it is a newsletter, its latest message was sent by us
(support@northwind-it.example), or the body of its latest message contains the word
"resolved".

## Priority
Only threads waiting for a reply have one; the others have priority `none`.
- `P1`: an incident from a gold customer;
- `P2`: an incident from a standard customer, or a billing or request thread from a gold
  customer;
- `P3`: every other waiting thread.
A customer's tier comes from `contacts.csv` by the domain of the first message's sender;
a domain not listed there is a standard customer.
"""


def _instruction() -> str:
    return f"""\
Please triage our support inbox. The export is `{INBOX}` (an mbox file), our customers and
their tiers are in `{CONTACTS}`, and the rules are in `{POLICY}` — follow them exactly.
A thread's latest message is the one sent last by its `Date` header (time zones
included), not the one last in the file.

Create:
1. `{TRIAGE}`: {{"threads": {{"<Message-ID of the thread's first message>": {{"category":
   …, "priority": "P1"|"P2"|"P3"|"none", "reply_needed": true|false}}, …}}}}, one entry
   per thread, the key written exactly as the `Message-ID` header (angle brackets
   included).
2. `{DRAFTS}`: our drafts folder, an mbox file holding one reply draft per thread waiting
   for a reply: `From: {US}`, `To:` the sender of the thread's latest message,
   `Subject:` "Re: " and the first message's subject (no second "Re:"), `In-Reply-To:` the
   latest message's `Message-ID`, and `References:` every message of the thread, oldest
   first. No drafts for other threads.

Do not modify `{INBOX}`, `{CONTACTS}` or `{POLICY}`.
"""


CHECK_REPLIES = (
    CHECK_PRELUDE
    + r'''
import mailbox
from email.utils import getaddresses

expected = json.loads((Path(__file__).parent / "expected_replies.json").read_text())
path = ws / "drafts.mbox"
if not path.is_file():
    report(0.0, "drafts.mbox is missing")
drafts = {}
try:
    for n, message in enumerate(mailbox.mbox(str(path), create=False), start=1):
        key = (message.get("In-Reply-To") or "").strip()
        drafts.setdefault(key, []).append((f"draft {n}", message))
except Exception as exc:  # a malformed mbox scores 0, it does not crash the verifier
    report(0.0, f"drafts.mbox does not parse: {exc!r}")

def addresses(value):
    return sorted(a.lower() for _n, a in getaddresses([value or ""]) if a)

good, notes = 0, []
for key, want in expected.items():
    found = drafts.get(key, [])
    if len(found) != 1:
        notes.append(f"{key}: {len(found)} drafts")
        continue
    name, m = found[0]
    problems = []
    if addresses(m.get("To")) != [want["to"].lower()]:
        problems.append(f"To {m.get('To')!r}")
    if " ".join((m.get("Subject") or "").split()) != want["subject"]:
        problems.append(f"Subject {m.get('Subject')!r}")
    if (m.get("References") or "").split() != want["references"]:
        problems.append("References")
    if addresses(m.get("Cc")) != ([want["cc"].lower()] if want["cc"] else []):
        problems.append(f"Cc {m.get('Cc')!r}")
    if addresses(m.get("From")) != ["support@northwind-it.example"]:
        problems.append("From")
    if problems:
        notes.append(f"{name}: " + ", ".join(problems))
    else:
        good += 1
extra = sorted(k for k in drafts if k not in expected)
if extra:
    notes.append(f"drafts for threads that wait for nothing: {extra}")
total = len(expected) + len(extra)
score = good / total if total else (1.0 if not drafts else 0.0)
report(score, "; ".join(notes) or f"all {good} drafts on the right threads")
'''
)


__all__ = ["InboxTriage", "mbox_record", "parse_mbox", "triage"]

"""The scripts of inbox_triage's ``hard`` tier: the reference solution (which knows what
every message means: the draft fills it in) and the handover queue's check."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .common import CHECK_PRELUDE, python_solution

# ---- the reference solution ---------------------------------------------------------------

SOLVE = python_solution(
    "thread the mbox, read what each customer means (category, order, closing the matter: "
    "known here), triage each thread by the policy (service hours 08:00-18:00, the contact "
    "row updated last: the user's answers), draft the replies, write the handover queue.",
    r"""import csv, json, mailbox, os
from datetime import date, datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import getaddresses, parsedate_to_datetime

turn = int(os.environ.get("COWORK_TURN", "0"))
QUEUE_FROM, EXPORT_FROM = int("__QUEUE_FROM_TURN__"), int("__EXPORT_FROM_TURN__")
export = datetime.fromisoformat(
    "__LATER_EXPORT__" if turn >= EXPORT_FROM else "__FIRST_EXPORT__")
closed = date.fromisoformat("__CLOSED__")
office = timezone(timedelta(hours=1))
US = "support@northwind-it.example"
# what each message means (category, order given, closes the matter), as read by a person
TRUTH = json.loads(r'''__TRUTH__''')

contacts = {}
for r in csv.DictReader(open("contacts.csv", newline="")):
    if r["domain"] not in contacts or r["updated"] >= contacts[r["domain"]]["updated"]:
        contacts[r["domain"]] = r
rota = {r["date"]: r for r in csv.DictReader(open("rota.csv", newline=""))}

def addr(value):
    found = getaddresses([value or ""])
    return found[0][1].lower() if found else ""

messages = {}
for m in mailbox.mbox("inbox.mbox"):
    messages.setdefault(m["Message-ID"].strip(), m)
def root(mid):
    refs = (messages[mid]["References"] or messages[mid]["In-Reply-To"] or "").split()
    return refs[0] if refs and refs[0] in messages else mid
threads = {}
for mid, m in messages.items():
    if (m["Auto-Submitted"] or "no").strip().lower() == "no":
        threads.setdefault(root(mid), []).append(m)

def due_after(start, hours):
    t, left = start.astimezone(office), timedelta(hours=hours)
    while True:
        opens = t.replace(hour=8, minute=0, second=0)
        closes = t.replace(hour=18, minute=0, second=0)
        if t.weekday() > 4 or t.date() == closed or t >= closes:
            t = opens + timedelta(days=1)
            continue
        t = max(t, opens)
        if left <= closes - t:
            return t + left
        left -= closes - t
        t = opens + timedelta(days=1)

result, queue = {}, []
if os.path.exists("drafts.mbox"):
    os.remove("drafts.mbox")
drafts = mailbox.mbox("drafts.mbox")
for rid, msgs in sorted(threads.items()):
    msgs.sort(key=lambda m: parsedate_to_datetime(m["Date"]))
    first, last = msgs[0], msgs[-1]
    ids = [m["Message-ID"].strip() for m in msgs]
    category = "newsletter" if first["List-Unsubscribe"] else TRUTH[rid][0]
    orders = [TRUTH[i][1] for i in ids if i in TRUTH and TRUTH[i][1]]
    contact = contacts.get(addr(first["From"]).split("@")[1], {})
    gold = contact.get("tier") == "gold"
    closes = ids[-1] in TRUTH and TRUTH[ids[-1]][2]
    needs = category != "newsletter" and addr(last["From"]) != US and not closes
    entry = {"category": category, "order": orders[-1] if orders else None,
             "priority": "none", "reply_needed": needs, "due": None, "breached": False}
    if needs:
        ours = [n for n, m in enumerate(msgs) if addr(m["From"]) == US]
        since = msgs[ours[-1] + 1:] if ours else msgs
        level = 1 if category == "security" or (category == "incident" and gold) else (
            2 if category == "incident" or gold else 3)
        if len(since) >= 2:
            level = max(1, level - 1)
        due = due_after(parsedate_to_datetime(since[0]["Date"]), {1: 4, 2: 8, 3: 16}[level])
        entry.update(priority=f"P{level}", breached=due < export,
                     due=due.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        local = due.astimezone(office)
        day = rota[export.astimezone(office).date().isoformat()]
        who = day["lead"] if entry["breached"] else rota[local.date().isoformat()][
            "late" if local.hour >= 13 else "early"]
        queue.append([rid, contact.get("company", ""), entry["priority"], entry["due"], who])
        reply = EmailMessage()
        reply["From"] = US
        reply["To"] = addr(last["Reply-To"] or last["From"])
        if turn >= QUEUE_FROM and gold:
            reply["Cc"] = contact["account_manager"]
        subject = first["Subject"]
        reply["Subject"] = subject if subject.lower().startswith("re:") else "Re: " + subject
        reply["In-Reply-To"] = last["Message-ID"]
        reply["References"] = " ".join(m["Message-ID"].strip() for m in msgs)
        reply.set_content("Hello,\n\nThank you for your message; we are looking into it.\n")
        drafts.add(reply)
    result[rid] = entry
drafts.flush()
json.dump({"threads": result}, open("triage.json", "w"), indent=2)
if turn >= QUEUE_FROM:
    with open("queue.csv", "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["thread", "company", "priority", "due", "assignee"])
        out.writerows(sorted(queue, key=lambda r: (r[3], r[0])))
""",
)


CHECK_QUEUE = (
    CHECK_PRELUDE
    + r'''
import csv

expected = json.loads((Path(__file__).parent / "expected_queue.json").read_text())
path = ws / "queue.csv"
if not path.is_file():
    report(0.0, "queue.csv is missing")
columns = ["thread", "company", "priority", "due", "assignee"]
try:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if [c.strip() for c in reader.fieldnames or []] != columns:
            report(0.0, f"queue.csv columns are {reader.fieldnames}, not {columns}")
        rows = [[(r.get(c) or "").strip() for c in columns] for r in reader]
except Exception as exc:  # a malformed table scores 0, it does not crash the verifier
    report(0.0, f"queue.csv does not parse: {exc!r}")
good = sum(1 for got, want in zip(rows, expected) if got == want)
total = max(len(rows), len(expected))
wrong = [f"row {n}: {got} (want {want})" for n, (got, want) in
         enumerate(zip(rows, expected), start=1) if got != want]
if len(rows) != len(expected):
    wrong.append(f"{len(rows)} rows, want {len(expected)}")
score = good / total if total else 1.0
report(score, "; ".join(wrong[:4]) or f"all {good} rows right, in order")
'''
)


def expected_queue(rows: Sequence[Sequence[str]]) -> bytes:
    return (json.dumps([list(r) for r in rows], indent=2) + "\n").encode()


__all__ = ["CHECK_QUEUE", "SOLVE", "expected_queue"]

"""The scripts of calendar_scheduling's ``hard`` tier: the reference solution (which knows
the requests the mailbox states and the user's answers: the draft fills them in) and the
invitations check every tier's verifier runs."""

from __future__ import annotations

from .common import CHECK_PRELUDE, python_solution

# ---- the reference ---------------------------------------------------------------------------

SOLVE = python_solution(
    "book the week's meetings under policy.md (hard): rooms, zones, series, the loop, changes.",
    r"""import csv, json, os
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
with_loop = turn >= int(os.environ["LOOP_FROM_TURN"])
changes = turn >= int(os.environ["CHANGES_FROM_TURN"])
remote = os.environ["REMOTE"]  # the user's answer: they work from Chicago
seats_said = dict(x.split("=") for x in os.environ["SEATS"].split(",") if x)  # room=seats
hours_said = dict(x.split("=") for x in os.environ["HOURS"].split(",") if x)  # key=from-to
panels = [p.split(",") for p in os.environ["PANELS"].split("/")]  # from the turn-2 message
PARIS = ZoneInfo("Europe/Paris")
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]

def to_min(t):
    h, m = t.split(":")
    return int(h) * 60 + int(m)

people = {}
for r in csv.DictReader(open("people.csv", newline="")):
    key = r["calendar"].split("/")[-1][:-4]
    a, b = r["working_hours"].split("-")
    if key in hours_said:  # the user's answer: the colleague's own hours
        a, b = hours_said[key].split("-")
    zone = "America/Chicago" if key == remote else r["time_zone"]
    people[key] = dict(email=r["email"], office=r["office"], zone=zone, team=r["team"],
                       hours=(to_min(a), to_min(b)))
by_email = {v["email"]: k for k, v in people.items()}

def stamp(params, value):
    if len(value) == 8:
        return datetime.strptime(value, "%Y%m%d").replace(tzinfo=PARIS), True
    t = datetime.strptime(value[:15], "%Y%m%dT%H%M%S")
    if value.endswith("Z"):
        return t.replace(tzinfo=timezone.utc), False
    zone = "Europe/Paris"
    for p in params:
        if p.startswith("TZID="):
            zone = p[5:]
    return t.replace(tzinfo=ZoneInfo(zone)), False

def vevents(path):
    text = open(path, encoding="utf-8").read().replace("\r\n", "\n").replace("\n ", "")
    out, ev = [], None
    for line in text.split("\n"):
        if line == "BEGIN:VEVENT":
            ev = {}
        elif line == "END:VEVENT":
            out.append(ev)
            ev = None
        elif ev is not None and ":" in line:
            head, value = line.split(":", 1)
            name, *params = head.split(";")
            ev.setdefault(name, []).append((params, value))
    return out

def office(t):
    return t.astimezone(PARIS).replace(tzinfo=None)

def busy_of(path, monday):
    evs = vevents(path)
    lo = monday.replace(tzinfo=PARIS)
    hi = lo + timedelta(days=7)
    moved = {}
    for e in evs:
        if "RECURRENCE-ID" in e:
            moved[(e["UID"][0][1], stamp(*e["RECURRENCE-ID"][0])[0].astimezone(timezone.utc))] = e
    spans = []
    for e in evs:
        if "RECURRENCE-ID" in e or e.get("STATUS", [("", "")])[0][1] == "CANCELLED":
            continue
        start, allday = stamp(*e["DTSTART"][0])
        end, _ = stamp(*e["DTEND"][0])
        free = e.get("TRANSP", [("", "")])[0][1] == "TRANSPARENT"
        starts = [start]
        if "RRULE" in e:
            rule = dict(x.split("=") for x in e["RRULE"][0][1].split(";"))
            byday = rule.get("BYDAY", "").split(",") if "BYDAY" in rule else []
            until = stamp([], rule["UNTIL"])[0] if "UNTIL" in rule else None
            count = int(rule["COUNT"]) if "COUNT" in rule else None
            starts, n = [], 0
            while True:
                s = start + timedelta(days=n)  # wall clock of the event's zone
                n += 1
                if s >= hi or (count is not None and len(starts) >= count) or (until and s > until):
                    break
                code = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"][s.weekday()]
                if byday and code not in byday:
                    continue
                if not byday and rule["FREQ"] == "WEEKLY" and s.weekday() != start.weekday():
                    continue
                starts.append(s)
        skip = {stamp(p, v)[0].astimezone(timezone.utc) for p, v in e.get("EXDATE", [])}
        for s in starts:
            key = (e["UID"][0][1], s.astimezone(timezone.utc))
            if key[1] in skip:
                continue
            if key in moved:
                o = moved[key]
                if o.get("STATUS", [("", "")])[0][1] == "CANCELLED":
                    continue
                if o.get("TRANSP", [("", "")])[0][1] == "TRANSPARENT":
                    continue
                span = (stamp(*o["DTSTART"][0])[0], stamp(*o["DTEND"][0])[0])
            elif free:
                continue
            else:
                span = (s, s + (end - start))
            a, b = office(span[0]), office(span[1])
            if b > monday and a < monday + timedelta(days=7):
                spans.append((a, b))
    return spans

# the week: the middle one of the three weeks the exports cover
firsts = []
for k in people:
    for e in vevents(f"calendars/{k}.ics"):
        if "RRULE" not in e:
            firsts.append(office(stamp(*e["DTSTART"][0])[0]))
first = min(firsts)
monday = datetime.combine((first - timedelta(days=first.weekday())).date(), datetime.min.time())
monday += timedelta(days=7)
busy = {k: busy_of(f"calendars/{k}.ics", monday) for k in people}
for item in os.environ["FREED"].split(","):  # the user's answer: an event called off
    if item:
        key, span = item.split("=")
        off = tuple(datetime.fromisoformat(t) for t in span.split("/"))
        busy[key] = [b for b in busy[key] if b != off]

wb = openpyxl.load_workbook("rooms.xlsx", read_only=True)
rooms = [(str(n), int(seats_said.get(str(n), s)), v == "yes")
         for n, s, v in wb["Rooms"].iter_rows(min_row=2, values_only=True)]
taken = {n: [] for n, _s, _v in rooms}
for n, d, a, b, _by in wb["Bookings"].iter_rows(min_row=2, values_only=True):
    day = datetime.fromisoformat(str(d))
    taken[n].append((day + timedelta(minutes=to_min(a)), day + timedelta(minutes=to_min(b))))

# the requests as read from the mailbox (and the user's answer on a length two mails give)
lines = json.loads(os.environ["REQUESTS"])
meetings = []
for n, r in enumerate(lines):
    who = []
    for a in r["attendees"]:
        if a.startswith("team:"):
            keys = [k for k, v in people.items() if v["team"] == a[5:]]
        else:
            keys = [by_email[a]]
        who += [k for k in keys if k not in who]
    meetings.append(dict(id=r["id"], title=r["title"], people=sorted(who),
                         minutes=int(r["minutes"]), days=r["days"],
                         priority=int(r["priority"]), after=r["after"], n=n))
meetings.sort(key=lambda m: (m["priority"], m["n"]))

def window(k, day):
    z = ZoneInfo(people[k]["zone"])
    mid = datetime.combine(day, datetime.min.time()).replace(tzinfo=z)
    a, b = people[k]["hours"]
    return office(mid + timedelta(minutes=a)), office(mid + timedelta(minutes=b))

def hours_ok(who, s, e):
    mid = datetime.combine(s.date(), datetime.min.time())
    if s < mid + timedelta(hours=9) or e > mid + timedelta(hours=17):
        return False
    if s < mid + timedelta(hours=13) and mid + timedelta(hours=12) < e:
        return False
    return all(window(k, s.date())[0] <= s and e <= window(k, s.date())[1] for k in who)

def overlaps(spans, s, e):
    return any(s < b and a < e for a, b in spans)

def person_free(k, s, e, plan, skip):
    mine = [(b["s"], b["e"]) for i, b in plan.items() if i not in skip and k in b["people"]]
    return not overlaps(busy[k] + mine, s, e)

def room_free(room, s, e, plan, skip):
    mine = [(b["s"], b["e"]) for i, b in plan.items() if i not in skip and b["room"] == room]
    return not overlaps(taken[room] + mine, s, e)

def fitting(who, extra=0, seats_of=None):
    here = sum(1 for k in (seats_of or who) if people[k]["office"] == "Paris") + extra
    video = any(people[k]["office"] != "Paris" for k in who)
    ordered = sorted(rooms, key=lambda r: (r[1], r[0]))
    return [n for n, s, v in ordered if s >= here and (v or not video)]

def starts(days):
    for i, d in enumerate(DAYS):
        if d in days:
            for minute in range(9 * 60, 17 * 60, 30):
                yield monday + timedelta(days=i, minutes=minute)

def m_fits(m, s, room, plan):
    e = s + timedelta(minutes=m["minutes"])
    if m["after"] and m["after"] in plan and s < plan[m["after"]]["e"]:
        return False
    return (hours_ok(m["people"], s, e) and room_free(room, s, e, plan, [m["id"]])
            and all(person_free(k, s, e, plan, [m["id"]]) for k in m["people"]))

def book(m, plan):
    for s in starts(m["days"]):
        for room in fitting(m["people"]):
            if m_fits(m, s, room, plan):
                end = s + timedelta(minutes=m["minutes"])
                return dict(s=s, e=end, room=room, people=m["people"])
    raise SystemExit(f"no slot for {m['id']}")

ids = [f"I{n + 1}" for n in range(len(panels))]
everyone = sorted({k for p in panels for k in p})
biggest = max(panels, key=lambda p: sum(1 for k in p if people[k]["office"] == "Paris"))

def loop_fits(s, room, plan):
    e = s + timedelta(minutes=45 * len(panels))
    if not hours_ok([], s, e) or not room_free(room, s, e, plan, ids):
        return False
    for n, p in enumerate(panels):
        a, b = s + timedelta(minutes=45 * n), s + timedelta(minutes=45 * (n + 1))
        if not hours_ok(p, a, b) or not all(person_free(k, a, b, plan, ids) for k in p):
            return False
    return True

def book_loop(plan):
    for s in starts(["Tue", "Wed", "Thu", "Fri"]):
        for room in fitting(everyone, 1, biggest):
            if loop_fits(s, room, plan):
                return {i: dict(s=s + timedelta(minutes=45 * n),
                                e=s + timedelta(minutes=45 * (n + 1)),
                                room=room, people=panels[n]) for n, i in enumerate(ids)}
    raise SystemExit("no slot for the loop")

def fmt(t):
    return t.strftime("%Y-%m-%dT%H:%M")

moved = []
if changes and os.path.exists("schedule.json"):
    old = json.load(open("schedule.json"))
    plan = {}
    for i, b in {**old["meetings"], **old.get("interviews", {})}.items():
        who = [by_email[x] for x in b["attendees"]]
        plan[i] = dict(s=datetime.fromisoformat(b["start"]), e=datetime.fromisoformat(b["end"]),
                       room=b["room"], people=sorted(who))
    before = {i: dict(b) for i, b in plan.items()}
    going = [m for m in meetings if not m_fits(m, plan[m["id"]]["s"], plan[m["id"]]["room"], plan)]
    loop_going = with_loop and not loop_fits(plan["I1"]["s"], plan["I1"]["room"], plan)
    for m in going:
        del plan[m["id"]]
    if loop_going:
        for i in ids:
            del plan[i]
    for m in going:
        plan[m["id"]] = book(m, plan)
    if loop_going:
        plan.update(book_loop(plan))
    moved = [i for i in before
             if (plan[i]["s"], plan[i]["room"]) != (before[i]["s"], before[i]["room"])]
    with open("changes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "old_start", "new_start"])
        for i in moved:
            w.writerow([i, fmt(before[i]["s"]), fmt(plan[i]["s"])])
else:
    plan = {}
    for m in meetings:
        plan[m["id"]] = book(m, plan)
    if with_loop:
        plan.update(book_loop(plan))

title = {m["id"]: m["title"] for m in meetings}
title.update({i: f"Interview loop, session {n + 1}" for n, i in enumerate(ids)})
out = {"meetings": {}, "interviews": {}}
for i, b in plan.items():
    entry = {"start": fmt(b["s"]), "end": fmt(b["e"]), "room": b["room"],
             "attendees": [people[k]["email"] for k in b["people"]]}
    out["interviews" if i.startswith("I") else "meetings"][i] = entry
if not out["interviews"]:
    del out["interviews"]
json.dump(out, open("schedule.json", "w"), indent=2)
ics = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//reference//EN"]
for i, b in plan.items():
    ics += ["BEGIN:VEVENT", "UID:" + i, "SUMMARY:" + title[i],
            "DTSTART:" + b["s"].strftime("%Y%m%dT%H%M%S"),
            "DTEND:" + b["e"].strftime("%Y%m%dT%H%M%S"),
            "LOCATION:" + b["room"], "SEQUENCE:" + ("1" if i in moved else "0"), "END:VEVENT"]
ics.append("END:VCALENDAR")
open("invites.ics", "w", newline="").write("\r\n".join(ics) + "\r\n")
""",
    "LOOP_FROM_TURN",
    "CHANGES_FROM_TURN",
    "REMOTE",
    "PANELS",
    "REQUESTS",
    "SEATS",
    "HOURS",
    "FREED",
)


# The invitations checks of every tier open alike: the expected slots, then the agent's
# invites.ics read into ``events`` by UID (folded lines joined, parameters dropped).
CHECK_INVITES_PRELUDE = (
    CHECK_PRELUDE
    + r"""
expected = json.loads((Path(__file__).parent / "expected_schedule.json").read_text())
path = ws / "invites.ics"
if not path.is_file():
    report(0.0, "invites.ics is missing")
text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n ", "")
header = [line.strip() for line in text.splitlines()[:12]]
if "BEGIN:VCALENDAR" not in header or "VERSION:2.0" not in header:
    report(0.0, "not an iCalendar 2.0 file (BEGIN:VCALENDAR, VERSION:2.0)")
if not any(line.startswith("PRODID:") for line in header):
    report(0.0, "the calendar has no PRODID")
events, current = {}, None
for line in text.replace("\r\n", "\n").split("\n"):
    if line.strip() == "BEGIN:VEVENT":
        current = {}
    elif line.strip() == "END:VEVENT" and current is not None:
        events[current.get("UID", "")] = current
        current = None
    elif current is not None and ":" in line:
        head, value = line.split(":", 1)
        current[head.split(";")[0].strip().upper()] = value.strip()
"""
)

CHECK_INVITES = (
    CHECK_INVITES_PRELUDE
    + r"""
def stamp(value):
    return value.replace("-", "").replace(":", "")[:13]

good, notes = 0, []
for key, slot in expected.items():
    event = events.get(key)
    want = (stamp(slot["start"]), stamp(slot["end"]), slot["room"], str(slot["sequence"]))
    if event is None:
        notes.append(f"{key}: no VEVENT")
        continue
    got = (stamp(event.get("DTSTART", "")), stamp(event.get("DTEND", "")),
           event.get("LOCATION", ""), event.get("SEQUENCE", "0") or "0")
    if got != want:
        notes.append(f"{key}: {got}, want {want}")
    else:
        good += 1
extra = sorted(set(events) - set(expected))
if extra:
    notes.append(f"events for no booking: {extra}")
score = good / (len(expected) + len(extra))
report(score, "; ".join(notes) or f"all {good} invitations at their slots and rooms")
"""
)


__all__ = ["CHECK_INVITES", "CHECK_INVITES_PRELUDE", "SOLVE"]

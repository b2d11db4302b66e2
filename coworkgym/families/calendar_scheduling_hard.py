"""The ``hard`` tier of calendar_scheduling: a week of meetings for a team spread over three
time zones, requested by mail, booked under a written policy into rooms, then an interview
loop fitted around them, then a changed calendar handled as the policy says changes are
handled.

The workspace: ``calendars/*.ics`` (seven exports of three weeks each, 85 to 120 events in
all: time zones named by ``TZID`` with their ``VTIMEZONE``, one export in UTC, weekly and
daily series that started weeks before, ``EXDATE`` and moved occurrences
(``RECURRENCE-ID``), cancelled, free and tentative events, multi-day absences, folded
lines), ``people.csv`` (the directory: email, office, time zone, working hours, team),
``rooms.xlsx`` (the Paris rooms and the week's room bookings), ``requests.mbox`` (last
week's mail, about 100 KB: the eight requests, each a thread with its id in the subject,
among some 140 other office mails; ``calendar_scheduling_mail``) and ``policy.md`` (the
rules). The readable text is over ten times what one tool result shows (12,000
characters): seeing it all takes many calls, and the agent must keep track of what it read.

Why hard is hard — what a careful agent must do:

- **Turn 1** (``schedule.json`` and ``invites.ics``): read the policy before the data
  (booking order by urgency, lunch, working hours in each person's own zone, rooms, the
  smallest room that fits); turn each request thread into a structured request by reading
  it — who attends (the sender, "me"; a whole team; someone added in a postscript; someone
  named only to be left out), the length, the days, the urgency and what it must follow,
  each said in one of eight or more phrasings, among distractors a keyword script takes at
  face value: the sender's later correction (sometimes above a quote of the older mail), a
  forwarded older request with another length or other days, a length denied ("we do not
  need an hour"), a past meeting's length in a postscript, another meeting named only to
  say this one does not follow it (a reader that knows every phrase but takes the last one
  it sees gets at most one request of eight right; the test measures it). Then parse every
  calendar with its zone — a ``TZID`` converts by the zone's rule for that date (the week
  lies between the US and the EU clock changes, so Chicago is six hours behind Paris, not
  seven), a ``Z`` stamp is UTC; expand series from their first occurrence weeks before, by
  the wall clock of their zone, minus ``EXDATE``s, with moved occurrences replaced; then
  book meeting by meeting in policy order, each blocking its people and its room. Two or
  three contradictions, drawn per seed from five (``CONTRADICTIONS``), must be asked: the
  directory puts the remote colleague in New York while their calendar is in Chicago time;
  another attendee mails a different length for someone's meeting (the sender's stands);
  facilities' mail gives a room another seat count than ``rooms.xlsx``; a colleague signs
  with other working hours than the directory gives; a colleague mails that an event their
  calendar still holds is off (for the last three, which side the user takes is drawn).
  Each misreading moves a meeting; the draw is refused otherwise.
- **Turn 2** (builds on turn 1): an interview loop — three consecutive sessions in one room
  with three panels — fitted around the meetings booked in turn 1 (they block panelists and
  rooms); a loop booked against the bare calendars lands elsewhere. The message names only
  the candidate: the panels are in the Talent Team's mails in the mailbox, by first name,
  beside a mail on another candidate's loop later on; in three seeds of five a later mail
  swaps one panelist. Both deliverables grow.
- **Turn 3** (invalidates turn 2's output in a way only re-reading reveals): the user
  replaces one calendar, saying a new call landed on a booked meeting. The new export also
  reinstates a cancelled event, unmentioned, that clashes with another booked item. The
  policy's rule for changes after invitations went out keeps every item that still fits
  where it is and rebooks only the others (re-running turn 1 from scratch moves more);
  moved invitations carry ``SEQUENCE:1``; ``changes.csv`` lists what moved, old and new.

A careful agent needs about twenty tool calls in turn 1 (list, read the policy, the
directory, the rooms workbook; list the mailbox's subjects and read the eight threads a few
at a time — the mailbox alone is nine tool results long —, search it for facilities' notes
and the colleagues' signed hours; look at several calendars; ask two or three times; write
the requests down, script, run, check the result against the calendars), seven or eight in
turn 2 (read the message, search the mailbox for the candidate's thread and read it and its
correction, map the first names to emails, add the loop around the booked meetings, run,
check both files)
and six to eight in turn 3 (diff the new export against the old, find both changes,
reschedule, write the changes, check).

Each difficulty is stated in the instruction, ``policy.md`` or the mailbox, or answered by
the user when asked; each is declared as a trap on the family (``TRAPS``) and checked by
the verifier with exact values recomputed from the truth, which is drawn again from the
seed: nothing is read back from the mailbox.
"""

from __future__ import annotations

import functools
import io
import json
import random
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import openpyxl

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, TurnPatch, UserState
from ..verifier.spec import Component, CsvValue, CustomScript, VerifierSpec
from . import calendar_scheduling_mail as mail
from .base import NEVER, FamilyDraft, FamilyParams, Reading, Trap, parse_csv, write_csv
from .calendar_scheduling_hard_scripts import CHECK_INVITES, CHECK_INVITES_PRELUDE, SOLVE
from .common import (
    after_reply,
    expectations,
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
from .office import stable_office_bytes

REQUESTS, PEOPLE_CSV, ROOMS, POLICY = mail.MAILBOX, "people.csv", "rooms.xlsx", "policy.md"
SCHEDULE, INVITES, CHANGES = "schedule.json", "invites.ics", "changes.csv"
EXPECTED = "expected_schedule.json"
OFFICE_ZONE = "Europe/Paris"
OFFICE = ZoneInfo(OFFICE_ZONE)
# Weeks between the US clock change (8 March 2026) and the EU one (29 March): Chicago is
# six hours behind Paris, not the usual seven.
WEEKS = (date(2026, 3, 9), date(2026, 3, 16), date(2026, 3, 23))
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
OPEN, CLOSE = 9 * 60, 17 * 60  # the Paris office, where every room is
LUNCH = (12 * 60, 13 * 60)
SLOT = 30
LOOP_SESSIONS, SESSION_MINUTES = 3, 45
LOOP_DAYS = ("Tue", "Wed", "Thu", "Fri")
DOMAIN = "northwind.example"

ROSTER = (
    ("ana", "Ana Lima"),
    ("ben", "Ben Okafor"),
    ("chen", "Chen Wei"),
    ("dana", "Dana Kowalski"),
    ("emre", "Emre Demir"),
    ("farah", "Farah Haddad"),
    ("greta", "Greta Holm"),
)
TEAMS = ("finance", "product")
ROOM_TABLE = (  # name, seats, video
    ("Atelier", 4, True),
    ("Bastille", 6, False),
    ("Canal", 8, True),
    ("Dauphine", 3, False),
    ("Etoile", 12, True),
)
TITLES = (
    "Budget review",
    "Vendor selection",
    "Quarterly planning",
    "Hiring plan",
    "Office move kick-off",
    "Security training dry run",
    "Pricing workshop",
    "Roadmap sync",
    "Supplier audit prep",
)
BUSY = ("Client call", "1:1", "Workshop", "Dentist", "Review", "Interview", "Site visit")
MEETINGS = 8
CANDIDATES = ("Jordan Reyes", "Sam Whitaker", "Noor Aziz", "Lena Brandt")

TRAPS = (
    Trap(
        "remote_zone",
        "people.csv puts the remote colleague in New York while his calendar is in Chicago "
        "time (hard): his working hours are Chicago time",
        (
            r"people\.csv is (out of date|outdated|stale|wrong)",
            r"\bnot in New York\b",
            r"\bmoved to Chicago\b",
            r"\bdirectory is (out of date|outdated|stale|wrong)",
        ),
    ),
    Trap(
        "two_lengths",
        "a colleague mails another length for someone else's meeting (hard): the sender of "
        "the request decides",
        (
            r"\bsender'?s? (length|word) (counts|stands|decides)",
            r"\bignore (the )?(second|other|later) (mail|message|length)",
            r"\b(lengths?|durations?) (differ|disagree|conflict)",
        ),
    ),
    Trap(
        "room_seats",
        "facilities' mail gives a room another seat count than rooms.xlsx (hard)",
        (
            r"\bseat counts? (differ|disagree|conflict)",
            r"\brooms\.xlsx is (out of date|outdated|stale|wrong)",
            r"\b(facilities'?|the) (mail|note|message) is (wrong|outdated|out of date|stale)",
        ),
    ),
    Trap(
        "own_hours",
        "a colleague signs with other working hours than people.csv gives (hard)",
        (r"\bsignature\b", r"\bhours (differ|disagree|conflict)"),
    ),
    Trap(
        "called_off",
        "a colleague mails that an event their calendar still holds is called off (hard)",
        (
            r"\bcalendar (is|was) (out of date|outdated|stale|wrong)",
            r"\bmail (is|was) (out of date|outdated|stale|wrong)",
            r"\bstill (in|on) (the|his|her|their) calendar\b",
        ),
    ),
    Trap(
        "series_from_earlier_weeks",
        "recurring events whose series started weeks before still block this week, by their "
        "zone's wall clock (hard)",
        (
            r"\bstarted (weeks|days) (before|earlier)\b",
            r"\bbefore the week\b",
            r"\bEXDATE\b",
            r"\bRECURRENCE-ID\b",
            r"\bwall[- ]clock\b",
        ),
    ),
    Trap(
        "reinstated_event",
        "the last turn's export reinstates a cancelled event that clashes with a booked item, "
        "which the user does not mention (hard)",
        (
            r"\breinstat",
            r"\bno longer cancel",
            r"\bun-?cancel",
            r"\bsecond change\b",
            r"\balso changed\b",
            r"\banother change\b",
        ),
    ),
)


def calendar_path(person: str) -> str:
    return f"calendars/{person}.ics"


# ---- the people, the rooms, the requests ------------------------------------------------------


@dataclass(frozen=True)
class Person:
    key: str
    name: str
    office: str  # Paris, Lisbon, New York (people.csv) — Chicago in truth for the remote one
    zone: str  # the zone people.csv lists
    hours: tuple[int, int]  # local working hours, minutes
    team: str
    utc_export: bool = False

    @property
    def email(self) -> str:
        first, last = self.name.lower().split()
        return f"{first}.{last}@{DOMAIN}"


@dataclass(frozen=True)
class Room:
    name: str
    seats: int
    video: bool


@dataclass(frozen=True)
class Request:
    """One meeting request as the truth has it (its mails say it in words); attendees are
    emails and ``team:<name>`` aliases."""

    id: str
    title: str
    attendees: tuple[str, ...]
    minutes: int
    days: tuple[str, ...]
    priority: int
    after: str = ""
    updated: str = ""


@dataclass(frozen=True)
class Meeting:
    """A request resolved: attendees as people keys, in booking order."""

    id: str
    title: str
    people: tuple[str, ...]
    minutes: int
    days: tuple[str, ...]
    priority: int
    after: str = ""


def people_csv(people: Sequence[Person]) -> bytes:
    rows: list[dict[str, object]] = [
        {
            "email": p.email,
            "name": p.name,
            "calendar": calendar_path(p.key),
            "office": p.office,
            "time_zone": p.zone,
            "working_hours": f"{_hm(p.hours[0])}-{_hm(p.hours[1])}",
            "team": p.team,
        }
        for p in people
    ]
    columns = ["email", "name", "calendar", "office", "time_zone", "working_hours", "team"]
    return write_csv(rows, columns)


@dataclass(frozen=True)
class Directory:
    """people.csv as read: email → person key, office, zone, local hours; team → keys."""

    key_of: Mapping[str, str]
    office: Mapping[str, str]
    zone: Mapping[str, str]
    hours: Mapping[str, tuple[int, int]]
    teams: Mapping[str, tuple[str, ...]]


def read_directory(data: bytes) -> Directory:
    key_of, office, zone, hours = {}, {}, {}, {}
    teams: dict[str, list[str]] = {}
    for row in parse_csv(data):
        key = row["calendar"].removeprefix("calendars/").removesuffix(".ics")
        key_of[row["email"]] = key
        office[key], zone[key] = row["office"], row["time_zone"]
        start, end = row["working_hours"].split("-")
        hours[key] = (_minutes(start), _minutes(end))
        teams.setdefault(row["team"], []).append(key)
    return Directory(key_of, office, zone, hours, {t: tuple(k) for t, k in teams.items()})


def current_request_rows(data: bytes) -> list[dict[str, str]]:
    """requests.csv's rows in file order, one per id: of an id's lines the one with the
    latest ``updated`` date, standing where its first line stands. Without an ``updated``
    column every id keeps its first line."""
    held: dict[str, dict[str, str]] = {}
    for row in parse_csv(data):
        if row["id"] not in held or row.get("updated", "") > held[row["id"]].get("updated", ""):
            held[row["id"]] = row  # a dict keeps the first line's place
    return list(held.values())


def resolve(requests: Sequence[Request], directory: Directory) -> list[Meeting]:
    """The meetings in booking order: priority 1 first, then file order; aliases expanded."""
    meetings = []
    for r in requests:
        people: list[str] = []
        for who in r.attendees:
            keys = (
                directory.teams[who.removeprefix("team:")]
                if who.startswith("team:")
                else (directory.key_of[who],)
            )
            people += [k for k in keys if k not in people]
        meetings.append(
            Meeting(r.id, r.title, tuple(sorted(people)), r.minutes, r.days, r.priority, r.after)
        )
    order = {m.id: n for n, m in enumerate(meetings)}
    return sorted(meetings, key=lambda m: (m.priority, order[m.id]))


def rooms_xlsx(rooms: Sequence[Room], bookings: Sequence[tuple[str, datetime, datetime]]) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Rooms"
    sheet.append(["room", "seats", "video"])
    for room in rooms:
        sheet.append([room.name, room.seats, "yes" if room.video else "no"])
    taken = book.create_sheet("Bookings")
    taken.append(["room", "date", "from", "to", "booked_by"])
    for name, start, end in sorted(bookings, key=lambda b: (b[1], b[0])):
        taken.append(
            [name, start.date().isoformat(), f"{start:%H:%M}", f"{end:%H:%M}", "facilities"]
        )
    buffer = io.BytesIO()
    book.save(buffer)
    return stable_office_bytes(buffer.getvalue())


def read_rooms(data: bytes) -> tuple[list[Room], dict[str, list[Interval]]]:
    rooms, taken = _read_rooms(data)
    return list(rooms), {name: list(spans) for name, spans in taken.items()}


@functools.lru_cache(maxsize=64)
def _read_rooms(data: bytes) -> tuple[list[Room], dict[str, list[Interval]]]:
    """The workbook read once per draft (the draw reads it many times); callers copy."""
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    rooms = [
        Room(str(name), int(str(seats)), str(video) == "yes")
        for name, seats, video in book["Rooms"].iter_rows(min_row=2, values_only=True)
    ]
    taken: dict[str, list[Interval]] = {r.name: [] for r in rooms}
    for name, day, start, end, _by in book["Bookings"].iter_rows(min_row=2, values_only=True):
        midnight = datetime.fromisoformat(str(day))
        taken[str(name)].append(
            (
                midnight + timedelta(minutes=_minutes(str(start))),
                midnight + timedelta(minutes=_minutes(str(end))),
            )
        )
    return rooms, taken


def _hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(text: str) -> int:
    hours, minutes = text.strip().split(":")
    return int(hours) * 60 + int(minutes)


# ---- the calendars ------------------------------------------------------------------------

Interval = tuple[datetime, datetime]  # naive office time


@dataclass(frozen=True)
class Event:
    """A VEVENT: times are aware (their zone, or UTC); an all-day event's are midnights."""

    uid: str
    summary: str
    start: datetime
    end: datetime
    all_day: bool = False
    status: str = ""  # CANCELLED does not block; TENTATIVE does
    transparent: bool = False
    rule: str = ""  # RRULE value
    exdates: tuple[datetime, ...] = ()
    recurrence_id: datetime | None = None
    description: str = ""


@dataclass
class Calendar:
    person: Person
    zone: str  # the zone its events are written in ("UTC": stamps ending in Z)
    events: list[Event] = field(default_factory=list)


VTIMEZONES = {
    "Europe/Paris": (
        ("DAYLIGHT", "19700329T020000", "+0100", "+0200", "CEST", "3", "-1SU"),
        ("STANDARD", "19701025T030000", "+0200", "+0100", "CET", "10", "-1SU"),
    ),
    "America/Chicago": (
        ("DAYLIGHT", "19700308T020000", "-0600", "-0500", "CDT", "3", "2SU"),
        ("STANDARD", "19701101T020000", "-0500", "-0600", "CST", "11", "1SU"),
    ),
}


def fold(line: str) -> list[str]:
    """RFC 5545 folding (ASCII text): lines of at most 75 octets, each continuation line
    starting with a space."""
    out = [line[:75]]
    for n in range(75, len(line), 74):
        out.append(" " + line[n : n + 74])
    return out


def ics(calendar: Calendar) -> bytes:
    person = calendar.person
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//Northwind//Groupware calendar export 7.3//EN",
        "CALSCALE:GREGORIAN",
        f"X-WR-CALNAME:{person.name}",
    ]
    if calendar.zone != "UTC":
        lines.append(f"X-WR-TIMEZONE:{calendar.zone}")
        lines += ["BEGIN:VTIMEZONE", f"TZID:{calendar.zone}"]
        for kind, start, before, after, name, month, day in VTIMEZONES[calendar.zone]:
            lines += [
                f"BEGIN:{kind}",
                f"DTSTART:{start}",
                f"RRULE:FREQ=YEARLY;BYMONTH={month};BYDAY={day}",
                f"TZOFFSETFROM:{before}",
                f"TZOFFSETTO:{after}",
                f"TZNAME:{name}",
                f"END:{kind}",
            ]
        lines.append("END:VTIMEZONE")

    def stamp(name: str, moment: datetime, all_day: bool = False) -> str:
        if all_day:
            return f"{name};VALUE=DATE:{moment:%Y%m%d}"
        if calendar.zone == "UTC":
            return f"{name}:{moment.astimezone(UTC):%Y%m%dT%H%M%SZ}"
        local = moment.astimezone(ZoneInfo(calendar.zone))
        return f"{name};TZID={calendar.zone}:{local:%Y%m%dT%H%M%S}"

    for e in calendar.events:
        lines += ["BEGIN:VEVENT", f"UID:{e.uid}", "DTSTAMP:20260301T080000Z"]
        if e.recurrence_id is not None:
            lines.append(stamp("RECURRENCE-ID", e.recurrence_id))
        lines += [
            f"SUMMARY:{e.summary}",
            stamp("DTSTART", e.start, e.all_day),
            stamp("DTEND", e.end, e.all_day),
        ]
        if e.rule:
            lines.append(f"RRULE:{e.rule}")
        lines += [stamp("EXDATE", x) for x in e.exdates]
        if e.status:
            lines.append(f"STATUS:{e.status}")
        if e.transparent:
            lines.append("TRANSP:TRANSPARENT")
        if e.description:
            lines += fold(f"DESCRIPTION:{e.description}")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return ("\r\n".join(lines) + "\r\n").encode()


@dataclass(frozen=True)
class Misreading:
    """Ways a reader can get the calendars wrong (the verifier uses none; the draw checks
    that each one moves a booking)."""

    z_as_office: bool = False  # a stamp ending in Z read as office time
    series_in_week_only: bool = False  # events whose DTSTART is before the week ignored
    series_in_utc: bool = False  # occurrences stepped in UTC, not by the zone's wall clock


CORRECT = Misreading()


def parse_ics(data: bytes, misreading: Misreading = CORRECT) -> list[Event]:
    """The verifier's reader: every VEVENT, times aware (floating time is office time)."""
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\n ", "")
    events: list[Event] = []
    fields: dict[str, list[tuple[str, str]]] | None = None
    for line in text.split("\n"):
        if line == "BEGIN:VEVENT":
            fields = {}
        elif line == "END:VEVENT" and fields is not None:
            events.append(_event(fields, misreading))
            fields = None
        elif fields is not None and ":" in line:
            head, value = line.split(":", 1)
            name, _sep, params = head.partition(";")
            fields.setdefault(name, []).append((params, value))
    return events


def _moment(params: str, value: str, misreading: Misreading) -> tuple[datetime, bool]:
    if ("VALUE=DATE" in params and "DATE-TIME" not in params) or len(value) == 8:
        day = datetime.strptime(value[:8], "%Y%m%d")
        return day.replace(tzinfo=OFFICE), True
    local = datetime.strptime(value.rstrip("Z"), "%Y%m%dT%H%M%S")
    if value.endswith("Z"):
        return local.replace(tzinfo=OFFICE if misreading.z_as_office else UTC), False
    zone = dict(p.split("=", 1) for p in params.split(";") if "=" in p).get("TZID", OFFICE_ZONE)
    return local.replace(tzinfo=ZoneInfo(zone)), False


def _event(fields: Mapping[str, list[tuple[str, str]]], misreading: Misreading) -> Event:
    def one(name: str) -> str:
        return fields.get(name, [("", "")])[0][1]

    start, all_day = _moment(*fields["DTSTART"][0], misreading)
    end, _ = _moment(*fields["DTEND"][0], misreading)
    recurrence = fields.get("RECURRENCE-ID")
    return Event(
        uid=one("UID"),
        summary=one("SUMMARY"),
        start=start,
        end=end,
        all_day=all_day,
        status=one("STATUS"),
        transparent=one("TRANSP") == "TRANSPARENT",
        rule=one("RRULE"),
        exdates=tuple(_moment(p, v, misreading)[0] for p, v in fields.get("EXDATE", [])),
        recurrence_id=_moment(*recurrence[0], misreading)[0] if recurrence else None,
        description=one("DESCRIPTION"),
    )


def occurrences(event: Event, until: datetime, misreading: Misreading = CORRECT) -> list[datetime]:
    """The starts of a (possibly recurring) event before ``until``: FREQ=DAILY or WEEKLY,
    BYDAY, COUNT, UNTIL; stepped by the wall clock of the event's zone (RFC 5545)."""
    if not event.rule:
        return [event.start]
    parts = dict(p.split("=", 1) for p in event.rule.split(";"))
    byday = [d[-2:] for d in parts.get("BYDAY", "").split(",") if d]
    codes = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
    count = int(parts["COUNT"]) if "COUNT" in parts else None
    last = None
    if "UNTIL" in parts:
        last = _moment("", parts["UNTIL"], CORRECT)[0]
    out: list[datetime] = []
    made, n = 0, 0
    while True:
        if misreading.series_in_utc:
            start = (event.start.astimezone(UTC) + timedelta(days=n)).astimezone(event.start.tzinfo)
        else:
            start = event.start + timedelta(days=n)  # aware arithmetic keeps the wall clock
        n += 1
        if start >= until or (count is not None and made >= count):
            break
        if last is not None and start > last:
            break
        if parts["FREQ"] == "WEEKLY" and not byday and start.weekday() != event.start.weekday():
            continue
        if byday and codes[start.weekday()] not in byday:
            continue
        made += 1
        out.append(start)
    return out


def busy_intervals(
    events: Sequence[Event], week: date, misreading: Misreading = CORRECT
) -> list[Interval]:
    """Blocking time in the week, naive office time: every occurrence of every event but the
    cancelled and the free ones; an EXDATE drops an occurrence, an event with a
    RECURRENCE-ID replaces it; an all-day event blocks its days (DTEND exclusive)."""
    monday = datetime.combine(week, datetime.min.time(), OFFICE)
    until = monday + timedelta(days=7)
    moved = {(e.uid, e.recurrence_id.astimezone(UTC)): e for e in events if e.recurrence_id}
    out: list[Interval] = []
    for master in events:
        if master.recurrence_id is not None or master.status == "CANCELLED":
            continue
        if misreading.series_in_week_only and master.start < monday:
            continue
        length = master.end - master.start
        skipped = {x.astimezone(UTC) for x in master.exdates}
        for start in occurrences(master, until, misreading):
            instant = start.astimezone(UTC)
            if instant in skipped:
                continue
            event = moved.get((master.uid, instant))
            if event is not None:
                if event.status == "CANCELLED" or event.transparent:
                    continue
                span = (event.start, event.end)
            elif master.transparent:
                continue
            else:
                span = (start, start + length)
            begin, end = (_office(t) for t in span)
            if end > monday.replace(tzinfo=None) and begin < until.replace(tzinfo=None):
                out.append((begin, end))
    return out


def _office(moment: datetime) -> datetime:
    return moment.astimezone(OFFICE).replace(tzinfo=None)


# ---- the rule, as the verifier applies it --------------------------------------------------


@dataclass(frozen=True)
class Rules:
    back_to_back: bool = True  # a meeting may start the minute a busy event ends
    close_inclusive: bool = True  # a meeting may end exactly at 17:00
    zones: Mapping[str, str] = field(default_factory=dict)  # person → zone of their hours
    seats: Mapping[str, int] = field(default_factory=dict)  # room → seats, the user's answer
    hours: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # person → local hours
    freed: Mapping[str, Interval] = field(default_factory=dict)  # person → an event called off


@dataclass(frozen=True)
class Booking:
    start: datetime
    end: datetime
    room: str
    people: tuple[str, ...]


@dataclass
class World:
    """Everything the files say about the week, in office time."""

    week: date
    busy: dict[str, list[Interval]]
    directory: Directory
    rooms: list[Room]
    room_taken: dict[str, list[Interval]]
    rules: Rules = field(default_factory=Rules)
    _windows: dict[tuple[str, date], Interval] = field(default_factory=dict, repr=False)

    def window(self, person: str, day: date) -> Interval:
        """The person's working hours that day, in office time."""
        key = (person, day)
        if key not in self._windows:
            self._windows[key] = self._window(person, day)
        return self._windows[key]

    def _window(self, person: str, day: date) -> Interval:
        start, end = self.rules.hours.get(person, self.directory.hours[person])
        zone = ZoneInfo(self.rules.zones.get(person, self.directory.zone[person]))
        midnight = datetime.combine(day, datetime.min.time(), zone)
        return (
            _office(midnight + timedelta(minutes=start)),
            _office(midnight + timedelta(minutes=end)),
        )


def world_of(inputs: Mapping[str, bytes], rules: Rules, misreading: Misreading = CORRECT) -> World:
    directory = read_directory(inputs[PEOPLE_CSV])
    calendars = {k: inputs[calendar_path(k)] for k in directory.zone}
    week = week_of(calendars.values())
    rooms, taken = read_rooms(inputs[ROOMS])
    rooms = [replace(r, seats=rules.seats.get(r.name, r.seats)) for r in rooms]
    busy = {
        k: [span for span in _busy(c, week, misreading) if span != rules.freed.get(k)]
        for k, c in calendars.items()
    }
    return World(week, busy, directory, rooms, taken, rules)


@functools.lru_cache(maxsize=512)
def _busy(data: bytes, week: date, misreading: Misreading) -> tuple[Interval, ...]:
    """A calendar's busy time, read once per draft: the draw reads each export many times."""
    return tuple(busy_intervals(_parsed(data, misreading), week, misreading))


@functools.lru_cache(maxsize=512)
def _parsed(data: bytes, misreading: Misreading) -> tuple[Event, ...]:
    return tuple(parse_ics(data, misreading))


def week_of(calendars: Iterable[bytes]) -> date:
    """The Monday of the week to book: the middle of the three weeks every export covers."""
    first = min(_office(e.start) for c in calendars for e in _parsed(c, CORRECT) if not e.rule)
    monday = (first - timedelta(days=first.weekday())).date()
    return monday + timedelta(days=7)


def _clash(a: Interval, b: Interval, back_to_back: bool) -> bool:
    if back_to_back:
        return a[0] < b[1] and b[0] < a[1]
    return a[0] <= b[1] and b[0] <= a[1]


Plan = dict[str, Booking]  # item id → booking, in booking order


def _free(world: World, person: str, span: Interval, plan: Plan, skip: Iterable[str]) -> bool:
    left_out = set(skip)
    busy = [
        *world.busy[person],
        *((b.start, b.end) for i, b in plan.items() if i not in left_out and person in b.people),
    ]
    return not any(_clash(span, other, world.rules.back_to_back) for other in busy)


def _room_free(world: World, room: str, span: Interval, plan: Plan, skip: Iterable[str]) -> bool:
    left_out = set(skip)
    taken = [
        *world.room_taken[room],
        *((b.start, b.end) for i, b in plan.items() if i not in left_out and b.room == room),
    ]
    return not any(_clash(span, other, world.rules.back_to_back) for other in taken)


def _in_hours(world: World, people: Iterable[str], span: Interval) -> bool:
    day = span[0].date()
    midnight = datetime.combine(day, datetime.min.time())
    close = midnight + timedelta(minutes=CLOSE if world.rules.close_inclusive else CLOSE - 1)
    if span[0] < midnight + timedelta(minutes=OPEN) or span[1] > close:
        return False
    lunch = (midnight + timedelta(minutes=LUNCH[0]), midnight + timedelta(minutes=LUNCH[1]))
    if span[0] < lunch[1] and lunch[0] < span[1]:
        return False
    for person in people:
        start, end = world.window(person, day)
        if span[0] < start or span[1] > end:
            return False
    return True


def _rooms_for(world: World, people: Sequence[str], extra_seats: int = 0) -> list[Room]:
    """The rooms that fit, smallest first (then by name): a seat for everyone in the Paris
    office (and ``extra_seats``), video when anyone is elsewhere."""
    here = sum(1 for p in people if world.directory.office[p] == "Paris") + extra_seats
    video = any(world.directory.office[p] != "Paris" for p in people)
    fitting = [r for r in world.rooms if r.seats >= here and (r.video or not video)]
    return sorted(fitting, key=lambda r: (r.seats, r.name))


def _starts(world: World, days: Sequence[str]) -> Iterable[datetime]:
    for index, day in enumerate(DAYS):
        if day in days:
            midnight = datetime.combine(world.week + timedelta(days=index), datetime.min.time())
            for minute in range(OPEN, CLOSE, SLOT):
                yield midnight + timedelta(minutes=minute)


def meeting_fits(world: World, meeting: Meeting, span: Interval, room: str, plan: Plan) -> bool:
    skip = [meeting.id]
    if meeting.after and meeting.after in plan and span[0] < plan[meeting.after].end:
        return False
    return (
        _in_hours(world, meeting.people, span)
        and all(_free(world, p, span, plan, skip) for p in meeting.people)
        and _room_free(world, room, span, plan, skip)
    )


def book_meeting(world: World, meeting: Meeting, plan: Plan) -> Booking | None:
    """The earliest slot (allowed day, then time) with every attendee free and in hours, and
    the smallest fitting room free then."""
    length = timedelta(minutes=meeting.minutes)
    for start in _starts(world, meeting.days):
        span = (start, start + length)
        for room in _rooms_for(world, meeting.people):
            if meeting_fits(world, meeting, span, room.name, plan):
                return Booking(start, start + length, room.name, meeting.people)
    return None


def book_meetings(world: World, meetings: Sequence[Meeting]) -> Plan | None:
    plan: Plan = {}
    for meeting in meetings:
        booking = book_meeting(world, meeting, plan)
        if booking is None:
            return None
        plan[meeting.id] = booking
    return plan


@dataclass(frozen=True)
class Loop:
    """The interview loop of turn 2: three consecutive sessions, one room, a panel each."""

    candidate: str
    panels: tuple[tuple[str, ...], ...]  # people keys per session

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(f"I{n}" for n in range(1, len(self.panels) + 1))


def _loop_spans(start: datetime) -> list[Interval]:
    step = timedelta(minutes=SESSION_MINUTES)
    return [(start + n * step, start + (n + 1) * step) for n in range(LOOP_SESSIONS)]


def loop_fits(world: World, loop: Loop, start: datetime, room: str, plan: Plan) -> bool:
    spans = _loop_spans(start)
    whole = (spans[0][0], spans[-1][1])
    if not _in_hours(world, (), whole) or not _room_free(world, room, whole, plan, loop.ids):
        return False
    return all(
        _in_hours(world, panel, span) and all(_free(world, p, span, plan, loop.ids) for p in panel)
        for panel, span in zip(loop.panels, spans, strict=True)
    )


def book_loop(world: World, loop: Loop, plan: Plan) -> Plan | None:
    everyone = sorted({p for panel in loop.panels for p in panel})
    biggest = max(
        loop.panels, key=lambda panel: sum(1 for p in panel if world.directory.office[p] == "Paris")
    )
    for start in _starts(world, LOOP_DAYS):
        for room in _loop_rooms(world, everyone, biggest):
            if loop_fits(world, loop, start, room.name, plan):
                spans = _loop_spans(start)
                return {
                    i: Booking(s, e, room.name, panel)
                    for i, (s, e), panel in zip(loop.ids, spans, loop.panels, strict=True)
                }
    return None


def _loop_rooms(world: World, everyone: Sequence[str], biggest: Sequence[str]) -> list[Room]:
    """A seat for the largest panel's Paris members and the candidate; video if any panelist
    is elsewhere."""
    video = any(world.directory.office[p] != "Paris" for p in everyone)
    seats = sum(1 for p in biggest if world.directory.office[p] == "Paris") + 1
    fitting = [r for r in world.rooms if r.seats >= seats and (r.video or not video)]
    return sorted(fitting, key=lambda r: (r.seats, r.name))


def reschedule(
    world: World, meetings: Sequence[Meeting], loop: Loop | None, old: Plan
) -> Plan | None:
    """After invitations went out: every item that still fits keeps its slot and room; the
    others are rebooked, in booking order (the meetings, then the loop), each in its earliest
    slot given everything that stays."""
    kept = dict(old)
    moving = [
        m
        for m in meetings
        if not meeting_fits(world, m, (old[m.id].start, old[m.id].end), old[m.id].room, old)
    ]
    loop_moves = loop is not None and not loop_fits(
        world, loop, old[loop.ids[0]].start, old[loop.ids[0]].room, old
    )
    for m in moving:
        del kept[m.id]
    if loop is not None and loop_moves:
        for i in loop.ids:
            del kept[i]
    for m in moving:
        booking = book_meeting(world, m, kept)
        if booking is None:
            return None
        kept[m.id] = booking
    if loop is not None and loop_moves:
        booked = book_loop(world, loop, kept)
        if booked is None:
            return None
        kept.update(booked)
    order = [*(m.id for m in meetings), *(loop.ids if loop else ())]
    return {i: kept[i] for i in order}


# ---- the expected schedule -----------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """What the text fixes beyond the files: the requests the mails state, the loop (turn
    2), the answers the user gives (``rules``), whether a changed calendar comes."""

    requests: tuple[Request, ...]  # in id order
    loop: Loop | None
    rules: Rules  # the remote colleague's zone, the room's seats and the hours the user says
    changes: bool  # a changed calendar (turn 3) is handled as the policy says


CHICAGO = "America/Chicago"


def expected(
    s0: Mapping[str, bytes], final: Mapping[str, bytes], task: Task, rules: Rules | None = None
) -> tuple[Plan, Plan | None]:
    """The schedule the user wants at the end, and (with a changed calendar) the one the
    changes were made to."""
    rules = rules or task.rules
    world = world_of(s0, rules)
    meetings = resolve(task.requests, world.directory)
    plan = book_meetings(world, meetings)
    assert plan is not None, "the draw guarantees every meeting a slot"
    if task.loop is not None:
        booked = book_loop(world, task.loop, plan)
        assert booked is not None, "the draw guarantees the loop a slot"
        plan = {**plan, **booked}
    if not task.changes:
        return plan, None
    later = reschedule(world_of(final, rules), meetings, task.loop, plan)
    assert later is not None, "the draw guarantees the rebooked items a slot"
    return later, plan


def moved(before: Plan, after: Plan) -> list[str]:
    """The items whose time or room changed."""
    return [
        i for i in after if (after[i].start, after[i].room) != (before[i].start, before[i].room)
    ]


# ---- drafting ---------------------------------------------------------------------------------

# What the files contradict, settled only by asking; a seed draws two or three.
REMOTE_ZONE, TWO_LENGTHS, ROOM_SEATS, OWN_HOURS, CALLED_OFF = (
    "remote_zone",
    "two_lengths",
    "room_seats",
    "own_hours",
    "called_off",
)
CONTRADICTIONS = (REMOTE_ZONE, TWO_LENGTHS, ROOM_SEATS, OWN_HOURS, CALLED_OFF)
# Hours a colleague's signature may give instead of the directory's (local time, minutes).
OTHER_HOURS = ((10 * 60, 16 * 60), (9 * 60, 15 * 60), (11 * 60, 17 * 60), (9 * 60, 16 * 60))


@dataclass(frozen=True)
class Contradictions:
    """The seed's contradictions and how each is settled (the user's answers)."""

    kinds: tuple[str, ...] = ()
    # TWO_LENGTHS: the request, the other attendee who mails another length, that length
    dispute: tuple[str, str, int] = ("", "", 0)
    # ROOM_SEATS: the room, the seats facilities' mail gives, whether the mail is right
    room: tuple[str, int, bool] = ("", 0, False)
    # OWN_HOURS: the colleague, the hours their signature gives, whether the signature is right
    hours: tuple[str, tuple[int, int], bool] = ("", (0, 0), False)
    # CALLED_OFF: the colleague, the event their mail calls off (its title, its span in office
    # time) while their calendar still holds it, whether the mail is right
    called_off: tuple[str, str, Interval | None, bool] = ("", "", None, False)


@dataclass
class Setting:
    week: date
    people: list[Person]
    calendars: dict[str, Calendar]
    rooms: list[Room]
    room_bookings: list[tuple[str, datetime, datetime]]
    requests: list[Request]  # the truth, in id order
    remote: str
    lisbon: str
    loop: Loop
    contradictions: Contradictions = Contradictions()
    changed: bytes = b""  # the turn-3 export of `changed_person`
    changed_person: str = ""
    called: str = ""  # the item the new call lands on (named by the user)
    mailbox: bytes = b""  # requests.mbox, written once the week is accepted
    wordings: list[mail.Wording] = field(default_factory=list)
    statements: dict[str, mail.Statement] = field(default_factory=dict)

    def files(self) -> dict[str, bytes]:
        files = {calendar_path(k): ics(c) for k, c in self.calendars.items()}
        files[PEOPLE_CSV] = people_csv(self.people)
        files[ROOMS] = rooms_xlsx(self.rooms, self.room_bookings)
        files[REQUESTS] = self.mailbox
        files[POLICY] = policy_md().encode()
        return files

    def rules(self, misread: str = "") -> Rules:
        """The rules the user's answers give; ``misread``: that contradiction settled the
        other way."""
        room, seats, mail_right = self.contradictions.room
        person, hours, signature_right = self.contradictions.hours
        who, _title, span, off_right = self.contradictions.called_off
        return Rules(
            zones={} if misread == REMOTE_ZONE else {self.remote: CHICAGO},
            seats={room: seats} if room and mail_right != (misread == ROOM_SEATS) else {},
            hours=({person: hours} if person and signature_right != (misread == OWN_HOURS) else {}),
            freed={who: span} if span is not None and off_right != (misread == CALLED_OFF) else {},
        )

    def truth(self, misread: str = "") -> tuple[Request, ...]:
        """The requests; ``misread == TWO_LENGTHS``: the other attendee's length taken."""
        item, _other, minutes = self.contradictions.dispute
        if misread != TWO_LENGTHS or not item:
            return tuple(self.requests)
        return tuple(replace(r, minutes=minutes) if r.id == item else r for r in self.requests)

    def task(self, changes: bool, misread: str = "") -> Task:
        return Task(self.truth(misread), self.loop, self.rules(misread), changes)


def draw(params: FamilyParams) -> Setting:
    rng = params.rng("calendar-hard")
    for _attempt in range(400):
        setting = _draw_once(rng)
        if setting is not None and _accept(setting, rng):
            write_mailbox(setting, params.rng("calendar-hard-mail"))
            return setting
    raise RuntimeError(f"no schedulable hard week for seed {params.seed}; widen the draw")


def _draw_once(rng: random.Random) -> Setting | None:
    week = rng.choice(WEEKS)
    names = list(ROSTER)
    rng.shuffle(names)
    remote, lisbon = names[0][0], names[1][0]
    part_timer = names[2][0]
    kinds = tuple(sorted(rng.sample(CONTRADICTIONS, rng.choice((2, 3)))))
    people = []
    for n, (key, name) in enumerate(names):
        office, zone = ("Paris", OFFICE_ZONE)
        if key == remote:  # the directory's New York is the contradiction; else it is right
            office, zone = ("New York", "America/New_York")
            if REMOTE_ZONE not in kinds:
                office, zone = ("Chicago", CHICAGO)
        elif key == lisbon:
            office, zone = ("Lisbon", "Europe/Lisbon")
        hours = (10 * 60, 16 * 60) if key == part_timer else (9 * 60, 17 * 60)
        if key == remote:  # 14:00–22:00 office time from Chicago (13:00 read as New York)
            hours = (8 * 60, 16 * 60)
        people.append(Person(key, name, office, zone, hours, TEAMS[n % 2], key == lisbon))
    people.sort(key=lambda p: p.key)
    calendars = {}
    for p in people:
        lives = CHICAGO if p.key == remote else p.zone
        export = "UTC" if p.utc_export else lives
        calendars[p.key] = Calendar(p, export, _events(rng, week, p, lives))
    bookings = _room_bookings(rng, week)
    requests = _requests(rng, people, remote, lisbon)
    paris = [p.key for p in people if p.office == "Paris"]
    panels = (
        tuple(sorted(rng.sample(paris, 2))),
        tuple(sorted(rng.sample([k for k in paris if k != part_timer], 2))),
        (remote,),
    )
    candidate = rng.choice(CANDIDATES)
    rooms = [Room(*r) for r in ROOM_TABLE]
    return Setting(
        week,
        people,
        calendars,
        rooms,
        bookings,
        requests,
        remote,
        lisbon,
        Loop(candidate, panels),
        Contradictions(kinds),
    )


def _local(week: date, day: int, minute: int, zone: str) -> datetime:
    """``minute`` past midnight of the week's day ``day`` (negative: a week before), on the
    wall clock of ``zone``."""
    midnight = datetime.combine(week + timedelta(days=day), datetime.min.time(), ZoneInfo(zone))
    return midnight + timedelta(minutes=minute)


def _events(rng: random.Random, week: date, person: Person, zone: str) -> list[Event]:
    """About 17 events over the week before, the week and the week after, on the wall clock
    of ``zone`` (where the person lives): one-offs (some cancelled, tentative or free), a
    weekly series and a daily one begun weeks earlier, an EXDATE, a moved occurrence, a
    multi-day absence."""
    events: list[Event] = []
    uid = f"{person.key}-{{}}@groupware.{DOMAIN}"
    begin, end = person.hours
    for n in range(rng.randint(15, 19)):
        day = rng.randrange(-7, 12)
        if (day + 7) % 7 >= 5:
            continue
        minute = rng.randrange(begin, end - 60, 30)
        start = _local(week, day, minute, zone)
        length = timedelta(minutes=rng.choice((30, 60, 60, 90)))
        roll = rng.random()
        status = "CANCELLED" if roll < 0.12 else "TENTATIVE" if roll < 0.22 else ""
        events.append(
            Event(
                uid.format(n),
                rng.choice(BUSY),
                start,
                start + length,
                status=status,
                transparent=0.22 <= roll < 0.3,
                description=_description(rng),
            )
        )
    # a weekly series set weeks ago (in February for the Chicago zone: before its change)
    first = _local(
        week,
        -rng.choice((21, 28, 35)) + rng.randrange(2),
        rng.randrange(begin + 60, end - 120, 30),
        zone,
    )
    weekday = ("MO", "TU", "WE", "TH", "FR")[first.weekday()]
    other = ("MO", "TU", "WE", "TH", "FR")[(first.weekday() + 2) % 5]
    series = Event(
        uid.format("weekly"),
        "Team meeting",
        first,
        first + timedelta(minutes=60),
        rule=f"FREQ=WEEKLY;BYDAY={weekday},{other};UNTIL=20260630T220000Z",
    )
    this_week = [s for s in occurrences(series, _local(week, 7, 0, zone)) if s.date() >= week]
    skipped = this_week[0]
    shifted = this_week[1]
    events.append(replace(series, exdates=(skipped,)))
    moved_to = shifted + timedelta(minutes=rng.choice((-90, 120, 150)))
    events.append(
        Event(
            series.uid,
            "Team meeting (moved)",
            moved_to,
            moved_to + timedelta(minutes=60),
            recurrence_id=shifted,
        )
    )
    if rng.random() < 0.7:
        standup = _local(week, -rng.randint(8, 16), begin + rng.choice((0, 30)), zone)
        events.append(
            Event(
                uid.format("standup"),
                "Daily stand-up",
                standup,
                standup + timedelta(minutes=15),
                rule=f"FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR;COUNT={rng.randint(14, 30)}",
            )
        )
    if zone == OFFICE_ZONE and rng.random() < 0.4:
        day = rng.randrange(5)
        away = datetime.combine(week + timedelta(days=day), datetime.min.time(), OFFICE)
        span = 1 if day == 4 else rng.choice((1, 1, 2))
        events.append(
            Event(
                uid.format("ooo"), "Out of office", away, away + timedelta(days=span), all_day=True
            )
        )
    events.sort(key=lambda e: (e.start, e.uid))
    return events


def _description(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return ""
    return rng.choice(
        (
            "Dial-in details are in the room booking; please join five minutes early so we "
            "can check the screen share works for everyone",
            "Agenda: status of the open items, risks, next steps. Notes go to the shared "
            "folder afterwards; ping me if you cannot make it",
        )
    )


def _room_bookings(rng: random.Random, week: date) -> list[tuple[str, datetime, datetime]]:
    out = []
    for _n in range(rng.randint(10, 14)):
        midnight = datetime.combine(week + timedelta(days=rng.randrange(5)), datetime.min.time())
        start = midnight + timedelta(minutes=rng.randrange(OPEN, CLOSE - 60, 30))
        length = timedelta(minutes=rng.choice((60, 90, 120, 180)))
        out.append(
            (
                rng.choice(ROOM_TABLE)[0],
                start,
                min(start + length, midnight + timedelta(minutes=CLOSE)),
            )
        )
    return out


def _requests(
    rng: random.Random, people: Sequence[Person], remote: str, lisbon: str
) -> list[Request]:
    email = {p.key: p.email for p in people}
    keys = [p.key for p in people]
    requests: list[Request] = []
    titles = rng.sample(TITLES, k=MEETINGS)
    alias_at = rng.randrange(MEETINGS)
    for n, title in enumerate(titles, start=1):
        size = rng.choice((2, 2, 3, 3))
        chosen = rng.sample([k for k in keys if k != remote], k=size)
        if n <= 2:  # the remote colleague in two meetings, the whole week open to them
            chosen = [remote, *chosen[:2]]
        if n in (3, 4) and lisbon not in chosen:
            chosen[0] = lisbon
        attendees = tuple(email[k] for k in sorted(set(chosen)))
        if n - 1 == alias_at:
            attendees = (f"team:{rng.choice(TEAMS)}",)
        first = 0 if n <= 2 else rng.randint(0, 1)
        requests.append(
            Request(
                id=f"M{n}",
                title=title,
                attendees=attendees,
                minutes=rng.choice((30, 45, 60) if n <= 2 else (30, 45, 60, 90)),
                days=DAYS[first:] if n <= 2 else DAYS[first : first + rng.randint(3, 4)],
                priority=rng.choice((1, 2, 2, 3)),
                updated=f"2026-02-{10 + n:02d}",
            )
        )
    rng.shuffle(requests)
    requests = [replace(r, id=f"M{n}") for n, r in enumerate(requests, start=1)]
    # one meeting must follow another that is booked before it
    order = sorted(range(MEETINGS), key=lambda i: (requests[i].priority, i))
    a, b = sorted(rng.sample(range(MEETINGS), 2), key=order.index)
    requests[b] = replace(requests[b], after=requests[a].id, days=_days_from(requests[a].days[0]))
    return requests


def _days_from(day: str) -> tuple[str, ...]:
    return DAYS[DAYS.index(day) :]


def _accept(setting: Setting, rng: random.Random) -> bool:
    """Every meeting and the loop booked; each misreading of the calendars and each of the
    seed's contradictions settled the other way moves a booking; then the changed calendar
    of turn 3 (a call on one booked meeting, a cancelled event reinstated under another
    item) is drawn, and the policy's rebooking must differ from booking afresh."""
    files = setting.files()
    if _plain(files, setting.task(changes=False)) is None:
        return False  # a week with no room for the meetings: no contradiction saves it
    for kind in setting.contradictions.kinds:
        if not _draw_contradiction(setting, files, kind, rng):
            return False
    plan = _booked(files, setting.task(changes=False))
    if plan is None:
        return False
    first_only = {r.id: plan[r.id] for r in setting.requests}
    truth = setting.task(changes=False)
    misread = [
        _plain(files, truth, Misreading(z_as_office=True)),
        _plain(files, truth, Misreading(series_in_week_only=True)),
        *(_plain(files, setting.task(False, kind)) for kind in setting.contradictions.kinds),
    ]
    if any(m == first_only for m in misread):
        return False
    bare = book_loop(world_of(files, truth.rules), setting.loop, {})
    if bare is None or all(bare[i] == plan[i] for i in setting.loop.ids):
        return False  # the loop must depend on turn 1's bookings
    meetings = resolve(truth.requests, read_directory(files[PEOPLE_CSV]))
    return _draw_change(setting, files, plan, meetings, rng)


def _draw_contradiction(
    setting: Setting, files: Mapping[str, bytes], kind: str, rng: random.Random
) -> bool:
    """Draw how ``kind`` shows (which request, room or colleague; the other value; which
    side the user takes) until settling it the other way moves a meeting."""
    people = {p.key: p for p in setting.people}
    off_candidates = _called_off_candidates(setting, files) if kind == CALLED_OFF else []
    for _try in range(6):
        found = setting.contradictions
        if kind == TWO_LENGTHS:
            request = rng.choice([r for r in setting.requests if len(r.attendees) >= 2])
            keys = [read_directory(files[PEOPLE_CSV]).key_of[e] for e in request.attendees]
            minutes = rng.choice([m for m in (30, 45, 60, 90) if m != request.minutes])
            found = replace(found, dispute=(request.id, rng.choice(keys), minutes))
        elif kind == ROOM_SEATS:
            room = rng.choice(setting.rooms)
            seats = rng.choice([n for n in (2, 3, 4, 5, 6, 8) if n != room.seats])
            found = replace(found, room=(room.name, seats, rng.random() < 0.5))
        elif kind == OWN_HOURS:
            person = rng.choice([k for k in people if k != setting.remote])
            hours = rng.choice([h for h in OTHER_HOURS if h != people[person].hours])
            found = replace(found, hours=(person, hours, rng.random() < 0.5))
        elif kind == CALLED_OFF:
            if not off_candidates:
                return False
            person, title, span = rng.choice(off_candidates)
            found = replace(found, called_off=(person, title, span, rng.random() < 0.5))
        setting.contradictions = found
        if kind == REMOTE_ZONE or _moves(setting, files, kind):
            return True
    return False


def _called_off_candidates(
    setting: Setting, files: Mapping[str, bytes]
) -> list[tuple[str, str, Interval]]:
    """Events a colleague may call off by mail that could matter: one-offs before one of
    their booked meetings (freed, the meeting may move into them)."""
    plan = _plain(files, setting.task(False))
    if plan is None:
        return []
    return [
        (person.key, title, span)
        for person in setting.people
        if person.key != setting.remote
        for title, span in _one_offs(files[calendar_path(person.key)], setting.week)
        if any(person.key in b.people and span[0] < b.start for b in plan.values())
    ]


def _one_offs(data: bytes, week: date) -> list[tuple[str, Interval]]:
    """The calendar's one-off events that block time in office hours of ``week`` (title,
    span in office time): what a colleague may mail is called off."""
    monday = datetime.combine(week, datetime.min.time())
    out = []
    for e in _parsed(data, CORRECT):
        if e.rule or e.recurrence_id or e.all_day or e.status == "CANCELLED" or e.transparent:
            continue
        span = (_office(e.start), _office(e.end))
        if monday <= span[0] < monday + timedelta(days=5) and 9 <= span[0].hour < 16:
            out.append((e.summary, span))
    return out


def _moves(setting: Setting, files: Mapping[str, bytes], kind: str) -> bool:
    right = _plain(files, setting.task(False))
    return right is not None and _plain(files, setting.task(False, kind)) != right


def _booked(files: Mapping[str, bytes], task: Task) -> Plan | None:
    try:
        plan, _ = expected(files, files, task)
    except AssertionError:
        return None
    return plan


def _plain(files: Mapping[str, bytes], task: Task, misreading: Misreading = CORRECT) -> Plan | None:
    world = world_of(files, task.rules, misreading)
    return book_meetings(world, resolve(task.requests, world.directory))


def _draw_change(
    setting: Setting,
    files: Mapping[str, bytes],
    plan: Plan,
    meetings: Sequence[Meeting],
    rng: random.Random,
) -> bool:
    """A call on one booked meeting (not a predecessor) and, in the same export, a cancelled
    event of that person reinstated under another booked item of theirs."""
    predecessors = {m.after for m in meetings if m.after}
    for _try in range(20):
        target = rng.choice([m for m in meetings if m.id not in predecessors])
        person = rng.choice([p for p in target.people if p != setting.remote])
        theirs = [i for i, b in plan.items() if person in b.people and i != target.id]
        if not theirs:
            continue
        other = rng.choice(theirs)
        old = setting.calendars[person]
        booked = plan[target.id]
        call = Event(
            f"{person}-{len(old.events) + 21}@groupware.{DOMAIN}",
            "External call",
            booked.start.replace(tzinfo=OFFICE),
            booked.end.replace(tzinfo=OFFICE),
        )
        clash = plan[other]
        revived = Event(
            f"{person}-{len(old.events) + 20}@groupware.{DOMAIN}",
            "Supplier visit",
            clash.start.replace(tzinfo=OFFICE),
            clash.start.replace(tzinfo=OFFICE) + timedelta(minutes=30),
        )
        # in s0 it is cancelled; the new export confirms it
        s0_events = sorted(
            [*old.events, replace(revived, status="CANCELLED")], key=lambda e: (e.start, e.uid)
        )
        new_events = sorted(
            [*old.events, replace(revived, status="CONFIRMED"), call],
            key=lambda e: (e.start, e.uid),
        )
        before = replace(old, events=s0_events)  # a cancelled event moves nothing in s0
        s0 = {**files, calendar_path(person): ics(before)}
        final = {**s0, calendar_path(person): ics(replace(old, events=new_events))}
        task = setting.task(changes=True)
        try:
            later, earlier = expected(s0, final, task)
        except AssertionError:
            continue
        assert earlier is not None
        shifted = moved(earlier, later)
        try:
            afresh, _ = expected(final, final, replace(task, changes=False))
        except AssertionError:  # booked afresh, something no longer fits: differs anyway
            afresh = {}
        if target.id not in shifted or other not in shifted or afresh == later:
            continue
        setting.calendars[person] = before
        setting.changed, setting.changed_person, setting.called = (
            final[calendar_path(person)],
            person,
            target.id,
        )
        return True
    return False


def write_mailbox(setting: Setting, rng: random.Random) -> None:
    """``requests.mbox``: each request's thread, written from the truth with its drawn
    distractors, the mails of the seed's contradictions, and a week of other office mail.
    Everyone signs with their hours (the directory's, but for a colleague whose own hours
    are one of the seed's contradictions)."""
    found = setting.contradictions
    directory = read_directory(people_csv(setting.people))
    senders = {}
    for p in setting.people:
        hours = found.hours[1] if p.key == found.hours[0] else p.hours
        senders[p.key] = mail.Sender(p.key, p.name, p.email, mail.hours_signature(*hours, rng))
    titles = {r.id: r.title for r in setting.requests}
    weights = mail.STORY_WEIGHTS
    mails: list[mail.Mail] = []
    for r in setting.requests:
        team = r.attendees[0].removeprefix("team:") if r.attendees[0].startswith("team:") else ""
        keys = list(directory.teams[team]) if team else [directory.key_of[e] for e in r.attendees]
        disputed_by = found.dispute[1] if found.dispute[0] == r.id else ""
        sender = rng.choice([k for k in keys if k != disputed_by])
        others = [] if team else [k for k in keys if k != sender]
        story = rng.choices(list(weights), weights=list(weights.values()))[0]
        fixes_days = story in (mail.CORRECTED, mail.QUOTED, mail.FORWARDED) and rng.random() < 0.5
        decoy_days: tuple[str, ...] = ()
        if fixes_days:
            decoy_days = rng.choice([d for d in _day_runs() if d != r.days])
        outsiders = [p.key for p in setting.people if p.key not in keys]
        wording = mail.Wording(
            id=r.id,
            title=r.title,
            sender=sender,
            attendees=tuple(others),
            team=team,
            minutes=r.minutes,
            days=r.days,
            priority=r.priority,
            after_title=titles.get(r.after, ""),
            story=story,
            decoy_minutes=rng.choice([m for m in (30, 45, 60, 90) if m != r.minutes]),
            decoy_days=decoy_days,
            joined=rng.choice(others) if len(others) >= 2 and rng.random() < 0.4 else "",
            left_out=rng.choice(outsiders) if outsiders and rng.random() < 0.4 else "",
            unrelated_title=(
                rng.choice([t for i, t in titles.items() if i != r.id])
                if not r.after and rng.random() < 0.5
                else ""
            ),
        )
        start = mail.request_sent(setting.week, rng)
        thread, said = mail.request_thread(wording, senders, start, rng)
        mails += thread
        if disputed_by:
            later = start + timedelta(hours=rng.randint(2, 6))
            mails.append(
                mail.dispute_mail(wording, senders[disputed_by], found.dispute[2], later, rng)
            )
        setting.wordings.append(wording)
        setting.statements[r.id] = said
    if found.room[0]:
        desk = mail.Sender("facilities", "Facilities Desk", f"facilities@{DOMAIN}")
        sent = mail.request_sent(setting.week, rng)
        mails.append(mail.seat_note(found.room[0], found.room[1], sent, desk, rng))
    who, title, span, _right = found.called_off
    if span is not None:
        sent = mail.request_sent(setting.week, rng)
        mails.append(mail.called_off_mail(senders[who], title, span[0], sent, rng))
    if found.hours[0]:  # the colleague writes at least once, signed with their own hours
        mails += mail.noise([senders[found.hours[0]]], list(TITLES), setting.week, rng)[:1]
    mails += _loop_mails(setting, rng)
    mails += mail.noise(list(senders.values()), list(TITLES), setting.week, rng)
    setting.mailbox = mail.mbox(mails)


def _loop_mails(setting: Setting, rng: random.Random) -> list[mail.Mail]:
    """HR's mails on the turn-2 loop (the panels by first name; in three seeds of five a
    later mail swaps one panelist of a Paris session) and on another candidate's, later."""
    first = {p.key: p.name.split()[0] for p in setting.people}
    panels = [[first[k] for k in panel] for panel in setting.loop.panels]
    swap = None
    if rng.random() < 0.6:
        n = rng.randrange(2)
        into = rng.choice(panels[n])
        paris = [k for k in first if k not in (setting.remote, setting.lisbon)]
        out = first[rng.choice([k for k in paris if first[k] not in panels[n]])]
        swap = (n, out, into)
    other = rng.choice([c for c in CANDIDATES if c != setting.loop.candidate])
    keys = list(first)
    their = [[first[k] for k in sorted(rng.sample(keys, 2))] for _n in range(2)]
    their.append([first[setting.remote]])
    hr = mail.Sender("hr", "Talent Team", f"talent@{DOMAIN}")
    return mail.loop_mails(
        hr, setting.loop.candidate, panels, swap, (other, their), setting.week, rng
    )


def _day_runs() -> list[tuple[str, ...]]:
    return [DAYS[a:b] for a in range(5) for b in range(a + 1, 6)]


# ---- the text -----------------------------------------------------------------------------


def policy_md() -> str:
    return f"""\
# Meeting scheduling policy

Every booking made for the team follows these rules; people check their invitations
against them.

## 1. Time

Office time is Paris time ({OFFICE_ZONE}). Every time in `{SCHEDULE}`, `{INVITES}` and
`{ROOMS}` is office time. A calendar event's time is in the zone its `TZID` names (that
zone's rule for that date decides the offset); a stamp ending in `Z` is UTC; a time with
neither is office time.

## 2. Who is busy

An attendee is busy during every occurrence of every event of their calendar, tentative
ones included, except cancelled events (`STATUS:CANCELLED`) and events marked free
(`TRANSP:TRANSPARENT`). A recurring event (`RRULE`) occurs by its rule from its first
`DTSTART`, at the same local time in its zone, except the dates its `EXDATE` lists; an
event with a `RECURRENCE-ID` replaces the occurrence it names. An all-day event blocks its
days (its `DTEND` is the day after the last). Back-to-back is fine: a meeting may start the
minute a busy event ends.

## 3. When a meeting may take place

- within office hours, 09:00–17:00 office time, starting on the hour or the half hour;
  ending exactly at 17:00 is fine;
- never over the protected lunch, 12:00–13:00 office time;
- within every attendee's working hours (`{PEOPLE_CSV}`: `working_hours`, in the
  attendee's own local time).

## 4. Rooms

Every meeting is held in a Paris room of `{ROOMS}` (sheet `Rooms`), which also lists the
rooms' bookings (sheet `Bookings`, office time). A room fits a meeting when it has a seat
for every attendee whose office is Paris and, when any attendee works from another office,
video. Book the smallest room that fits and is free (fewest seats; then by name). A booked
meeting makes its room busy.

## 5. Booking order

Book the requests of `{REQUESTS}` in priority order (urgent first, then normal, then low;
within a priority, by request id: M1 before M2). A request for a team is for everyone of
that team in `{PEOPLE_CSV}`. Each meeting goes in its earliest slot — the earliest allowed
day, then the earliest time — where every attendee is free and a fitting room is free; a
meeting that must follow another starts no earlier than the end of the one it follows. A
booked meeting makes its attendees busy for the bookings after it.

## 6. Changes after invitations went out

When an input changes after invitations went out, a booked meeting (or interview loop)
that still fits where it is keeps its time and its room. Only those that no longer fit are
rebooked: in booking order (the meetings, then an interview loop), each in its earliest
slot by sections 3–5, given everything that stays. Their invitations go out again with
`SEQUENCE:1`; invitations of items that did not move keep `SEQUENCE:0`.
"""


def instruction(week: date, changes: bool) -> str:
    later = ""
    if changes:
        later = (
            "\nIf I tell you an input changed after the invitations went out, follow the "
            "policy's section\non changes and list every booking that moved in "
            f"`{CHANGES}`.\n"
        )
    return f"""\
Please book the internal meetings of the week of {week:%A %d %B %Y}. Everything is in
the workspace: the calendar exports in `calendars/`, the team directory `{PEOPLE_CSV}`,
the rooms and their bookings in `{ROOMS}`, my mail of last week in `{REQUESTS}` and our
scheduling policy, `{POLICY}`, which decides how to read the calendars, when a meeting may
take place, which room it gets and in what order to book. Back-to-back is fine: a meeting
may start the minute a busy event ends. A meeting ending exactly at 17:00 is fine.

The meetings to book are the requests colleagues mailed me, each with its id in the
subject (`[M1]` to `[M{MEETINGS}]`): who attends (the sender too, unless they say
otherwise), how long it lasts, the days it may take, how urgent it is, and whether it must
follow another meeting. A later message of the sender can change their request; the rest of
the mailbox books nothing.

Create:
1. `{SCHEDULE}`: {{"meetings": {{"M1": {{"start": "YYYY-MM-DDTHH:MM", "end": "…",
   "room": "…", "attendees": ["email", …]}}, …}}}} in office time, one entry per request
   (`M1` to `M{MEETINGS}`).
2. `{INVITES}`: a valid iCalendar file (`VERSION:2.0`, a `PRODID`) with one `VEVENT` per
   booking whose `UID` is its id, `SUMMARY` its title, `DTSTART`/`DTEND` its slot in office
   time (floating local time, `YYYYMMDDTHHMMSS`), `LOCATION` its room and `SEQUENCE:0`.

Do not edit the input files. If the files contradict each other on something the policy
depends on, ask me which to trust before you book.
{later}"""


def loop_message(setting: Setting) -> str:
    return (
        f"Thanks. {setting.loop.candidate} comes in for an interview loop this week: three "
        f"{SESSION_MINUTES}-minute sessions, one right after the other, all in one room (the "
        "candidate stays put, in person). The Talent Team mailed me the panels last week; "
        f"their mails are in `{REQUESTS}`. Book it on Tuesday, Wednesday, Thursday or "
        "Friday in the earliest slot where the whole loop fits, around the meetings you "
        "booked: the loop's room needs a seat for the candidate and for the largest panel's Paris "
        "members, and video if a panelist works from another office; the first session starts "
        "on the hour or the half hour; office hours and lunch apply to the whole loop, and "
        f"each panelist's working hours to their own session. Add it to `{SCHEDULE}` under "
        '"interviews" ("I1", "I2", "I3", each with start, end, room and attendees, the '
        f"panel's emails) and to `{INVITES}` as "
        "three more invitations, UIDs I1 to I3."
    )


def change_message(setting: Setting) -> str:
    name = next(p.name for p in setting.people if p.key == setting.changed_person)
    return (
        f"{name} just accepted an external call that lands on {setting.called}. I replaced "
        f"`{calendar_path(setting.changed_person)}` with the current export. The invitations "
        "have gone out, so please bring the schedule and the invitations up to date as the "
        f"policy says for changes, and list every booking that moved in `{CHANGES}` with the "
        "columns `id`, `old_start` and `new_start` (times as in the schedule)."
    )


def user(setting: Setting) -> UserState:
    """The office manager: the answers every week needs, and one per contradiction this seed
    has (asked about anything else, the user says nothing of them)."""
    people = {p.key: p for p in setting.people}
    remote = people[setting.remote]
    first = remote.name.split()[0]
    found = setting.contradictions
    signals = [
        Signal(
            trigger="agent asks about the time zone of the calendars",
            reveals="office time is Paris time, UTC+01:00 all this week",
        ),
        Signal(
            trigger="agent asks whether to edit, change or send the calendars or invitations",
            reveals=f"never edit anyone's calendar; I send the invitations from {INVITES} myself",
        ),
    ]
    if REMOTE_ZONE in found.kinds:
        signals.append(
            Signal(
                trigger=f"agent asks where {first} works: {first}'s office, city or zone, "
                "New York or Chicago",
                reveals=f"{remote.name} works from our Chicago office: their working hours, "
                f"{_hm(remote.hours[0])}–{_hm(remote.hours[1])}, are Chicago time "
                "(America/Chicago)",
            )
        )
    if TWO_LENGTHS in found.kinds:
        item, other, _minutes = found.dispute
        owner = people[next(w.sender for w in setting.wordings if w.id == item)]
        own, theirs = owner.name.split()[0], people[other].name.split()[0]
        signals.append(
            Signal(
                trigger=f"agent asks how long {item} lasts: {own} and {theirs} give two "
                "lengths, durations or minutes",
                reveals=f"{item} is {own}'s meeting, so {own}'s length stands; {theirs}'s "
                "estimate does not count",
            )
        )
    if ROOM_SEATS in found.kinds:
        room, seats, mail_right = found.room
        listed = next(r.seats for r in setting.rooms if r.name == room)
        reveals = (
            f"{room} seats {seats}: facilities counted the chairs last week"
            if mail_right
            else f"{room} seats {listed}, as {ROOMS} has it; facilities wrote about the old layout"
        )
        signals.append(
            Signal(
                trigger=f"agent asks how many seats {room} has: the room's capacity or chairs",
                reveals=reveals,
            )
        )
    if OWN_HOURS in found.kinds:
        person, hours, own_right = found.hours
        colleague = people[person]
        name = colleague.name.split()[0]
        a, b = hours if own_right else colleague.hours
        signals.append(
            Signal(
                trigger=f"agent asks about {name}'s hours: when {name}'s day starts or ends, "
                "directory or sign-off",
                reveals=f"{colleague.name} works {_hm(a)}–{_hm(b)}, local time, these weeks",
            )
        )
    if CALLED_OFF in found.kinds:
        who, title, span, off_right = found.called_off
        assert span is not None
        name = people[who].name.split()[0]
        day = f"{span[0]:%A}"
        signals.append(
            Signal(
                trigger=f"agent asks whether {name}'s {title} on {day} still takes place: "
                "cancelled or not",
                reveals=(
                    f"{name}'s {title} on {day} is off: {name} is free then"
                    if off_right
                    else f"{name}'s {title} on {day} takes place as the calendar shows; "
                    "it was put back"
                ),
            )
        )
    return UserState(
        persona="Office manager who books the team's internal meetings each week.",
        role="administrator",
        latent_goals=[
            "Meetings should land as early in the week as the calendars allow.",
            "People who already have an invitation should be disturbed as little as possible.",
        ],
        knowledge_boundary=["does not know what the calendar app writes into the export"],
        signal_plan=signals,
    )


# ---- the family's hard draft and verifier ----------------------------------------------------


def draft(params: FamilyParams) -> FamilyDraft:
    setting = draw(params)
    workspace = setting.files()
    kinds = ["requirement_changed", "input_replaced"][: params.turns - 1]
    turns: list[UserTurn] = []
    if "requirement_changed" in kinds:
        turns.append(requirement_turn(1, loop_message(setting), [SCHEDULE, INVITES]))
    if "input_replaced" in kinds:
        path = calendar_path(setting.changed_person)
        turns.append(
            input_turn(
                2,
                after_reply(2),
                change_message(setting),
                {path: setting.changed},
                reason="calendar updated",
                invalidates=[SCHEDULE, INVITES, CHANGES],
            )
        )
    inputs = list(workspace)
    return FamilyDraft(
        slug=f"calendar-scheduling-{setting.week:%Y-%m-%d}-{params.seed}",
        title=f"Book the team's meetings for the week of {setting.week:%d %B %Y}",
        instruction=instruction(setting.week, "input_replaced" in kinds),
        workspace=workspace,
        solve_sh=fill_template(
            SOLVE,
            loop_from_turn=1 if "requirement_changed" in kinds else NEVER,
            changes_from_turn=2 if "input_replaced" in kinds else NEVER,
            remote=setting.remote,
            panels="/".join(",".join(p) for p in setting.loop.panels),
            requests=shlex.quote(json.dumps([_as_json(r) for r in setting.truth()])),
            seats=",".join(f"{k}={v}" for k, v in setting.rules().seats.items()),
            hours=",".join(f"{k}={a}-{b}" for k, (a, b) in _hours_said(setting).items()),
            freed=",".join(
                f"{k}={a:%Y-%m-%dT%H:%M}/{b:%Y-%m-%dT%H:%M}"
                for k, (a, b) in setting.rules().freed.items()
            ),
        ),
        user=user(setting),
        inputs=input_artifacts(
            {
                **{p: "other" for p in inputs if p.startswith("calendars/")},
                PEOPLE_CSV: "csv",
                REQUESTS: "other",
                ROOMS: "xlsx",
                POLICY: "md",
            }
        ),
        outputs=output_artifacts(
            {SCHEDULE: "json", INVITES: "other", **({CHANGES: "csv"} if len(kinds) > 1 else {})},
            inputs,
        ),
        turns=turns,
        agent_timeout_sec=1800.0,
    )


def _as_json(request: Request) -> dict[str, object]:
    return {
        "id": request.id,
        "title": request.title,
        "attendees": list(request.attendees),
        "minutes": request.minutes,
        "days": list(request.days),
        "priority": request.priority,
        "after": request.after,
    }


def _hours_said(setting: Setting) -> dict[str, tuple[str, str]]:
    """The user's answer on a colleague's own hours, as the reference's clock times."""
    return {k: (_hm(a), _hm(b)) for k, (a, b) in setting.rules().hours.items()}


def _task(built: BuilderOutput, params: FamilyParams) -> Task:
    """The truth drawn again from the seed (the requests the mails state, the user's
    answers, the loop's panels HR's mails state, once the turn-2 message asks for it), a
    changed calendar when an input turn comes: nothing is read back from the mailbox."""
    setting = draw(params)
    asked = any(t.patch.kind == "requirement_changed" for t in built.turns)
    loop = setting.loop if asked else None
    changes = any(t.patch.kind == "input_replaced" for t in built.turns)
    return Task(setting.truth(), loop, setting.rules(), changes)


def verifier(built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
    inputs = built.final_inputs()
    task = _task(built, params)
    plan, before = expected(built.workspace, inputs, task)
    components: list[Component] = []
    shifted = moved(before, plan) if before is not None else []
    expect: dict[str, dict[str, object]] = {}
    for item, b in plan.items():
        start, end = (t.strftime("%Y-%m-%dT%H:%M") for t in (b.start, b.end))
        group = "interviews" if item.startswith("I") else "meetings"
        slug = item.lower()
        expect[item] = {
            "start": start,
            "end": end,
            "room": b.room,
            "sequence": 1 if item in shifted else 0,
        }
        components += [
            json_value(
                f"{slug}_start",
                SCHEDULE,
                f"/{group}/{item}/start",
                start,
                f"{item} starts in its earliest slot under the policy",
                weight=2,
            ),
            json_value(
                f"{slug}_end",
                SCHEDULE,
                f"/{group}/{item}/end",
                end,
                f"{item} ends after its length",
            ),
            json_value(
                f"{slug}_room",
                SCHEDULE,
                f"/{group}/{item}/room",
                b.room,
                f"{item} is in the smallest free room that fits",
            ),
        ]
    if before is not None:
        components += table_shape(
            "changes",
            CHANGES,
            ["id", "old_start", "new_start"],
            len(shifted),
            "changes.csv columns",
            "one row per booking that moved, no more",
        )
        for item in shifted:
            for column, when in (
                ("old_start", before[item].start),
                ("new_start", plan[item].start),
            ):
                components.append(
                    Component(
                        id=f"changes_{item.lower()}_{column}",
                        weight=1,
                        check=CsvValue(
                            path=CHANGES,
                            key_column="id",
                            key=item,
                            column=column,
                            expected=when.strftime("%Y-%m-%dT%H:%M"),
                        ),
                        requirement=f"{item}: {column} in changes.csv",
                    )
                )
    components.append(
        Component(
            id="invites_match_schedule",
            weight=2,
            check=CustomScript(script="check_invites.py"),
            requirement="invites.ics: one VEVENT per booking (UID = id) at its slot, in its room, "
            "with the policy's SEQUENCE",
        )
    )
    kept = {p: inputs[p] for p in inputs}
    spec = VerifierSpec(
        components=components,
        red_lines=[
            inputs_unmodified(
                "inputs_unmodified",
                "calendars, the directory, the rooms, the requests and the policy are not the "
                "agent's to edit",
                kept,
            )
        ],
        rubric=rubric(
            "invitations_usable",
            "The invitations are usable as sent: each has the meeting's title (or the "
            "interview session) as its summary, and the schedule lists each booking's "
            "attendees by email.",
            [SCHEDULE, INVITES],
        ),
    )
    private = {EXPECTED: expectations(expect), "check_invites.py": CHECK_INVITES.encode()}
    return verifier_output(spec, kept, private)


def readings(inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
    """None: the requests are stated in the mailbox's words and the truth is drawn from the
    seed, which the inputs alone do not give; the instruction and the policy state
    back-to-back and the 17:00 end in the words the lower tiers' readings look for."""
    del inputs, turns
    return []


def _text(plan: Plan | None, item: str) -> str | None:
    if plan is None or item not in plan:
        return None
    return plan[item].start.strftime("%Y-%m-%dT%H:%M")


__all__ = [
    "CHANGES",
    "CHECK_INVITES_PRELUDE",
    "INVITES",
    "PEOPLE_CSV",
    "POLICY",
    "REQUESTS",
    "ROOMS",
    "SCHEDULE",
    "TRAPS",
    "Misreading",
    "Rules",
    "Setting",
    "Task",
    "busy_intervals",
    "calendar_path",
    "current_request_rows",
    "draft",
    "draw",
    "expected",
    "occurrences",
    "parse_ics",
    "readings",
    "verifier",
]

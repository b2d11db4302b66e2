"""The office of calendar_scheduling's ``hard`` week and its written inputs: office time
(Paris) and hours, the workspace's file names, the people and rooms as drawn and as read
back (``people.csv``, ``rooms.xlsx``), the requests resolved against the directory, and
``policy.md``."""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import openpyxl

from . import calendar_scheduling_mail as mail
from .base import parse_csv, write_csv
from .office import stable_office_bytes

REQUESTS, PEOPLE_CSV, ROOMS, POLICY = mail.MAILBOX, "people.csv", "rooms.xlsx", "policy.md"
SCHEDULE, INVITES, CHANGES = "schedule.json", "invites.ics", "changes.csv"
EXPECTED = "expected_schedule.json"
OFFICE_ZONE = "Europe/Paris"
OFFICE = ZoneInfo(OFFICE_ZONE)
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
OPEN, CLOSE = 9 * 60, 17 * 60  # the Paris office, where every room is
LUNCH = (12 * 60, 13 * 60)
SLOT = 30
LOOP_SESSIONS, SESSION_MINUTES = 3, 45
LOOP_DAYS = ("Tue", "Wed", "Thu", "Fri")
DOMAIN = "northwind.example"
MEETINGS = 8
CHICAGO = "America/Chicago"  # the remote colleague's zone (the directory may say New York)

Interval = tuple[datetime, datetime]  # naive office time


def calendar_path(person: str) -> str:
    return f"calendars/{person}.ics"


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
            "working_hours": f"{clock_time(p.hours[0])}-{clock_time(p.hours[1])}",
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


def clock_time(minutes: int) -> str:
    """Minutes past midnight as ``HH:MM``."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(text: str) -> int:
    hours, minutes = text.strip().split(":")
    return int(hours) * 60 + int(minutes)


def office_time(moment: datetime) -> datetime:
    """An aware time as naive office time."""
    return moment.astimezone(OFFICE).replace(tzinfo=None)


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

"""The calendar exports of calendar_scheduling's ``hard`` week: ``calendars/*.ics`` written
(``VTIMEZONE``, UTC stamps, folded lines) and read back, recurring series expanded by the
wall clock of their zone, and each person's busy time in office time — with the ways a
reader can misread them (``Misreading``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from .calendar_scheduling_office import OFFICE, OFFICE_ZONE, Interval, Person, office_time


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
            begin, end = (office_time(t) for t in span)
            if end > monday.replace(tzinfo=None) and begin < until.replace(tzinfo=None):
                out.append((begin, end))
    return out


@functools.lru_cache(maxsize=512)
def parsed_ics(data: bytes, misreading: Misreading) -> tuple[Event, ...]:
    """``parse_ics``, once per export and reading: the draw reads each export many times."""
    return tuple(parse_ics(data, misreading))

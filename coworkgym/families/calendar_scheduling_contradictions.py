"""The contradictions calendar_scheduling's ``hard`` week draws per seed (two or three of
``CONTRADICTIONS``): what each one is, how the seed shows it and which side the user takes,
drawn again until settling it the other way moves a booked meeting."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from .calendar_scheduling_booking import book_requests
from .calendar_scheduling_ics import CORRECT, parsed_ics
from .calendar_scheduling_office import (
    PEOPLE_CSV,
    Interval,
    calendar_path,
    office_time,
    read_directory,
)

if TYPE_CHECKING:  # the setting holds its contradictions: a runtime import would be a cycle
    from .calendar_scheduling_draw import Setting

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


def draw_contradiction(
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
    plan = book_requests(files, setting.task(False))
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
    for e in parsed_ics(data, CORRECT):
        if e.rule or e.recurrence_id or e.all_day or e.status == "CANCELLED" or e.transparent:
            continue
        span = (office_time(e.start), office_time(e.end))
        if monday <= span[0] < monday + timedelta(days=5) and 9 <= span[0].hour < 16:
            out.append((e.summary, span))
    return out


def _moves(setting: Setting, files: Mapping[str, bytes], kind: str) -> bool:
    right = book_requests(files, setting.task(False))
    return right is not None and book_requests(files, setting.task(False, kind)) != right

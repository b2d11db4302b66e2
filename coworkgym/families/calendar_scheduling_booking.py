"""The booking rules of calendar_scheduling's ``hard`` week as the verifier applies them:
the week's busy time read from the files, each meeting and the interview loop in its
earliest slot and smallest fitting room, the rebooking after a change, and the expected
schedule (``expected``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from .calendar_scheduling_ics import CORRECT, Misreading, busy_intervals, parsed_ics
from .calendar_scheduling_office import (
    CLOSE,
    DAYS,
    LOOP_DAYS,
    LOOP_SESSIONS,
    LUNCH,
    OPEN,
    PEOPLE_CSV,
    ROOMS,
    SESSION_MINUTES,
    SLOT,
    Directory,
    Interval,
    Meeting,
    Request,
    Room,
    calendar_path,
    office_time,
    read_directory,
    read_rooms,
    resolve,
)


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
            office_time(midnight + timedelta(minutes=start)),
            office_time(midnight + timedelta(minutes=end)),
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
    return tuple(busy_intervals(parsed_ics(data, misreading), week, misreading))


def week_of(calendars: Iterable[bytes]) -> date:
    """The Monday of the week to book: the middle of the three weeks every export covers."""
    first = min(
        office_time(e.start) for c in calendars for e in parsed_ics(c, CORRECT) if not e.rule
    )
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


def book_requests(
    files: Mapping[str, bytes], task: Task, misreading: Misreading = CORRECT
) -> Plan | None:
    """The requests alone booked from the files (no loop, no change); None if one has no
    slot."""
    world = world_of(files, task.rules, misreading)
    return book_meetings(world, resolve(task.requests, world.directory))

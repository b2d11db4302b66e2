"""Scheduling meetings from people's calendar exports (.ics) into a schedule (JSON) and the
invitations (.ics).

Grounded in calendars this family writes itself (CC0): a week of busy events per person,
exported as iCalendar. The agent books the requested meetings in order, each in the
earliest slot where every attendee is free, and a booked meeting blocks its attendees for
the meetings after it — so one wrong slot moves every later one. The medium variant hides
busy time in the calendar's structure: a cancelled event that does not block and an
all-day absence that does.

Later user turns either replace one person's calendar (a new call lands on a booked
meeting, which must move, and the meetings after it may follow) or add a requirement: a
15-minute gap between any two of a person's engagements.

The ``hard`` tier is a different task with its own module, ``calendar_scheduling_hard``
(a week across three time zones under a written policy, with rooms, an interview loop
built on the first turn's bookings and a changed calendar handled as the policy says; its
docstring says why it is hard). The early-leaver and repeated-request branches below are
what this module's hard variant was before; easy and medium never take them, and they are
kept so that those tiers' packages stay byte for byte as they were.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Signal, TurnPatch, UserState
from ..verifier.spec import Component, CustomScript, VerifierSpec
from . import calendar_scheduling_hard as hard
from .base import Trap
from .calendar_scheduling_hard import calendar_path
from .common import (
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
    plan_turns,
    python_solution,
    requirement_added,
    requirement_turn,
    rubric,
    verifier_output,
    when_delivered,
    write_csv,
)

REQUESTS = "requests.csv"
SCHEDULE, INVITES = "schedule.json", "invites.ics"
EXPECTED = "expected_schedule.json"
PEOPLE = hard.ROSTER[:6]  # the same staff; the hard tier's week adds one more
TITLES = (
    "Budget review",
    "Vendor selection",
    "Quarterly planning",
    "Hiring panel debrief",
    "Office move kick-off",
    "Security training dry run",
)
BUSY = ("Client call", "1:1", "Workshop", "Dentist", "Team sync", "Interview", "Review")
WEEKS = (date(2026, 2, 2), date(2026, 2, 9), date(2026, 2, 16), date(2026, 2, 23))
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
SIZES = {"easy": (3, 2), "medium": (4, 3), "hard": (5, 4)}  # people, meetings
OPEN, CLOSE = 9 * 60, 17 * 60
EARLY_LEAVE = 15 * 60  # the hard variant's latent constraint: the person's meetings end by 15:00
GAP = 15  # minutes, when the requirement turn asks for a gap


# ---- the calendars ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    uid: str
    summary: str
    start: datetime  # office time
    end: datetime
    all_day: bool = False
    status: str = ""  # CANCELLED does not block
    transparent: bool = False  # TRANSP:TRANSPARENT does not block
    daily_count: int = 0  # RRULE:FREQ=DAILY;COUNT=n


@dataclass
class Calendar:
    person: str
    name: str
    events: list[Event] = field(default_factory=list)
    utc: bool = False  # exported in UTC: office time is UTC+01:00


@dataclass(frozen=True)
class Meeting:
    id: str
    title: str
    attendees: tuple[str, ...]
    minutes: int
    days: tuple[str, ...]


def ics(calendar: Calendar) -> bytes:
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//Cowork-Gym//calendar export//EN",
        f"X-WR-CALNAME:{calendar.name}",
    ]

    def stamp(moment: datetime) -> str:
        if calendar.utc:
            return (moment - timedelta(hours=1)).strftime("%Y%m%dT%H%M%SZ")
        return moment.strftime("%Y%m%dT%H%M%S")

    for event in calendar.events:
        lines += ["BEGIN:VEVENT", f"UID:{event.uid}", f"SUMMARY:{event.summary}"]
        if event.all_day:
            lines += [
                f"DTSTART;VALUE=DATE:{event.start:%Y%m%d}",
                f"DTEND;VALUE=DATE:{event.end:%Y%m%d}",
            ]
        else:
            lines += [f"DTSTART:{stamp(event.start)}", f"DTEND:{stamp(event.end)}"]
        if event.daily_count:
            lines.append(f"RRULE:FREQ=DAILY;COUNT={event.daily_count}")
        if event.status:
            lines.append(f"STATUS:{event.status}")
        if event.transparent:
            lines.append("TRANSP:TRANSPARENT")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return ("\r\n".join(lines) + "\r\n").encode()


def parse_ics(data: bytes) -> list[Event]:
    """The verifier's own reader: events in office time (a UTC stamp moves one hour on)."""
    text = data.decode("utf-8").replace("\r\n ", "").replace("\r\n", "\n")
    events: list[Event] = []
    current: dict[str, tuple[str, str]] = {}
    for line in text.split("\n"):
        if line == "BEGIN:VEVENT":
            current = {}
        elif line == "END:VEVENT":
            events.append(_event(current))
        elif ":" in line:
            head, value = line.split(":", 1)
            name, _sep, params = head.partition(";")
            current[name] = (params, value)
    return events


def _moment(value: str) -> datetime:
    if len(value) == 8:
        return datetime.strptime(value, "%Y%m%d")
    moment = datetime.strptime(value.rstrip("Z"), "%Y%m%dT%H%M%S")
    return moment + timedelta(hours=1) if value.endswith("Z") else moment


def _event(fields: Mapping[str, tuple[str, str]]) -> Event:
    start, end = fields["DTSTART"][1], fields["DTEND"][1]
    rule = fields.get("RRULE", ("", ""))[1]
    count = int(rule.split("COUNT=")[1].split(";")[0]) if "COUNT=" in rule else 0
    return Event(
        uid=fields["UID"][1],
        summary=fields.get("SUMMARY", ("", ""))[1],
        start=_moment(start),
        end=_moment(end),
        all_day=len(start) == 8,
        status=fields.get("STATUS", ("", ""))[1],
        transparent=fields.get("TRANSP", ("", ""))[1] == "TRANSPARENT",
        daily_count=count,
    )


def busy_intervals(events: Sequence[Event]) -> list[tuple[datetime, datetime]]:
    """Blocking time: cancelled and transparent events do not block; an all-day event
    blocks its whole days; a daily rule repeats the event ``COUNT`` days."""
    out = []
    for e in events:
        if e.status == "CANCELLED" or e.transparent:
            continue
        for n in range(max(1, e.daily_count)):
            out.append((e.start + timedelta(days=n), e.end + timedelta(days=n)))
    return out


# ---- the rule, as the verifier applies it ----------------------------------------------------


@dataclass(frozen=True)
class Rules:
    gap: int = 0  # minutes required between two engagements of one person
    back_to_back: bool = True  # a meeting may start the minute a busy event ends
    close_inclusive: bool = True  # a meeting may end exactly at 17:00
    early_leaver: str = ""  # this person's meetings must end by 15:00


def schedule(
    calendars: Mapping[str, bytes], meetings: Sequence[Meeting], week: date, rules: Rules
) -> dict[str, tuple[datetime, datetime] | None]:
    """Each meeting, in order, in its earliest slot (earliest day, then time, on the half
    hour) within office hours where every attendee is free; it then blocks them."""
    busy = {p: busy_intervals(parse_ics(c)) for p, c in calendars.items()}
    booked: dict[str, tuple[datetime, datetime] | None] = {}
    for meeting in meetings:
        booked[meeting.id] = None
        for day_index, day in enumerate(DAYS):
            if day not in meeting.days:
                continue
            midnight = datetime.combine(week + timedelta(days=day_index), datetime.min.time())
            slot = _first_slot(meeting, midnight, busy, rules)
            if slot is not None:
                booked[meeting.id] = slot
                for person in meeting.attendees:
                    busy[person].append(slot)
                break
    return booked


def _first_slot(
    meeting: Meeting,
    midnight: datetime,
    busy: Mapping[str, list[tuple[datetime, datetime]]],
    rules: Rules,
) -> tuple[datetime, datetime] | None:
    latest_end = CLOSE if rules.close_inclusive else CLOSE - 1
    if rules.early_leaver in meeting.attendees:
        latest_end = min(latest_end, EARLY_LEAVE)
    margin = timedelta(minutes=rules.gap)
    for minute in range(OPEN, CLOSE, 30):
        if minute + meeting.minutes > latest_end:
            break
        start = midnight + timedelta(minutes=minute)
        end = start + timedelta(minutes=meeting.minutes)
        clash = False
        for person in meeting.attendees:
            for s, e in busy[person]:
                if rules.back_to_back:
                    clash = clash or (start < e + margin and s - margin < end)
                else:
                    clash = clash or (start <= e + margin and s - margin <= end)
        if not clash:
            return start, end
    return None


def parse_requests(data: bytes) -> list[Meeting]:
    """The requests in file order; a meeting on several lines (hard) is the line with the
    latest ``updated`` date, where the first of its lines stands (the user's answer)."""
    return [
        Meeting(
            id=r["id"],
            title=r["title"],
            attendees=tuple(r["attendees"].split(";")),
            minutes=int(r["minutes"]),
            days=tuple(r["days"].split(";")),
        )
        for r in hard.current_request_rows(data)
    ]


# ---- the family -----------------------------------------------------------------------------

SOLVE = python_solution(
    "book each requested meeting in the earliest common free slot.",
    r"""import csv, json, os
from datetime import datetime, timedelta

turn = int(os.environ.get("COWORK_TURN", "0"))
gap = 15 if turn >= int(os.environ["GAP_FROM_TURN"]) else 0
early = os.environ["EARLY_LEAVER"]  # what the user says when asked about standing commitments
week = datetime.strptime(os.environ["WEEK"], "%Y-%m-%d")
days = ["Mon", "Tue", "Wed", "Thu", "Fri"]

def when(value):
    if len(value) == 8:
        return datetime.strptime(value, "%Y%m%d")
    t = datetime.strptime(value[:15], "%Y%m%dT%H%M%S")
    return t + timedelta(hours=1) if value.endswith("Z") else t

def busy_of(path):
    raw = open(path, encoding="utf-8").read().replace("\r\n ", "").splitlines()
    out, ev = [], None
    for line in raw:
        if line == "BEGIN:VEVENT":
            ev = {}
        elif line == "END:VEVENT":
            if ev.get("STATUS") != "CANCELLED" and ev.get("TRANSP") != "TRANSPARENT":
                repeat = 1
                if "COUNT=" in ev.get("RRULE", ""):
                    repeat = int(ev["RRULE"].split("COUNT=")[1].split(";")[0])
                for n in range(repeat):
                    out.append((when(ev["DTSTART"]) + timedelta(days=n),
                                when(ev["DTEND"]) + timedelta(days=n)))
            ev = None
        elif ev is not None and ":" in line:
            key, value = line.split(":", 1)
            ev[key.split(";")[0]] = value
    return out

busy = {}
meetings, where = [], {}
for r in csv.DictReader(open("requests.csv", newline="")):
    # the user, asked about a meeting on two lines: the line updated last is the request
    if r["id"] not in where:
        where[r["id"]] = len(meetings)
        meetings.append(r)
    elif r.get("updated", "") > meetings[where[r["id"]]].get("updated", ""):
        meetings[where[r["id"]]] = r
for m in meetings:
    for p in m["attendees"].split(";"):
        busy.setdefault(p, busy_of(f"calendars/{p}.ics"))

result = {}
g = timedelta(minutes=gap)
for m in meetings:
    people, length = m["attendees"].split(";"), timedelta(minutes=int(m["minutes"]))
    found = None
    for i, d in enumerate(days):
        if found or d not in m["days"].split(";"):
            continue
        t = week + timedelta(days=i, hours=9)
        close = week + timedelta(days=i, hours=15 if early in people else 17)
        while found is None and t + length <= close:
            if all(not (t < e + g and s - g < t + length) for p in people for s, e in busy[p]):
                found = (t, t + length)
            t += timedelta(minutes=30)
    for p in people:
        busy[p].append(found)
    result[m["id"]] = {"start": found[0].strftime("%Y-%m-%dT%H:%M"),
                       "end": found[1].strftime("%Y-%m-%dT%H:%M"), "attendees": people}

json.dump({"meetings": result}, open("schedule.json", "w"), indent=2)
lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//reference//EN"]
for m in meetings:
    r = result[m["id"]]
    lines += ["BEGIN:VEVENT", "UID:" + m["id"], "SUMMARY:" + m["title"],
              "DTSTART:" + r["start"].replace("-", "").replace(":", "") + "00",
              "DTEND:" + r["end"].replace("-", "").replace(":", "") + "00", "END:VEVENT"]
lines.append("END:VCALENDAR")
open("invites.ics", "w", newline="").write("\r\n".join(lines) + "\r\n")
""",
    "GAP_FROM_TURN",
    "EARLY_LEAVER",
    "WEEK",
)


@dataclass
class Setting:
    week: date
    calendars: dict[str, Calendar]
    meetings: list[Meeting]
    early_leaver: str  # "" unless hard
    void: Meeting | None = None  # hard: an older line of one meeting, last in the file


class CalendarScheduling(TaskFamily):
    name = "calendar_scheduling"
    scenarios = (
        "administration/scheduling/calendar_planning",
        "human_resources/recruiting/interview_scheduling",
    )
    capabilities = ("scheduling", "information_extraction", "requirement_tracking",
                    "dependency_tracking")
    # with 3 turns both later turns come: the gap requirement and the changed calendar
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("json", "ics")
    modalities = ("tabular",)  # the detector maps no modality to .ics calendars
    traps = (
        Trap(
            "utc_export",
            "one calendar is exported in UTC (stamps ending in Z), an hour behind office time",
            (
                r"ending in ['\"`]?Z\b",
                r"\bZ['\"`]?\s+(?:means|is|stands for)\s+UTC",
                r"exported in UTC\b(?![+-])",
                r"\bin UTC\b(?![+-])",
            ),
        ),
        Trap(
            "void_request_line",
            "requests.csv (hard) has one meeting on two lines, the last one older and void",
            (r"\btwice\b", r"\bduplicat", r"more than once", r"\bvoid\b", r"last line"),
        ),
        *hard.TRAPS,
    )

    def draft(self, params: FamilyParams) -> FamilyDraft:
        if params.difficulty == "hard":
            return hard.draft(params)
        rng = params.rng("calendar")
        turn_kinds, gap_from = plan_turns(rng, params, "input_replaced")
        setting, changed = _setting(params, rng)
        turns: list[UserTurn] = []
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                person, new = changed
                name = setting.calendars[person].name
                turns.append(
                    input_turn(
                        index,
                        when_delivered(SCHEDULE, index),
                        f"{name} just accepted an external call this week. I replaced "
                        f"{calendar_path(person)} with their current calendar; please redo the "
                        "schedule and the invitations against it.",
                        {calendar_path(person): new},
                        reason="calendar updated",
                        invalidates=[SCHEDULE, INVITES],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "People complained about running from one meeting to the next. From "
                        f"now on leave at least {GAP} minutes between any two engagements of the "
                        "same person: a meeting may not start less than 15 minutes after one of "
                        "its attendees' busy events (or earlier-booked meetings) ends, nor end "
                        "less than 15 minutes before one starts. Please redo the schedule and "
                        "the invitations with this rule.",
                        [SCHEDULE, INVITES],
                    )
                )
        workspace = {calendar_path(p): ics(c) for p, c in setting.calendars.items()}
        workspace[REQUESTS] = _requests_csv(setting.meetings, setting.void)
        return FamilyDraft(
            slug=f"calendar-scheduling-{setting.week:%Y-%m-%d}-{params.seed}",
            title=f"Book the team's meetings for the week of {setting.week:%d %B %Y}",
            instruction=_instruction(setting),
            workspace=workspace,
            solve_sh=fill_template(
                SOLVE,
                gap_from_turn=gap_from,
                early_leaver=setting.early_leaver or "nobody",
                week=setting.week.isoformat(),
            ),
            user=_user(setting),
            inputs=input_artifacts({**{p: "other" for p in workspace if p != REQUESTS},
                                    REQUESTS: "csv"}),
            outputs=output_artifacts({SCHEDULE: "json", INVITES: "other"}, list(workspace)),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        if params.difficulty == "hard":
            return hard.verifier(built, params)
        inputs = built.final_inputs()
        meetings = parse_requests(inputs[REQUESTS])
        week = _week_from_inputs(inputs)
        rules = Rules(gap=GAP if requirement_added(built) else 0, early_leaver=early_leaver(inputs))
        booked = schedule(_calendars(inputs), meetings, week, rules)
        components: list[Component] = []
        expected: dict[str, dict[str, str]] = {}
        for m in meetings:
            slot = booked[m.id]
            assert slot is not None, f"meeting {m.id} has no slot; the draft guarantees one"
            start, end = (t.strftime("%Y-%m-%dT%H:%M") for t in slot)
            expected[m.id] = {"start": start, "end": end}
            slug = m.id.lower()
            components += [
                json_value(f"{slug}_start", SCHEDULE, f"/meetings/{m.id}/start", start,
                           f"{m.id} ({m.title}) starts in its earliest free slot", weight=2),
                json_value(f"{slug}_end", SCHEDULE, f"/meetings/{m.id}/end", end,
                           f"{m.id} ends after its duration"),
            ]
        components.append(
            Component(
                id="invites_match_schedule",
                weight=2,
                check=CustomScript(script="check_invites.py"),
                requirement="invites.ics has one VEVENT per meeting (UID = id) at its slot",
            )
        )
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "calendars_unmodified",
                    "people's calendars and the requests are not the agent's to edit",
                    inputs,
                )
            ],
            rubric=rubric(
                "invitations_usable",
                "The invitations are usable as sent: each has the meeting's title as its "
                "summary, and the schedule lists each meeting's attendees.",
                [SCHEDULE, INVITES],
            ),
        )
        private = {EXPECTED: expectations(expected), "check_invites.py": CHECK_INVITES.encode()}
        return verifier_output(spec, inputs, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """Whether a slot may start the minute a busy event ends, and whether a meeting may
        end exactly at 17:00: each, read the other way, may move a meeting."""
        if hard.PEOPLE_CSV in inputs:
            return hard.readings(inputs, turns)
        meetings = parse_requests(inputs[REQUESTS])
        week = _week_from_inputs(inputs)
        gap = GAP if any(t.kind == "requirement_changed" for t in turns) else 0
        calendars, early = _calendars(inputs), early_leaver(inputs)
        base = schedule(calendars, meetings, week, Rules(gap=gap, early_leaver=early))
        apart = schedule(
            calendars, meetings, week, Rules(gap=gap, back_to_back=False, early_leaver=early)
        )
        before = schedule(
            calendars, meetings, week, Rules(gap=gap, close_inclusive=False, early_leaver=early)
        )
        found = []
        for m in meetings:
            component = f"{m.id.lower()}_start"
            found += [
                Reading(
                    component=component,
                    subject="back-to-back",
                    values={"allowed": _text(base[m.id]), "not allowed": _text(apart[m.id])},
                    phrases={"allowed": r"back-to-back (is|are) fine",
                             "not allowed": r"no back-to-back"},
                ),
                Reading(
                    component=component,
                    subject="17:00",
                    values={"inclusive": _text(base[m.id]), "exclusive": _text(before[m.id])},
                    phrases={"inclusive": r"ending (exactly )?at 17:00 is fine",
                             "exclusive": r"end before 17:00"},
                ),
            ]
        return found


def _text(slot: tuple[datetime, datetime] | None) -> str | None:
    return None if slot is None else slot[0].strftime("%Y-%m-%dT%H:%M")


def _calendars(inputs: Mapping[str, bytes]) -> dict[str, bytes]:
    return {
        p.removeprefix("calendars/").removesuffix(".ics"): c
        for p, c in inputs.items()
        if p.startswith("calendars/")
    }


def _week_from_inputs(inputs: Mapping[str, bytes]) -> date:
    """The Monday of the week: every event of every calendar falls in it."""
    first = min(e.start for c in _calendars(inputs).values() for e in parse_ics(c))
    return (first - timedelta(days=first.weekday())).date()


def early_leaver(inputs: Mapping[str, bytes]) -> str:
    """The hard variant's person with a standing commitment (the user reveals it when
    asked): the one who works from the other office, whose calendar is exported in UTC."""
    for person, data in sorted(_calendars(inputs).items()):
        if b"Z\r\n" in data:
            return person
    return ""


# ---- drafting ---------------------------------------------------------------------------------


def _setting(params: FamilyParams, rng: random.Random) -> tuple[Setting, tuple[str, bytes]]:
    """Calendars and requests whose every reading of the rules books every meeting, on
    which the gap requirement and the latent constraint each move a meeting, and a changed
    calendar (a call on a booked meeting) that moves one."""
    people_count, meeting_count = SIZES[params.difficulty]
    hard = params.difficulty == "hard"
    for _attempt in range(200):
        week = rng.choice(WEEKS)
        people = rng.sample(PEOPLE, k=people_count)
        calendars = {
            p: Calendar(p, n, _busy_events(rng, week, p, params.difficulty)) for p, n in people
        }
        if hard:
            calendars[people[-1][0]].utc = True
        meetings = []
        for n, title in enumerate(rng.sample(TITLES, k=meeting_count), start=1):
            size = rng.randint(2, min(3, people_count))
            first = rng.randint(0, 2)
            meetings.append(
                Meeting(
                    id=f"M{n}",
                    title=title,
                    attendees=tuple(sorted(p for p, _n in rng.sample(people, k=size))),
                    minutes=rng.choice((30, 45, 60, 90)),
                    days=DAYS[first : first + rng.randint(2, 3)],
                )
            )
        early = people[-1][0] if hard else ""  # the colleague in the other office
        void = None
        if hard:  # an older version of one request, with another length
            target = rng.choice(meetings)
            minutes = rng.choice([m for m in (30, 45, 60, 90) if m != target.minutes])
            void = Meeting(target.id, target.title, target.attendees, minutes, target.days)
        setting = Setting(week, calendars, meetings, early, void)
        changed = _accept(setting, rng)
        if changed is not None:
            return setting, changed
    raise RuntimeError(f"no schedulable week for seed {params.seed}; widen the draw")


def _accept(setting: Setting, rng: random.Random) -> tuple[str, bytes] | None:
    files = {p: ics(c) for p, c in setting.calendars.items()}
    early = setting.early_leaver
    plain = schedule(files, setting.meetings, setting.week, Rules(early_leaver=early))
    gapped = schedule(files, setting.meetings, setting.week, Rules(gap=GAP, early_leaver=early))
    if None in plain.values() or None in gapped.values() or plain == gapped:
        return None
    if early and schedule(files, setting.meetings, setting.week, Rules()) == plain:
        return None  # the latent constraint must matter
    if setting.void is not None:  # the void line, read as the request, must move a meeting
        void = setting.void
        misread = [void if m.id == void.id else m for m in setting.meetings]
        if schedule(files, misread, setting.week, Rules(early_leaver=early)) == plain:
            return None
    # the changed calendar: an external call exactly on one booked meeting
    meeting = rng.choice(setting.meetings)
    person = rng.choice(meeting.attendees)
    start, end = plain[meeting.id]  # type: ignore[misc]
    old = setting.calendars[person]
    call = Event(f"{person}-call@cowork-gym", "External call", start, end)
    new_calendar = Calendar(old.person, old.name, [*old.events, call], old.utc)
    new_files = {**files, person: ics(new_calendar)}
    for gap in (0, GAP):
        if None in schedule(
            new_files, setting.meetings, setting.week, Rules(gap=gap, early_leaver=early)
        ).values():
            return None
    return person, new_files[person]


def _busy_events(rng: random.Random, week: date, person: str, difficulty: str) -> list[Event]:
    events: list[Event] = []
    for n in range(rng.randint(4, 7)):
        day = datetime.combine(week + timedelta(days=rng.randrange(5)), datetime.min.time())
        start = day + timedelta(minutes=rng.randrange(OPEN, CLOSE - 60, 30))
        length = timedelta(minutes=rng.choice((30, 60, 60, 90, 120)))
        events.append(Event(f"{person}-{n}@cowork-gym", rng.choice(BUSY), start, start + length))
    if difficulty != "easy":
        day = datetime.combine(week + timedelta(days=rng.randrange(5)), datetime.min.time())
        if rng.random() < 0.5:
            away = day + timedelta(days=1)
            events.append(Event(f"{person}-ooo@cowork-gym", "Out of office", day, away, True))
        victim = rng.randrange(len(events))
        e = events[victim]
        events[victim] = Event(e.uid, e.summary, e.start, e.end, e.all_day, status="CANCELLED")
    if difficulty == "hard":
        monday = datetime.combine(week, datetime.min.time())
        standup = monday + timedelta(minutes=rng.choice((570, 600, 630)))  # 09:30–10:30
        if rng.random() < 0.6:
            end = standup + timedelta(minutes=15)
            events.append(
                Event(f"{person}-standup@cowork-gym", "Daily stand-up", standup, end, daily_count=5)
            )
        focus = events[rng.randrange(len(events))]
        if not focus.all_day:
            end = focus.end + timedelta(minutes=30)
            uid = f"{person}-focus@cowork-gym"
            events.append(Event(uid, "Focus time", focus.start, end, transparent=True))
    events.sort(key=lambda e: (e.start, e.uid))
    return events


def _requests_csv(meetings: Sequence[Meeting], void: Meeting | None = None) -> bytes:
    """The requests; with ``void`` (hard) every line has an ``updated`` date and the void,
    older version of one meeting comes last."""
    rows: list[dict[str, object]] = [
        {
            "id": m.id,
            "title": m.title,
            "attendees": ";".join(m.attendees),
            "minutes": m.minutes,
            "days": ";".join(m.days),
        }
        for m in [*meetings, *([void] if void else [])]
    ]
    columns = ["id", "title", "attendees", "minutes", "days"]
    if void is None:
        return write_csv(rows, columns)
    for n, row in enumerate(rows):
        row["updated"] = f"2026-01-{20 + n:02d}"
    rows[-1]["updated"] = "2026-01-12"  # the void line: older than every other
    return write_csv(rows, [*columns, "updated"])


def _user(setting: Setting) -> UserState:
    signals = [
        Signal(
            trigger="agent asks about the time zone of the calendars",
            # what the app writes into an export is past this user's knowledge
            reveals="office time is UTC+01:00 all week",
        )
    ]
    goals = ["Meetings should land as early in the week as the calendars allow."]
    if setting.early_leaver:
        name = setting.calendars[setting.early_leaver].name
        first = name.split()[0]
        signals.append(
            Signal(
                trigger=f"agent asks about {first}'s standing commitment",
                reveals=f"{name} leaves at 15:00 every day: none of {first}'s meetings may end "
                "after 15:00",
            )
        )
        goals.append(f"{first} can only attend meetings that end by 15:00.")
    if setting.void is not None:
        signals.append(
            Signal(
                # "M2 is on two lines of requests.csv with different lengths: which one?"
                trigger="agent asks about a meeting listed twice, on two lines or rows with "
                "different lengths in minutes: duplicate, conflicting or contradicting requests",
                reveals="when a meeting id has more than one line in requests.csv, the line "
                "with the latest `updated` date is the request (book it where the first of "
                "its lines stands); the older lines do not count",
            )
        )
    return UserState(
        persona="Office manager who books the team's internal meetings each week.",
        role="administrator",
        latent_goals=goals,
        knowledge_boundary=["does not know what the calendar app writes into the export"],
        signal_plan=signals,
    )


def _instruction(setting: Setting) -> str:
    names = ", ".join(
        f"`{calendar_path(p)}` ({c.name})" for p, c in sorted(setting.calendars.items())
    )
    latent = ""
    if setting.early_leaver:
        first = setting.calendars[setting.early_leaver].name.split()[0]
        latent = (
            f"\n{first} has a standing commitment that is in no calendar; ask me about "
            f"{first}'s standing commitment before you book anything {first} attends.\n"
        )
    if setting.void is not None:
        latent += (
            f"If `{REQUESTS}` contradicts itself in a way these rules do not settle, ask me "
            "which to trust before you book.\n"
        )
    return f"""\
Please book this week's internal meetings (the week of {setting.week:%A %d %B %Y}). The
calendar exports are {names}; the meetings to book are in `{REQUESTS}` (attendees by
calendar name, separated by `;`, the length in minutes and the weekdays allowed).

Rules:
- Office hours are 09:00–17:00 office time (UTC+01:00). A meeting starts on the hour or the
  half hour and lies within office hours; ending exactly at 17:00 is fine.
- An attendee is busy during every event of their calendar except cancelled events
  (`STATUS:CANCELLED`) and events marked free (`TRANSP:TRANSPARENT`). An all-day event
  blocks the whole day; a recurring event blocks every occurrence. Back-to-back is fine: a
  meeting may start the minute a busy event ends.
- Book the meetings in the order of `{REQUESTS}`, each in its earliest slot (earliest
  allowed day, then earliest time) where every attendee is free. A booked meeting makes
  its attendees busy for the meetings after it.
{latent}
Create:
1. `{SCHEDULE}`: {{"meetings": {{"M1": {{"start": "YYYY-MM-DDTHH:MM", "end": "…",
   "attendees": [...]}}, …}}}} in office time.
2. `{INVITES}`: a valid iCalendar file (`VERSION:2.0`, a `PRODID`) with one `VEVENT` per
   meeting whose `UID` is the meeting's id, `SUMMARY` its title, and `DTSTART`/`DTEND` its
   slot in office time (floating local time, `YYYYMMDDTHHMMSS`).

Do not edit the calendars or `{REQUESTS}`.
"""


CHECK_INVITES = (
    hard.CHECK_INVITES_PRELUDE
    + r'''
def stamp(value):
    digits = value.replace("-", "").replace(":", "")
    return digits[:13]

good, notes = 0, []
for key, slot in expected.items():
    event = events.get(key)
    want = (stamp(slot["start"]), stamp(slot["end"]))
    if event is None:
        notes.append(f"{key}: no VEVENT")
    elif (stamp(event.get("DTSTART", "")), stamp(event.get("DTEND", ""))) != want:
        notes.append(f"{key}: {event.get('DTSTART')}–{event.get('DTEND')}, want {want}")
    else:
        good += 1
extra = sorted(set(events) - set(expected))
if extra:
    notes.append(f"events for no requested meeting: {extra}")
score = good / len(expected) if not extra else good / (len(expected) + len(extra))
report(score, "; ".join(notes) or f"all {good} invitations at their slots")
'''
)


__all__ = ["CalendarScheduling", "parse_ics", "schedule"]

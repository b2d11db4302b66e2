"""The week calendar_scheduling's ``hard`` tier draws from a seed (``draw``): the people,
their calendars, the rooms' bookings and the requests, the seed's contradictions, the
changed calendar of turn 3 and the mailbox written from the truth — each draw refused
unless every misreading moves a booking (``Setting`` holds the result)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from . import calendar_scheduling_mail as mail
from .base import FamilyParams
from .calendar_scheduling_booking import (
    Loop,
    Plan,
    Rules,
    Task,
    book_loop,
    book_requests,
    expected,
    moved,
    world_of,
)
from .calendar_scheduling_contradictions import (
    CALLED_OFF,
    CONTRADICTIONS,
    OWN_HOURS,
    REMOTE_ZONE,
    ROOM_SEATS,
    TWO_LENGTHS,
    Contradictions,
    draw_contradiction,
)
from .calendar_scheduling_ics import Calendar, Event, Misreading, ics, occurrences
from .calendar_scheduling_office import (
    CHICAGO,
    CLOSE,
    DAYS,
    DOMAIN,
    MEETINGS,
    OFFICE,
    OFFICE_ZONE,
    OPEN,
    PEOPLE_CSV,
    POLICY,
    REQUESTS,
    ROOMS,
    Meeting,
    Person,
    Request,
    Room,
    calendar_path,
    people_csv,
    policy_md,
    read_directory,
    resolve,
    rooms_xlsx,
)

# Weeks between the US clock change (8 March 2026) and the EU one (29 March): Chicago is
# six hours behind Paris, not the usual seven.
WEEKS = (date(2026, 3, 9), date(2026, 3, 16), date(2026, 3, 23))
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
CANDIDATES = ("Jordan Reyes", "Sam Whitaker", "Noor Aziz", "Lena Brandt")


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
    contradictions: Contradictions = Contradictions()  # noqa: RUF009 - frozen: immutable
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
    if book_requests(files, setting.task(changes=False)) is None:
        return False  # a week with no room for the meetings: no contradiction saves it
    for kind in setting.contradictions.kinds:
        if not draw_contradiction(setting, files, kind, rng):
            return False
    plan = _booked(files, setting.task(changes=False))
    if plan is None:
        return False
    first_only = {r.id: plan[r.id] for r in setting.requests}
    truth = setting.task(changes=False)
    misread = [
        book_requests(files, truth, Misreading(z_as_office=True)),
        book_requests(files, truth, Misreading(series_in_week_only=True)),
        *(book_requests(files, setting.task(False, kind)) for kind in setting.contradictions.kinds),
    ]
    if any(m == first_only for m in misread):
        return False
    bare = book_loop(world_of(files, truth.rules), setting.loop, {})
    if bare is None or all(bare[i] == plan[i] for i in setting.loop.ids):
        return False  # the loop must depend on turn 1's bookings
    meetings = resolve(truth.requests, read_directory(files[PEOPLE_CSV]))
    return _draw_change(setting, files, plan, meetings, rng)


def _booked(files: Mapping[str, bytes], task: Task) -> Plan | None:
    try:
        plan, _ = expected(files, files, task)
    except AssertionError:
        return None
    return plan


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

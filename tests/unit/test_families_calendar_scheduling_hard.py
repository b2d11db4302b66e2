"""The hard tier of calendar_scheduling: each difficulty it is built on is present in every
draft, decides a checked value (the misreading books something else), and is fair —
stated in the instruction or the policy, written plainly in the mailbox, or answered by the
user when asked, never given away. The requests are mails: a keyword reader of the
mailbox books the wrong week, the reference (which knows the truth) passes."""

from __future__ import annotations

import csv
import io
import itertools
import json
import mailbox
import re
import subprocess
import time
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from coworkgym.families import calendar_scheduling_booking as booking
from coworkgym.families import calendar_scheduling_contradictions as contradictions
from coworkgym.families import calendar_scheduling_hard as hard
from coworkgym.families import calendar_scheduling_mail as mail
from coworkgym.families import calendar_scheduling_office as office
from coworkgym.families import calendar_scheduling_texts as texts
from coworkgym.families.base import FamilyParams
from coworkgym.families.calendar_scheduling import CalendarScheduling
from coworkgym.families.calendar_scheduling_draw import WEEKS
from coworkgym.llm.tools import MAX_TOOL_OUTPUT
from coworkgym.rollout.user import matches
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = CalendarScheduling()
SEEDS = range(4)
WIDE = range(6)  # seeds for the properties of the mailbox (cheap: no reference run)


def _params(seed: int, turns: int = 3) -> FamilyParams:
    return FamilyParams(seed=seed, difficulty="hard", turns=turns)


def _setting(seed: int) -> hard.Setting:
    return hard.draw(_params(seed))


def _right(setting: hard.Setting) -> hard.Rules:
    return setting.rules()


def _answer(seed: int, question: str) -> str:
    draft = FAMILY.draft(_params(seed))
    said = [s.reveals for s in draft.user.signal_plan if matches(question, s.trigger)]
    assert said, question
    return " ".join(said)


@pytest.mark.parametrize("seed", SEEDS)
def test_drafts_are_deterministic_fast_and_too_large_to_eyeball(seed: int) -> None:
    started = time.perf_counter()
    a = FAMILY.draft(_params(seed))
    assert time.perf_counter() - started < 2.0
    b = FAMILY.draft(_params(seed))
    assert a.workspace == b.workspace and a.instruction == b.instruction
    assert [t.files for t in a.turns] == [t.files for t in b.turns]
    calendars = [p for p in a.workspace if p.startswith("calendars/")]
    assert len(calendars) == 7
    assert sum(a.workspace[p].count(b"BEGIN:VEVENT") for p in calendars) >= 85
    assert {hard.PEOPLE_CSV, hard.ROOMS, hard.REQUESTS, hard.POLICY} <= set(a.workspace)
    subjects = {m["subject"] for m in _mails(a.workspace[hard.REQUESTS])}
    ids = {re.search(r"\[(M\d)\]", s).group(1) for s in subjects if "[M" in s}  # type: ignore[union-attr]
    assert ids == {f"M{n}" for n in range(1, office.MEETINGS + 1)}
    readable = sum(len(v) for p, v in a.workspace.items() if not p.endswith(".xlsx"))
    assert len(a.workspace[hard.REQUESTS]) > 6 * MAX_TOOL_OUTPUT
    assert readable > 10 * MAX_TOOL_OUTPUT


def test_the_lower_tiers_keep_their_design() -> None:
    easy = FAMILY.draft(FamilyParams(seed=0, difficulty="easy", turns=3))
    assert (
        hard.PEOPLE_CSV not in easy.workspace and b"updated" not in easy.workspace["requests.csv"]
    )
    assert hard.REQUESTS not in easy.workspace
    medium = FAMILY.draft(FamilyParams(seed=0, difficulty="medium", turns=3))
    assert hard.POLICY not in medium.workspace


def test_the_reader_follows_rfc_5545_series_by_their_wall_clock() -> None:
    """A weekly Chicago series set in February keeps 10:00 local after the US clock change
    (six hours behind Paris, not seven); an EXDATE drops an occurrence; a RECURRENCE-ID moves
    one; a cancelled override frees it; a stamp ending in Z is UTC; folded lines unfold."""
    data = (
        b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:s\r\n"
        b"DTSTART;TZID=America/Chicago:20260202T100000\r\n"
        b"DTEND;TZID=America/Chicago:20260202T110000\r\n"
        b"RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;UNTIL=20260630T220000Z\r\n"
        b"EXDATE;TZID=America/Chicago:20260318T100000\r\n"
        b"DESCRIPTION:a long line th\r\n at folds\r\n"
        b"END:VEVENT\r\nBEGIN:VEVENT\r\nUID:s\r\n"
        b"RECURRENCE-ID;TZID=America/Chicago:20260320T100000\r\n"
        b"DTSTART;TZID=America/Chicago:20260320T080000\r\n"
        b"DTEND;TZID=America/Chicago:20260320T083000\r\nEND:VEVENT\r\n"
        b"BEGIN:VEVENT\r\nUID:z\r\nDTSTART:20260317T090000Z\r\nDTEND:20260317T093000Z\r\n"
        b"END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    events = hard.parse_ics(data)
    assert events[0].description == "a long line that folds"
    busy = hard.busy_intervals(events, date(2026, 3, 16))
    assert sorted(busy) == [
        (datetime(2026, 3, 16, 16), datetime(2026, 3, 16, 17)),  # 10:00 CDT is 16:00 CET
        (datetime(2026, 3, 17, 10), datetime(2026, 3, 17, 10, 30)),  # 09:00Z
        (datetime(2026, 3, 20, 14), datetime(2026, 3, 20, 14, 30)),  # moved to 08:00 CDT
    ]
    stepped_in_utc = hard.busy_intervals(
        hard.parse_ics(data), date(2026, 3, 16), hard.Misreading(series_in_utc=True)
    )
    assert (datetime(2026, 3, 16, 17), datetime(2026, 3, 16, 18)) in stepped_in_utc


@pytest.mark.parametrize("week", WEEKS)
def test_the_weeks_lie_between_the_two_clock_changes(week: date) -> None:
    for day in range(5):
        noon = datetime.combine(week + timedelta(days=day), datetime.min.time()).replace(hour=12)
        paris = noon.replace(tzinfo=ZoneInfo("Europe/Paris")).utcoffset()
        chicago = noon.replace(tzinfo=ZoneInfo("America/Chicago")).utcoffset()
        assert paris is not None and chicago is not None
        assert paris - chicago == timedelta(hours=6)  # seven outside these weeks


@pytest.mark.parametrize("seed", SEEDS)
def test_each_misreading_and_each_contradiction_books_another_week(seed: int) -> None:
    """A Z stamp read as office time, series that began before the week left out, and each
    of the seed's two or three contradictions settled the other way: each moves a meeting."""
    setting = _setting(seed)
    files = setting.files()
    truth = setting.task(changes=False)
    right = booking.book_requests(files, truth)
    assert right is not None
    assert booking.book_requests(files, truth, hard.Misreading(z_as_office=True)) != right
    assert booking.book_requests(files, truth, hard.Misreading(series_in_week_only=True)) != right
    kinds = setting.contradictions.kinds
    assert 2 <= len(kinds) <= 3 and set(kinds) <= set(contradictions.CONTRADICTIONS)
    for kind in kinds:
        assert booking.book_requests(files, setting.task(False, kind)) != right, kind
    directory = office.read_directory(files[hard.PEOPLE_CSV])
    in_directory = directory.zone[setting.remote]
    assert in_directory == (
        "America/New_York" if contradictions.REMOTE_ZONE in kinds else office.CHICAGO
    )
    assert f"TZID={office.CHICAGO}".encode() in files[hard.calendar_path(setting.remote)]
    assert b"Z\r\n" in files[hard.calendar_path(setting.lisbon)]
    who, title, span, _right = setting.contradictions.called_off
    if span is not None:  # the calendar holds the event the colleague's mail calls off
        assert span in booking.world_of(files, hard.Rules()).busy[who]
        mails = [m for m in _mails(setting.mailbox) if m["subject"] == f"{title} on {span[0]:%A}"]
        assert len(mails) == 1 and f"{span[0]:%H:%M}" in str(mails[0].get_payload())


def test_every_contradiction_of_the_pool_is_drawn_and_subsets_vary() -> None:
    drawn = [_setting(seed).contradictions.kinds for seed in WIDE]
    assert {k for kinds in drawn for k in kinds} == set(contradictions.CONTRADICTIONS)
    assert len(set(drawn)) >= 3


@pytest.mark.parametrize("seed", SEEDS)
def test_the_interview_loop_is_booked_around_turn_ones_meetings(seed: int) -> None:
    setting = _setting(seed)
    files = setting.files()
    world = booking.world_of(files, _right(setting))
    meetings = office.resolve(setting.truth(), world.directory)
    plan = booking.book_meetings(world, meetings)
    assert plan is not None
    loop = booking.book_loop(world, setting.loop, plan)
    bare = booking.book_loop(world, setting.loop, {})
    assert loop is not None and bare is not None and loop != bare
    starts = [loop[i].start for i in setting.loop.ids]
    assert [b - a for a, b in itertools.pairwise(starts)] == [timedelta(minutes=45)] * 2
    assert len({loop[i].room for i in setting.loop.ids}) == 1
    # the message names the candidate; HR's mails name the panels (a later one may swap one)
    draft = FAMILY.draft(_params(seed))
    message = draft.turns[0].patch.message
    assert setting.loop.candidate in message and "@" not in message
    subject = f"Interview loop: {setting.loop.candidate}"
    hr = [str(m.get_payload()) for m in _mails(setting.mailbox) if m["subject"].endswith(subject)]
    first = {p.key: p.name.split()[0] for p in setting.people}
    said = _flat(" ".join(hr))
    assert all(re.search(rf"\b{first[k]}\b", said) for p in setting.loop.panels for k in p)
    if len(hr) == 2:  # the swap names the one who replaces and the one replaced
        dropped = [f for f in first.values() if f in hr[1] and f in hr[0]]
        assert len(dropped) >= 2


@pytest.mark.parametrize("seed", SEEDS)
def test_the_changed_calendar_hides_a_second_change_and_the_policy_moves_little(seed: int) -> None:
    """Turn 3: the user names the call on one meeting; the same export confirms an event that
    was cancelled, under another booked item, unsaid. Rebooking as the policy says moves
    both and differs from booking the week afresh."""
    setting = _setting(seed)
    draft = FAMILY.draft(_params(seed))
    path = hard.calendar_path(setting.changed_person)
    old, new = draft.workspace[path], draft.turns[1].files[Path(path).name]
    old_events = {e.uid: e for e in hard.parse_ics(old)}
    new_events = {e.uid: e for e in hard.parse_ics(new)}
    revived = [
        u
        for u, e in new_events.items()
        if u in old_events and old_events[u].status == "CANCELLED" and e.status != "CANCELLED"
    ]
    assert len(revived) == 1 and len(set(new_events) - set(old_events)) == 1
    message = draft.turns[1].patch.message
    assert setting.called in message and new_events[revived[0]].summary not in message
    task = setting.task(changes=True)
    final = {**draft.workspace, path: new}
    later, earlier = hard.expected(draft.workspace, final, task)
    assert earlier is not None
    shifted = booking.moved(earlier, later)
    assert setting.called in shifted and len(shifted) >= 2
    try:
        afresh, _ = hard.expected(final, final, replace(task, changes=False))
    except AssertionError:  # booked afresh, some item finds no slot at all: differs anyway
        afresh = {}
    assert afresh != later
    unchanged = [i for i in later if i not in shifted]
    assert unchanged and all(later[i] == earlier[i] for i in unchanged)


def test_the_user_answers_what_is_asked_and_gives_no_trap_away() -> None:
    for seed in SEEDS:
        setting = _setting(seed)
        found = setting.contradictions
        people = {p.key: p for p in setting.people}
        if contradictions.REMOTE_ZONE in found.kinds:
            first = people[setting.remote].name.split()[0]
            answer = _answer(
                seed,
                f"people.csv says {first} is in New York but the calendar is "
                "Chicago time: which time zone are their working hours in?",
            )
            assert "Chicago time" in answer
        if contradictions.TWO_LENGTHS in found.kinds:
            item = found.dispute[0]
            answer = _answer(seed, f"Two mails give {item} different lengths: how long is it?")
            owner = next(w.sender for w in setting.wordings if w.id == item)
            assert f"{people[owner].name.split()[0]}'s length stands" in answer
        if contradictions.ROOM_SEATS in found.kinds:
            room, seats, mail_right = found.room
            answer = _answer(seed, f"How many seats does {room} have?")
            listed = next(r.seats for r in setting.rooms if r.name == room)
            assert f"{room} seats {seats if mail_right else listed}" in answer
        if contradictions.OWN_HOURS in found.kinds:
            person, (a, b), own_right = found.hours
            name = people[person].name.split()[0]
            answer = _answer(seed, f"What are {name}'s hours: when does the day start?")
            a, b = (a, b) if own_right else people[person].hours
            assert f"{office.clock_time(a)}–{office.clock_time(b)}" in answer
        if contradictions.CALLED_OFF in found.kinds:
            who, title, span, off_right = found.called_off
            assert span is not None
            name = people[who].name.split()[0]
            answer = _answer(seed, f"Is {name}'s {title} on {span[0]:%A} cancelled?")
            assert ("is off" if off_right else "takes place") in answer
        draft = FAMILY.draft(_params(seed))
        assert "ask me which to trust" in draft.instruction
        spoken = [s.reveals for s in draft.user.signal_plan]
        spoken += [t.patch.message for t in draft.turns]
        assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]


def _slip(built: object, old: str, new: str) -> object:
    assert old in built.solve_sh  # type: ignore[attr-defined]
    return replace(built, solve_sh=built.solve_sh.replace(old, new))  # type: ignore[attr-defined,type-var]


@pytest.mark.parametrize("seed", [1, 2, 3])  # every kind of contradiction among them
def test_the_reference_passes_and_each_slip_fails(seed: int, tmp_path: Path) -> None:
    params = _params(seed)
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    setting = _setting(seed)
    found = setting.contradictions
    slips = {
        "booked afresh": _slip(built, "CHANGES_FROM_TURN=2", "CHANGES_FROM_TURN=99"),
        "loop on bare calendars": _slip(
            built, "plan.update(book_loop(plan))", "plan.update(book_loop({}))"
        ),
    }
    if contradictions.REMOTE_ZONE in found.kinds:
        slips["New York hours"] = _slip(built, f"REMOTE={setting.remote}", "REMOTE=nobody")
    if contradictions.TWO_LENGTHS in found.kinds:
        wrong = [hard._as_json(r) for r in setting.truth(contradictions.TWO_LENGTHS)]
        slips["the other length"] = replace(
            built,
            solve_sh=re.sub(r"REQUESTS='[^']*'", f"REQUESTS='{json.dumps(wrong)}'", built.solve_sh),
        )
    if contradictions.ROOM_SEATS in found.kinds:
        said = ",".join(
            f"{k}={v}" for k, v in setting.rules(contradictions.ROOM_SEATS).seats.items()
        )
        slips["the other seat count"] = replace(
            built, solve_sh=re.sub(r"SEATS=\S*", f"SEATS={said}", built.solve_sh)
        )
    if contradictions.OWN_HOURS in found.kinds:
        hours = setting.rules(contradictions.OWN_HOURS).hours
        said = ",".join(
            f"{k}={office.clock_time(a)}-{office.clock_time(b)}" for k, (a, b) in hours.items()
        )
        slips["the other hours"] = replace(
            built, solve_sh=re.sub(r"HOURS=\S*", f"HOURS={said}", built.solve_sh)
        )
    if contradictions.CALLED_OFF in found.kinds:
        off = setting.rules(contradictions.CALLED_OFF).freed
        said = ",".join(f"{k}={a:%Y-%m-%dT%H:%M}/{b:%Y-%m-%dT%H:%M}" for k, (a, b) in off.items())
        slips["the other word on the event"] = replace(
            built, solve_sh=re.sub(r"FREED=\S*", f"FREED={said}", built.solve_sh)
        )
    assert len(slips) >= 4
    for name, slipped in slips.items():
        root = tmp_path / name.replace(" ", "-")
        try:
            done = run_reference(slipped, root)  # type: ignore[arg-type]
        except subprocess.CalledProcessError:
            continue  # the slipped reading finds no slot for some meeting: nothing to score
        assert reward(FAMILY, built, params, done, root) <= 0.5, name
    # every invitation sent again, moved or not
    invites = (workspace / hard.INVITES).read_text().replace("SEQUENCE:0", "SEQUENCE:1")
    (workspace / hard.INVITES).write_text(invites)
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") <= 0.5
    stale = run_reference(built, tmp_path / "stale", upto=1)  # the changed calendar ignored
    assert reward(FAMILY, built, params, stale, tmp_path / "stale") <= 0.5
    changes = list(csv.DictReader(io.StringIO((workspace / hard.CHANGES).read_text())))
    assert {r["id"] for r in changes} >= {setting.called}
    schedule = json.loads((workspace / hard.SCHEDULE).read_text())
    assert set(schedule["interviews"]) == set(setting.loop.ids)


# ---- the mailbox: meaning, not keywords --------------------------------------------------------


def _mails(data: bytes) -> list[mailbox.mboxMessage]:
    """The mailbox's messages, split on their mbox ``From `` lines, in file order."""
    return [
        mailbox.mboxMessage(chunk.split(b"\n", 1)[1])
        for chunk in re.split(rb"\n(?=From \S+@\S+ )", data)
    ]


def _flat(text: str) -> str:
    """``text`` on one line: the mailbox wraps its lines at 78 characters."""
    return " ".join(text.split())


def _threads(data: bytes) -> dict[str, list[str]]:
    """Each request's mails (bodies, in mailbox order), by the id in their subject."""
    return {i: [body for _who, body in mails] for i, mails in _senders(data).items()}


def _senders(data: bytes) -> dict[str, list[tuple[str, str]]]:
    """Each request's mails as (sender's address, body), by the id in their subject."""
    threads: dict[str, list[tuple[str, str]]] = {}
    for message in _mails(data):
        found = re.search(r"\[(M\d)\]", message["subject"])
        if found:
            who = re.sub(r".*<|>", "", message["from"])
            threads.setdefault(found.group(1), []).append((who, str(message.get_payload())))
    return threads


ALL_LENGTHS = sorted(
    ((p, m) for m, bank in texts.LENGTHS.items() for p in bank), key=lambda x: -len(x[0])
)
ALL_DAYS = sorted(
    (
        (phrase, office.DAYS[a : b + 1])
        for a in range(5)
        for b in range(a, 5)
        for phrase in texts.days_phrases(
            a, b, texts.DAY_NAMES[office.DAYS[a]], texts.DAY_NAMES[office.DAYS[b]]
        )
    ),
    key=lambda x: -len(x[0]),
)


def _last(text: str, bank: list[tuple[str, object]]) -> object:
    """The value of the bank phrase that occurs last in ``text`` (longest phrase first)."""
    best, at = None, -1
    for phrase, value in bank:
        where = text.lower().rfind(phrase.lower())
        if where > at:
            best, at = value, where
    return best


def _keyword_reading(setting: hard.Setting, thread: list[str]) -> dict[str, object]:
    """What a grep-and-script reader takes from a thread: quoted lines dropped, the last
    length and days phrase it knows (every phrase of the banks), "urgent"/"low" for the
    priority, every colleague named, another meeting named as the one to follow."""
    text = _flat(
        "\n".join(line for body in thread for line in body.split("\n") if not line.startswith(">"))
    )
    names = {p.name.split()[0]: p.key for p in setting.people}
    lowered = text.lower()
    priority = 1 if "urgent" in lowered else 3 if "low" in lowered else 2
    titles = {r.title: r.id for r in setting.requests}
    return {
        "minutes": _last(text, ALL_LENGTHS),  # type: ignore[arg-type]
        "days": _last(text, ALL_DAYS),  # type: ignore[arg-type]
        "priority": priority,
        "people": {k for first, k in names.items() if re.search(rf"\b{first}\b", text)},
        "after": next((i for t, i in titles.items() if t in text), ""),
    }


def _truth_reading(setting: hard.Setting, request: office.Request) -> dict[str, object]:
    directory = office.read_directory(office.people_csv(setting.people))
    [meeting] = office.resolve([request], directory)
    return {
        "minutes": request.minutes,
        "days": request.days,
        "priority": request.priority,
        "people": set(meeting.people),
        "after": request.after,
    }


@pytest.mark.parametrize("seed", WIDE)
def test_a_keyword_reader_of_the_mailbox_gets_most_requests_wrong(seed: int) -> None:
    """The pass threshold is every request right; a reader that knows every phrase of the
    banks but not what the sentences mean gets at most half of them right."""
    setting = _setting(seed)
    threads = _threads(setting.mailbox)
    right = 0
    for request in setting.requests:
        guess = _keyword_reading(setting, threads[request.id])
        truth = _truth_reading(setting, request)
        if request.attendees[0].startswith("team:"):
            guess["people"] = truth["people"]  # the team alias: no name to grep for
        right += guess == truth
    assert right <= office.MEETINGS // 2, right


@pytest.mark.parametrize("seed", WIDE)
def test_each_request_states_each_field_plainly_where_it_counts(seed: int) -> None:
    """Fairness: the thread of each request holds, for every field, a phrase of the true
    value's own bank; a corrected field's phrase stands in the sender's latest mail, above
    any quote; a forwarded request's lead states the changed field."""
    setting = _setting(seed)
    threads = _threads(setting.mailbox)
    by_sender = _senders(setting.mailbox)
    titles = {r.id: r.title for r in setting.requests}
    for request, wording in zip(setting.requests, setting.wordings, strict=True):
        said = setting.statements[request.id].phrases
        thread = threads[request.id]
        text = _flat("\n".join(thread))
        assert said["minutes"] in texts.LENGTHS[request.minutes]
        first, last = office.DAYS.index(request.days[0]), office.DAYS.index(request.days[-1])
        names = (texts.DAY_NAMES[request.days[0]], texts.DAY_NAMES[request.days[-1]])
        assert said["days"] in texts.days_phrases(first, last, *names)
        assert said["priority"] in texts.PRIORITIES[request.priority]
        fields = ["minutes", "days", "priority", "attendees"]
        if request.after:
            assert said["after"] in {a.format(title=titles[request.after]) for a in texts.AFTERS}
            fields.append("after")
        for name in fields:
            assert said[name].lower() in text.lower(), (request.id, name)
        if wording.story in (mail.CORRECTED, mail.QUOTED, mail.FORWARDED):
            fixed = "days" if wording.decoy_days else "minutes"
            sender = next(p.email for p in setting.people if p.key == wording.sender)
            latest = [body for who, body in by_sender[request.id] if who == sender][-1]
            above = _flat(latest.split(" wrote:\n")[0].split("---------- Forwarded")[0])
            assert said[fixed].lower() in above.lower(), (request.id, fixed)
        if wording.joined:
            joined = next(p.name.split()[0] for p in setting.people if p.key == wording.joined)
            assert re.search(rf"PS:.*\b{joined}\b", text)


def test_the_mailbox_varies_by_seed() -> None:
    """Different stories, phrasings and contradictions per seed."""
    settings = [_setting(seed) for seed in WIDE]
    stories = [tuple(w.story for w in s.wordings) for s in settings]
    assert len(set(stories)) == len(settings)
    phrases = [{p for st in s.statements.values() for p in st.phrases.values()} for s in settings]
    for a, b in itertools.combinations(phrases, 2):
        assert len(a & b) < len(a) // 2
    told = {w.story for s in settings for w in s.wordings}
    assert told == set(mail.STORY_WEIGHTS)

"""The hard tier of calendar_scheduling: each difficulty it is built on is present in every
draft, decides a checked value (the misreading books something else), and is fair —
stated in the instruction or the policy, or answered by the user when asked, never given
away."""

from __future__ import annotations

import csv
import io
import itertools
import json
import time
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from coworkgym.families import calendar_scheduling_hard as hard
from coworkgym.families.base import FamilyParams, parse_csv
from coworkgym.families.calendar_scheduling import CalendarScheduling
from coworkgym.rollout.user import matches
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = CalendarScheduling()
SEEDS = range(4)


def _params(seed: int, turns: int = 3) -> FamilyParams:
    return FamilyParams(seed=seed, difficulty="hard", turns=turns)


def _setting(seed: int) -> hard.Setting:
    return hard.draw(_params(seed))


def _right(setting: hard.Setting) -> hard.Rules:
    return hard.Rules(zones={setting.remote: hard.CHICAGO})


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
    assert sum(a.workspace[p].count(b"BEGIN:VEVENT") for p in calendars) >= 100
    assert {hard.PEOPLE_CSV, hard.ROOMS, hard.REQUESTS, hard.POLICY} <= set(a.workspace)
    assert len(hard.read_requests(a.workspace[hard.REQUESTS])) == hard.MEETINGS


def test_the_lower_tiers_keep_their_design() -> None:
    easy = FAMILY.draft(FamilyParams(seed=0, difficulty="easy", turns=3))
    assert (
        hard.PEOPLE_CSV not in easy.workspace and b"updated" not in easy.workspace["requests.csv"]
    )
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


@pytest.mark.parametrize("week", hard.WEEKS)
def test_the_weeks_lie_between_the_two_clock_changes(week: date) -> None:
    for day in range(5):
        noon = datetime.combine(week + timedelta(days=day), datetime.min.time()).replace(hour=12)
        paris = noon.replace(tzinfo=ZoneInfo("Europe/Paris")).utcoffset()
        chicago = noon.replace(tzinfo=ZoneInfo("America/Chicago")).utcoffset()
        assert paris is not None and chicago is not None
        assert paris - chicago == timedelta(hours=6)  # seven outside these weeks


def _plain(files: dict[str, bytes], rules: hard.Rules, misreading: hard.Misreading) -> object:
    return hard._plain(files, rules, misreading)


@pytest.mark.parametrize("seed", SEEDS)
def test_each_misreading_of_the_files_books_another_week(seed: int) -> None:
    """people.csv's New York hours, a Z stamp read as office time, series that began before
    the week left out, and the last line of a meeting listed twice: each moves a meeting."""
    setting = _setting(seed)
    files = setting.files()
    right = _plain(files, _right(setting), hard.CORRECT)
    assert right is not None
    assert _plain(files, hard.Rules(), hard.CORRECT) != right
    assert _plain(files, _right(setting), hard.Misreading(z_as_office=True)) != right
    assert _plain(files, _right(setting), hard.Misreading(series_in_week_only=True)) != right
    last = {**files, hard.REQUESTS: hard._last_line_wins(files[hard.REQUESTS])}
    assert _plain(last, _right(setting), hard.CORRECT) != right
    rows = parse_csv(files[hard.REQUESTS])
    ids = [r["id"] for r in rows]
    assert ids[-1] in ids[:-1] and rows[-1]["updated"] < min(r["updated"] for r in rows[:-1])
    directory = hard.read_directory(files[hard.PEOPLE_CSV])
    assert directory.zone[setting.remote] == "America/New_York"
    assert f"TZID={hard.CHICAGO}".encode() in files[hard.calendar_path(setting.remote)]
    assert b"Z\r\n" in files[hard.calendar_path(setting.lisbon)]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_interview_loop_is_booked_around_turn_ones_meetings(seed: int) -> None:
    setting = _setting(seed)
    files = setting.files()
    world = hard.world_of(files, _right(setting))
    meetings = hard.resolve(hard.read_requests(files[hard.REQUESTS]), world.directory)
    plan = hard.book_meetings(world, meetings)
    assert plan is not None
    loop = hard.book_loop(world, setting.loop, plan)
    bare = hard.book_loop(world, setting.loop, {})
    assert loop is not None and bare is not None and loop != bare
    starts = [loop[i].start for i in setting.loop.ids]
    assert [b - a for a, b in itertools.pairwise(starts)] == [timedelta(minutes=45)] * 2
    assert len({loop[i].room for i in setting.loop.ids}) == 1
    draft = FAMILY.draft(_params(seed))
    parsed = hard.parse_loop(draft.turns[0].patch.message, world.directory)
    assert parsed.panels == setting.loop.panels


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
    task = hard.Task(setting.loop, setting.remote, changes=True)
    final = {**draft.workspace, path: new}
    later, earlier = hard.expected(draft.workspace, final, task)
    assert earlier is not None
    shifted = hard.moved(earlier, later)
    assert setting.called in shifted and len(shifted) >= 2
    afresh, _ = hard.expected(final, final, replace(task, changes=False))
    assert afresh != later
    unchanged = [i for i in later if i not in shifted]
    assert unchanged and all(later[i] == earlier[i] for i in unchanged)


def test_the_user_answers_what_is_asked_and_gives_no_trap_away() -> None:
    for seed in SEEDS:
        setting = _setting(seed)
        first = next(p.name.split()[0] for p in setting.people if p.key == setting.remote)
        answer = _answer(
            seed,
            f"people.csv says {first} is in New York but the calendar is "
            "Chicago time: which time zone are his working hours in?",
        )
        assert "Chicago time" in answer
        answer = _answer(
            seed, "M2 is listed twice in requests.csv with different lengths: which line?"
        )
        assert "latest `updated`" in answer
        draft = FAMILY.draft(_params(seed))
        assert "ask me which to trust" in draft.instruction
        spoken = [s.reveals for s in draft.user.signal_plan]
        spoken += [t.patch.message for t in draft.turns]
        assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]


def _slip(built: object, old: str, new: str) -> object:
    assert old in built.solve_sh  # type: ignore[attr-defined]
    return replace(built, solve_sh=built.solve_sh.replace(old, new))  # type: ignore[attr-defined,type-var]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_reference_passes_and_each_slip_fails(seed: int, tmp_path: Path) -> None:
    params = _params(seed)
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    setting = _setting(seed)
    slips = {
        "New York hours": _slip(built, f"REMOTE={setting.remote}", "REMOTE=nobody"),
        "booked afresh": _slip(built, "CHANGES_FROM_TURN=2", "CHANGES_FROM_TURN=99"),
        "loop on bare calendars": _slip(
            built, "plan.update(book_loop(plan))", "plan.update(book_loop({}))"
        ),
    }
    for name, slipped in slips.items():
        root = tmp_path / name.replace(" ", "-")
        done = run_reference(slipped, root)  # type: ignore[arg-type]
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

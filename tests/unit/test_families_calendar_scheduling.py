"""The calendar-scheduling family: the calendar's structure decides who is busy, a booked
meeting blocks its attendees, and the reference books what the verifier recomputes. The
hard tier (its own module) has its own tests: ``test_families_calendar_scheduling_hard``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.calendar_scheduling import (
    INVITES,
    SCHEDULE,
    CalendarScheduling,
    busy_intervals,
    parse_ics,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = CalendarScheduling()
KEYS = ("start", "end")


def test_registered() -> None:
    assert isinstance(FAMILIES["calendar_scheduling"], CalendarScheduling)


def test_cancelled_and_free_events_do_not_block_but_recurring_ones_do() -> None:
    data = (
        b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART:20260202T090000\r\n"
        b"DTEND:20260202T100000\r\nSTATUS:CANCELLED\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:b\r\n"
        b"DTSTART:20260202T100000Z\r\nDTEND:20260202T110000Z\r\nTRANSP:TRANSPARENT\r\n"
        b"END:VEVENT\r\nBEGIN:VEVENT\r\nUID:c\r\nDTSTART:20260202T080000Z\r\n"
        b"DTEND:20260202T081500Z\r\nRRULE:FREQ=DAILY;COUNT=3\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    busy = busy_intervals(parse_ics(data))
    assert busy == [
        (datetime(2026, 2, d, 9, 0), datetime(2026, 2, d, 9, 15)) for d in (2, 3, 4)
    ]  # the UTC stand-up at 08:00Z is 09:00 office time, three days running


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
)
def test_reference_passes_and_wrong_schedules_fail(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    untouched = tmp_path / "untouched"
    untouched.mkdir()
    for rel, content in built.workspace.items():
        (untouched / rel).parent.mkdir(parents=True, exist_ok=True)
        (untouched / rel).write_bytes(content)
    assert reward(FAMILY, built, params, untouched, tmp_path / "u") < 0.5
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    # the first meeting an hour late, in both deliverables alike
    schedule = json.loads((workspace / SCHEDULE).read_text())
    slot = schedule["meetings"]["M1"]
    later = {k: f"{slot[k][:11]}{int(slot[k][11:13]) + 1:02d}{slot[k][13:]}" for k in KEYS}
    invites = (workspace / INVITES).read_text()
    for key in KEYS:
        old, new = (s.replace("-", "").replace(":", "") for s in (slot[key], later[key]))
        invites = invites.replace(old, new)
    schedule["meetings"]["M1"].update(later)
    (workspace / SCHEDULE).write_text(json.dumps(schedule))
    (workspace / INVITES).write_text(invites)
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

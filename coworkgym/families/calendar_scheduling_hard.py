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

Each part of the tier has a module of its own: the office and its written inputs
(``calendar_scheduling_office``: ``people.csv``, ``rooms.xlsx``, ``policy.md``), the
calendar exports (``calendar_scheduling_ics``), the booking rules and the expected schedule
(``calendar_scheduling_booking``), the contradictions (``calendar_scheduling_contradictions``),
the seed's week (``calendar_scheduling_draw``), the mailbox (``calendar_scheduling_mail``)
and what the user says (``calendar_scheduling_user``). This module declares the traps and
assembles the draft and the verifier.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CsvValue, CustomScript, VerifierSpec
from .base import NEVER, FamilyDraft, FamilyParams, Reading, Trap
from .calendar_scheduling_booking import Plan, Rules, Task, expected, moved
from .calendar_scheduling_draw import ROSTER, Setting, draw
from .calendar_scheduling_hard_scripts import CHECK_INVITES, CHECK_INVITES_PRELUDE, SOLVE
from .calendar_scheduling_ics import Misreading, busy_intervals, occurrences, parse_ics
from .calendar_scheduling_office import (
    CHANGES,
    EXPECTED,
    INVITES,
    PEOPLE_CSV,
    POLICY,
    REQUESTS,
    ROOMS,
    SCHEDULE,
    Request,
    calendar_path,
    clock_time,
    current_request_rows,
)
from .calendar_scheduling_user import change_message, instruction, loop_message, user
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
    return {k: (clock_time(a), clock_time(b)) for k, (a, b) in setting.rules().hours.items()}


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
    "ROSTER",
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

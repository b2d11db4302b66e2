"""What the user of calendar_scheduling's ``hard`` week says: the instruction, the later
turns' messages (the interview loop, the replaced calendar) and the answers the simulated
user gives when asked — one per contradiction the seed has."""

from __future__ import annotations

from datetime import date

from ..package.cowork import Signal, UserState
from .calendar_scheduling_contradictions import (
    CALLED_OFF,
    OWN_HOURS,
    REMOTE_ZONE,
    ROOM_SEATS,
    TWO_LENGTHS,
)
from .calendar_scheduling_draw import Setting
from .calendar_scheduling_office import (
    CHANGES,
    INVITES,
    MEETINGS,
    PEOPLE_CSV,
    POLICY,
    REQUESTS,
    ROOMS,
    SCHEDULE,
    SESSION_MINUTES,
    calendar_path,
    clock_time,
)


def instruction(week: date, changes: bool) -> str:
    later = ""
    if changes:
        later = (
            "\nIf I tell you an input changed after the invitations went out, follow the "
            "policy's section\non changes and list every booking that moved in "
            f"`{CHANGES}`.\n"
        )
    return f"""\
Please book the internal meetings of the week of {week:%A %d %B %Y}. Everything is in
the workspace: the calendar exports in `calendars/`, the team directory `{PEOPLE_CSV}`,
the rooms and their bookings in `{ROOMS}`, my mail of last week in `{REQUESTS}` and our
scheduling policy, `{POLICY}`, which decides how to read the calendars, when a meeting may
take place, which room it gets and in what order to book. Back-to-back is fine: a meeting
may start the minute a busy event ends. A meeting ending exactly at 17:00 is fine.

The meetings to book are the requests colleagues mailed me, each with its id in the
subject (`[M1]` to `[M{MEETINGS}]`): who attends (the sender too, unless they say
otherwise), how long it lasts, the days it may take, how urgent it is, and whether it must
follow another meeting. A later message of the sender can change their request; the rest of
the mailbox books nothing.

Create:
1. `{SCHEDULE}`: {{"meetings": {{"M1": {{"start": "YYYY-MM-DDTHH:MM", "end": "…",
   "room": "…", "attendees": ["email", …]}}, …}}}} in office time, one entry per request
   (`M1` to `M{MEETINGS}`).
2. `{INVITES}`: a valid iCalendar file (`VERSION:2.0`, a `PRODID`) with one `VEVENT` per
   booking whose `UID` is its id, `SUMMARY` its title, `DTSTART`/`DTEND` its slot in office
   time (floating local time, `YYYYMMDDTHHMMSS`), `LOCATION` its room and `SEQUENCE:0`.

Do not edit the input files. If the files contradict each other on something the policy
depends on, ask me which to trust before you book.
{later}"""


def loop_message(setting: Setting) -> str:
    return (
        f"Thanks. {setting.loop.candidate} comes in for an interview loop this week: three "
        f"{SESSION_MINUTES}-minute sessions, one right after the other, all in one room (the "
        "candidate stays put, in person). The Talent Team mailed me the panels last week; "
        f"their mails are in `{REQUESTS}`. Book it on Tuesday, Wednesday, Thursday or "
        "Friday in the earliest slot where the whole loop fits, around the meetings you "
        "booked: the loop's room needs a seat for the candidate and for the largest panel's Paris "
        "members, and video if a panelist works from another office; the first session starts "
        "on the hour or the half hour; office hours and lunch apply to the whole loop, and "
        f"each panelist's working hours to their own session. Add it to `{SCHEDULE}` under "
        '"interviews" ("I1", "I2", "I3", each with start, end, room and attendees, the '
        f"panel's emails) and to `{INVITES}` as "
        "three more invitations, UIDs I1 to I3."
    )


def change_message(setting: Setting) -> str:
    name = next(p.name for p in setting.people if p.key == setting.changed_person)
    return (
        f"{name} just accepted an external call that lands on {setting.called}. I replaced "
        f"`{calendar_path(setting.changed_person)}` with the current export. The invitations "
        "have gone out, so please bring the schedule and the invitations up to date as the "
        f"policy says for changes, and list every booking that moved in `{CHANGES}` with the "
        "columns `id`, `old_start` and `new_start` (times as in the schedule)."
    )


def user(setting: Setting) -> UserState:
    """The office manager: the answers every week needs, and one per contradiction this seed
    has (asked about anything else, the user says nothing of them)."""
    people = {p.key: p for p in setting.people}
    remote = people[setting.remote]
    first = remote.name.split()[0]
    found = setting.contradictions
    signals = [
        Signal(
            trigger="agent asks about the time zone of the calendars",
            reveals="office time is Paris time, UTC+01:00 all this week",
        ),
        Signal(
            trigger="agent asks whether to edit, change or send the calendars or invitations",
            reveals=f"never edit anyone's calendar; I send the invitations from {INVITES} myself",
        ),
    ]
    if REMOTE_ZONE in found.kinds:
        signals.append(
            Signal(
                trigger=f"agent asks where {first} works: {first}'s office, city or zone, "
                "New York or Chicago",
                reveals=f"{remote.name} works from our Chicago office: their working hours, "
                f"{clock_time(remote.hours[0])}–{clock_time(remote.hours[1])}, are Chicago time "
                "(America/Chicago)",
            )
        )
    if TWO_LENGTHS in found.kinds:
        item, other, _minutes = found.dispute
        owner = people[next(w.sender for w in setting.wordings if w.id == item)]
        own, theirs = owner.name.split()[0], people[other].name.split()[0]
        signals.append(
            Signal(
                trigger=f"agent asks how long {item} lasts: {own} and {theirs} give two "
                "lengths, durations or minutes",
                reveals=f"{item} is {own}'s meeting, so {own}'s length stands; {theirs}'s "
                "estimate does not count",
            )
        )
    if ROOM_SEATS in found.kinds:
        room, seats, mail_right = found.room
        listed = next(r.seats for r in setting.rooms if r.name == room)
        reveals = (
            f"{room} seats {seats}: facilities counted the chairs last week"
            if mail_right
            else f"{room} seats {listed}, as {ROOMS} has it; facilities wrote about the old layout"
        )
        signals.append(
            Signal(
                trigger=f"agent asks how many seats {room} has: the room's capacity or chairs",
                reveals=reveals,
            )
        )
    if OWN_HOURS in found.kinds:
        person, hours, own_right = found.hours
        colleague = people[person]
        name = colleague.name.split()[0]
        a, b = hours if own_right else colleague.hours
        signals.append(
            Signal(
                trigger=f"agent asks about {name}'s hours: when {name}'s day starts or ends, "
                "directory or sign-off",
                reveals=f"{colleague.name} works {clock_time(a)}–{clock_time(b)}, local time, "
                "these weeks",
            )
        )
    if CALLED_OFF in found.kinds:
        who, title, span, off_right = found.called_off
        assert span is not None
        name = people[who].name.split()[0]
        day = f"{span[0]:%A}"
        signals.append(
            Signal(
                trigger=f"agent asks whether {name}'s {title} on {day} still takes place: "
                "cancelled or not",
                reveals=(
                    f"{name}'s {title} on {day} is off: {name} is free then"
                    if off_right
                    else f"{name}'s {title} on {day} takes place as the calendar shows; "
                    "it was put back"
                ),
            )
        )
    return UserState(
        persona="Office manager who books the team's internal meetings each week.",
        role="administrator",
        latent_goals=[
            "Meetings should land as early in the week as the calendars allow.",
            "People who already have an invitation should be disturbed as little as possible.",
        ],
        knowledge_boundary=["does not know what the calendar app writes into the export"],
        signal_plan=signals,
    )

"""``requests.mbox`` of the hard calendar week: the meeting requests colleagues mailed, in
words, among a week of other office mail.

The requests are drawn first, as structured ``Request``s (``calendar_scheduling_draw``);
this module writes each one out as a thread (``request_thread``) whose story hides its plain
statements among distractors a keyword script misreads — a later correction by the sender,
the same correction above a quote of the older mail, a forwarded older request with another
length or other days, a length denied or mentioned as a past meeting's, an attendee added in
a postscript or named only to be left out, another meeting named only to say this one does
not follow it. The contradictions a seed draws (``calendar_scheduling_contradictions``)
add their own mails: a colleague's other length for someone else's meeting, facilities'
seat count for a room, a colleague's own hours in their signature. Nothing is parsed back:
``Statement``s record which phrase states which field, for the tests.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from . import calendar_scheduling_texts as texts

MAILBOX = "requests.mbox"
OFFICE_MANAGER = "office@northwind.example"
# How a request's thread hides its plain statements (drawn per request).
PLAIN, CORRECTED, QUOTED, FORWARDED, DENIED, PAST = (
    "plain",
    "corrected",
    "quoted",
    "forwarded",
    "denied",
    "past",
)
STORY_WEIGHTS = {PLAIN: 1, CORRECTED: 2, QUOTED: 2, FORWARDED: 2, DENIED: 2, PAST: 2}
NOISE_MAILS = (136, 152)


@dataclass(frozen=True)
class Sender:
    key: str
    name: str
    email: str
    signature: str = ""  # extra signature line (a colleague's own hours)

    @property
    def first(self) -> str:
        return self.name.split()[0]


@dataclass(frozen=True)
class Mail:
    sender: Sender
    sent: datetime  # office time
    subject: str
    body: str


@dataclass(frozen=True)
class Wording:
    """What a request's thread says, as data: the attendees the sender lists (without
    themselves), the team alias, and the distractors drawn for it."""

    id: str
    title: str
    sender: str  # person key
    attendees: tuple[str, ...]  # person keys besides the sender ("" team)
    team: str  # team name when the request is for a whole team
    minutes: int
    days: tuple[str, ...]
    priority: int
    after_title: str  # the title of the meeting it must follow, "" if none
    story: str
    decoy_minutes: int  # the wrong length a distractor states (story-dependent)
    decoy_days: tuple[str, ...]  # the wrong days a correction or forward states
    joined: str = ""  # an attendee added in a postscript
    left_out: str = ""  # someone named only to be left out
    unrelated_title: str = ""  # another meeting named only to say this one does not follow it


@dataclass
class Statement:
    """Where a thread states a field plainly: the phrase, per field."""

    phrases: dict[str, str] = field(default_factory=dict)


def request_thread(
    w: Wording, people: Mapping[str, Sender], start: datetime, rng: random.Random
) -> tuple[list[Mail], Statement]:
    """The mails of one request, oldest first, and the phrases that state its fields."""
    sender = people[w.sender]
    said = Statement()
    length = rng.choice(texts.LENGTHS[w.minutes])
    days = texts.days_phrase(w.days, rng)
    priority = rng.choice(texts.PRIORITIES[w.priority])
    said.phrases["priority"] = priority
    subject = f"[{w.id}] {w.title}"
    others = [people[k].first for k in w.attendees if k != w.joined]
    if w.team:
        names = rng.choice(texts.TEAM_NAMES).format(team=w.team)
    else:
        names = texts.names_phrase([*others, "me"])
    said.phrases["attendees"] = names
    extra: list[str] = []
    if w.after_title:
        after = rng.choice(texts.AFTERS).format(title=w.after_title)
        said.phrases["after"] = after
        extra.append(_sentence(after))
    elif w.unrelated_title:
        extra.append(_sentence(rng.choice(texts.NOT_AFTERS).format(title=w.unrelated_title)))
    if w.left_out:
        extra.append(rng.choice(texts.NOT_INVITED).format(name=people[w.left_out].first))
    extra.append(_sentence(priority))
    postscripts = []
    if w.joined:
        joined = people[w.joined].first
        postscripts.append(
            rng.choice(texts.JOINS).format(name=joined, pronoun="them", pronoun_subject="they")
        )
        said.phrases["joined"] = joined

    def block(length_text: str, days_text: str) -> str:
        lines = [
            rng.choice(texts.ATTENDEE_LINES).format(names=names),
            rng.choice(texts.LENGTH_LINES).format(length=length_text),
            rng.choice(texts.DAY_LINES).format(days=days_text),
            *extra,
        ]
        head, rest = lines[0], lines[1:]
        rng.shuffle(rest)
        return " ".join([rng.choice(texts.OPENINGS).format(title=w.title), head, *rest])

    decoy_length = rng.choice(texts.LENGTHS[w.decoy_minutes])
    decoy_days = texts.days_phrase(w.decoy_days, rng) if w.decoy_days else days
    fixes_length = w.story in (CORRECTED, QUOTED, FORWARDED) and w.decoy_days == ()
    mails: list[Mail] = []
    if w.story in (PLAIN, DENIED, PAST):
        said.phrases["minutes"], said.phrases["days"] = length, days
        body = [block(length, days)]
        if w.story == DENIED:
            body.append(_capital(rng.choice(texts.NEGATED_LENGTHS).format(what=decoy_length)))
        if w.story == PAST:
            postscripts.append(rng.choice(texts.PAST_MENTIONS).format(what=decoy_length))
        mails.append(Mail(sender, start, subject, _letter(body, postscripts, sender, rng)))
        return mails, said
    old = block(decoy_length, days) if fixes_length else block(length, decoy_days)
    if fixes_length:
        fix = rng.choice(texts.LENGTH_FIXES).format(what=length)
        said.phrases["minutes"], said.phrases["days"] = length, days
    else:
        fix = rng.choice(texts.DAY_FIXES).format(what=days)
        said.phrases["minutes"], said.phrases["days"] = length, days
    if w.story == FORWARDED:
        earlier = start - timedelta(days=rng.randint(40, 120))
        lead = rng.choice(texts.FORWARD_LEADS).format(
            what=f"it should last {length}" if fixes_length else f"the days are {days}"
        )
        forwarded = (
            "---------- Forwarded message ----------\n"
            f"From: {sender.name} <{sender.email}>\n"
            f"Date: {_date(earlier)}\n"
            f"Subject: {w.title}\n\n" + _wrap(old)
        )
        body = [lead, forwarded]
        mails.append(Mail(sender, start, subject, _letter(body, postscripts, sender, rng)))
        return mails, said
    original = _letter([old], postscripts, sender, rng)
    mails.append(Mail(sender, start, subject, original))
    later = _later(start, rng)
    reply = [fix]
    if w.story == QUOTED:
        reply.append(
            f"On {_date(start)}, {sender.name} wrote:\n"
            + "\n".join(f"> {line}" if line else ">" for line in original.split("\n"))
        )
    mails.append(Mail(sender, later, f"Re: {subject}", _letter(reply, [], sender, rng)))
    return mails, said


def dispute_mail(
    w: Wording, other: Sender, minutes: int, sent: datetime, rng: random.Random
) -> Mail:
    """Another attendee's own length for ``w``'s meeting: neither a correction nor the
    sender's word."""
    text = rng.choice(texts.LENGTH_DISPUTES).format(
        title=w.title, what=rng.choice(texts.LENGTHS[minutes])
    )
    body = [text, rng.choice(FILLER)]
    return Mail(other, sent, f"Re: [{w.id}] {w.title}", _letter(body, [], other, rng))


SEAT_NOTES = (
    "A reminder from facilities: {room} has {seats} seats.",
    "Facilities here: the {room} room seats {seats} people.",
    "Please note that {room} holds {seats} people, seated.",
    "{room} has room for {seats} around the table.",
    "For your bookings: {room}, {seats} seats.",
    "Quick note on {room}: it seats {seats}.",
    "The seat count of {room} is {seats}.",
    "{room} fits {seats} people at the table.",
)
HOURS_LINES = (
    "My working hours: {start}-{end} (local time)",
    "Hours: {start} to {end}, local time",
    "In the office {start}-{end} local time",
    "Available {start}-{end} (local time)",
    "Working day: {start} to {end}, local time",
    "Reachable {start}-{end}, local time",
    "At my desk {start}-{end} local time",
    "Office hours {start}-{end}, local time",
)


def seat_note(room: str, seats: int, sent: datetime, sender: Sender, rng: random.Random) -> Mail:
    body = [
        rng.choice(SEAT_NOTES).format(room=room, seats=seats),
        *rng.sample(FACILITIES, 2),
    ]
    return Mail(sender, sent, f"{room} room", _letter(body, [], sender, rng))


# HR's mails about an interview loop: {first}, {second}, {last} are the panels in words.
PANEL_LINES = (
    "The first session is with {first}, the second with {second}, and {last} takes the last.",
    "Session one: {first}. Session two: {second}. Session three: {last}.",
    "{first} open the day; {second} follow; {last} closes the loop.",
    "Order of the panels: {first} first, then {second}, then {last}.",
    "First {first}, next {second}, and finally {last}.",
    "The loop starts with {first}, continues with {second} and ends with {last}.",
    "Panel 1 is {first}, panel 2 is {second}, panel 3 is {last}.",
    "{first} take the opening session, {second} the middle one and {last} the final one.",
)
SWAP_LINES = (
    # "cannot make it" alone read as out of the whole loop to a blind player
    "Change for {candidate}'s loop: {out} cannot make session {n}; {into} takes that seat.",
    "Update on {candidate}'s panels: {into} replaces {out} in session {n}.",
    "Sorry, one change for {candidate}: session {n} is {into}, not {out}.",
    "{out} dropped out of {candidate}'s session {n}; {into} sits in instead.",
    "Correction for {candidate}'s loop: in session {n}, {into} instead of {out}.",
    "Swap for {candidate}: {out} is out of session {n}, {into} is in.",
    "For {candidate}'s session {n}, please read {into} where I wrote {out}.",
    "{into} takes {out}'s place in session {n} of {candidate}'s loop.",
)


def loop_mails(
    hr: Sender,
    candidate: str,
    panels: Sequence[Sequence[str]],
    swap: tuple[int, str, str] | None,
    other: tuple[str, Sequence[Sequence[str]]],
    week: date,
    rng: random.Random,
) -> list[Mail]:
    """HR's thread on ``candidate``'s loop (first names per session; with ``swap`` =
    (session, the one who drops out, the one who replaces them) the first mail names the
    former and a later one corrects it) and a mail on another candidate's loop next month."""
    listed = [list(p) for p in panels]
    if swap is not None:
        n, out, into = swap
        listed[n] = [out if name == into else name for name in listed[n]]
    line = rng.choice(PANEL_LINES).format(**_panels_words(listed))
    sent = request_sent(week, rng)
    body = [
        f"{candidate} comes in for the interview loop next week: three sessions of 45 minutes, "
        "back to back, same room.",
        line,
        rng.choice(FILLER),
    ]
    mails = [Mail(hr, sent, f"Interview loop: {candidate}", _letter(body, [], hr, rng))]
    if swap is not None:
        n, out, into = swap
        fix = rng.choice(SWAP_LINES).format(candidate=candidate, out=out, into=into, n=n + 1)
        mails.append(
            Mail(
                hr,
                _later(sent, rng),
                f"Re: Interview loop: {candidate}",
                _letter([fix], [], hr, rng),
            )
        )
    name, their_panels = other
    later = rng.choice(LATER_WEEKS)
    body = [
        f"Planning ahead: {name} comes in for a loop later ({later}), not this week; nothing "
        "to book yet. The tentative panels, for when it comes:",
        rng.choice(PANEL_LINES).format(**_panels_words(their_panels)),
    ]
    mails.append(
        Mail(hr, _sent(week, rng), f"Interview loop: {name} (later)", _letter(body, [], hr, rng))
    )
    return mails


def _panels_words(panels: Sequence[Sequence[str]]) -> dict[str, str]:
    words = [texts.names_phrase(list(p)) for p in panels]
    return {"first": words[0], "second": words[1], "last": words[2]}


CALLED_OFF_LINES = (
    "My {title} on {day} at {time} (Paris time) is off, so I am free then.",
    "The {title} I had on {day} at {time} Paris time has been called off.",
    "Good news: {day}'s {title} at {time} (Paris time) will not happen.",
    "My {day} {title}, {time} Paris time, is cancelled.",
    "Please note my {title} on {day} at {time} (Paris time) is not happening.",
    "The {title} on {day}, {time} Paris time, is off.",
    "{day}'s {title} at {time} (Paris time) was called off; I am available.",
    "Scratch my {title} on {day} at {time} Paris time: it is cancelled.",
)


def called_off_mail(
    sender: Sender, title: str, start: datetime, sent: datetime, rng: random.Random
) -> Mail:
    """A colleague's word that an event of theirs this week will not take place."""
    line = rng.choice(CALLED_OFF_LINES).format(
        title=title if title == "1:1" else title.lower(), day=f"{start:%A}", time=f"{start:%H:%M}"
    )
    body = [_capital(line), rng.choice(FILLER)]
    return Mail(sender, sent, f"{title} on {start:%A}", _letter(body, [], sender, rng))


def hours_signature(start: int, end: int, rng: random.Random) -> str:
    return rng.choice(HOURS_LINES).format(start=_hm(start), end=_hm(end))


def noise(
    people: Sequence[Sender], titles: Sequence[str], week: date, rng: random.Random
) -> list[Mail]:
    """Office mail that books nothing: recaps of past meetings (with their lengths and
    days), plans for other weeks, facilities news, out-of-office replies."""
    out = []
    for _n in range(rng.randint(*NOISE_MAILS)):
        sender = rng.choice(people)
        sent = _sent(week, rng)
        kind = rng.randrange(4)
        title = rng.choice(titles)
        if kind == 0:
            past = rng.choice(tuple(texts.DAY_NAMES.values()))
            length = rng.choice(texts.LENGTHS[rng.choice((30, 45, 60, 90))])
            subject = f"Notes: {title} ({past.lower()[:3]})"
            body = [
                f"Notes from {past}'s {title}, which took {length}.",
                *rng.sample(RECAP, 5),
            ]
        elif kind == 1:
            subject = f"Later: {title}"
            body = [
                f"Heads-up for {rng.choice(LATER_WEEKS)}: we will want another {title} then. "
                "Nothing to book this week; I will send a request when it is time.",
                *rng.sample(FILLER, 3),
            ]
        elif kind == 2:
            subject = rng.choice(FACILITY_SUBJECTS)
            body = rng.sample(FACILITIES, 5)
        else:
            subject = "Automatic reply: " + rng.choice(("Out of office", "Away", "Travelling"))
            body = [
                "I am away from my desk with limited access to mail and will reply when I am "
                "back. For anything urgent please write to the office address.",
                rng.choice(FILLER),
            ]
        out.append(Mail(sender, sent, subject, _letter(body, [], sender, rng)))
    return out


def mbox(mails: Sequence[Mail]) -> bytes:
    """The mails in date order, as an mbox file."""
    parts = []
    for n, mail in enumerate(sorted(mails, key=lambda m: (m.sent, m.subject))):
        parts.append(
            f"From {mail.sender.email} {mail.sent:%a %b %d %H:%M:%S %Y}\n"
            f"From: {mail.sender.name} <{mail.sender.email}>\n"
            f"To: Office manager <{OFFICE_MANAGER}>\n"
            f"Date: {_date(mail.sent)}\n"
            f"Subject: {mail.subject}\n"
            f"Message-ID: <{n:04d}.{mail.sent:%Y%m%d%H%M}@mail.northwind.example>\n\n"
            f"{mail.body}\n"
        )
    return "\n".join(parts).encode()


def _sent(week: date, rng: random.Random) -> datetime:
    """A working moment of the week before ``week``."""
    day = week - timedelta(days=7 - rng.randrange(5))
    return datetime.combine(day, datetime.min.time()) + timedelta(
        minutes=rng.randrange(8 * 60, 19 * 60)
    )


def _later(moment: datetime, rng: random.Random) -> datetime:
    """A working moment (08:00–19:00) one to three hours, or a day or two, after ``moment``."""
    later = moment + timedelta(hours=rng.randint(1, 3), minutes=rng.randrange(60))
    if later.hour >= 19 or rng.random() < 0.5:
        day = moment.date() + timedelta(days=rng.randint(1, 2))
        later = datetime.combine(day, datetime.min.time()) + timedelta(
            minutes=rng.randrange(8 * 60, 19 * 60)
        )
    return later


def request_sent(week: date, rng: random.Random) -> datetime:
    """When a request's first mail went out: Monday to Wednesday of the week before."""
    day = week - timedelta(days=7 - rng.randrange(3))
    return datetime.combine(day, datetime.min.time()) + timedelta(
        minutes=rng.randrange(8 * 60, 18 * 60)
    )


def _letter(
    body: Sequence[str],
    postscripts: Sequence[str],
    sender: Sender,
    rng: random.Random,
    greet: bool = True,
) -> str:
    parts = [rng.choice(texts.GREETINGS)] if greet else []
    parts += [p if "\n" in p else _wrap(p) for p in body]
    parts.append(f"{rng.choice(texts.SIGN_OFFS)}\n{sender.name}")
    if sender.signature:
        parts[-1] += f"\n{sender.signature}"
    parts += [_wrap(p) for p in postscripts]
    return "\n\n".join(parts)


def _wrap(text: str, width: int = 78) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def _sentence(text: str) -> str:
    return _capital(text) + "."


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _date(moment: datetime) -> str:
    return f"{moment:%a, %d %b %Y %H:%M:%S} +0100"


def _hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


LATER_WEEKS = (
    "the week after next",
    "early April",
    "the last week of April",
    "May",
    "the start of next quarter",
    "after Easter",
    "mid-April",
    "the week of the board meeting in April",
)
RECAP = (
    "We agreed to revisit the open items once the numbers are in.",
    "Action items are in the shared folder; owners are named next to each one.",
    "The discussion on vendors ran long, so we parked the last two points.",
    "Next time we should send the agenda a day earlier.",
    "The screen share dropped twice; facilities say the cable has been replaced.",
    "Everyone agreed the draft is close; one more round of comments should do.",
    "We overran by a good twenty minutes, mostly on the budget table.",
    "The minutes will be circulated by the end of the week.",
    "Two people joined late because the room was still taken.",
    "We decided to keep the same format for the next session.",
    "The risk list has three new entries; please read them before the next round.",
    "Thanks to everyone who stayed on for the extra questions.",
)
FILLER = (
    "Let me know if anything is unclear.",
    "Thanks for sorting out the bookings every week, it makes life much easier.",
    "I will be on the train on Thursday morning, so mail may be slow.",
    "The coffee machine on the second floor is finally fixed.",
    "Happy to help with the agenda if needed.",
    "Sorry for the long thread on this one.",
    "I have copied the notes into the shared folder as usual.",
    "No need to reply to this one.",
    "Looking forward to it.",
    "The slides are almost ready; I will share them the day before.",
)
FACILITIES = (
    "The lifts on the east side will be serviced on Saturday morning.",
    "Please leave the rooms tidy: whiteboards wiped, chairs back at the table.",
    "The new badge readers go live next month; old badges keep working until then.",
    "Coffee and tea are restocked every morning at eight.",
    "Please report broken screens or cables to the facilities desk.",
    "Bike parking has moved to the courtyard during the works.",
    "The printer on the third floor is out of toner until Tuesday.",
    "Visitors sign in at the front desk and wear a visitor badge.",
    "The fire drill is planned for a morning next month; details will follow.",
    "Lost property is kept at the front desk for two weeks.",
)
FACILITY_SUBJECTS = (
    "Facilities update",
    "Building news",
    "Office notes",
    "A few reminders",
    "This week in the building",
    "Front desk",
)


__all__ = [
    "CORRECTED",
    "DENIED",
    "FORWARDED",
    "MAILBOX",
    "PAST",
    "PLAIN",
    "QUOTED",
    "STORY_WEIGHTS",
    "Mail",
    "Sender",
    "Statement",
    "Wording",
    "called_off_mail",
    "dispute_mail",
    "hours_signature",
    "loop_mails",
    "mbox",
    "noise",
    "request_sent",
    "request_thread",
    "seat_note",
]

"""The words of the hard calendar week's mailbox: how a colleague says how long a meeting
lasts, which days it may take, how urgent it is, what it must follow, and the distractors
around those statements (a correction, a quoted or forwarded older request, a negation, a
past meeting in a postscript).

Each meaning has its own bank of phrasings and no phrasing serves two meanings, so the
text is written from the structured request (``calendar_scheduling_mail``) and a test can
find the plain statement of each field in the message that states it. Nothing here is read
back: the verifier books from the structured truth.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

DAY_NAMES = {
    "Mon": "Monday",
    "Tue": "Tuesday",
    "Wed": "Wednesday",
    "Thu": "Thursday",
    "Fri": "Friday",
}
WEEK = ("Mon", "Tue", "Wed", "Thu", "Fri")

# How long: one bank per length; a phrase of one bank never appears in another.
LENGTHS: dict[int, tuple[str, ...]] = {
    30: (
        "half an hour",
        "30 minutes",
        "thirty minutes",
        "a 30-minute slot",
        "a half-hour slot",
        "30 min",
        "a short half hour",
        "no more than thirty minutes, and no less",
    ),
    45: (
        "45 minutes",
        "three quarters of an hour",
        "forty-five minutes",
        "a 45-minute slot",
        "45 min",
        "a three-quarter-hour slot",
        "forty-five minutes exactly",
        "45 minutes, not a minute more",
    ),
    60: (
        "an hour",
        "60 minutes",
        "one hour",
        "a full hour",
        "a one-hour slot",
        "sixty minutes",
        "an hour, no more",
        "a 60-minute slot",
    ),
    90: (
        "an hour and a half",
        "90 minutes",
        "ninety minutes",
        "a 90-minute slot",
        "one and a half hours",
        "90 min",
        "a good hour and a half",
        "an hour and thirty minutes",
    ),
}

# How urgent: priority 1, 2, 3 (the policy books 1 first). A keyword "urgent" is no guide:
# the normal and low banks say what a meeting is not.
PRIORITIES: dict[int, tuple[str, ...]] = {
    1: (
        "this one is urgent",
        "it is top priority",
        "please book it before anything else",
        "it has the highest priority",
        "it cannot wait: priority one",
        "treat it as urgent, please",
        "it comes first this week",
        "it is our most pressing meeting",
    ),
    2: (
        "it is normal priority",
        "it is not urgent, just the usual priority",
        "the usual priority, nothing special",
        "ordinary priority, neither urgent nor optional",
        "standard priority, please",
        "it is a regular-priority meeting",
        "it is not top priority, but not low either",
        "medium priority",
    ),
    3: (
        "it is low priority",
        "it is the least urgent of the lot",
        "book it last, it is low priority",
        "lowest priority: fit it in wherever",
        "it is not urgent at all, low priority",
        "it can wait for the others, low priority",
        "low on the list, priority three",
        "no rush whatsoever, lowest priority",
    ),
}

# What it must follow: the other meeting's title fills {title}.
AFTERS = (
    "it has to come after the {title}",
    "it must not start before the {title} is over",
    "please put it after the {title}",
    "it only makes sense once the {title} has taken place",
    "it needs the outcome of the {title}, so after that one",
    "schedule it after the {title} ends",
    "the {title} has to happen first",
    "it should follow the {title}",
)
# A meeting with no such dependency says so about another meeting, in passing.
NOT_AFTERS = (
    "it does not need to wait for the {title}",
    "it is independent of the {title}",
    "no need to put it after the {title}",
    "it has nothing to do with the {title}",
    "the {title} can come before or after it, it does not matter",
    "it is not tied to the {title}",
    "do not wait for the {title} on this one",
    "the {title} is a separate matter",
)

OPENINGS = (
    "Could you book the {title} for us this week?",
    "I would like to set up the {title} this week.",
    "Please find us a slot for the {title}.",
    "Can you schedule the {title} for this week, please?",
    "We need to hold the {title} this week.",
    "Would you put the {title} in the calendar for this week?",
    "Time to organise the {title}: could you book it?",
    "I am asking for a slot for the {title} this week.",
)
LENGTH_LINES = (
    "It should last {length}.",
    "We need {length} for it.",
    "Please block {length}.",
    "Plan {length}.",
    "The meeting takes {length}.",
    "Length: {length}.",
    "Give it {length}.",
    "It will run {length}.",
)
DAY_LINES = (
    "As for the day: {days}.",
    "Days: {days}.",
    "When: {days}.",
    "Which day: {days}.",
    "For the day, {days}.",
    "On timing: {days}.",
    "Day-wise, {days}.",
    "Regarding the day, {days}.",
)
ATTENDEE_LINES = (
    "Attendees: {names}.",
    "It is for {names}.",
    "Invite {names}.",
    "The people: {names}.",
    "Those attending: {names}.",
    "Please invite {names}.",
    "Participants: {names}.",
    "Who: {names}.",
)
TEAM_NAMES = (
    "the whole {team} team",
    "everyone on the {team} team",
    "all of the {team} team",
    "the {team} team, all of them",
    "every member of the {team} team",
    "the full {team} team",
    "the {team} team in full",
    "all {team} team members",
)
JOINS = (
    "PS: {name} should join as well, please add {pronoun}.",
    "PS: I forgot {name}: {pronoun_subject} needs to be there too.",
    "PS: please add {name} to the invitation.",
    "PS: {name} will attend as well.",
    "PS: include {name}, {pronoun_subject} asked to come.",
    "PS: one more attendee: {name}.",
    "PS: {name} wants in, please invite {pronoun}.",
    "PS: add {name} to the list of attendees.",
)
NOT_INVITED = (
    "No need to invite {name} this time.",
    "{name} does not need to come to this one.",
    "Leave {name} out of it, please.",
    "{name} will not attend.",
    "Please do not invite {name}.",
    "{name} is not needed for this.",
    "We can do without {name} here.",
    "{name} asked to be left off this one.",
)
# A later message of the sender changes the length or the days; {what} is the new phrase.
LENGTH_FIXES = (
    "Sorry, I gave you the wrong length: it should be {what}.",
    "Correction: make it {what}, not what I wrote before.",
    "Actually, we need {what} after all.",
    "Change of plan on the length: {what}.",
    "Scratch the length I gave you: {what}.",
    "My mistake on the duration, it is {what}.",
    "Update: please plan {what} instead.",
    "I got the length wrong, sorry: {what}.",
)
DAY_FIXES = (
    "Forget the days I gave you, that was for the other project: {what}.",
    "Correction on the days: {what}.",
    "Sorry, wrong days: {what}.",
    "Scratch what I said about the day: {what}.",
    "The days I sent were for something else; for this one, {what}.",
    "Update on the days: {what}.",
    "I mixed up two meetings: for this one, {what}.",
    "Please ignore my earlier days: {what}.",
)
FORWARD_LEADS = (
    "Same meeting as below, but this time {what}.",
    "Forwarding last quarter's request; the same again, except that {what}.",
    "Like the request below, only {what} now.",
    "Here is the old request for reference; this time {what}.",
    "Reusing the request below; the one difference: {what}.",
    "See below for what we did last time; now {what}.",
    "The request below still stands, except that {what}.",
    "As in the mail below, but {what}.",
)
PAST_MENTIONS = (
    "PS: last quarter's session took {what}, for what it is worth.",
    "PS: the previous one ran {what}; that was far too long.",
    "PS: when we did this in January it took {what}.",
    "PS: a similar meeting last month lasted {what}.",
    "PS: for the record, the last round needed {what}.",
    "PS: I remember our last one took {what}.",
    "PS: our last one went {what}, if you wondered.",
    "PS: the old format used to be {what}.",
)
NEGATED_LENGTHS = (
    "We do not need {what} this time.",
    "No need for {what} here.",
    "{what} would be too long.",
    "Not {what}, please.",
    "Please do not book {what} for it.",
    "Last time we blocked {what}; not again.",
    "{what} is what the other team asked for, not us.",
    "Blocking {what} would be a waste.",
)
LENGTH_DISPUTES = (
    "About the {title}: I think we will need {what} for it.",
    "For the {title}, I would plan {what}.",
    "The {title} will take {what}, as far as I can see.",
    "My estimate for the {title}: {what}.",
    "I would block {what} for the {title}.",
    "The {title} needs {what}, in my view.",
    "For the {title} we should reserve {what}.",
    "I expect the {title} to take {what}.",
)
GREETINGS = ("Hi,", "Hello,", "Hi there,", "Good morning,", "Hello again,", "Hey,", "Dear all,")
SIGN_OFFS = ("Thanks,", "Thank you,", "Best,", "Cheers,", "Many thanks,", "Regards,")


def days_phrase(days: Sequence[str], rng: random.Random) -> str:
    """One phrasing of a run of consecutive weekdays that names exactly that run."""
    first, last = WEEK.index(days[0]), WEEK.index(days[-1])
    a, b = DAY_NAMES[days[0]], DAY_NAMES[days[-1]]
    return rng.choice(days_phrases(first, last, a, b))


def days_phrases(first: int, last: int, a: str, b: str) -> tuple[str, ...]:
    listed = _either([DAY_NAMES[d] for d in WEEK[first : last + 1]])
    if first == last:
        return (
            f"only on {a}",
            f"{a}, no other day",
            f"it has to be {a}",
            f"{a} and nothing else",
            f"strictly {a}",
            f"{a} is the only possible day",
            f"just {a}",
            f"{a} only",
        )
    if first == 0 and last == 4:
        return (
            "any day of the week",
            "whichever day suits, Monday to Friday",
            "any weekday is fine",
            "Monday through Friday all work",
            "no day is off limits",
            "any day from Monday to Friday",
            "all five days work",
            "every day of the week works for us",
        )
    if last == 4:
        before = _and([DAY_NAMES[d] for d in WEEK[:first]])
        return (
            f"any day from {a} on",
            f"{a} or later in the week",
            f"not before {a}",
            f"from {a} to Friday",
            f"{a} through Friday",
            f"any day except {before}",
            f"{a} at the earliest",
            f"anywhere from {a} to the end of the week",
        )
    if first == 0:
        after = _and([DAY_NAMES[d] for d in WEEK[last + 1 :]])
        return (
            f"by {b} at the latest",
            f"Monday to {b}",
            f"no later than {b}",
            f"any day up to {b}",
            f"any day except {after}",
            f"{b} at the latest",
            f"Monday through {b}",
            f"early in the week, up to and including {b}",
        )
    return (
        f"between {a} and {b}",
        f"{a} to {b}",
        listed,
        f"from {a} through {b}",
        f"any day from {a} to {b}",
        f"{a}, {b} or any day in between",
        f"not before {a} and not after {b}",
        f"only {listed}",
    )


def names_phrase(names: Sequence[str]) -> str:
    return _and(list(names))


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


__all__ = [
    "AFTERS",
    "DAY_FIXES",
    "LENGTHS",
    "LENGTH_FIXES",
    "NOT_AFTERS",
    "PRIORITIES",
    "days_phrase",
    "days_phrases",
]

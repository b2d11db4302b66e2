"""Meeting notes (Markdown) into an action-item table (CSV) and a short memo (Markdown).

Grounded in the EIA's annual Iowa net generation figures (bundled): the notes record an
energy-planning meeting that reviews one year against the year before. Everything in the
notes (attendees, decisions, action items with owners and due dates) is generated from the
seed; harder variants refer to owners by first name, mix date formats and strike one
action through. Later user turns edit the notes: a late action item, a moved due date.

The verifier parses the *final* notes with its own parser (``parse_notes``); the reference
solution has a separate one in ``SOLVE``, so a disagreement between the two shows up.
"""

from __future__ import annotations

import calendar
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import (
    Component,
    CsvValue,
    DocumentValue,
    RowCount,
    TableColumns,
    TextRegex,
    VerifierSpec,
)
from .common import (
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    after_reply,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    output_artifacts,
    python_solution,
    read_csv_resource,
    rubric,
    user_state,
    verifier_output,
)

NOTES = "notes/meeting-notes.md"
ITEMS = "action_items.csv"
MEMO = "memo.md"
SOURCES = ("Fossil Fuels", "Nuclear Energy", "Renewables")
MONTHS = tuple(calendar.month_name[1:])  # English: the notes are written in English

# (key phrase, task text): the key phrase is what the verifier looks for in the table, so it
# is distinctive and appears verbatim in the task; no task contains " by " or " to " before
# its key, which keeps "<owner> to <task> — due <date>" unambiguous.
TASKS = (
    ("generation summary", "circulate the {year} generation summary to the board"),
    ("storage pilot", "prepare a budget for the storage pilot"),
    ("site visit", "organise a site visit to the new wind farm"),
    ("outage schedule", "collect the nuclear outage schedule from the operator"),
    ("renewables dashboard", "update the renewables dashboard with the {year} figures"),
    ("EIA revisions", "check the {prev} fossil figure against the EIA revisions"),
    ("capacity additions", "draft a note on wind capacity additions"),
    ("first-quarter figures", "request the {next} first-quarter figures from the utility"),
    ("fuel contracts", "review the coal fuel contracts that expire next year"),
    ("transmission study", "summarise the transmission study for the steering group"),
    ("demand forecast", "refresh the demand forecast with the new generation mix"),
)
DECISIONS = (
    "keep the {next} renewables target unchanged",
    "fund a feasibility study for battery storage",
    "report generation quarterly instead of annually",
    "ask the utility for monthly data from {next} onwards",
    "retire the old fossil-share dashboard",
    "invite the grid operator to the next meeting",
)
PEOPLE = (
    "Priya Shah",
    "Marco Rossi",
    "Dana Kim",
    "Tomás Herrera",
    "Aisha Bello",
    "Lena Novak",
    "Owen Gallagher",
    "Mei Lin",
    "Jonas Berg",
    "Farah Haddad",
)
# easy → medium → hard: more people and items, first-name references, mixed date formats
SIZES = {"easy": (4, 3, 2), "medium": (5, 5, 3), "hard": (7, 7, 4)}

SOLVE = python_solution(
    "parse the meeting notes; write action_items.csv and memo.md.",
    r"""import calendar
import csv
import re
from datetime import date

MONTHS = {calendar.month_name[i].lower(): i for i in range(1, 13)}

def parse_date(text):
    text = text.strip().rstrip(".")
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text)
    if m:
        return date(int(m[1]), int(m[2]), int(m[3]))
    m = re.fullmatch(r"(\d{1,2}) ([A-Za-z]+) (\d{4})", text)
    if m:
        return date(int(m[3]), MONTHS[m[2].lower()], int(m[1]))
    m = re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", text)
    if m:
        return date(int(m[3]), MONTHS[m[1].lower()], int(m[2]))
    raise ValueError(f"unknown date {text!r}")

lines = open("notes/meeting-notes.md", encoding="utf-8").read().splitlines()
attendees, decisions, actions, table = [], 0, [], []
meeting = next_meeting = None
for line in lines:
    if line.startswith("Date:"):
        meeting = parse_date(line.split(":", 1)[1])
    elif line.startswith("Attendees:"):
        attendees = [re.sub(r"\s*\(.*?\)", "", a).strip() for a in line.split(":", 1)[1].split(",")]
    elif line.startswith("- Decision:"):
        decisions += 1
    elif line.startswith("|") and not line.startswith("|-"):
        table.append([c.strip() for c in line.strip("|").split("|")])
    m = re.search(r"reconvene on (.+?)(?: \(|\.|$)", line)
    if m:
        next_meeting = parse_date(m[1])
    m = re.match(r"^- Action: (.+?) (?:to|will) (.+?) (?:— due|by) (.+)$", line)
    if m:  # struck-through (withdrawn) items start with "- ~~" and never match
        who = m[1].strip()
        owner = next(a for a in attendees if a == who or a.split()[0] == who)
        actions.append((owner, m[2].strip(), parse_date(m[3])))

with open("action_items.csv", "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["owner", "task", "due"])
    for owner, task, due in actions:
        writer.writerow([owner, task, due.isoformat()])

header, rows = table[0], table[1:]
latest = {r[0]: float(r[-1].replace(",", "")) for r in rows}
share = round(100 * latest["Renewables"] / sum(latest.values()), 1)
memo = [
    "# Energy planning meeting: summary",
    "",
    f"Meeting date: {meeting.isoformat()}",
    f"Attendees: {len(attendees)}",
    f"Decision count: {decisions}",
    f"Action items: {len(actions)}",
    f"First deadline: {min(a[2] for a in actions).isoformat()}",
    f"Renewables share: {share}%",
    f"Next meeting: {next_meeting.isoformat()}",
    "",
    "## Actions by due date",
    "",
]
memo += [f"- {o}: {t} (due {d.isoformat()})" for o, t, d in sorted(actions, key=lambda a: a[2])]
open("memo.md", "w", encoding="utf-8").write("\n".join(memo) + "\n")
""",
)


@dataclass(frozen=True)
class Action:
    owner: str  # full name, as in the attendee list
    ref: str  # how the notes name the owner: full or first name
    task: str
    due: date
    fmt: str  # "iso" | "dmy" | "mdy"
    form: str  # "to" | "will"
    withdrawn: bool = False


@dataclass
class Meeting:
    """What the notes say; rendered to Markdown by ``render_notes``."""

    held: date
    reviewed_year: int
    figures: dict[int, dict[str, int]]  # year → source → thousand MWh
    attendees: list[str]
    apologies: list[str]
    decisions: list[str]
    actions: list[Action]  # in section order; late items go to ``added``
    next_meeting: date
    date_fmt: str
    added: list[Action] = field(default_factory=list)


@dataclass(frozen=True)
class ParsedNotes:
    """What the verifier reads back out of the notes."""

    held: date
    attendees: list[str]
    decisions: int
    actions: list[tuple[str, str, date]]  # (owner, task, due), withdrawn ones dropped
    next_meeting: date
    latest: dict[str, float]  # source → figure in the table's most recent year


class MeetingNotes(TaskFamily):
    name = "meeting_notes"
    scenarios = ("administration/meetings/action_items",)
    capabilities = ("information_extraction", "summarization", "dependency_tracking")
    later_capabilities = ("dependency_tracking",)
    full_turns = 2  # every later turn edits the notes
    deliverables = ("csv", "md")
    modalities = ("text",)

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("meeting")
        meeting = _meeting(params, rng)
        s0 = render_notes(meeting)
        kinds = ["late_item", "moved_due"]
        rng.shuffle(kinds)
        turns: list[UserTurn] = []
        for index, kind in enumerate(kinds[: params.turns - 1], start=1):
            turn_rng = params.rng(f"turn{index}")
            if kind == "late_item":
                meeting, message = _add_late_item(meeting, turn_rng)
            else:
                meeting, message = _move_due_date(meeting, turn_rng)
            turns.append(
                input_turn(
                    index,
                    after_reply(index),
                    message,
                    {NOTES: render_notes(meeting).encode()},
                    reason="the user edited the notes",
                    invalidates=[ITEMS, MEMO],
                    kind="input_edited",
                )
            )
        return FamilyDraft(
            slug=f"meeting-notes-{meeting.held.isoformat()}-{params.seed}",
            title=f"Action items from the energy planning meeting of {meeting.held.isoformat()}",
            instruction=_instruction(),
            workspace={NOTES: s0.encode(), "README.md": _readme().encode()},
            solve_sh=SOLVE,
            user=user_state(
                "Chief of staff of a state energy office who runs the planning meeting.",
                "administrator",
                "Owners are chased by due date, so every due date must be exact.",
                "does not know how EIA revises its annual figures",
                (
                    "agent asks about struck-through items",
                    "struck-through actions were withdrawn in the meeting",
                ),
            ),
            inputs=input_artifacts({NOTES: "md"}),
            outputs=output_artifacts({ITEMS: "csv", MEMO: "md"}, [NOTES]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        final = built.final_inputs()[NOTES]
        notes = parse_notes(final.decode("utf-8"))
        actions = notes.actions
        share = round(100 * notes.latest["Renewables"] / sum(notes.latest.values()), 1)
        components = [
            Component(
                id="action_count",
                weight=2,
                check=RowCount(path=ITEMS, equals=len(actions)),
                requirement="one row per live action item",
            ),
            Component(
                id="table_layout",
                weight=1,
                check=TableColumns(path=ITEMS, columns=["owner", "task", "due"]),
                requirement="action_items.csv columns",
            ),
            Component(
                id="tasks_listed",
                weight=2,
                check=TextRegex(path=ITEMS, pattern=_all_of(_task_keys(actions))),
                requirement="every action's task appears in the table",
            ),
        ]
        # Due dates are distinct by construction, so the due date identifies the action.
        for number, (owner, _task, due) in enumerate(sorted(actions, key=lambda a: a[2]), 1):
            components.append(
                Component(
                    id=f"action_{number:02d}_owner",
                    weight=1,
                    check=CsvValue(
                        path=ITEMS,
                        key_column="due",
                        key=due.isoformat(),
                        column="owner",
                        expected=owner,
                    ),
                    requirement=f"the action due {due.isoformat()} is {owner}'s (ISO due date)",
                )
            )
        memo_fields: list[tuple[str, str, object]] = [
            ("memo_meeting_date", "Meeting date", notes.held.isoformat()),
            ("memo_attendees", "Attendees", len(notes.attendees)),
            ("memo_decisions", "Decision count", notes.decisions),
            ("memo_action_count", "Action items", len(actions)),
            ("memo_first_deadline", "First deadline", min(a[2] for a in actions).isoformat()),
            ("memo_next_meeting", "Next meeting", notes.next_meeting.isoformat()),
        ]
        for component_id, label, expected in memo_fields:
            components.append(
                Component(
                    id=component_id,
                    weight=1,
                    check=DocumentValue(path=MEMO, label=label, expected=expected),
                    requirement=f"memo field '{label}'",
                )
            )
        components.append(
            Component(
                id="memo_lists_actions",
                weight=1,
                check=TextRegex(path=MEMO, pattern=_all_of(_task_keys(actions))),
                requirement="the memo lists every action item",
            )
        )
        components.append(
            Component(
                id="memo_renewables_share",
                weight=2,
                check=DocumentValue(
                    path=MEMO, label="Renewables share", expected=share, tolerance=0.05
                ),
                requirement="renewables share of the latest year's generation",
            )
        )
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "notes_unmodified",
                    "the meeting notes are the record and must not be edited",
                    {NOTES: final},
                )
            ],
            rubric=rubric(
                "memo_is_a_summary",
                "memo.md reads as a short summary a director could forward: the labelled fields "
                "are correct and the action items are listed with owner and date.",
                [MEMO, ITEMS],
            ),
        )
        return verifier_output(spec, {NOTES: final})


    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """Whether the attendee count includes those who sent apologies."""
        text = inputs[NOTES].decode("utf-8")
        present = len(parse_notes(text).attendees)
        apologies = next(
            (len(line.split(":", 1)[1].split(",")) for line in text.splitlines()
             if line.startswith("Apologies:")),
            0,
        )  # fmt: skip
        return [
            Reading(
                component="memo_attendees",
                subject="Attendees",
                values={"present": present, "invited": present + apologies},
                phrases={
                    "present": r"\bpresent\b|\bnot apologies\b",
                    "invited": r"\bincluding apologies\b|\binvited\b",
                },
            )
        ]


# ---- generating the meeting ----------------------------------------------------------------


def _meeting(params: FamilyParams, rng: random.Random) -> Meeting:
    figures: dict[int, dict[str, int]] = {}
    for row in read_csv_resource("data/iowa-electricity.csv"):
        figures.setdefault(int(row["year"][:4]), {})[row["source"]] = int(row["net_generation"])
    year = rng.randint(min(figures) + 1, max(figures))
    people, action_count, decision_count = SIZES[params.difficulty]
    names = rng.sample(PEOPLE, k=people + 1)
    attendees, apologies = names[:people], names[people:]
    if params.difficulty == "easy":
        apologies = []
    held = date(year + 1, rng.randint(2, 10), rng.randint(1, 28))
    formats = {"easy": ["iso"], "medium": ["iso", "dmy"], "hard": ["iso", "dmy", "mdy"]}
    fmts = formats[params.difficulty]
    dues = _distinct_dates(rng, held, action_count, set())
    tasks = rng.sample(TASKS, k=action_count)
    actions = []
    for due, (_key, template) in zip(dues, tasks, strict=True):
        owner = rng.choice(attendees)
        first_name = params.difficulty != "easy" and rng.random() < 0.5
        actions.append(
            Action(
                owner=owner,
                ref=owner.split()[0] if first_name else owner,
                task=_fill(template, year),
                due=due,
                fmt=rng.choice(fmts),
                form=rng.choice(["to", "will"]) if params.difficulty != "easy" else "to",
            )
        )
    if params.difficulty == "hard":  # one action was withdrawn during the meeting
        index = rng.randrange(len(actions))
        actions[index] = replace(actions[index], withdrawn=True)
    decisions = [_fill(d, year) for d in rng.sample(DECISIONS, k=decision_count)]
    return Meeting(
        held=held,
        reviewed_year=year,
        figures={year - 1: figures[year - 1], year: figures[year]},
        attendees=attendees,
        apologies=apologies,
        decisions=decisions,
        actions=actions,
        next_meeting=held + timedelta(days=rng.choice([21, 28, 35])),
        date_fmt=rng.choice(fmts),
    )


def _fill(template: str, year: int) -> str:
    return template.format(year=year, prev=year - 1, next=year + 1)


def _distinct_dates(rng: random.Random, after: date, count: int, taken: set[date]) -> list[date]:
    """Due dates 3–45 days after the meeting, distinct (they key the verifier's checks)."""
    pool = [after + timedelta(days=d) for d in range(3, 46)]
    return rng.sample([d for d in pool if d not in taken], k=count)


def _live(meeting: Meeting) -> list[Action]:
    return [a for a in [*meeting.actions, *meeting.added] if not a.withdrawn]


def _add_late_item(meeting: Meeting, rng: random.Random) -> tuple[Meeting, str]:
    used = {a.task for a in [*meeting.actions, *meeting.added]}
    free = [t for _k, t in TASKS if _fill(t, meeting.reviewed_year) not in used]
    task = _fill(rng.choice(free), meeting.reviewed_year)
    owner = rng.choice(meeting.attendees)
    taken = {a.due for a in [*meeting.actions, *meeting.added]}
    (due,) = _distinct_dates(rng, meeting.held, 1, taken)
    late = Action(owner=owner, ref=owner, task=task, due=due, fmt="iso", form="to")
    first = owner.split()[0]
    message = (
        f"I forgot an action from the end of the meeting: {first} agreed to {task}. I've added "
        f"it to {NOTES} under 'Added after the meeting'. Please update {ITEMS} and {MEMO}."
    )
    return replace(meeting, added=[*meeting.added, late]), message


def _move_due_date(meeting: Meeting, rng: random.Random) -> tuple[Meeting, str]:
    movable = [i for i, a in enumerate(meeting.actions) if not a.withdrawn]
    index = rng.choice(movable)
    action = meeting.actions[index]
    taken = {a.due for a in [*meeting.actions, *meeting.added]}
    later = [action.due + timedelta(days=d) for d in range(5, 20)]
    new_due = rng.choice([d for d in later if d not in taken])
    actions = list(meeting.actions)
    actions[index] = replace(action, due=new_due)
    message = (
        f"{action.owner.split()[0]} can't make the deadline for '{action.task}'; we agreed a "
        f"later date and I've changed it in {NOTES}. Please bring {ITEMS} and {MEMO} up to date."
    )
    return replace(meeting, actions=actions), message


# ---- the notes as Markdown, and reading them back ------------------------------------------


def format_date(day: date, fmt: str) -> str:
    if fmt == "dmy":
        return f"{day.day} {MONTHS[day.month - 1]} {day.year}"
    if fmt == "mdy":
        return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"
    return day.isoformat()


def _action_line(action: Action) -> str:
    due = format_date(action.due, action.fmt)
    tail = (
        f"to {action.task} — due {due}" if action.form == "to" else f"will {action.task} by {due}"
    )
    line = f"Action: {action.ref} {tail}"
    return f"- ~~{line}~~ (withdrawn)" if action.withdrawn else f"- {line}"


def render_notes(meeting: Meeting) -> str:
    year, prev = meeting.reviewed_year, meeting.reviewed_year - 1
    chair, *others = meeting.attendees
    lines = [
        f"# Energy planning meeting — {year} generation review",
        "",
        f"Date: {format_date(meeting.held, meeting.date_fmt)}",
        f"Attendees: {chair} (chair), {', '.join(others)}",
    ]
    if meeting.apologies:
        lines.append(f"Apologies: {', '.join(meeting.apologies)}")
    lines += [
        "",
        f"## 1. Iowa net generation, {prev} vs {year}",
        "",
        "Figures in thousand MWh, from the EIA annual series:",
        "",
        f"| Source | {prev} | {year} |",
        "|---|---|---|",
    ]
    for source in SOURCES:
        a, b = meeting.figures[prev][source], meeting.figures[year][source]
        lines.append(f"| {source} | {a:,} | {b:,} |")
    old, new = meeting.figures[prev]["Renewables"], meeting.figures[year]["Renewables"]
    trend = "grew" if new >= old else "fell"
    lines += ["", f"Renewables {trend} year on year; the group discussed what drives the change."]
    # Spread decisions and actions over three agenda sections, as real notes do.
    sections = ["2. Supply outlook", "3. Projects and reporting", "4. Next steps"]
    buckets: list[list[str]] = [[], [], []]
    for i, decision in enumerate(meeting.decisions):
        buckets[i % 3].append(f"- Decision: {decision[0].upper()}{decision[1:]}.")
    for i, action in enumerate(meeting.actions):
        buckets[(i + 1) % 3].append(_action_line(action))
    for title, bucket in zip(sections, buckets, strict=True):
        lines += ["", f"## {title}", "", *(bucket or ["- No items."])]
    lines += [
        "",
        "## AOB",
        "",
        f"The group will reconvene on {format_date(meeting.next_meeting, meeting.date_fmt)} "
        "(same room).",
    ]
    if meeting.added:
        lines += ["", "## Added after the meeting", ""]
        lines += [_action_line(a) for a in meeting.added]
    return "\n".join(lines) + "\n"


ACTION_RE = re.compile(
    r"^- Action: (?P<who>.+?) (?:to|will) (?P<task>.+?) (?:— due|by) (?P<due>.+)$"
)


def parse_date(text: str) -> date:
    text = text.strip().rstrip(".")
    if m := re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text):
        return date(int(m[1]), int(m[2]), int(m[3]))
    if m := re.fullmatch(r"(\d{1,2}) ([A-Za-z]+) (\d{4})", text):
        return date(int(m[3]), MONTHS.index(m[2].capitalize()) + 1, int(m[1]))
    if m := re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", text):
        return date(int(m[3]), MONTHS.index(m[1].capitalize()) + 1, int(m[2]))
    raise ValueError(f"unrecognised date {text!r}")


def parse_notes(text: str) -> ParsedNotes:
    held = next_meeting = None
    attendees: list[str] = []
    decisions = 0
    raw_actions: list[tuple[str, str, date]] = []
    table: list[list[str]] = []
    for line in text.splitlines():
        label, _, rest = line.partition(":")
        if label == "Date":
            held = parse_date(rest)
        elif label == "Attendees":
            attendees = [re.sub(r"\s*\(.*?\)", "", a).strip() for a in rest.split(",")]
        elif line.startswith("- Decision:"):
            decisions += 1
        elif line.startswith("| ") and not line.startswith("| Source"):
            table.append([c.strip() for c in line.strip("|").split("|")])
        if m := re.search(r"reconvene on (.+?) \(", line):
            next_meeting = parse_date(m[1])
        if m := ACTION_RE.match(line):
            raw_actions.append((m["who"], m["task"], parse_date(m["due"])))
    if held is None or next_meeting is None or not attendees:
        raise ValueError("notes lack a date, an attendee list or the next meeting")
    by_first = {a.split()[0]: a for a in attendees}
    actions = [(by_first.get(who, who), task, due) for who, task, due in raw_actions]
    latest = {row[0]: float(row[-1].replace(",", "")) for row in table}
    return ParsedNotes(held, attendees, decisions, actions, next_meeting, latest)


def _task_keys(actions: list[tuple[str, str, date]]) -> list[str]:
    keys = []
    for _owner, task, _due in actions:
        keys.append(next((k for k, _t in TASKS if k in task), task))
    return keys


def _all_of(phrases: list[str]) -> str:
    """One regex that matches only when every phrase occurs (in any order)."""
    return r"\A" + "".join(rf"(?=[\s\S]*{re.escape(p)})" for p in phrases)


def _instruction() -> str:
    return f"""\
I chaired our energy planning meeting and my notes are in `{NOTES}`. Please turn them into:

1. `{ITEMS}` with the columns `owner`, `task`, `due`: one row per action item in the notes.
   `owner` is the person's full name as in the attendee list (the notes sometimes use only a
   first name), `task` is what they agreed to do, and `due` is the due date as `YYYY-MM-DD`
   (the notes write dates in several ways). Struck-through actions were withdrawn: leave
   them out.
2. `{MEMO}`, a short summary with these labelled lines (one per line, `Label: value`):
   - `Meeting date: YYYY-MM-DD`
   - `Attendees: N` (people present, not apologies)
   - `Decision count: N`
   - `Action items: N` (the same rows as the table)
   - `First deadline: YYYY-MM-DD` (the earliest due date)
   - `Renewables share: X.X%` (renewables as a share of the total net generation of the
     three sources, for the most recent year in the notes' table, one decimal)
   - `Next meeting: YYYY-MM-DD`

   After the fields, list the action items (task as written, owner, due date).

Please leave `{NOTES}` itself unchanged.
"""


def _readme() -> str:
    return (
        "# Meeting notes\n\nNotes of the state energy office's planning meetings. Generation "
        "figures come from the U.S. EIA's annual series for Iowa (thousand MWh).\n"
    )


__all__ = ["MeetingNotes", "format_date", "parse_date", "parse_notes", "render_notes"]

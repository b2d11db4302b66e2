"""Revising a services agreement (DOCX) to an agreed change request, keeping every other
paragraph, style and the fee table's layout, plus a JSON account of the changes.

Grounded in an agreement this family writes itself (CC0): numbered clauses (payment,
interest, service levels, confidentiality, fees with a rate table, liability, termination).
The change request names clauses by title, not number; the liability cap is a multiple of
the annual fees (each role's daily rate × days per year), so a rate change moves the cap
though no item mentions it. The hard variant withdraws one item, ties the termination
notice to the new payment term, and splits values across runs (a plain run-by-run replace
misses them).

Later user turns either replace the change request (the counterparty moved a figure and
added an item) or add a requirement: every changed paragraph ends with " [amended]" and
the JSON counts them.
"""

from __future__ import annotations

import inspect
import io
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import docx
from docx.shared import Pt

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CustomScript, VerifierSpec
from .common import (
    CHECK_PRELUDE,
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    check_scripts,
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
    user_state,
    verifier_output,
    when_delivered,
)
from .office import docx_body, stable_office_bytes

AGREEMENT, REQUEST = "services_agreement.docx", "change_request.md"
REVISED, CHANGES = "services_agreement_revised.docx", "changes.json"
EXPECTED = "expected_agreement.json"
MARK = " [amended]"
CUSTOMERS = ("Alder Bank plc", "Cedar Clinic Ltd", "Elmgrove Schools Trust", "Fernway Hotels SA")
ROLES = (
    ("Project manager", 950, 40),
    ("Senior consultant", 1100, 120),
    ("Consultant", 800, 200),
    ("Analyst", 600, 80),
)
CHANGES_BY_SIZE = {"easy": 2, "medium": 3, "hard": 4}
MODES = ("changed", "kept", "table", "structure")


@dataclass(frozen=True)
class Terms:
    pay: int = 30
    interest: int = 4
    response: int = 8
    confidentiality: int = 3
    notice: int = 90
    multiple: int = 2
    rates: tuple[tuple[str, int, int], ...] = ()  # role, daily rate (EUR), days per year

    @property
    def annual_fees(self) -> int:
        return sum(rate * days for _r, rate, days in self.rates)

    @property
    def cap(self) -> int:
        return self.multiple * self.annual_fees


# (clause title, body paragraphs): each paragraph a template over Terms; "{fees}" marks the
# rate table, which follows the paragraph before it.
CLAUSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Services", ("The Supplier provides the IT support services described in Schedule 1, "
                  "from the Supplier's service desk and on site.",)),
    ("Fees", ("The Customer pays the daily rates below for the days worked.", "{fees}",
              "The annual fees are the sum of each role's daily rate times its days per year.")),
    ("Payment", ("Invoices are payable within {pay} days of receipt.",
                 "Late payments bear interest at {interest}% per year.")),
    ("Service levels", ("The Supplier responds to priority incidents within {response} hours, "
                        "at any time of day.",)),
    ("Confidentiality", ("Each party keeps the other's confidential information secret during "
                         "this Agreement and for {confidentiality} years after it ends.",)),
    ("Liability", ("Each party's total liability under this Agreement is limited to {multiple} "
                   "times the annual fees, that is EUR {cap:,}.",)),
    ("Termination", ("Either party may terminate this Agreement by giving not less than "
                     "{notice} days' written notice.",)),
    ("Governing law", ("This Agreement is governed by the laws of England and Wales.",)),
)


def render(terms: Terms) -> list[tuple[str, str]]:
    """The agreement's body paragraphs as (style id, text); the table is not a paragraph."""
    out = [("Title", "Master Services Agreement")]
    for number, (title, body) in enumerate(CLAUSES, start=1):
        out.append(("Heading2", f"{number}. {title}"))
        for template in body:
            if template != "{fees}":
                values = {**terms.__dict__, "cap": terms.cap}
                out.append(("BodyText", template.format(**values)))
    return out


def fee_rows(terms: Terms) -> list[list[str]]:
    return [["Role", "Daily rate (EUR)", "Days per year"]] + [
        [role, f"{rate:,}", str(days)] for role, rate, days in terms.rates
    ]


def clause_of(paragraph: int) -> int:
    """The clause number of a body paragraph index of ``render``."""
    number, index = 0, 1
    for n, (_title, body) in enumerate(CLAUSES, start=1):
        index += 1  # the heading
        for template in body:
            if template == "{fees}":
                continue
            if index == paragraph:
                number = n
            index += 1
    return number


# ---- the change request ---------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    key: str  # pay | interest | response | confidentiality | notice | multiple | rate
    value: int
    role: str = ""
    withdrawn: bool = False
    follows_pay: bool = False  # the notice equals the (new) payment term

    def line(self) -> str:
        if self.follows_pay:
            return "Termination — the notice period becomes the same number of days as the " \
                "new payment term."
        return {
            "pay": f"Payment — invoices are payable within {self.value} days of receipt.",
            "interest": f"Late payments — interest of {self.value}% per year.",
            "response": f"Service levels — priority incidents are answered within {self.value} "
            "hours.",
            "confidentiality": f"Confidentiality — obligations last {self.value} years after "
            "the Agreement ends.",
            "notice": f"Termination — notice of not less than {self.value} days.",
            "multiple": f"Liability — the cap becomes {self.value} times the annual fees.",
            "rate": f"Fees — the daily rate of the {self.role} becomes EUR {self.value:,}.",
        }[self.key]


@dataclass
class Request:
    changes: list[Change] = field(default_factory=list)
    revision: int = 1

    def markdown(self, customer: str) -> bytes:
        lines = [f"# Agreed changes to the Master Services Agreement with {customer}", ""]
        if self.revision > 1:
            lines += [f"Revision {self.revision}: this list replaces the earlier one.", ""]
        lines += ["Both parties agreed the following changes:", ""]
        for n, change in enumerate(self.changes, start=1):
            lines.append(f"{n}. {change.line()}")
        withdrawn = [n for n, c in enumerate(self.changes, start=1) if c.withdrawn]
        for n in withdrawn:
            lines += ["", f"Item {n} is withdrawn: keep the current wording of that clause."]
        return ("\n".join(lines) + "\n").encode()


def apply(terms: Terms, request: Request) -> Terms:
    """The agreed terms: each item not withdrawn, in order; the notice that follows the
    payment term is set last."""
    out = terms
    for change in request.changes:
        if change.withdrawn or change.follows_pay:
            continue
        if change.key == "rate":
            rates = tuple((r, change.value if r == change.role else v, d) for r, v, d in out.rates)
            out = replace(out, rates=rates)
        else:
            values: dict[str, int] = {change.key: change.value}
            out = replace(out, **values)  # type: ignore[arg-type]  # the key is an int field
    if any(c.follows_pay and not c.withdrawn for c in request.changes):
        out = replace(out, notice=out.pay)
    return out


_LINE = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)


def parse_request(data: bytes, terms: Terms) -> Request:
    """The verifier's reading of a change request (inverse of ``Request.markdown``)."""
    text = data.decode()
    withdrawn = {int(n) for n in re.findall(r"Item (\d+) is withdrawn", text)}
    revision = re.search(r"Revision (\d+):", text)
    changes = []
    for number, line in _LINE.findall(text):
        n = int(number)
        if "same number of days" in line:
            changes.append(Change("notice", 0, follows_pay=True, withdrawn=n in withdrawn))
            continue
        value = int(re.findall(r"\d[\d,]*", line)[-1].replace(",", ""))
        key = next(
            k for k, word in (("pay", "Payment"), ("interest", "Late payments"),
                              ("response", "Service levels"), ("confidentiality", "Confidential"),
                              ("notice", "Termination"), ("multiple", "Liability"),
                              ("rate", "Fees"))
            if line.startswith(word)
        )
        role = ""
        if key == "rate":
            role = next(r for r, _v, _d in terms.rates if f"of the {r} " in line)
        changes.append(Change(key, value, role=role, withdrawn=n in withdrawn))
    return Request(changes, int(revision[1]) if revision else 1)


# ---- the family -----------------------------------------------------------------------------

SOLVE = python_solution(
    "apply the change request to a copy of the agreement, paragraph by paragraph.",
    r"""import json, os, re
import docx

turn = int(os.environ.get("COWORK_TURN", "0"))
mark = turn >= int(os.environ["MARK_FROM_TURN"])
doc = docx.Document("services_agreement.docx")
memo = open("change_request.md", encoding="utf-8").read()
withdrawn = {int(n) for n in re.findall(r"Item (\d+) is withdrawn", memo)}
items = [(int(n), line) for n, line in re.findall(r"^(\d+)\. (.+)$", memo, re.M)]
items = [line for n, line in items if n not in withdrawn]

table = doc.tables[0]
rates = {}
for row in table.rows[1:]:
    rates[row.cells[0].text] = [int(row.cells[1].text.replace(",", "")), int(row.cells[2].text)]

def num(line):
    return int(re.findall(r"\d[\d,]*", line)[-1].replace(",", ""))

subs = []  # (pattern, replacement) on paragraph texts
follow = False
for line in items:
    if line.startswith("Payment"):
        subs.append((r"within \d+ days of receipt", f"within {num(line)} days of receipt"))
    elif line.startswith("Late payments"):
        subs.append((r"interest at \d+% per year", f"interest at {num(line)}% per year"))
    elif line.startswith("Service levels"):
        subs.append((r"within \d+ hours", f"within {num(line)} hours"))
    elif line.startswith("Confidentiality"):
        subs.append((r"for \d+ years after", f"for {num(line)} years after"))
    elif line.startswith("Termination") and "same number" in line:
        follow = True
    elif line.startswith("Termination"):
        subs.append((r"not less than \d+ days", f"not less than {num(line)} days"))
    elif line.startswith("Liability"):
        subs.append((r"limited to \d+ times", f"limited to {num(line)} times"))
    elif line.startswith("Fees"):
        role = re.search(r"rate of the (.+?) becomes", line).group(1)
        rates[role][0] = num(line)
if follow:
    pay = [p.text for p in doc.paragraphs if "days of receipt" in p.text][0]
    for pattern, new in subs:
        pay = re.sub(pattern, new, pay)
    days = re.search(r"within (\d+) days", pay).group(1)
    subs.append((r"not less than \d+ days", f"not less than {days} days"))

fees = sum(rate * days for rate, days in rates.values())
changed = []
for index, p in enumerate(doc.paragraphs):
    text = p.text
    new = text
    for pattern, repl in subs:
        new = re.sub(pattern, repl, new)
    if "limited to" in new:
        multiple = int(re.search(r"limited to (\d+) times", new).group(1))
        new = re.sub(r"EUR [\d,]+", f"EUR {multiple * fees:,}", new)
    if new != text:
        if mark:
            new += " [amended]"
        for run in p.runs[1:]:
            run._element.getparent().remove(run._element)
        p.runs[0].text = new
        changed.append(index)
for row in table.rows[1:]:
    rate = rates[row.cells[0].text][0]
    cell = row.cells[1].paragraphs[0]
    if cell.text != f"{rate:,}":
        cell.runs[0].text = f"{rate:,}"
        for run in cell.runs[1:]:
            run._element.getparent().remove(run._element)
        changed.append("fees")
doc.save("services_agreement_revised.docx")

clause, clauses = 0, set()
for index, p in enumerate(doc.paragraphs):
    if p.style.style_id == "Heading2":
        clause = int(p.text.split(".")[0])
    if index in changed:
        clauses.add(clause)
if "fees" in changed:
    clauses.add(next(int(p.text.split(".")[0]) for p in doc.paragraphs if p.text.endswith("Fees")))
summary = {"changed_clauses": sorted(clauses), "annual_fees": fees,
           "liability_cap": multiple * fees}
if mark:
    summary["amended_paragraphs"] = len([c for c in changed if c != "fees"])
json.dump(summary, open("changes.json", "w"), indent=2)
""",
    "MARK_FROM_TURN",
)


class ContractRevision(TaskFamily):
    name = "contract_revision"
    scenarios = (
        "legal_compliance/contracts/clause_review",
        "office_productivity/documents/document_revision",
    )
    capabilities = (
        "document_authoring",
        "information_extraction",
        "requirement_tracking",
        "dependency_tracking",
    )
    # with 3 turns both later turns come: the [amended] marks and the revised request
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("docx", "json")
    modalities = ("document", "text")
    safety = ("confidential_documents",)

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("contract")
        customer = rng.choice(CUSTOMERS)
        terms = _terms(params, rng)
        request = _request(params, rng, terms)
        turn_kinds, mark_from = plan_turns(rng, params, "input_edited")
        turns: list[UserTurn] = []
        current = request
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_edited":
                current = _revised_request(current, terms, params.rng(f"request{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(REVISED, index),
                        f"The counterparty came back with a revised list. I replaced {REQUEST} "
                        "with it; please redo the revised agreement and changes.json from the "
                        "original agreement and the new list.",
                        {REQUEST: current.markdown(customer)},
                        reason="revised change request",
                        invalidates=[REVISED, CHANGES],
                        kind="input_edited",
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "Legal wants the changes visible. End every body paragraph you changed "
                        f"with the text `{MARK.strip()}` (one space before it; not headings, not "
                        "table cells), and add `amended_paragraphs` to changes.json: how many "
                        "paragraphs carry it.",
                        [REVISED, CHANGES],
                    )
                )
        return FamilyDraft(
            slug=f"contract-revision-{params.difficulty}-{params.seed}",
            title=f"Apply the agreed changes to the agreement with {customer}",
            instruction=_instruction(),
            workspace={
                AGREEMENT: agreement_docx(terms, customer, split=params.difficulty == "hard"),
                REQUEST: request.markdown(customer),
            },
            solve_sh=fill_template(SOLVE, mark_from_turn=mark_from),
            user=user_state(
                "In-house counsel who sends the revised agreement for signature.",
                "legal_counsel",
                "Nothing but the agreed changes may differ: the other side compares versions.",
                "does not know how the document's styles were set up",
                (
                    "agent asks whether the liability amount should change",
                    "the cap always follows the annual fees, even when no item mentions it",
                ),
            ),
            inputs=input_artifacts({AGREEMENT: "docx", REQUEST: "md"}),
            outputs=output_artifacts({REVISED: "docx", CHANGES: "json"}, [AGREEMENT, REQUEST]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        inputs = built.final_inputs()
        mark = requirement_added(built)
        terms = terms_of(inputs[AGREEMENT])
        agreed = apply(terms, parse_request(inputs[REQUEST], terms))
        before, after = render(terms), render(agreed)
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        wanted = [
            (style, text + (MARK if mark and i in changed else ""))
            for i, (style, text) in enumerate(after)
        ]
        original, _tables = docx_body(inputs[AGREEMENT])
        clauses = sorted(
            {clause_of(i) for i in changed}
            | ({2} if fee_rows(terms) != fee_rows(agreed) else set())
        )
        expected = {
            "paragraphs": wanted,
            "original": original,
            "changed": changed,
            "table": fee_rows(agreed),
        }
        components = [
            Component(id="changed_paragraphs", weight=6,
                      check=CustomScript(script="check_changed.py"),
                      requirement="each changed paragraph reads as the agreed terms require"),
            Component(id="other_paragraphs_kept", weight=2,
                      check=CustomScript(script="check_kept.py"),
                      requirement="every other paragraph keeps its text and style"),
            Component(id="fee_table", weight=2, check=CustomScript(script="check_table.py"),
                      requirement="the fee table carries the agreed rates, layout kept"),
            Component(id="structure_kept", weight=1,
                      check=CustomScript(script="check_structure.py"),
                      requirement="same paragraphs, styles and table"),
            json_value("changed_clauses", CHANGES, "/changed_clauses", clauses,
                       "changes.json changed_clauses", weight=2),
            json_value("annual_fees", CHANGES, "/annual_fees", agreed.annual_fees,
                       "changes.json annual_fees"),
            json_value("liability_cap", CHANGES, "/liability_cap", agreed.cap,
                       "changes.json liability_cap"),
        ]
        if mark:
            components.append(
                json_value("amended_count", CHANGES, "/amended_paragraphs", len(changed),
                           "changes.json amended_paragraphs (turn requirement)")
            )
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "originals_unmodified",
                    "the signed-off original and the change request must not change",
                    inputs,
                )
            ],
            rubric=rubric(
                "faithful_revision",
                "The revised agreement reads as a clean copy of the original with exactly the "
                "agreed changes; nothing is reworded beyond them.",
                [REVISED, CHANGES],
            ),
        )
        private = {EXPECTED: expectations(expected)}
        private |= check_scripts(CHECK, MODES, "check_{mode}.py")
        return verifier_output(spec, inputs, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        return []  # every figure is stated; the cap's rule is in the instruction


def terms_of(data: bytes) -> Terms:
    """The original terms, read back from the agreement's text and table."""
    paragraphs, tables = docx_body(data)
    text = " ".join(t for _s, t in paragraphs)

    def number(pattern: str) -> int:
        found = re.search(pattern, text)
        assert found is not None, pattern
        return int(found[1])

    rates = tuple(
        (row[0], int(row[1].replace(",", "")), int(row[2])) for row in tables[0][1:]
    )
    return Terms(
        pay=number(r"within (\d+) days of receipt"),
        interest=number(r"interest at (\d+)%"),
        response=number(r"within (\d+) hours"),
        confidentiality=number(r"for (\d+) years after"),
        notice=number(r"not less than (\d+) days"),
        multiple=number(r"limited to (\d+) times"),
        rates=rates,
    )


# ---- drafting -------------------------------------------------------------------------------


def agreement_docx(terms: Terms, customer: str, *, split: bool) -> bytes:
    document = docx.Document()
    document.styles["Normal"].font.size = Pt(11)
    paragraphs = render(terms)
    document.add_paragraph(paragraphs[0][1], style="Title")
    index = 1
    for number, (title, body) in enumerate(CLAUSES, start=1):
        document.add_paragraph(f"{number}. {title}", style="Heading 2")
        index += 1
        for template in body:
            if template == "{fees}":
                rows = fee_rows(terms)
                table = document.add_table(rows=len(rows), cols=3)
                table.style = "Table Grid"
                for r, row in enumerate(rows):
                    for c, value in enumerate(row):
                        table.cell(r, c).text = value
                continue
            text = paragraphs[index][1]
            paragraph = document.add_paragraph(style="Body Text")
            digits = re.search(r"\d[\d,]*", text)
            if split and digits is not None and len(digits[0]) > 1:
                # the way a word processor leaves an edited figure: split across two runs
                cut = digits.start() + 1
                paragraph.add_run(text[:cut])
                paragraph.add_run(text[cut:])
            else:
                paragraph.add_run(text)
            index += 1
    document.core_properties.title = f"Master Services Agreement — {customer}"
    document.core_properties.author = "Northwind IT Services"
    buffer = io.BytesIO()
    document.save(buffer)
    return stable_office_bytes(buffer.getvalue())


def _terms(params: FamilyParams, rng: random.Random) -> Terms:
    count = {"easy": 2, "medium": 3, "hard": 4}[params.difficulty]
    roles = rng.sample(ROLES, k=count)
    rates = tuple((r, rate + 50 * rng.randint(-3, 3), days) for r, rate, days in roles)
    return Terms(
        pay=rng.choice((30, 45)),
        interest=rng.choice((3, 4, 5)),
        response=rng.choice((4, 8)),
        confidentiality=rng.choice((2, 3)),
        notice=rng.choice((60, 90)),
        multiple=rng.choice((1, 2)),
        rates=rates,
    )


def _request(params: FamilyParams, rng: random.Random, terms: Terms) -> Request:
    role = rng.choice(terms.rates)
    options = [
        Change("pay", terms.pay + rng.choice((15, 30))),
        Change("interest", terms.interest + rng.choice((1, 2))),
        Change("response", terms.response // 2),
        Change("notice", terms.notice - 30),
        Change("multiple", terms.multiple + 1),
    ]
    count = CHANGES_BY_SIZE[params.difficulty]
    changes = [Change("rate", role[1] + 50 * rng.randint(1, 4), role=role[0])]
    changes += rng.sample(options, k=count - 1)
    if params.difficulty == "hard":
        if not any(c.key == "pay" for c in changes):
            changes.append(Change("pay", terms.pay + 15))
        changes = [c for c in changes if c.key != "notice"]
        changes.append(Change("notice", 0, follows_pay=True))
        victim = rng.choice([i for i, c in enumerate(changes) if c.key not in ("pay", "rate")
                             and not c.follows_pay] or [0])
        changes.insert(victim, replace(changes[victim], withdrawn=True))
        del changes[victim + 1]
    rng.shuffle(changes)
    return Request(changes)


def _revised_request(request: Request, terms: Terms, rng: random.Random) -> Request:
    """A figure moved and an item added (confidentiality, which no first list has)."""
    changes = list(request.changes)
    movable = [i for i, c in enumerate(changes) if not c.withdrawn and not c.follows_pay]
    i = rng.choice(movable)
    bump = 50 if changes[i].key == "rate" else (15 if changes[i].key == "pay" else 1)
    changes[i] = replace(changes[i], value=changes[i].value + bump)
    if not any(c.key == "confidentiality" for c in changes):
        changes.append(Change("confidentiality", terms.confidentiality + 2))
    return Request(changes, request.revision + 1)


def _instruction() -> str:
    return f"""\
Please apply the agreed changes in `{REQUEST}` to our Master Services Agreement
`{AGREEMENT}` and save the result as `{REVISED}`. The list names clauses by their titles.

- Change only what the agreed items require: the figures in the clauses they name, and
  the rates in the fee table of the Fees clause. An item marked as withdrawn is not
  applied.
- The liability cap amount is always the stated multiple of the annual fees (the sum of
  each role's daily rate times its days per year, as in the Fees clause), so whenever the
  fees or the multiple change, update the amount in the Liability clause too, written like
  the original (e.g. `EUR 123,600`).
- Keep everything else exactly as it is: every other paragraph's text and style, the
  headings, the table's layout and the figures' formatting (e.g. `1,250` in the table).

Then write `{CHANGES}` with `changed_clauses` (the numbers of the clauses whose text or
table changed, ascending), `annual_fees` and `liability_cap` (whole euros) of the revised
agreement.

Do not modify `{AGREEMENT}` or `{REQUEST}`.
"""


CHECK = (
    "from __future__ import annotations\n\nimport io\n\n"
    + inspect.getsource(docx_body)
    + "\n\n"
    + CHECK_PRELUDE
    + r'''
MODE = "__MODE__"
expected = json.loads((Path(__file__).parent / "expected_agreement.json").read_text())
path = ws / "services_agreement_revised.docx"
try:
    paragraphs, tables = docx_body(path.read_bytes())
except Exception as exc:
    report(0.0, f"the revised agreement does not open: {exc!r}")


def norm(text):
    return " ".join(text.split())


want = [tuple(p) for p in expected["paragraphs"]]
got = [(s, norm(t)) for s, t in paragraphs]
if MODE == "changed":
    keys = expected["changed"]
    bad = []
    for i in keys:
        have = got[i] if i < len(got) else None
        if have != (want[i][0], norm(want[i][1])):
            bad.append(f"paragraph {i}: {have[1] if have else None!r}, want {want[i][1]!r}")
    report((len(keys) - len(bad)) / len(keys) if keys else 1.0, "; ".join(bad[:4]) or "all")
if MODE == "kept":
    keys = [i for i in range(len(want)) if i not in expected["changed"]]
    bad = [i for i in keys if i >= len(got) or got[i] != (want[i][0], norm(want[i][1]))]
    notes = [f"paragraph {i}: {got[i] if i < len(got) else None!r}" for i in bad[:4]]
    report((len(keys) - len(bad)) / len(keys), "; ".join(notes) or "all kept")
if MODE == "table":
    if not tables:
        report(0.0, "no table")
    rows = [[norm(c) for c in row] for row in tables[0]]
    table = expected["table"]
    cells = [(r, c) for r in range(len(table)) for c in range(len(table[r]))]

    def same(a, b):  # "EUR 1,250" and "1250" are the same rate
        return a.replace(",", "").replace("EUR", "").strip() == b.replace(",", "").replace(
            "EUR", "").strip()

    bad = [(r, c) for r, c in cells
           if r >= len(rows) or c >= len(rows[r]) or not same(rows[r][c], table[r][c])]
    if len(rows) != len(table):
        bad.append(("rows", len(rows)))
    report(max(0.0, 1 - len(bad) / len(cells)), f"wrong cells {bad[:6]}" if bad else "table")
if MODE == "structure":
    styles = [s for s, _t in paragraphs]
    want_styles = [s for s, _t in expected["original"]]
    problems = []
    if styles != want_styles:
        problems.append(f"paragraph styles {styles[:6]}…, want {want_styles[:6]}…")
    if len(tables) != 1 or [len(r) for r in tables[0]] != [len(r) for r in expected["table"]]:
        problems.append("the fee table's shape changed")
    report(1.0 - 0.5 * len(problems), "; ".join(problems) or "structure kept")
report(0.0, f"unknown mode {MODE}")
'''
)


__all__ = ["ContractRevision", "apply", "parse_request", "render", "terms_of"]

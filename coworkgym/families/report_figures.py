"""Extracting the figures of a Word report into a table (CSV) and a JSON document.

The report is a DOCX employment brief built here with python-docx from the bundled BLS
series (``us-employment.csv``): one sentence per month with total nonfarm employment and
its change on the month, and a table of sector employment by month. Harder variants cover
more months and sectors and phrase the sentences two ways ("rose by" / "fell by").

The verifier reads the *final* report with its own parser (``read_report``); the reference
solution has a separate one. Later user turns replace the report with a revised edition
(every figure revised) or ask for each sector's peak month.
"""

from __future__ import annotations

import calendar
import io
import random
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CustomScript, RowCount, TableColumns, VerifierSpec
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
    read_csv_resource,
    requirement_added,
    requirement_turn,
    rubric,
    tie_reading,
    user_state,
    verifier_output,
    when_delivered,
)

REPORT = "report/employment-brief.docx"
CSV, JSON = "figures.csv", "figures.json"
EXPECTED = "figures_expected.json"  # under tests/
SECTORS = {  # table header → column of us-employment.csv (the metric name)
    "Construction": "construction",
    "Manufacturing": "manufacturing",
    "Retail trade": "retail_trade",
    "Information": "information",
    "Financial activities": "financial_activities",
    "Leisure and hospitality": "leisure_and_hospitality",
    "Government": "government",
}
SIZES = {"easy": (3, 2), "medium": (6, 3), "hard": (12, 4)}  # months, sectors
MONTHS = tuple(calendar.month_name[1:])
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed member timestamps: the same seed, the same bytes

SOLVE = python_solution(
    "read the brief's sentences and table; write figures.csv/figures.json.",
    r"""import calendar
import csv
import json
import os
import re
import docx

turn = int(os.environ.get("COWORK_TURN", "0"))
with_peak = turn >= int(os.environ["PEAK_FROM_TURN"])
MONTHS = {calendar.month_name[i]: i for i in range(1, 13)}

def month(text):
    name, year = text.split()
    return f"{year}-{MONTHS[name]:02d}"

def number(text):
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value

doc = docx.Document("report/employment-brief.docx")
figures = {}
for paragraph in doc.paragraphs:
    text = paragraph.text
    m = re.search(r"In (\w+ \d{4}), total nonfarm employment was ([\d,.]+) thousand, "
                  r"a change of ([+-][\d,.]+) thousand", text)
    if m:
        figures.setdefault("nonfarm", {})[month(m[1])] = number(m[2])
        figures.setdefault("nonfarm_change", {})[month(m[1])] = number(m[3])
        continue
    m = re.search(r"(\w+ \d{4}): payrolls stood at ([\d,.]+) thousand after jobs "
                  r"(rose|fell) by ([\d,.]+) thousand", text)
    if m:
        sign = 1 if m[3] == "rose" else -1
        figures.setdefault("nonfarm", {})[month(m[1])] = number(m[2])
        figures.setdefault("nonfarm_change", {})[month(m[1])] = sign * number(m[4])
table = doc.tables[0]
header = [c.text.strip() for c in table.rows[0].cells]
sectors = [h.lower().replace(" ", "_") for h in header[1:]]
for row in table.rows[1:]:
    cells = [c.text.strip() for c in row.cells]
    for sector, cell in zip(sectors, cells[1:]):
        figures.setdefault(sector, {})[month(cells[0])] = number(cell)

with open("figures.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["metric", "month", "value"])
    for metric in sorted(figures):
        for key in sorted(figures[metric]):
            writer.writerow([metric, key, figures[metric][key]])

nonfarm, change = figures["nonfarm"], figures["nonfarm_change"]
first, last = min(nonfarm), max(nonfarm)
best = max(sorted(change), key=lambda k: change[k])  # ties: the earliest month
document = {
    "figures": figures,
    "nonfarm_growth": round(nonfarm[last] - nonfarm[first], 1),
    "largest_gain_month": best,
}
if with_peak:
    document["peak"] = {s: max(sorted(figures[s]), key=lambda k: figures[s][k]) for s in sectors}
with open("figures.json", "w") as f:
    json.dump(document, f, indent=2, sort_keys=True)
""",
    "PEAK_FROM_TURN",
)

CHECK = (
    '''"""Cowork-Gym check for the figure-extraction task (mode: __MODE__).

Prints {"score": x, "evidence": "..."}: the share of expected figures found, right."""
import csv
'''
    + CHECK_PRELUDE
    + r'''
MODE = "__MODE__"
expected = json.loads(Path(__file__).with_name("figures_expected.json").read_text())["figures"]
wanted = {(m, k): v for m, months in expected.items() for k, v in months.items()}


def number(value):
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


found = {}
try:
    if MODE == "csv":
        with open(ws / "figures.csv", newline="", encoding="utf-8-sig") as f:
            for row in csv.DictReader(f):
                found[(str(row["metric"]).strip(), str(row["month"]).strip())] = row["value"]
    else:
        document = json.loads((ws / "figures.json").read_text())["figures"]
        for metric, months in document.items():
            for key, value in months.items():
                found[(metric, key)] = value
except Exception as exc:
    report(0.0, f"cannot read the figures: {exc!r}")
wrong = [k for k, v in sorted(wanted.items())
         if number(found.get(k)) is None or abs(number(found.get(k)) - v) > 0.05]
extra = sorted(set(found) - set(wanted))
right = len(wanted) - len(wrong)
score = right / len(wanted) * (1.0 if not extra else 0.5)
report(score, f"{right}/{len(wanted)} figures right; wrong: {wrong[:4]}; extra: {extra[:4]}")
'''
)


@dataclass
class Brief:
    """What the report states; rendered to DOCX by ``render_report``."""

    months: list[str]  # YYYY-MM
    sectors: list[str]  # table headers
    nonfarm: dict[str, float]
    change: dict[str, float]
    table: dict[str, dict[str, float]]  # header → month → value
    phrasing: list[str]  # per month: "plain" | "rose_fell"
    revised: bool = False


class ReportFigures(TaskFamily):
    name = "report_figures"
    scenarios = ("research/reports/figure_extraction",)  # a brief, not a paper (literature)
    capabilities = (
        "information_extraction",
        "format_conversion",
        "requirement_tracking",
        "dependency_tracking",
    )
    # with 3 turns both later turns come: the peak requirement and the revised edition
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("csv", "json")
    modalities = ("document",)

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("figures")
        brief = _brief(params, rng)
        s0 = render_report(brief)
        turn_kinds, peak_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                brief = _revised(brief, params.rng(f"revision{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(JSON, index),
                        "BLS published its benchmark revision and the brief was reissued: I "
                        f"replaced {REPORT} with the revised edition. Please redo figures.csv "
                        "and figures.json from it.",
                        {REPORT: render_report(brief)},
                        reason="revised edition of the brief",
                        invalidates=[CSV, JSON],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "For the slides I also need each sector's best month: add a `peak` "
                        "object to figures.json mapping every sector metric of the table to the "
                        "month (YYYY-MM) with its highest value (the earliest such month if "
                        "there is a tie).",
                        [JSON],
                    )
                )
        period = f"{brief.months[0]}-to-{brief.months[-1]}"
        return FamilyDraft(
            slug=f"report-figures-{period}-{params.seed}",
            title=f"Extract the figures of the employment brief, {period.replace('-to-', ' to ')}",
            instruction=_instruction(),
            workspace={REPORT: s0, "README.md": _readme().encode()},
            solve_sh=fill_template(SOLVE, peak_from_turn=peak_from),
            user=user_state(
                "Research assistant who feeds a labour-market dashboard from briefs.",
                "researcher",
                "Every figure must match the brief exactly; no rounding.",
                "does not know how BLS benchmarks its estimates",
                (
                    "agent asks about units",
                    "all figures are thousands of jobs, seasonally adjusted",
                ),
            ),
            inputs=input_artifacts({REPORT: "docx"}),
            outputs=output_artifacts({CSV: "csv", JSON: "json"}, [REPORT]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        final = built.final_inputs()[REPORT]
        figures, sectors = read_report(final)
        count = sum(len(months) for months in figures.values())
        nonfarm, change = figures["nonfarm"], figures["nonfarm_change"]
        first, last = min(nonfarm), max(nonfarm)
        best = max(sorted(change), key=lambda k: change[k])
        peak = requirement_added(built)

        def script(mode: str) -> CustomScript:
            return CustomScript(script=f"check_figures_{mode}.py")

        components = [
            Component(
                id="csv_figures",
                weight=4,
                check=script("csv"),
                requirement="figures.csv: every figure of the brief, right",
            ),
            Component(
                id="csv_rows",
                weight=1,
                check=RowCount(path=CSV, equals=count),
                requirement="one row per figure",
            ),
            Component(
                id="csv_layout",
                weight=1,
                check=TableColumns(path=CSV, columns=["metric", "month", "value"]),
                requirement="figures.csv columns",
            ),
            Component(
                id="json_figures",
                weight=3,
                check=script("json"),
                requirement="figures.json figures: every figure, right",
            ),
            json_value(
                "nonfarm_growth",
                JSON,
                "/nonfarm_growth",
                round(nonfarm[last] - nonfarm[first], 1),
                "nonfarm growth from the first to the last month",
                tolerance=0.05,
            ),
            json_value(
                "largest_gain_month",
                JSON,
                "/largest_gain_month",
                best,
                "the month with the largest change on the month",
            ),
        ]
        # a few figures by pointer too: the first and last nonfarm, a sector, a change
        middle = sorted(nonfarm)[len(nonfarm) // 2]
        samples = [("nonfarm", first), ("nonfarm", last), (sectors[0], middle)]
        samples.append(("nonfarm_change", last))
        for n, (metric, month) in enumerate(samples, 1):
            components.append(
                json_value(
                    f"figure_{n}",
                    JSON,
                    f"/figures/{metric}/{month}",
                    figures[metric][month],
                    f"figures.json {metric} for {month}",
                    weight=0.5,
                    tolerance=0.05,
                )
            )
        if peak:
            components += [
                json_value(
                    f"peak_{sector}",
                    JSON,
                    f"/peak/{sector}",
                    max(sorted(figures[sector]), key=lambda k: figures[sector][k]),
                    f"peak month of {sector} (turn requirement)",
                )
                for sector in sectors
            ]
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "report_unmodified",
                    "the brief is the source and must not be edited",
                    {REPORT: final},
                )
            ],
            rubric=rubric(
                "tidy_table",
                "figures.csv is tidy: one figure per row, metric names as instructed, months as "
                "YYYY-MM, values as plain numbers without separators.",
                [CSV, JSON],
            ),
        )
        private = {EXPECTED: expectations({"figures": figures})}
        private |= check_scripts(CHECK, ("csv", "json"), "check_figures_{mode}.py")
        return verifier_output(spec, {REPORT: final}, private)


    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        figures, sectors = read_report(inputs[REPORT])
        found = [tie_reading("largest_gain_month", "largest_gain_month", figures["nonfarm_change"])]
        if any(t.kind == "requirement_changed" for t in turns):
            found += [tie_reading(f"peak_{s}", "peak", figures[s]) for s in sectors]
        return found


# ---- building the brief ---------------------------------------------------------------------


def _brief(params: FamilyParams, rng: random.Random) -> Brief:
    rows = {r["month"][:7]: r for r in read_csv_resource("data/us-employment.csv")}
    months_count, sector_count = SIZES[params.difficulty]
    keys = sorted(rows)
    start = rng.randrange(0, len(keys) - months_count + 1)
    months = keys[start : start + months_count]
    sectors = sorted(rng.sample(sorted(SECTORS), k=sector_count), key=list(SECTORS).index)
    styles = ["plain", "rose_fell"] if params.difficulty == "hard" else ["plain"]
    return Brief(
        months=months,
        sectors=sectors,
        nonfarm={m: _figure(rows[m]["nonfarm"]) for m in months},
        change={m: _figure(rows[m]["nonfarm_change"]) for m in months},
        table={s: {m: _figure(rows[m][SECTORS[s]]) for m in months} for s in sectors},
        phrasing=[rng.choice(styles) for _ in months],
    )


def _figure(text: str) -> float:
    value = float(text)
    return float(int(value)) if value.is_integer() else round(value, 1)


def _revised(brief: Brief, rng: random.Random) -> Brief:
    """The benchmark-revised edition: every figure moves a little (changes stay consistent
    with the revised levels where the previous month is in the brief)."""
    nonfarm = {m: v + _nudge(rng, 60) for m, v in brief.nonfarm.items()}
    change = {}
    for i, m in enumerate(brief.months):
        if i == 0:
            change[m] = brief.change[m] + (nonfarm[m] - brief.nonfarm[m])
        else:
            change[m] = nonfarm[m] - nonfarm[brief.months[i - 1]]
    table = {
        s: {m: round(v + _nudge(rng, 15), 1) for m, v in months.items()}
        for s, months in brief.table.items()
    }
    return Brief(
        months=brief.months,
        sectors=brief.sectors,
        nonfarm=nonfarm,
        change=change,
        table=table,
        phrasing=brief.phrasing,
        revised=True,
    )


def _nudge(rng: random.Random, most: int) -> int:
    """A revision: a non-zero whole number of thousands, at most ``most`` either way."""
    return rng.choice([d for d in range(-most, most + 1) if d])


def _label(month: str) -> str:
    year, number = month.split("-")
    return f"{MONTHS[int(number) - 1]} {year}"


def _thousands(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def _sentence(brief: Brief, month: str, style: str) -> str:
    level, change = brief.nonfarm[month], brief.change[month]
    if style == "rose_fell":
        verb = "rose" if change >= 0 else "fell"
        return (
            f"{_label(month)}: payrolls stood at {_thousands(level)} thousand after jobs {verb} "
            f"by {_thousands(abs(change))} thousand."
        )
    sign = "+" if change >= 0 else "-"
    return (
        f"In {_label(month)}, total nonfarm employment was {_thousands(level)} thousand, "
        f"a change of {sign}{_thousands(abs(change))} thousand on the month."
    )


def render_report(brief: Brief) -> bytes:
    import docx  # python-docx: only the Builder needs it

    document = docx.Document()
    document.core_properties.author = "Labour-market team"
    edition = " (revised edition)" if brief.revised else ""
    span = f"{_label(brief.months[0])} to {_label(brief.months[-1])}"
    document.add_heading(f"US employment brief, {span}{edition}", level=1)
    document.add_paragraph(
        "Seasonally adjusted payroll employment from the BLS Current Employment Statistics "
        "survey, in thousands of jobs."
        + (" This edition incorporates the annual benchmark revision." if brief.revised else "")
    )
    document.add_heading("Total nonfarm employment", level=2)
    for month, style in zip(brief.months, brief.phrasing, strict=True):
        document.add_paragraph(_sentence(brief, month, style))
    document.add_heading("Employment by sector", level=2)
    table = document.add_table(rows=1 + len(brief.months), cols=1 + len(brief.sectors))
    table.style = "Table Grid"
    for col, header in enumerate(["Month", *brief.sectors]):
        table.cell(0, col).text = header
    for row, month in enumerate(brief.months, start=1):
        table.cell(row, 0).text = _label(month)
        for col, sector in enumerate(brief.sectors, start=1):
            table.cell(row, col).text = _thousands(brief.table[sector][month])
    document.add_paragraph("Source: U.S. Bureau of Labor Statistics.")
    buffer = io.BytesIO()
    document.save(buffer)
    return _fixed_zip(buffer.getvalue())


def _fixed_zip(data: bytes) -> bytes:
    """The same DOCX with fixed member timestamps, so a seed always gives the same bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(member, source.read(info.filename))
    return out.getvalue()


# ---- reading the brief back (the verifier's parser) ----------------------------------------

PLAIN_RE = re.compile(
    r"In (\w+ \d{4}), total nonfarm employment was ([\d,.]+) thousand, "
    r"a change of ([+-][\d,.]+) thousand"
)
ROSE_FELL_RE = re.compile(
    r"(\w+ \d{4}): payrolls stood at ([\d,.]+) thousand after jobs (rose|fell) by ([\d,.]+) "
    r"thousand"
)


def _month_key(label: str) -> str:
    name, year = label.split()
    return f"{year}-{MONTHS.index(name) + 1:02d}"


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("+", ""))


def read_report(data: bytes) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(metric → month → value, the table's sector metrics in column order)."""
    import docx

    document = docx.Document(io.BytesIO(data))
    figures: dict[str, dict[str, float]] = {"nonfarm": {}, "nonfarm_change": {}}
    for paragraph in document.paragraphs:
        if m := PLAIN_RE.search(paragraph.text):
            key = _month_key(m[1])
            figures["nonfarm"][key], figures["nonfarm_change"][key] = _number(m[2]), _number(m[3])
        elif m := ROSE_FELL_RE.search(paragraph.text):
            key = _month_key(m[1])
            sign = 1 if m[3] == "rose" else -1
            figures["nonfarm"][key] = _number(m[2])
            figures["nonfarm_change"][key] = sign * _number(m[4])
    table = document.tables[0]
    headers = [c.text.strip() for c in table.rows[0].cells][1:]
    sectors = [h.lower().replace(" ", "_") for h in headers]
    for row in table.rows[1:]:
        cells = [c.text.strip() for c in row.cells]
        for sector, cell in zip(sectors, cells[1:], strict=True):
            figures.setdefault(sector, {})[_month_key(cells[0])] = _number(cell)
    return figures, sectors


def _instruction() -> str:
    return f"""\
Our team's employment brief is `{REPORT}` (a Word document). I need its figures as data:

1. `{CSV}` with the columns `metric`, `month`, `value`: one row per figure in the brief.
   - From each monthly sentence: `nonfarm` (total nonfarm employment) and `nonfarm_change`
     (its change on the month; negative when jobs fell).
   - From the sector table: one row per cell, the metric being the column header in lower
     case with spaces replaced by underscores (e.g. `Leisure and hospitality` →
     `leisure_and_hospitality`).
   - `month` as `YYYY-MM`; `value` as a plain number in thousands, exactly as in the brief
     (no thousands separators).
2. `{JSON}` with
   - `figures`: the same figures as an object metric → month → value;
   - `nonfarm_growth`: total nonfarm in the last month minus in the first month;
   - `largest_gain_month`: the month with the largest `nonfarm_change` (the earliest month
     if there is a tie).

Please don't edit `{REPORT}`.
"""


def _readme() -> str:
    return (
        "# Labour-market briefs\n\nBriefs are written from the BLS Current Employment "
        "Statistics series (seasonally adjusted, thousands of jobs).\n"
    )


__all__ = ["Brief", "ReportFigures", "read_report", "render_report"]

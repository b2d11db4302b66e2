"""Repairing the broken formulas of a budget-versus-actual workbook (XLSX), keeping its
sheets, layout and styles, plus a JSON list of the repairs.

Grounded in the EIA's annual Iowa net generation by source (bundled, public domain): a
utility's planning workbook compares the generation it budgeted with the EIA's actuals
(``eia_generation.csv``). Planted faults: a ``#REF!``, a range one column short, a row
misaligned across sheets, a total that stops a year early, a stale number typed over a
formula, an inverted ratio and an anchor that pins every row to the first. Harder variants
have more of them and a data cell mistyped against the CSV. openpyxl stores no computed
values, so the verifier recomputes the agent's formulas (``formulas``) and compares them
with values it computes directly from the data.

Later user turns either replace the CSV with the EIA's revised figures (the data cells and
everything computed from them change) or add a requirement: a fossil-share column and its
average.
"""

from __future__ import annotations

import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import openpyxl
from openpyxl.styles import Font

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CustomScript, VerifierSpec
from . import formulas
from .base import Trap
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
    parse_csv,
    plan_turns,
    python_solution,
    read_csv_resource,
    requirement_added,
    requirement_turn,
    rubric,
    user_state,
    verifier_output,
    when_delivered,
    write_csv,
)
from .office import stable_office_bytes

BOOK, CSV = "generation_budget.xlsx", "eia_generation.csv"
REPAIRED, REPAIRS = "generation_budget_repaired.xlsx", "repairs.json"
EXPECTED = "expected_workbook.json"
SOURCES = ("Fossil Fuels", "Nuclear Energy", "Renewables")
DATA_COLUMNS = ("B", "C", "D")
YEARS = {"easy": 5, "medium": 6, "hard": 8}
FAULTS = {"easy": 2, "medium": 3, "hard": 5}
HEADERS = {
    "Actuals": ["year", *SOURCES, "Total", "Renewables share"],
    "Budget": ["year", *SOURCES, "Total"],
    "Variance": ["year", *SOURCES, "Total", "Variance share"],
}
SUMMARY_LABELS = (
    "Total actual generation (thousand MWh)",
    "Total budgeted generation (thousand MWh)",
    "Total variance (actual − budget)",
    "Average renewables share (mean of the yearly shares)",
)
NOTES = (
    "Planning workbook, generation budget versus EIA actuals.",
    "Actuals: EIA annual net generation, Iowa, thousand MWh.",
    "Budget: the plan approved by the board; do not change it.",
    "Variance: actual minus budget; the share is the variance over the budget.",
)
MODES = ("repaired", "formulas", "data", "layout", "fossil")


def canonical(rows: int, fossil: bool) -> dict[str, str]:
    """Every formula cell of the intact workbook, ``"Sheet!A1"`` → formula."""
    last = rows + 1
    out: dict[str, str] = {}
    for r in range(2, last + 1):
        out[f"Actuals!E{r}"] = f"=SUM(B{r}:D{r})"
        out[f"Actuals!F{r}"] = f"=D{r}/E{r}"
        out[f"Budget!E{r}"] = f"=SUM(B{r}:D{r})"
        for c in ("B", "C", "D", "E"):
            out[f"Variance!{c}{r}"] = f"=Actuals!{c}{r}-Budget!{c}{r}"
        out[f"Variance!F{r}"] = f"=E{r}/Budget!E{r}"
        if fossil:
            out[f"Actuals!G{r}"] = f"=B{r}/E{r}"
    out["Summary!B1"] = f"=SUM(Actuals!E2:E{last})"
    out["Summary!B2"] = f"=SUM(Budget!E2:E{last})"
    out["Summary!B3"] = "=B1-B2"
    out["Summary!B4"] = f"=AVERAGE(Actuals!F2:F{last})"
    if fossil:
        out["Summary!B5"] = f"=AVERAGE(Actuals!G2:G{last})"
    return out


def fault(kind: str, row: int, rows: int) -> tuple[str, object]:
    """A planted fault: the cell and what it holds instead of its formula."""
    last = rows + 1
    other = 2 if row != 2 else 3
    return {
        "ref_error": (f"Actuals!E{row}", f"=SUM(B{row}:#REF!)"),
        "short_range": (f"Actuals!E{row}", f"=SUM(B{row}:C{row})"),
        "misaligned": (f"Variance!B{row}", f"=Actuals!B{row}-Budget!B{other}"),
        "early_total": ("Summary!B1", f"=SUM(Actuals!E2:E{last - 1})"),
        "typed_over": (f"Variance!E{row}", 0),  # the number is filled in by the drafter
        "inverted": (f"Variance!F{row}", f"=Budget!E{row}/E{row}"),
        "anchored": (f"Actuals!F{row}", f"=D{row}/E$2" if row != 2 else f"=D{row}/E$3"),
    }[kind]


# ---- the numbers, as the verifier computes them ---------------------------------------------


@dataclass
class Plan:
    years: list[int]
    actuals: dict[int, dict[str, float]]  # year → source → thousand MWh (the CSV)
    budget: dict[int, dict[str, float]]


def expected_values(plan: Plan, fossil: bool) -> dict[str, float]:
    """Every formula cell's value, from the data directly (no formula evaluated)."""
    out: dict[str, float] = {}
    shares, fossil_shares = [], []
    act_total = bud_total = 0.0
    for i, year in enumerate(plan.years):
        r = i + 2
        act, bud = plan.actuals[year], plan.budget[year]
        a_tot, b_tot = sum(act.values()), sum(bud.values())
        out[f"Actuals!E{r}"], out[f"Budget!E{r}"] = a_tot, b_tot
        out[f"Actuals!F{r}"] = act["Renewables"] / a_tot
        shares.append(act["Renewables"] / a_tot)
        for c, source in zip(DATA_COLUMNS, SOURCES, strict=True):
            out[f"Variance!{c}{r}"] = act[source] - bud[source]
        out[f"Variance!E{r}"] = a_tot - b_tot
        out[f"Variance!F{r}"] = (a_tot - b_tot) / b_tot
        if fossil:
            out[f"Actuals!G{r}"] = act["Fossil Fuels"] / a_tot
            fossil_shares.append(act["Fossil Fuels"] / a_tot)
        act_total += a_tot
        bud_total += b_tot
    out["Summary!B1"], out["Summary!B2"] = act_total, bud_total
    out["Summary!B3"] = act_total - bud_total
    out["Summary!B4"] = sum(shares) / len(shares)
    if fossil:
        out["Summary!B5"] = sum(fossil_shares) / len(fossil_shares)
    return out


def data_cells(plan: Plan) -> dict[str, float]:
    out: dict[str, float] = {}
    for i, year in enumerate(plan.years):
        for c, source in zip(DATA_COLUMNS, SOURCES, strict=True):
            out[f"Actuals!{c}{i + 2}"] = plan.actuals[year][source]
            out[f"Budget!{c}{i + 2}"] = plan.budget[year][source]
    return out


def read_book(data: bytes) -> dict[str, dict[str, object]]:
    workbook = openpyxl.load_workbook(io.BytesIO(data))
    return {
        ws.title: {c.coordinate: c.value for r in ws.iter_rows() for c in r if c.value is not None}
        for ws in workbook.worksheets
    }


def repairs_needed(book: Mapping[str, Mapping[str, object]], plan: Plan) -> list[str]:
    """The cells whose own content is wrong: a formula cell that is not a formula or that
    computes a wrong value *when every cell it refers to is right*, and a data cell of the
    Actuals that disagrees with the CSV. The Budget is never a repair."""
    right = {**expected_values(plan, False), **data_cells(plan)}
    local: dict[str, dict[str, object]] = {}
    for key, value in right.items():
        sheet, cell = key.split("!")
        local.setdefault(sheet, {})[cell] = value
    for i, year in enumerate(plan.years):
        local["Actuals"][f"A{i + 2}"] = year
    found = []
    for key in sorted(canonical(len(plan.years), False)):
        sheet, cell = key.split("!")
        content = book.get(sheet, {}).get(cell)
        if not (isinstance(content, str) and content.startswith("=")):
            found.append(key)
            continue
        trial = {s: dict(cells) for s, cells in local.items()}
        trial[sheet][cell] = content
        try:
            value = formulas.evaluate(trial, sheet, cell)
        except formulas.FormulaError:
            found.append(key)
            continue
        if abs(value - right[key]) > 1e-9 * max(1.0, abs(right[key])):
            found.append(key)
    for key, value in data_cells(plan).items():
        sheet, cell = key.split("!")
        if sheet == "Actuals" and book.get(sheet, {}).get(cell) != value:
            found.append(key)
    return sorted(found, key=_cell_order)


def _cell_order(key: str) -> tuple[int, int, int]:
    sheet, cell = key.split("!")
    match = formulas.CELL.fullmatch(cell)
    assert match is not None
    order = ("Actuals", "Budget", "Variance", "Summary")
    return order.index(sheet), int(match[2]), formulas.column_index(match[1])


# ---- the family -----------------------------------------------------------------------------

SOLVE = python_solution(
    "repair the workbook's formulas against its intended layout and the EIA figures.",
    r"""import csv, json, os, re
from copy import copy
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
fossil = turn >= int(os.environ["FOSSIL_FROM_TURN"])
wb = openpyxl.load_workbook("generation_budget.xlsx")
act, bud, var, summ = (wb[n] for n in ("Actuals", "Budget", "Variance", "Summary"))
rows = [r for r in range(2, act.max_row + 1) if act.cell(r, 1).value is not None]
last = rows[-1]
eia = {}
for row in csv.DictReader(open("eia_generation.csv", newline="")):
    eia[(int(row["year"][:4]), row["source"])] = float(row["net_generation"])
sources = ["Fossil Fuels", "Nuclear Energy", "Renewables"]

want = {}
for r in rows:
    want[("Actuals", f"E{r}")] = f"=SUM(B{r}:D{r})"
    want[("Actuals", f"F{r}")] = f"=D{r}/E{r}"
    want[("Budget", f"E{r}")] = f"=SUM(B{r}:D{r})"
    for c in "BCDE":
        want[("Variance", f"{c}{r}")] = f"=Actuals!{c}{r}-Budget!{c}{r}"
    want[("Variance", f"F{r}")] = f"=E{r}/Budget!E{r}"
want[("Summary", "B1")] = f"=SUM(Actuals!E2:E{last})"
want[("Summary", "B2")] = f"=SUM(Budget!E2:E{last})"
want[("Summary", "B3")] = "=B1-B2"
want[("Summary", "B4")] = f"=AVERAGE(Actuals!F2:F{last})"

def same(a, b):
    norm = lambda x: re.sub(r"[\s$]", "", str(x)).upper()
    return isinstance(a, str) and norm(a) == norm(b)

repaired = []
order = ["Actuals", "Budget", "Variance", "Summary"]
for (sheet, cell), formula in want.items():
    if not same(wb[sheet][cell].value, formula):
        wb[sheet][cell] = formula
        repaired.append((sheet, cell))
for r in rows:
    year = int(act.cell(r, 1).value)
    for i, source in enumerate(sources):
        cell = act.cell(r, 2 + i)
        if float(cell.value) != eia[(year, source)]:
            cell.value = eia[(year, source)]
            repaired.append(("Actuals", cell.coordinate))
if fossil:
    act["G1"] = "Fossil share"
    act["G1"].font = copy(act["F1"].font)
    for r in rows:
        act[f"G{r}"] = f"=B{r}/E{r}"
        act[f"G{r}"].number_format = "0.0%"
    summ["A5"] = "Average fossil share (mean of the yearly shares)"
    summ["B5"] = f"=AVERAGE(Actuals!G2:G{last})"
wb.save("generation_budget_repaired.xlsx")

def key(sc):
    m = re.fullmatch(r"([A-Z]+)(\d+)", sc[1])
    return order.index(sc[0]), int(m[2]), m[1]
totals_act = {r: sum(eia[(int(act.cell(r, 1).value), s)] for s in sources) for r in rows}
totals_bud = {r: sum(float(bud.cell(r, 2 + i).value) for i in range(3)) for r in rows}
shares = [eia[(int(act.cell(r, 1).value), "Renewables")] / totals_act[r] for r in rows]
summary = {
    "repaired": [f"{s}!{c}" for s, c in sorted(repaired, key=key)],
    "total_variance": round(sum(totals_act.values()) - sum(totals_bud.values()), 1),
    "average_renewables_share": round(sum(shares) / len(shares), 4),
}
json.dump(summary, open("repairs.json", "w"), indent=2)
""",
    "FOSSIL_FROM_TURN",
)


class FormulaRepair(TaskFamily):
    name = "formula_repair"
    scenarios = ("finance/budgeting/variance_analysis", "data_analysis/reporting/kpi_dashboard")
    capabilities = (
        "spreadsheet_authoring",
        "verification",
        "reconciliation",
        "requirement_tracking",
        "dependency_tracking",
    )
    # with 3 turns both later turns come: the fossil-share column and the revised figures
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("xlsx", "json")
    modalities = ("tabular",)
    safety = ("financial_data",)
    traps = (
        Trap(
            "anchored_reference",
            "an absolute reference pins every row's formula to the first row",
            (r"\banchor\w*", r"\babsolute reference", r"\$[A-Z]+\$\d+"),
        ),
        Trap(
            "typed_over_formula",
            "a stale number is typed over a formula",
            (r"\btyped over\b", r"\bhard-?coded\b", r"\bstale (?:number|value)\b"),
        ),
    )

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("formulas")
        plan = _plan(params, rng)
        book = _workbook(plan, params, rng)
        planted = FAULTS[params.difficulty] + (params.difficulty == "hard")
        for _attempt in range(50):  # a fault that happens to compute the right value is none
            if len(repairs_needed(read_book(book), plan)) == planted:
                break
            book = _workbook(plan, params, rng)
        turn_kinds, fossil_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        revised = plan
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                revised = _revised(revised, params.rng(f"revision{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(REPAIRED, index),
                        f"The EIA has just published revised figures. I replaced {CSV} with "
                        "the revised file; please bring the repaired workbook and repairs.json "
                        "in line with it.",
                        {CSV: _csv(revised)},
                        reason="EIA revision",
                        invalidates=[REPAIRED, REPAIRS],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "The board also wants the fossil share. In the repaired workbook add a "
                        "column G headed `Fossil share` to the Actuals sheet with, in each "
                        "year's row, the formula for that year's fossil generation over its "
                        "total (formatted as a percentage), and in the Summary sheet cell B5 "
                        "the formula for the mean of those yearly shares (A5 labels it).",
                        [REPAIRED, REPAIRS],
                    )
                )
        return FamilyDraft(
            slug=f"formula-repair-{plan.years[0]}-{plan.years[-1]}-{params.seed}",
            title=f"Repair the generation budget workbook, {plan.years[0]}–{plan.years[-1]}",
            instruction=_instruction(),
            workspace={BOOK: book, CSV: _csv(plan)},
            solve_sh=fill_template(SOLVE, fossil_from_turn=fossil_from),
            user=user_state(
                "Planning analyst at a regional utility who presents the workbook to the board.",
                "analyst",
                "The board must be able to trust every number: formulas, not typed values.",
                "does not know who broke the workbook or when",
                (
                    "agent asks whether the budget figures may be corrected",
                    "the budget is what the board approved; only the actuals follow the EIA",
                ),
            ),
            inputs=input_artifacts({BOOK: "xlsx", CSV: "csv"}),
            outputs=output_artifacts({REPAIRED: "xlsx", REPAIRS: "json"}, [BOOK, CSV]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        inputs = built.final_inputs()
        fossil = requirement_added(built)
        book = read_book(inputs[BOOK])
        plan = plan_from(book, inputs[CSV])
        needed = repairs_needed(book, plan)
        values = expected_values(plan, fossil)
        expected = {
            "values": values,
            "data": data_cells(plan),
            "repaired": needed,
            "sheets": list(book),
            "headers": HEADERS,
            "labels": list(SUMMARY_LABELS),
            "notes": list(NOTES),
            "years": plan.years,
            "fossil": fossil,
        }

        def script(mode: str) -> CustomScript:
            return CustomScript(script=f"check_{mode}.py")

        components = [
            Component(id="faults_repaired", weight=6, check=script("repaired"),
                      requirement="every faulty cell holds a formula that computes its value"),
            Component(id="formulas_compute", weight=2, check=script("formulas"),
                      requirement="every formula cell of the workbook computes its value"),
            Component(id="data_cells_right", weight=2, check=script("data"),
                      requirement="the actuals follow the CSV; the budget is kept"),
            Component(id="layout_kept", weight=1, check=script("layout"),
                      requirement="sheets, headers, labels, styles and notes kept"),
            json_value("repairs_listed", REPAIRS, "/repaired", needed,
                       "repairs.json lists exactly the repaired cells", weight=2),
            json_value("total_variance", REPAIRS, "/total_variance",
                       round(values["Summary!B3"], 1), "repairs.json total_variance",
                       tolerance=0.05),
            json_value("average_renewables_share", REPAIRS, "/average_renewables_share",
                       round(values["Summary!B4"], 4),
                       "repairs.json average_renewables_share", tolerance=0.00005),
        ]
        if fossil:
            components.append(
                Component(id="fossil_share_added", weight=2, check=script("fossil"),
                          requirement="Actuals column G and Summary B5 (turn requirement)")
            )
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "sources_unmodified",
                    "the original workbook and the EIA file are the sources and must not change",
                    inputs,
                )
            ],
            rubric=rubric(
                "auditable_repairs",
                "Each repair is the formula the layout intends (no typed numbers, no "
                "workarounds), and the workbook still reads as the planners built it.",
                [REPAIRED, REPAIRS],
            ),
        )
        private = {EXPECTED: expectations(expected)}
        private |= check_scripts(CHECK, MODES, "check_{mode}.py")
        return verifier_output(spec, inputs, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """An average share: the mean of the yearly shares, or the pooled share (the
        period's renewables over the period's total)."""
        plan = plan_from(read_book(inputs[BOOK]), inputs[CSV])
        mean = expected_values(plan, False)["Summary!B4"]
        pooled = sum(plan.actuals[y]["Renewables"] for y in plan.years) / sum(
            sum(plan.actuals[y].values()) for y in plan.years
        )
        return [
            Reading(
                component="average_renewables_share",
                subject="average_renewables_share",
                values={"mean of yearly shares": round(mean, 4), "pooled": round(pooled, 4)},
                phrases={
                    "mean of yearly shares": r"mean of the yearly shares",
                    "pooled": r"total renewables[^.]*over[^.]*total generation",
                },
                tolerance=0.00005,
            )
        ]


def plan_from(book: Mapping[str, Mapping[str, object]], eia_csv: bytes) -> Plan:
    """The years of the workbook, the actuals of the CSV and the budget of the workbook."""
    actuals_sheet = book["Actuals"]
    years = []
    r = 2
    while f"A{r}" in actuals_sheet:
        years.append(int(str(actuals_sheet[f"A{r}"])))
        r += 1
    eia: dict[int, dict[str, float]] = {}
    for row in parse_csv(eia_csv):
        eia.setdefault(int(row["year"][:4]), {})[row["source"]] = float(row["net_generation"])
    budget = {
        year: {
            s: float(str(book["Budget"][f"{c}{i + 2}"]))
            for c, s in zip(DATA_COLUMNS, SOURCES, strict=True)
        }
        for i, year in enumerate(years)
    }
    return Plan(years, {y: eia[y] for y in years}, budget)


# ---- drafting -------------------------------------------------------------------------------


def _plan(params: FamilyParams, rng: random.Random) -> Plan:
    data: dict[int, dict[str, float]] = {}
    for row in read_csv_resource("data/iowa-electricity.csv"):
        data.setdefault(int(row["year"][:4]), {})[row["source"]] = float(row["net_generation"])
    count = YEARS[params.difficulty]
    first = rng.randint(min(data), max(data) - count + 1)
    years = list(range(first, first + count))
    budget = {
        y: {s: float(round(data[y][s] * rng.uniform(0.92, 1.08))) for s in SOURCES} for y in years
    }
    return Plan(years, {y: dict(data[y]) for y in years}, budget)


def _workbook(plan: Plan, params: FamilyParams, rng: random.Random) -> bytes:
    rows = len(plan.years)
    content: dict[str, object] = dict(canonical(rows, False))
    values = expected_values(plan, False)
    kinds = ["ref_error", "short_range", "early_total"]
    if params.difficulty != "easy":
        kinds += ["misaligned", "typed_over", "inverted", "anchored"]
    chosen = rng.sample(kinds, k=FAULTS[params.difficulty])
    used: set[str] = set()
    for kind in chosen:
        for _attempt in range(20):
            cell, broken = fault(kind, rng.randint(2, rows + 1), rows)
            if cell not in used:
                break
        used.add(cell)
        if kind == "typed_over":  # last year's figure, typed over the formula
            broken = round(values[cell] * 0.97 + 11)
        content[cell] = broken
    typo = ""
    if params.difficulty == "hard":
        year_row = rng.randint(2, rows + 1)
        column = rng.choice(DATA_COLUMNS)
        typo = f"Actuals!{column}{year_row}"
    workbook = openpyxl.Workbook()
    bold = Font(bold=True)
    first = workbook.active
    assert first is not None
    workbook.remove(first)
    for sheet, headers in HEADERS.items():
        ws = workbook.create_sheet(sheet)
        ws.append(headers)
        for cell in ws[1]:
            cell.font = bold
        for i, year in enumerate(plan.years):
            r = i + 2
            ws[f"A{r}"] = year
            for c, source in zip(DATA_COLUMNS, SOURCES, strict=True):
                if sheet == "Actuals":
                    value = plan.actuals[year][source]
                    if f"Actuals!{c}{r}" == typo:  # two digits swapped when it was typed in
                        text = str(int(value))
                        value = float(text[:-3] + text[-2] + text[-3] + text[-1])
                        if value == plan.actuals[year][source]:
                            value += 90
                    ws[f"{c}{r}"] = int(value)
                elif sheet == "Budget":
                    ws[f"{c}{r}"] = int(plan.budget[year][source])
        ws.column_dimensions["A"].width = 8
        for c in "BCDEF":
            ws.column_dimensions[c].width = 16
    summary = workbook.create_sheet("Summary")
    for n, label in enumerate(SUMMARY_LABELS, start=1):
        summary[f"A{n}"] = label
        summary[f"A{n}"].font = bold
    summary.column_dimensions["A"].width = 52
    notes = workbook.create_sheet("Notes")
    for line in NOTES:
        notes.append([line])
    for key, held in content.items():
        sheet, cell = key.split("!")
        workbook[sheet][cell] = held
        if cell.startswith("F") or key == "Summary!B4":
            workbook[sheet][cell].number_format = "0.0%"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return stable_office_bytes(buffer.getvalue())


def _csv(plan: Plan) -> bytes:
    rows: list[dict[str, object]] = [
        {"year": f"{y}-01-01", "source": s, "net_generation": int(plan.actuals[y][s])}
        for s in SOURCES
        for y in plan.years
    ]
    return write_csv(rows, ["year", "source", "net_generation"])


def _revised(plan: Plan, rng: random.Random) -> Plan:
    """Two figures revised by 1–4 %."""
    actuals = {y: dict(v) for y, v in plan.actuals.items()}
    for year, source in rng.sample([(y, s) for y in plan.years for s in SOURCES], k=2):
        actuals[year][source] = float(round(actuals[year][source] * rng.uniform(1.01, 1.04)))
    return Plan(plan.years, actuals, plan.budget)


def _instruction() -> str:
    return f"""\
Our generation budget workbook `{BOOK}` has been damaged: some cells show wrong numbers.
The sheets are `Actuals` (the EIA's annual net generation by source, thousand MWh),
`Budget` (the plan the board approved), `Variance` (actual minus budget, and the variance
over the budget), `Summary` and `Notes`. The EIA's figures are in `{CSV}`.

Please save a repaired copy as `{REPAIRED}`:
- Every computed cell must hold the formula its row and column intend — totals are the sum
  of the three sources, the shares divide by the total, each Variance cell is the Actuals
  cell minus the same Budget cell, the Summary totals cover every year, and the Summary
  average renewables share is the mean of the yearly shares. No typed-in numbers where a
  formula belongs.
- The Actuals data cells must equal `{CSV}`. The Budget figures are approved: keep them.
- Keep everything else as it is: the sheets and their order, headers and labels, fonts,
  number formats and the Notes.

Also write `{REPAIRS}` with `repaired`: the cells you repaired, as `"Sheet!A1"` strings in
workbook order (sheet order, then row, then column) — a formula cell whose own formula was
wrong or missing, and an Actuals cell that disagreed with the CSV; a cell that only showed
a wrong number because a cell it refers to was wrong is not a repair. Add
`total_variance` (the period's total actual minus total budget, rounded to one decimal)
and `average_renewables_share` (the mean of the yearly shares, as a fraction rounded to 4
decimals).

Do not modify `{BOOK}` or `{CSV}`.
"""


CHECK = (
    formulas.SOURCE
    + "\n\n"
    + CHECK_PRELUDE
    + r'''
import re
import zipfile
import xml.etree.ElementTree as ET

MODE = "__MODE__"
expected = json.loads((Path(__file__).parent / "expected_workbook.json").read_text())
path = ws / "generation_budget_repaired.xlsx"
NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


class Sheet:
    """A sheet as read from the XML: values (formulas as "=…"), bold and number format."""

    def __init__(self, title):
        self.title, self.values, self.bold, self.formats = title, {}, {}, {}


def read_workbook(path):
    """The workbook's sheets in order, with the standard library only."""
    archive = zipfile.ZipFile(path)
    names = set(archive.namelist())
    shared = []
    if "xl/sharedStrings.xml" in names:
        for item in ET.fromstring(archive.read("xl/sharedStrings.xml")).findall("m:si", NS):
            shared.append("".join(t.text or "" for t in item.iter(f"{{{NS['m']}}}t")))
    styles = ET.fromstring(archive.read("xl/styles.xml")) if "xl/styles.xml" in names else None
    fonts, xfs, custom = [], [], {}
    if styles is not None:
        fonts = [f.find("m:b", NS) is not None and f.find("m:b", NS).get("val", "1") not in
                 ("0", "false") for f in styles.findall("m:fonts/m:font", NS)]
        custom = {int(f.get("numFmtId")): f.get("formatCode", "")
                  for f in styles.findall("m:numFmts/m:numFmt", NS)}
        xfs = [(int(x.get("fontId", 0)), int(x.get("numFmtId", 0)))
               for x in styles.findall("m:cellXfs/m:xf", NS)]
    builtin = {9: "0%", 10: "0.00%"}
    rels = {}
    for rel in ET.fromstring(archive.read("xl/_rels/workbook.xml.rels")):
        target = rel.get("Target", "")
        rels[rel.get("Id")] = target.lstrip("/") if target.startswith("/") else "xl/" + target
    sheets = []
    root = ET.fromstring(archive.read("xl/workbook.xml"))
    for entry in root.findall("m:sheets/m:sheet", NS):
        sheet = Sheet(entry.get("name"))
        xml = ET.fromstring(archive.read(rels[entry.get(REL)]))
        for c in xml.iter(f"{{{NS['m']}}}c"):
            ref, kind = c.get("r"), c.get("t", "n")
            f, v = c.find("m:f", NS), c.find("m:v", NS)
            if f is not None and f.text:
                value = "=" + f.text
            elif kind == "s" and v is not None:
                value = shared[int(v.text)]
            elif kind == "inlineStr":
                value = "".join(t.text or "" for t in c.iter(f"{{{NS['m']}}}t"))
            elif kind in ("str", "e") and v is not None:
                value = v.text
            elif kind == "b" and v is not None:
                value = v.text == "1"
            elif v is not None and v.text is not None:
                number = float(v.text)
                value = int(number) if number.is_integer() and "." not in v.text else number
            else:
                value = None
            style = int(c.get("s", 0))
            font, fmt = xfs[style] if style < len(xfs) else (0, 0)
            if value is not None:
                sheet.values[ref] = value
            sheet.bold[ref] = fonts[font] if font < len(fonts) else False
            sheet.formats[ref] = custom.get(fmt, builtin.get(fmt, ""))
        sheets.append(sheet)
    return sheets


try:
    sheets = read_workbook(path)
except Exception as exc:
    report(0.0, f"the repaired workbook does not open: {exc!r}")
by_name = {s.title: s for s in sheets}
book = {s.title: s.values for s in sheets}


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def formula_ok(key):
    sheet, cell = key.split("!")
    content = book.get(sheet, {}).get(cell)
    if not (isinstance(content, str) and content.startswith("=")):
        return f"{key} is not a formula ({content!r})"
    try:
        value = evaluate(book, sheet, cell)
    except FormulaError as exc:
        return f"{key}: {exc}"
    want = expected["values"][key]
    return None if close(value, want) else f"{key} computes {value:.6g}, want {want:.6g}"


def data_ok(key):
    sheet, cell = key.split("!")
    got = book.get(sheet, {}).get(cell)
    want = expected["data"][key]
    ok = isinstance(got, (int, float)) and not isinstance(got, bool) and close(float(got), want)
    return None if ok else f"{key} is {got!r}, want {want:g}"


def score_of(problems, total):
    bad = [p for p in problems if p]
    report((total - len(bad)) / total if total else 1.0, "; ".join(bad[:6]) or "all right")


if MODE == "repaired":
    keys = expected["repaired"]
    score_of([formula_ok(k) if k in expected["values"] else data_ok(k) for k in keys], len(keys))
if MODE == "formulas":
    keys = list(expected["values"])
    score_of([formula_ok(k) for k in keys], len(keys))
if MODE == "data":
    keys = sorted(expected["data"])
    years = [book.get("Actuals", {}).get(f"A{i + 2}") for i in range(len(expected["years"]))]
    problems = [data_ok(k) for k in keys]
    problems.append(None if years == expected["years"] else f"years {years}")
    score_of(problems, len(problems))
if MODE == "layout":
    problems = []
    names = [s.title for s in sheets]
    if names != expected["sheets"]:
        problems.append(f"sheets {names}, want {expected['sheets']}")
    for name, headers in expected["headers"].items():
        sheet = by_name.get(name)
        if sheet is None:
            problems.append(f"no sheet {name}")
            continue
        cells = [f"{chr(65 + i)}1" for i in range(len(headers))]
        if [sheet.values.get(c) for c in cells] != headers:
            problems.append(f"{name} headers {[sheet.values.get(c) for c in cells]}")
        if not all(sheet.bold.get(c) for c in cells):
            problems.append(f"{name} headers lost their bold font")
        if name != "Budget" and "%" not in sheet.formats.get("F2", ""):
            problems.append(f"{name}!F2 is formatted {sheet.formats.get('F2')!r}, not as a %")
    summary, notes = by_name.get("Summary"), by_name.get("Notes")
    labels = [summary.values.get(f"A{i + 1}") for i in range(4)] if summary else []
    if labels != expected["labels"]:
        problems.append("Summary labels changed")
    lines = [notes.values.get(f"A{i + 1}") for i in range(len(expected["notes"]))] if notes else []
    if lines != expected["notes"]:
        problems.append("Notes changed")
    checks = 1 + 3 * len(expected["headers"]) + 2
    report(max(0.0, (checks - len(problems)) / checks), "; ".join(problems) or "layout kept")
if MODE == "fossil":
    keys = [k for k in expected["values"] if "!G" in k or k == "Summary!B5"]
    header = book.get("Actuals", {}).get("G1")
    problems = [formula_ok(k) for k in keys]
    problems.append(None if header == "Fossil share" else f"Actuals!G1 is {header!r}")
    score_of(problems, len(problems))
report(0.0, f"unknown mode {MODE}")
'''
)


__all__ = ["FormulaRepair", "canonical", "expected_values", "plan_from", "repairs_needed"]

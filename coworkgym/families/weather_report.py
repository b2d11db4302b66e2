"""Data analysis of a CSV into an XLSX report plus a JSON summary.

Grounded in NOAA's daily Seattle weather (bundled). Later user turns either replace the
data with a corrected export (every monthly figure changes) or add a wind requirement.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import (
    Aggregate,
    AggregateSource,
    Component,
    CrossFile,
    TableColumns,
    ValueRef,
    VerifierSpec,
)
from .common import (
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
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
    tie_reading,
    user_state,
    verifier_output,
    when_delivered,
    write_csv,
)

DATA = "data/weather.csv"
COLUMNS = ["date", "precipitation", "temp_max", "temp_min", "wind", "weather"]
MONTHS = {"easy": 3, "medium": 6, "hard": 12}
OUTPUTS = ("report.xlsx", "summary.json")
# The export's weather labels stop saying "rain" in spring 2013 (2014 has 3 rain days in 365,
# some months none, which leaves rainy_days meaningless and the verifier's count with no
# groups), so the family draws the one full year whose labels follow the rain gauge.
YEARS = ("2012",)

SOLVE = python_solution(
    "monthly weather report (report.xlsx) and summary (summary.json).",
    r"""import csv, json, os
import random
from collections import defaultdict
import openpyxl

turn = int(os.environ.get("COWORK_TURN", "0"))
with_wind = turn >= int(os.environ["WIND_FROM_TURN"])
months = defaultdict(list)
with open("data/weather.csv", newline="") as f:
    for row in csv.DictReader(f):
        months[row["date"][:7]].append(row)

wb = openpyxl.Workbook()
ws = wb.active
ws.title = "Summary"
header = ["month", "total_precip_mm", "avg_temp_max", "rainy_days"]
header += ["max_wind"] if with_wind else []
ws.append(header)
totals = {}
winds = {}
for month in sorted(months):
    rows = months[month]
    total = round(sum(float(r["precipitation"]) for r in rows), 2)
    totals[month] = total
    line = [month, total, round(sum(float(r["temp_max"]) for r in rows) / len(rows), 2),
            sum(1 for r in rows if r["weather"] == "rain")]
    if with_wind:
        winds[month] = max(float(r["wind"]) for r in rows)
        line.append(winds[month])
    ws.append(line)
grand = round(sum(totals.values()), 2)
ws.append(["TOTAL", grand])
wb.save("report.xlsx")

summary = {"wettest_month": max(sorted(totals), key=lambda m: totals[m]), "total_precip_mm": grand}
if with_wind:
    summary["windiest_month"] = max(sorted(winds), key=lambda m: winds[m])
with open("summary.json", "w") as f:
    json.dump(summary, f, indent=2)
""",
    "WIND_FROM_TURN",
)


class WeatherReport(TaskFamily):
    name = "weather_report"
    scenarios = ("data_analysis/reporting/periodic_report", "operations/facilities/monitoring")
    capabilities = (
        "data_analysis",
        "spreadsheet_authoring",
        "aggregation",
        "requirement_tracking",
        "dependency_tracking",
    )
    # with 3 turns both later turns come: the wind requirement and the corrected export
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("xlsx", "json")
    modalities = ("tabular",)

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("weather")
        rows = read_csv_resource("data/seattle-weather.csv")
        year = rng.choice(YEARS)
        count = MONTHS[params.difficulty]
        first = rng.randint(1, 13 - count)
        wanted = {f"{year}-{m:02d}" for m in range(first, first + count)}
        data = _original(rows, wanted)
        turn_kinds, wind_from = plan_turns(rng, params, "input_replaced")

        turns: list[UserTurn] = []
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                data = _corrected(data, params.rng(f"correction{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered("report.xlsx", index),
                        "The station just sent a corrected export: several rain-gauge readings "
                        f"were wrong. I replaced {DATA} with it. Please redo the report and the "
                        "summary from the corrected data.",
                        {DATA: write_csv(data, COLUMNS)},
                        reason="corrected station export",
                        invalidates=OUTPUTS,
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "Facilities also cares about wind. Add a max_wind column (the highest "
                        "daily wind speed of each month) to the Summary sheet, and a "
                        "windiest_month key to summary.json: the month with the highest "
                        "max_wind (the earliest such month if months tie).",
                        OUTPUTS,
                    )
                )
        s0 = _original(rows, wanted)  # data was replaced by later turns' corrections
        return FamilyDraft(
            slug=f"weather-report-{year}-{params.seed}",
            title=f"Monthly weather report for {year}",
            instruction=_instruction(),
            workspace={DATA: write_csv(s0, COLUMNS), "README.md": _readme(year).encode()},
            solve_sh=fill_template(SOLVE, wind_from_turn=wind_from),
            user=user_state(
                "Facilities coordinator who prepares a weather brief for the site team.",
                "facilities coordinator",
                "The brief is read by managers; month order and a clear total matter most.",
                "does not know how the station computes its readings",
                ("agent asks about units", "precipitation is in mm"),
            ),
            inputs=input_artifacts({DATA: "csv"}),
            outputs=output_artifacts({"report.xlsx": "xlsx", "summary.json": "json"}, [DATA]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        final = built.final_inputs()[DATA]
        by_month = _by_month(parse_csv(final))
        totals = {m: sum(float(r["precipitation"]) for r in rs) for m, rs in by_month.items()}
        wettest = max(sorted(totals), key=lambda m: totals[m])
        grand = round(sum(totals.values()), 2)
        wind = requirement_added(built)

        def monthly(op: str, value: str, **extra: object) -> Aggregate:
            return Aggregate(
                path="report.xlsx",
                sheet="Summary",
                key_column="month",
                value_column={
                    "precipitation": "total_precip_mm",
                    "temp_max": "avg_temp_max",
                    "weather": "rainy_days",
                    "wind": "max_wind",
                }[value],
                source=AggregateSource.model_validate(
                    {
                        "path": f"inputs/{DATA}",
                        "op": op,
                        "value": value,
                        "group_by": "date",
                        "group_prefix": 7,
                        **extra,
                    }
                ),
                tolerance=0.02,
            )

        components = [
            Component(
                id="monthly_precipitation",
                weight=3,
                check=monthly("sum", "precipitation"),
                requirement="total_precip_mm per month",
            ),
            Component(
                id="monthly_avg_temp_max",
                weight=2,
                check=monthly("mean", "temp_max"),
                requirement="avg_temp_max per month",
            ),
            Component(
                id="monthly_rainy_days",
                weight=2,
                check=monthly("count", "weather", where={"weather": "rain"}),
                requirement="rainy_days per month",
            ),
            json_value(
                "wettest_month",
                "summary.json",
                "/wettest_month",
                wettest,
                "summary.json wettest_month",
                weight=2,
            ),
            json_value(
                "total_precipitation",
                "summary.json",
                "/total_precip_mm",
                grand,
                "summary.json total_precip_mm",
                tolerance=0.05,
            ),
            Component(
                id="total_row_matches_summary",
                weight=1,
                check=CrossFile(
                    left=ValueRef(path="summary.json", kind="json", pointer="/total_precip_mm"),
                    right=ValueRef(
                        path="report.xlsx",
                        kind="xlsx",
                        sheet="Summary",
                        key_column="month",
                        key="TOTAL",
                        column="total_precip_mm",
                    ),
                    tolerance=0.05,
                ),
                requirement="TOTAL row agrees with summary.json",
            ),
            Component(
                id="summary_columns",
                weight=1,
                check=TableColumns(
                    path="report.xlsx",
                    sheet="Summary",
                    columns=["month", "total_precip_mm", "avg_temp_max", "rainy_days"]
                    + (["max_wind"] if wind else []),
                ),
                requirement="Summary sheet layout",
            ),
        ]
        if wind:
            winds = {m: max(float(r["wind"]) for r in rs) for m, rs in by_month.items()}
            components += [
                Component(
                    id="monthly_max_wind",
                    weight=2,
                    check=monthly("max", "wind"),
                    requirement="max_wind per month (turn requirement)",
                ),
                json_value(
                    "windiest_month",
                    "summary.json",
                    "/windiest_month",
                    max(sorted(winds), key=lambda m: winds[m]),
                    "summary.json windiest_month",
                ),
            ]
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "data_unmodified", "the station data must not be edited", {DATA: final}
                )
            ],
            rubric=rubric(
                "readable_summary",
                "The Summary sheet reads well for managers: months in chronological order, "
                "a header row, and the TOTAL row last.",
                ["report.xlsx"],
            ),
        )
        return verifier_output(spec, {DATA: final})


    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        by_month = _by_month(parse_csv(inputs[DATA]))
        totals = {m: sum(float(r["precipitation"]) for r in rs) for m, rs in by_month.items()}
        found = [tie_reading("wettest_month", "wettest_month", totals)]
        if any(t.kind == "requirement_changed" for t in turns):
            winds = {m: max(float(r["wind"]) for r in rs) for m, rs in by_month.items()}
            found.append(tie_reading("windiest_month", "windiest_month", winds))
        rainy = {m: sum(1 for r in rs if r["weather"] == "rain") for m, rs in by_month.items()}
        wet = {m: sum(1 for r in rs if float(r["precipitation"]) > 0) for m, rs in by_month.items()}
        found.append(  # a "rainy day" by its weather type, or by any precipitation
            Reading(
                component="monthly_rainy_days",
                subject="rainy_days",
                values={"weather is rain": rainy, "precipitation above 0": wet},
                phrases={
                    "weather is rain": r"weather is `?rain",
                    "precipitation above 0": r"precipitation (above|over|greater than) 0",
                },
            )
        )
        return found


def _by_month(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    by_month: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_month[row["date"][:7]].append(row)
    return by_month


def _original(rows: list[dict[str, str]], wanted: set[str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for row in rows:
        date = row["date"].replace("/", "-")
        if date[:7] in wanted:
            out.append({**row, "date": date})
    return out


def _corrected(data: list[dict[str, object]], rng: random.Random) -> list[dict[str, object]]:
    fixed = [dict(r) for r in data]
    rainy = [i for i, r in enumerate(fixed) if float(str(r["precipitation"])) > 0] or list(
        range(len(fixed))
    )
    for i in rng.sample(rainy, k=min(8, len(rainy))):
        fixed[i]["precipitation"] = round(float(str(fixed[i]["precipitation"])) * 1.5 + 2.0, 1)
    return fixed


def _instruction() -> str:
    return f"""\
I'm preparing the weather brief for our facilities team. The daily station readings are in
`{DATA}` (one row per day: precipitation in mm, temperatures in °C, wind, weather type).

Please create:

1. `report.xlsx` with a sheet named `Summary`: one row per month, in chronological order,
   with the columns `month` (formatted `YYYY-MM`), `total_precip_mm` (sum of the daily
   precipitation), `avg_temp_max` (mean daily maximum temperature, 2 decimals) and
   `rainy_days` (number of days whose weather is `rain`). Finish with a row whose `month` is
   `TOTAL` and whose `total_precip_mm` is the precipitation over the whole period.
2. `summary.json` with `wettest_month` (the `YYYY-MM` month with the most precipitation,
   the earliest such month if months tie) and `total_precip_mm` (the same total as the
   TOTAL row).

Please don't modify `{DATA}`.
"""


def _readme(year: str) -> str:
    return (
        f"# Station export {year}\n\nDaily readings from the Seattle station (NOAA). "
        "Columns: date, precipitation (mm), temp_max and temp_min (°C), wind (m/s), weather.\n"
    )


__all__ = ["WeatherReport"]

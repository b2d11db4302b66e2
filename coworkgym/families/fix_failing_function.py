"""Debugging a small Python module whose visible tests fail; deliver the fix and FIXES.md.

The module (``stats_utils.py``) holds statistics helpers for the bundled Palmer penguins
data; the seed plants one to three classic bugs (an off-by-one, a wrong rounding, a wrong
key, a wrong missing-value sentinel) and the visible ``test_stats_utils.py`` exercises
every function, so each bug makes a visible test fail.

The verifier runs *hidden* tests (``tests/hidden/``, written here from the final data with
their own inputs) per fixed function, a regression suite for the functions that were not
broken, and the verifier's private copy of the visible suite. Later user turns add a
requirement (empty input → None) or extend the visible tests for a new helper, ``spread``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from statistics import median as _median

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..verifier.spec import (
    Command,
    Component,
    DocumentValue,
    TextRegex,
    VerifierSpec,
)
from .common import (
    NEVER,
    FamilyDraft,
    FamilyParams,
    TaskFamily,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    output_artifacts,
    parse_csv,
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

MODULE, TESTS, DATA, FIXES = (
    "stats_utils.py",
    "test_stats_utils.py",
    "data/penguins.csv",
    "FIXES.md",
)
COLUMNS = [
    "species",
    "island",
    "bill_length_mm",
    "bill_depth_mm",
    "flipper_length_mm",
    "body_mass_g",
    "sex",
    "year",
]
MEASURES = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
FUNCTIONS = ("load_rows", "numbers", "mean_of", "median", "count_by", "mean_by", "top_n")
BUG_COUNT = {"easy": 1, "medium": 2, "hard": 3}
PYTEST = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]

# The correct module. Each bug below replaces one exact (unique) snippet of it.
SOURCE = '''\
"""Small statistics helpers for the penguin survey data (data/penguins.csv)."""

import csv


def load_rows(path):
    """The rows of a CSV file as dicts; missing values ("NA") become None."""
    with open(path, newline="", encoding="utf-8") as f:
        return [
            {key: (None if value == "NA" else value) for key, value in row.items()}
            for row in csv.DictReader(f)
        ]


def numbers(rows, column):
    """The column's values as floats, skipping missing ones."""
    return [float(row[column]) for row in rows if row[column] is not None]


def mean_of(values):
    """The arithmetic mean, rounded to 2 decimals."""
    return round(sum(values) / len(values), 2)


def median(values):
    """The median: the middle value, or the mean of the two middle values."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def count_by(rows, key):
    """How many rows have each value of `key` (rows missing it are skipped)."""
    counts = {}
    for row in rows:
        if row[key] is not None:
            counts[row[key]] = counts.get(row[key], 0) + 1
    return counts


def mean_by(rows, key, column):
    """The mean of `column` for each value of `key`, rounded to 2 decimals."""
    groups = {}
    for row in rows:
        if row[key] is not None and row[column] is not None:
            groups.setdefault(row[key], []).append(float(row[column]))
    return {group: mean_of(values) for group, values in groups.items()}


def top_n(rows, column, n):
    """The n rows with the largest `column`, largest first (rows missing it are skipped)."""
    present = [r for r in rows if r[column] is not None]
    ranked = sorted(present, key=lambda r: float(r[column]), reverse=True)
    return ranked[:n]
'''

SPREAD = '''

def spread(values):
    """The range of the values: largest minus smallest, rounded to 2 decimals."""
    return round(max(values) - min(values), 2)
'''
GUARD = "    if not values:\n        return None\n"
GUARDED_DOCS = (
    '    """The arithmetic mean, rounded to 2 decimals."""\n',
    '    """The median: the middle value, or the mean of the two middle values."""\n',
)


@dataclass(frozen=True)
class Bug:
    function: str
    fixed: str  # the correct snippet
    buggy: str
    cause: str


BUGS = (
    Bug(
        "median",
        "return (ordered[mid - 1] + ordered[mid]) / 2",
        "return (ordered[mid] + ordered[mid + 1]) / 2",
        "off by one: for an even count it averaged ordered[mid] and ordered[mid + 1] instead "
        "of the two middle values ordered[mid - 1] and ordered[mid]",
    ),
    Bug(
        "mean_of",
        "return round(sum(values) / len(values), 2)",
        "return round(sum(values) / len(values), 1)",
        "wrong rounding: the mean was rounded to 1 decimal instead of the documented 2",
    ),
    Bug(
        "count_by",
        "counts[row[key]] = counts.get(row[key], 0) + 1",
        'counts[row["species"]] = counts.get(row["species"], 0) + 1',
        'wrong key: it always counted row["species"] instead of the requested key',
    ),
    Bug(
        "top_n",
        "return ranked[:n]",
        "return ranked[: n - 1]",
        "off by one: the slice ranked[: n - 1] returned one row too few",
    ),
    Bug(
        "numbers",
        "if row[column] is not None]",
        'if row[column] != "NA"]',
        'wrong sentinel: it skipped the string "NA", but load_rows already turns NA into None, '
        "so float(None) raised",
    ),
)

SOLVE = python_solution(
    "fix the planted bugs in stats_utils.py, apply later requirements,\n"
    "run the visible tests and write FIXES.md.",
    r"""import os
import re
import subprocess
import sys

turn = int(os.environ.get("COWORK_TURN", "0"))
FIXES = __FIXES__
GUARD = __GUARD__
GUARDED_DOCS = __GUARDED_DOCS__
SPREAD = __SPREAD__

with open("stats_utils.py", encoding="utf-8") as f:
    text = f.read()
notes = []
for fix in FIXES:
    text = text.replace(fix["buggy"], fix["fixed"])
    notes.append((fix["function"], fix["cause"]))
if turn >= int(os.environ["NONE_FROM_TURN"]):
    for doc in GUARDED_DOCS:
        if doc + GUARD not in text:
            text = text.replace(doc, doc + GUARD)
    notes.append(("mean_of, median", "requirement: an empty list gives None, not an error"))
if turn >= int(os.environ["SPREAD_FROM_TURN"]) and "def spread(" not in text:
    text = text.rstrip("\n") + "\n" + SPREAD
    notes.append(("spread", "new helper for the added tests: largest minus smallest value"))
with open("stats_utils.py", "w", encoding="utf-8") as f:
    f.write(text)

done = subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_stats_utils.py"],
    capture_output=True, text=True,
)
if done.returncode != 0:
    sys.exit("visible tests still fail:\n" + done.stdout[-2000:])
passed = int(re.search(r"(\d+) passed", done.stdout).group(1))

lines = ["# Fixes to stats_utils.py", ""]
for function, cause in notes:
    lines += [f"Function: {function}", f"Root cause: {cause}.", ""]
lines.append(f"Tests passed: {passed}")
with open("FIXES.md", "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
""",
    "NONE_FROM_TURN",
    "SPREAD_FROM_TURN",
)


class FixFailingFunction(TaskFamily):
    name = "fix_failing_function"
    scenarios = ("software/maintenance/bug_fix",)  # the agent fixes code; it writes no tests
    capabilities = ("debugging", "requirement_tracking")
    later_capabilities = ("requirement_tracking",)  # with 3 turns the None rule always comes
    deliverables = ("code", "md")
    modalities = ("code", "tabular")

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("bugfix")
        rows = _penguins(rng)
        bugs = rng.sample(BUGS, k=BUG_COUNT[params.difficulty])
        module = SOURCE
        for bug in bugs:
            assert module.count(bug.fixed) == 1, bug.function
            module = module.replace(bug.fixed, bug.buggy)
        data = write_csv(rows, COLUMNS)
        s0_tests = visible = visible_tests(parse_csv(data), params.rng("bugfix-tests"))
        kinds = ["requirement_changed", "input_edited"]
        rng.shuffle(kinds)
        turn_kinds = kinds[: params.turns - 1]
        none_from = spread_from = NEVER
        turns: list[UserTurn] = []
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "requirement_changed":
                none_from = index
                turns.append(
                    requirement_turn(
                        index,
                        "One more thing: the dashboard calls mean_of and median on empty "
                        "selections. Please make both return None for an empty list instead of "
                        f"raising, and note it in {FIXES}.",
                        [MODULE, FIXES],
                    )
                )
            else:
                spread_from = index
                visible = with_spread_tests(visible, parse_csv(data), params.rng(f"spread{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(FIXES, index),
                        f"I added tests to {TESTS} for a helper we need, spread(values): the "
                        "largest minus the smallest value, rounded to 2 decimals. Please add it "
                        f"to {MODULE} so they pass, and update {FIXES}.",
                        {TESTS: visible.encode()},
                        reason="tests for the new spread helper",
                        invalidates=[MODULE, FIXES],
                        kind="input_edited",
                    )
                )
        fixes = [
            {"function": b.function, "buggy": b.buggy, "fixed": b.fixed, "cause": b.cause}
            for b in bugs
        ]
        solve = fill_template(
            SOLVE,
            none_from_turn=none_from,
            spread_from_turn=spread_from,
            fixes=repr(fixes),
            guard=repr(GUARD),
            guarded_docs=repr(GUARDED_DOCS),
            spread=repr(SPREAD),
        )
        return FamilyDraft(
            slug=f"fix-failing-function-{params.difficulty}-{params.seed}",
            title="Fix the failing statistics helpers",
            instruction=_instruction(),
            workspace={
                MODULE: module.encode(),
                TESTS: s0_tests.encode(),
                DATA: data,
                "README.md": _readme().encode(),
            },
            solve_sh=solve,
            user=user_state(
                "Data engineer who maintains the team's small analysis helpers.",
                "engineer",
                "The helpers must behave as their docstrings say, not just pass.",
                "does not know which commit introduced the failures",
                (
                    "agent asks whether to change the tests",
                    "the tests are right; only the module may change",
                ),
            ),
            inputs=input_artifacts({TESTS: "py", DATA: "csv"}),
            outputs=[
                *output_artifacts({MODULE: "py"}, [TESTS, DATA], in_place=True),
                *output_artifacts({FIXES: "md"}, [MODULE, TESTS]),
            ],
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        inputs = built.final_inputs()
        visible, data = inputs[TESTS], inputs[DATA]
        rows = _load_rows(data)
        broken = planted_bugs(built.workspace[MODULE].decode())
        none_required = requirement_added(built)
        spread_required = re.search(r"\bspread\(", visible.decode()) is not None
        hidden = hidden_tests(rows)
        private: dict[str, bytes] = {}
        for function, text in hidden.items():
            private[f"hidden/test_{function}.py"] = text.encode()

        def pytest(*files: str) -> Command:
            return Command(argv=[*PYTEST, *files], timeout=120)

        components = [
            Component(
                id=f"fixed_{function}",
                weight=3,
                check=pytest(f"/tests/hidden/test_{function}.py"),
                requirement=f"{function} behaves as documented (hidden tests)",
            )
            for function in broken
        ]
        intact = [f for f in FUNCTIONS if f not in broken]
        components += [
            Component(
                id="other_functions_intact",
                weight=1,
                check=pytest(*(f"/tests/hidden/test_{f}.py" for f in intact)),
                requirement="the functions that worked still work",
            ),
            Component(
                id="visible_tests_pass",
                weight=2,
                check=pytest(f"/tests/inputs/{TESTS}"),
                requirement=f"{TESTS} passes",
            ),
            Component(
                id="fixes_root_cause",
                weight=1,
                check=TextRegex(path=FIXES, pattern=r"^\W*Root cause\W*:\s*\S.{10,}"),
                requirement="FIXES.md explains the root cause",
            ),
            Component(
                id="fixes_name_functions",
                weight=1,
                check=TextRegex(
                    path=FIXES,
                    pattern=r"\A" + "".join(rf"(?=[\s\S]*\b{f}\b)" for f in broken),
                    ignore_case=False,
                ),
                requirement="FIXES.md names every fixed function",
            ),
            Component(
                id="fixes_tests_passed",
                weight=1,
                check=DocumentValue(
                    path=FIXES, label="Tests passed", expected=_test_count(visible.decode())
                ),
                requirement="FIXES.md reports how many visible tests pass",
            ),
        ]
        if none_required:
            private["hidden/test_empty_input.py"] = EMPTY_TESTS.encode()
            components.append(
                Component(
                    id="empty_input_gives_none",
                    weight=2,
                    check=pytest("/tests/hidden/test_empty_input.py"),
                    requirement="mean_of and median return None for [] (turn requirement)",
                )
            )
        if spread_required:
            private["hidden/test_spread.py"] = spread_tests(rows).encode()
            components.append(
                Component(
                    id="spread_added",
                    weight=2,
                    check=pytest("/tests/hidden/test_spread.py"),
                    requirement="spread(values) as the added tests describe",
                )
            )
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "tests_and_data_unmodified",
                    "the fix must not touch the tests or the data",
                    {TESTS: visible, DATA: data},
                )
            ],
            rubric=rubric(
                "minimal_fix",
                "The fix is minimal and explained: each change in stats_utils.py addresses a root "
                "cause named in FIXES.md, with no unrelated rewrites.",
                [MODULE, FIXES],
            ),
        )
        return verifier_output(spec, {TESTS: visible, DATA: data}, private)


def planted_bugs(module: str) -> list[str]:
    """The functions whose buggy snippet is in the s0 module, in source order."""
    found = [b for b in BUGS if b.buggy in module]
    return [b.function for b in sorted(found, key=lambda b: module.index(b.buggy))]


# ---- data and the reference semantics (what the module should compute) --------------------


def _penguins(rng: random.Random) -> list[dict[str, object]]:
    rows = read_csv_resource("data/penguins.csv")
    year = rng.choice(sorted({r["year"] for r in rows}))
    return [dict(r) for r in rows if r["year"] == year]


def _load_rows(data: bytes) -> list[dict[str, str | None]]:
    return [{k: (None if v == "NA" else v) for k, v in r.items()} for r in parse_csv(data)]


def _numbers(rows: list[dict[str, str | None]], column: str) -> list[float]:
    return [float(v) for r in rows if (v := r[column]) is not None]


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2)


def _count_by(rows: list[dict[str, str | None]], key: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        if (value := row[key]) is not None:
            counts[value] = counts.get(value, 0) + 1
    return counts


def _mean_by(rows: list[dict[str, str | None]], key: str, column: str) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for row in rows:
        group, value = row[key], row[column]
        if group is not None and value is not None:
            groups.setdefault(group, []).append(float(value))
    return {g: _mean(v) for g, v in groups.items()}


def _top(rows: list[dict[str, str | None]], column: str, n: int) -> list[str]:
    present = [r for r in rows if r[column] is not None]
    ranked = sorted(present, key=lambda r: float(str(r[column])), reverse=True)
    return [str(r[column]) for r in ranked[:n]]


def _literal_mean(rng: random.Random) -> tuple[list[float], float]:
    """Three values whose mean rounds differently to 1 and 2 decimals (catches rounding)."""
    while True:
        values = [float(rng.randint(1, 9)) for _ in range(3)]
        mean = sum(values) / 3
        if round(mean, 1) != round(mean, 2):
            return values, round(mean, 2)


HEADER = '''\
"""Tests for stats_utils (run: python3 -m pytest test_stats_utils.py)."""

from pathlib import Path

from stats_utils import count_by, load_rows, mean_by, mean_of, median, numbers, top_n

ROWS = load_rows(Path(__file__).parent / "data" / "penguins.csv")
'''


def visible_tests(raw: list[dict[str, str]], rng: random.Random) -> str:
    """The visible suite: every function exercised, so each planted bug fails a test."""
    rows: list[dict[str, str | None]] = [
        {k: (None if v == "NA" else v) for k, v in r.items()} for r in raw
    ]
    values, mean = _literal_mean(rng)
    column, n = rng.choice(MEASURES), rng.randint(3, 5)
    key = rng.choice(["island", "sex"])
    even = rng.sample(range(1, 40), k=4)
    odd = rng.sample(range(1, 40), k=5)
    return (
        HEADER
        + f"""

def test_load_rows_reads_every_penguin():
    assert len(ROWS) == {len(rows)}
    assert ROWS[0]["species"] == {rows[0]["species"]!r}


def test_numbers_skips_missing_values():
    rows = [{{"mass": "3750"}}, {{"mass": None}}, {{"mass": "4100.5"}}]
    assert numbers(rows, "mass") == [3750.0, 4100.5]


def test_mean_of_rounds_to_two_decimals():
    assert mean_of({values!r}) == {mean!r}


def test_median_of_an_odd_count():
    assert median({odd!r}) == {_median(odd)!r}


def test_median_of_an_even_count():
    assert median({even!r}) == {_median(even)!r}


def test_count_by_{key}():
    assert count_by(ROWS, {key!r}) == {_count_by(rows, key)!r}


def test_mean_by_species():
    assert mean_by(ROWS, "species", {column!r}) == {_mean_by(rows, "species", column)!r}


def test_top_n_rows():
    top = top_n(ROWS, {column!r}, {n})
    assert [row[{column!r}] for row in top] == {_top(rows, column, n)!r}
"""
    )


def with_spread_tests(visible: str, raw: list[dict[str, str]], rng: random.Random) -> str:
    """The user's edit: import spread and test it on a literal list and on a column."""
    rows: list[dict[str, str | None]] = [
        {k: (None if v == "NA" else v) for k, v in r.items()} for r in raw
    ]
    column = rng.choice(MEASURES)
    values = _numbers(rows, column)
    literal = [round(rng.uniform(1, 50), 2) for _ in range(4)]
    text = visible.replace("numbers, top_n\n", "numbers, spread, top_n\n")
    return (
        text
        + f"""

def test_spread_of_a_list():
    assert spread({literal!r}) == {round(max(literal) - min(literal), 2)!r}


def test_spread_of_{column}():
    assert spread(numbers(ROWS, {column!r})) == {round(max(values) - min(values), 2)!r}
"""
    )


def _test_count(visible: str) -> int:
    return len(re.findall(r"^def test_", visible, flags=re.MULTILINE))


HIDDEN_HEADER = '''\
"""Hidden tests (Cowork-Gym verifier): the module under test is the workspace's."""

import os

import pytest

from stats_utils import {names}

ROWS = load_rows(os.path.join(os.environ["TESTS_DIR"], "inputs", "data", "penguins.csv"))
'''


def hidden_tests(rows: list[dict[str, str | None]]) -> dict[str, str]:
    """One file per function, with other inputs than the visible suite, expectations from
    the verifier's own copy of the final data."""
    counts = {k: _count_by(rows, k) for k in ("island", "sex", "species")}
    means = {c: _mean_by(rows, "island", c) for c in MEASURES}
    present = {c: len(_numbers(rows, c)) for c in MEASURES}

    def header(*names: str) -> str:
        return HIDDEN_HEADER.format(names=", ".join(sorted({"load_rows", *names})))

    return {
        "load_rows": header()
        + f"""

def test_rows_and_missing_values():
    assert len(ROWS) == {len(rows)}
    assert sum(1 for r in ROWS if r["sex"] is None) == {sum(1 for r in rows if r["sex"] is None)}
""",
        "numbers": header("numbers")
        + f"""

def test_skips_none():
    rows = [{{"x": None}}, {{"x": "2.5"}}, {{"x": "7"}}, {{"x": None}}]
    assert numbers(rows, "x") == [2.5, 7.0]


def test_columns_of_the_data():
    assert [len(numbers(ROWS, c)) for c in {list(MEASURES)!r}] == {list(present.values())!r}
""",
        "mean_of": header("mean_of", "numbers")
        + f"""

def test_two_decimals():
    assert mean_of([2.0, 2.0, 3.0]) == 2.33
    assert mean_of([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) == 1.5


def test_body_mass():
    expected = {_mean(_numbers(rows, "body_mass_g"))!r}
    assert mean_of(numbers(ROWS, "body_mass_g")) == pytest.approx(expected, abs=0.006)
""",
        "median": header("median", "numbers")
        + f"""

def test_small_lists():
    assert median([7]) == 7
    assert median([9, 2, 6, 4]) == 5
    assert median([1.5, 3.5, 2.5, 0.5, 4.5, 5.5]) == 3.0
    assert median([3, 1, 2]) == 2


def test_flipper_length():
    expected = {float(_median(_numbers(rows, "flipper_length_mm")))!r}
    assert median(numbers(ROWS, "flipper_length_mm")) == pytest.approx(expected)
""",
        "count_by": header("count_by")
        + f"""

def test_every_key():
    assert count_by(ROWS, "island") == {counts["island"]!r}
    assert count_by(ROWS, "sex") == {counts["sex"]!r}
    assert count_by(ROWS, "species") == {counts["species"]!r}
""",
        "mean_by": header("mean_by")
        + f"""

def test_by_island():
    expected = {means!r}
    for column, means in expected.items():
        got = mean_by(ROWS, "island", column)
        assert got == pytest.approx(means, abs=0.006), column
""",
        "top_n": header("top_n")
        + f"""

def test_two_and_five():
    depth = [r["bill_depth_mm"] for r in top_n(ROWS, "bill_depth_mm", 2)]
    assert depth == {_top(rows, "bill_depth_mm", 2)!r}
    mass = [r["body_mass_g"] for r in top_n(ROWS, "body_mass_g", 5)]
    assert mass == {_top(rows, "body_mass_g", 5)!r}
""",
    }


EMPTY_TESTS = '''\
"""Hidden tests (Cowork-Gym verifier): empty input gives None (a later requirement)."""

from stats_utils import mean_of, median


def test_empty_lists():
    assert mean_of([]) is None
    assert median([]) is None


def test_non_empty_unchanged():
    assert mean_of([1.0, 2.0]) == 1.5
    assert median([4, 8]) == 6
'''


def spread_tests(rows: list[dict[str, str | None]]) -> str:
    depth = _numbers(rows, "bill_depth_mm")
    return f'''\
"""Hidden tests (Cowork-Gym verifier): the spread helper the user asked for."""

import os

from stats_utils import load_rows, numbers, spread

ROWS = load_rows(os.path.join(os.environ["TESTS_DIR"], "inputs", "data", "penguins.csv"))


def test_small_lists():
    assert spread([10, 4, 7]) == 6
    assert spread([2.5]) == 0
    assert spread([1.234, 5.678]) == 4.44


def test_bill_depth():
    assert spread(numbers(ROWS, "bill_depth_mm")) == {round(max(depth) - min(depth), 2)!r}
'''


def _instruction() -> str:
    return f"""\
Our statistics helpers in `{MODULE}` are broken: `python3 -m pytest {TESTS}` fails. The
tests and the data (`{DATA}`) are right; the bugs are in the module.

1. Fix `{MODULE}` so that every test in `{TESTS}` passes and every function does what its
   docstring says. Keep the functions' names and signatures.
2. Write `{FIXES}`: for each function you fixed, a line `Function: <name>` followed by a
   line `Root cause: <what was wrong>`. End with a line `Tests passed: N`, the number of
   tests in `{TESTS}` that pass after your fix.

Do not modify `{TESTS}` or `{DATA}`.
"""


def _readme() -> str:
    return (
        "# stats_utils\n\nHelpers for the Palmer penguins survey data (Gorman, Williams & "
        "Fraser 2014). Run the tests with `python3 -m pytest test_stats_utils.py`.\n"
    )


__all__ = [
    "BUGS",
    "SOURCE",
    "FixFailingFunction",
    "hidden_tests",
    "planted_bugs",
    "visible_tests",
    "with_spread_tests",
]

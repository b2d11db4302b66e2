"""The verifier engine: every check type, scoring, and invalid-is-not-zero."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pytest

from coworkgym.verifier.engine import CHECKS, Scoring, combine, verify
from coworkgym.verifier.engine.__main__ import main as engine_main
from coworkgym.verifier.engine.checks import Context
from coworkgym.verifier.spec import VerifierSpec


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out.json").write_text(json.dumps({"total": 1234.5, "top": "North", "items": [1, 2, 3]}))
    with (ws / "table.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerows([["region", "amount"], ["North", "10.5"], ["South", "4"]])
    wb = openpyxl.Workbook()
    sheet = wb.active
    sheet.title = "Summary"
    sheet.append(["region", "amount"])
    sheet.append(["North", 10.5])
    sheet.append(["South", 4])
    wb.save(ws / "report.xlsx")
    document = docx.Document()
    document.add_paragraph("Total revenue: $1,234.50")
    document.save(str(ws / "memo.docx"))
    (ws / "notes.md").write_text("# Memo\n\n**Decision count**: 3\nOwner - Ana\n")
    return ws


@pytest.fixture
def tests_dir(tmp_path: Path) -> Path:
    tests = tmp_path / "tests"
    (tests / "inputs").mkdir(parents=True)
    rows = [["region", "amount"], ["North", "7"], ["North", "3.5"], ["South", "4"]]
    with (tests / "inputs" / "sales.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return tests


def run(check: dict[str, Any], ws: Path, tests: Path, trajectory: Any = None) -> float:
    result = CHECKS[check["type"]](check, Context(ws, tests, trajectory))
    return result.score


def test_there_are_at_least_twelve_deterministic_check_types() -> None:
    assert len(CHECKS) >= 12


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"type": "file_exists", "path": "out.json"}, 1.0),
        ({"type": "file_absent", "path": "nothing.txt"}, 1.0),
        ({"type": "json_value", "path": "out.json", "pointer": "/total", "expected": 1234.5}, 1.0),
        ({"type": "json_value", "path": "out.json", "pointer": "/top", "expected": "north"}, 1.0),
        (
            {
                "type": "csv_value",
                "path": "table.csv",
                "key_column": "region",
                "key": "North",
                "column": "amount",
                "expected": 10.4,
                "tolerance": 0.2,
            },
            1.0,
        ),
        (
            {
                "type": "xlsx_value",
                "path": "report.xlsx",
                "sheet": "Summary",
                "cell": "B2",
                "expected": 10.5,
            },
            1.0,
        ),
        (
            {
                "type": "document_value",
                "path": "memo.docx",
                "label": "Total revenue",
                "expected": 1234.5,
            },
            1.0,
        ),
        (
            {
                "type": "document_value",
                "path": "notes.md",
                "label": "Decision count",
                "expected": 3,
            },
            1.0,
        ),
        (
            {
                "type": "json_schema",
                "path": "out.json",
                "schema": {"type": "object", "required": ["total", "top"]},
            },
            1.0,
        ),
        ({"type": "table_columns", "path": "report.xlsx", "columns": ["region", "amount"]}, 1.0),
        ({"type": "row_count", "path": "table.csv", "equals": 2}, 1.0),
        ({"type": "row_count", "path": "out.json", "pointer": "/items", "min": 3}, 1.0),
        (
            {
                "type": "aggregate",
                "path": "table.csv",
                "key_column": "region",
                "value_column": "amount",
                "source": {
                    "path": "inputs/sales.csv",
                    "op": "sum",
                    "value": "amount",
                    "group_by": "region",
                },
            },
            1.0,
        ),
        (
            {
                "type": "cross_file",
                "left": {
                    "path": "table.csv",
                    "key_column": "region",
                    "key": "North",
                    "column": "amount",
                },
                "right": {
                    "path": "report.xlsx",
                    "kind": "xlsx",
                    "sheet": "Summary",
                    "key_column": "region",
                    "key": "North",
                    "column": "amount",
                },
            },
            1.0,
        ),
        ({"type": "text_regex", "path": "notes.md", "pattern": r"^# Memo$"}, 1.0),
        ({"type": "text_regex", "path": "notes.md", "pattern": "TODO", "must_match": False}, 1.0),
        ({"type": "command", "argv": ["python3", "-c", "import sys; sys.exit(0)"]}, 1.0),
        ({"type": "command", "argv": ["python3", "-c", "import sys; sys.exit(3)"]}, 0.0),
        ({"type": "json_value", "path": "out.json", "pointer": "/total", "expected": 99}, 0.0),
        ({"type": "json_value", "path": "missing.json", "pointer": "/x", "expected": 1}, 0.0),
        ({"type": "row_count", "path": "table.csv", "min": 5}, 0.0),
    ],
)
def test_check_types_score_the_workspace(
    check: dict[str, Any], expected: float, workspace: Path, tests_dir: Path
) -> None:
    from coworkgym.verifier.engine import CheckFailure

    try:
        score = run(check, workspace, tests_dir)
    except CheckFailure:
        score = 0.0
    assert score == expected


def test_aggregate_gives_partial_credit_per_group(workspace: Path, tests_dir: Path) -> None:
    (workspace / "table.csv").write_text("region,amount\nNorth,10.5\nSouth,99\n")
    check = {
        "type": "aggregate",
        "path": "table.csv",
        "key_column": "region",
        "value_column": "amount",
        "source": {
            "path": "inputs/sales.csv",
            "op": "sum",
            "value": "amount",
            "group_by": "region",
        },
    }
    assert run(check, workspace, tests_dir) == 0.5


def test_inputs_unmodified_detects_edits_and_deletions(workspace: Path, tests_dir: Path) -> None:
    digest = hashlib.sha256((workspace / "table.csv").read_bytes()).hexdigest()
    check = {"type": "inputs_unmodified", "files": {"table.csv": digest}}
    assert run(check, workspace, tests_dir) == 1.0
    (workspace / "table.csv").write_text("tampered")
    with pytest.raises(Exception, match="modified"):
        run(check, workspace, tests_dir)


def test_trajectory_checks_skip_without_a_trajectory_and_judge_with_one(
    workspace: Path, tests_dir: Path
) -> None:
    claimed = {"type": "claimed_files_exist"}
    result = CHECKS["claimed_files_exist"](claimed, Context(workspace, tests_dir, None))
    assert result.skipped
    good = {"claimed_files": ["out.json"], "tool_calls": [{"name": "shell"}]}
    assert run(claimed, workspace, tests_dir, good) == 1.0
    lying = {"claimed_files": ["final_report.pdf"]}
    with pytest.raises(Exception, match="do not exist"):
        run(claimed, workspace, tests_dir, lying)
    forbidden = {"type": "forbidden_tool", "tools": ["web_search"]}
    with pytest.raises(Exception, match="forbidden"):
        run(forbidden, workspace, tests_dir, {"steps": [{"tool_calls": [{"name": "web_search"}]}]})


def test_custom_script_is_the_escape_hatch_and_its_crash_is_invalid(
    workspace: Path, tests_dir: Path
) -> None:
    (tests_dir / "ok.py").write_text('print(\'{"score": 0.75, "evidence": "fine"}\')')
    (tests_dir / "crash.py").write_text("raise SystemExit('boom')")
    spec = {
        "components": [
            {"id": "c", "weight": 1, "check": {"type": "custom_script", "script": "ok.py"}}
        ]
    }
    assert verify(spec, workspace, tests_dir).reward == 0.75
    spec["components"][0]["check"]["script"] = "crash.py"
    report = verify(spec, workspace, tests_dir)
    assert report.status == "invalid" and report.reward is None


def test_combined_reward_is_a_weighted_geometric_mean_capped_by_red_lines() -> None:
    scoring = Scoring(code_weight=0.7, rubric_weight=0.3, red_line_cap=0.0)
    assert combine(0.8, None, 0, scoring) == 0.8
    assert combine(0.0, 0.9, 0, scoring) == 0.0
    assert combine(0.9, 0.0, 0, scoring) == 0.0
    assert combine(1.0, 1.0, 0, scoring) == 1.0
    assert combine(0.64, 0.64 ** (1 / 1), 0, scoring) == pytest.approx(0.64)
    assert combine(0.5, 1.0, 0, scoring) == pytest.approx(0.5**0.7, abs=1e-6)
    assert combine(1.0, 1.0, 1, scoring) == 0.0
    assert combine(1.0, 1.0, 1, Scoring(red_line_cap=0.2)) == 0.2


def test_weights_are_normalized_and_rubric_enters_when_judged(
    workspace: Path, tests_dir: Path
) -> None:
    spec = {
        "components": [
            {"id": "a", "weight": 3, "check": {"type": "file_exists", "path": "out.json"}},
            {"id": "b", "weight": 1, "check": {"type": "file_exists", "path": "nope.json"}},
        ],
        "rubric": [{"id": "clear", "weight": 1, "criterion": "The memo is clear and brief."}],
    }
    unjudged = verify(spec, workspace, tests_dir)
    assert unjudged.reward == 0.75 and unjudged.rubric_score is None
    judged = verify(spec, workspace, tests_dir, rubric_scores={"clear": 0.5})
    assert judged.reward == pytest.approx(0.75**0.7 * 0.5**0.3, abs=1e-6)
    flat = judged.reward_json()
    assert set(flat) >= {"reward", "a", "b", "code_score", "rubric_score"}


def test_engine_cli_writes_flat_reward_and_details_and_no_reward_when_invalid(
    workspace: Path, tests_dir: Path, tmp_path: Path
) -> None:
    spec = VerifierSpec.model_validate(
        {
            "components": [
                {
                    "id": "total",
                    "weight": 1,
                    "check": {
                        "type": "json_value",
                        "path": "out.json",
                        "pointer": "/total",
                        "expected": 1234.5,
                    },
                }
            ]
        }
    )
    (tests_dir / "verifier.json").write_text(json.dumps(spec.engine_dict()))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.txt").write_text("1.0")  # stale: must not survive
    assert (
        engine_main(
            [
                "--spec",
                str(tests_dir / "verifier.json"),
                "--workspace",
                str(workspace),
                "--out",
                str(logs),
            ]
        )
        == 0
    )
    assert json.loads((logs / "reward.json").read_text()) == {
        "reward": 1.0,
        "total": 1.0,
        "code_score": 1.0,
    }
    assert not (logs / "reward.txt").exists()
    (tests_dir / "verifier.json").write_text("{not json")
    assert (
        engine_main(
            [
                "--spec",
                str(tests_dir / "verifier.json"),
                "--workspace",
                str(workspace),
                "--out",
                str(logs),
            ]
        )
        == 2
    )
    assert not (logs / "reward.json").exists()
    assert json.loads((logs / "details.json").read_text())["status"] == "invalid"


def test_spec_validation_names_the_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        VerifierSpec.model_validate(
            {
                "components": [
                    {"id": "x", "weight": 1, "check": {"type": "row_count", "path": "a.csv"}}
                ]
            }
        )
    assert "components.0.check.row_count" in str(err.value)
    assert "set 'equals', 'min' or 'max'" in str(err.value)

"""Partial work (issue 24.3), the parts that need no sandbox: the free-text blanking, the
stale-state plans, the probes' bars, gates in the verifier engine and in the procedural
verifiers, and what the LLM Builder's submit refuses."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from coworkgym.detector.defects import CATALOGUE, DefectCode
from coworkgym.detector.mutations import blank_free_text, is_free_text
from coworkgym.detector.partial_work import (
    PARTIAL_WORK_BOUND,
    blank_rungs,
    missing_rungs,
    rubric_over,
    stale_plans,
    stale_rungs,
)
from coworkgym.families.common import SHAPE_CHECKS, gated
from coworkgym.llm import prompts
from coworkgym.llm.layout import LayoutError, export_builder, load_builder
from coworkgym.package.cowork import Artifact, ArtifactGraph, TurnPatch
from coworkgym.verifier.engine import verify
from coworkgym.verifier.spec import VerifierSpec
from tests.support.builders import environment_spec, good_package, role_outputs


# ---- blank free text --------------------------------------------------------------------
def test_a_reason_and_prose_are_blanked_but_names_numbers_and_ids_stay(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    summary = {
        "largest_source": "Fossil Fuels",
        "total": 868187,
        "reason": "Fossil Fuels generated the most.",
        "findings": [{"id": "F-1", "explanation": "an off-by-one in the band loop"}],
    }
    path.write_text(json.dumps(summary))
    assert blank_free_text(path) == 2
    blanked = json.loads(path.read_text())
    assert blanked["reason"] == "" and blanked["findings"][0]["explanation"] == ""
    assert blanked["largest_source"] == "Fossil Fuels" and blanked["total"] == 868187
    assert blanked["findings"][0]["id"] == "F-1"


def test_a_table_loses_its_prose_column_only(tmp_path: Path) -> None:
    path = tmp_path / "triage.csv"
    rows = [
        ["thread", "category", "why"],
        ["t1", "billing", "asks for a refund of the March invoice"],
        ["t2", "support", "cannot log in since the update"],
    ]
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert blank_free_text(path) == 2
    table = list(csv.reader(io.StringIO(path.read_text())))
    assert table == [rows[0], ["t1", "billing", ""], ["t2", "support", ""]]


def test_a_document_keeps_headings_labels_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "memo.md"
    path.write_text(
        "# Memo\n\nDate: 2024-03-01\n| a | b |\n"
        "We agreed to move the launch to April because the vendor is late.\n"
    )
    assert blank_free_text(path) == 1
    assert path.read_text() == "# Memo\n\nDate: 2024-03-01\n| a | b |\n\n"


def test_what_counts_as_free_text() -> None:
    assert is_free_text("needs a reply today", "reason")  # named like prose
    assert is_free_text("the vendor is late again this week")  # reads as a sentence
    assert not is_free_text("Fossil Fuels") and not is_free_text("2024-03-01", "reason")
    assert blank_free_text(Path(__file__).parent / "no-such-file.json") == 0


# ---- the states and their bars ----------------------------------------------------------
def test_a_three_turn_package_gets_every_kind_of_stale_state() -> None:
    pkg = good_package("weather_report", turns=3, seed=2)
    kinds = {p.turn: p.kind for p in pkg.patches}
    assert kinds == {1: "requirement_changed", 2: "input_replaced"}
    plans = {p.label: p for p in stale_plans(pkg)}
    assert list(plans) == [
        "turn-1-on-ignored",
        "turn-1-requirement-unapplied",
        "turn-2-on-ignored",
        "turn-2-new-input-unused",
    ]
    assert not plans["turn-1-on-ignored"].solve
    assert plans["turn-1-requirement-unapplied"].solve_as == 0
    assert plans["turn-2-new-input-unused"].held_back == 2
    assert stale_plans(good_package("weather_report", turns=1)) == []


def test_the_bars_say_which_code_a_reward_earns() -> None:
    assert PARTIAL_WORK_BOUND == 0.5
    passing, stale = stale_rungs(0.99)
    assert passing.code == DefectCode.ACCEPTS_STALE_RESULT and passing.reached(0.99)
    assert stale.code == DefectCode.PARTIAL_CREDIT_STALE
    assert stale.reached(0.51) and not stale.reached(0.5)  # the bound itself is allowed
    assert [r.code for r in missing_rungs(0.99, None)] == [DefectCode.ACCEPTS_MISSING_ARTIFACT]
    assert missing_rungs(0.99, 0.5)[1].code == DefectCode.PARTIAL_CREDIT_MISSING
    (blank,) = blank_rungs(0.99)
    assert blank.reached(0.99) and not blank.reached(0.98)


def test_the_new_codes_are_routed_to_the_verifier_constructor() -> None:
    for code in (
        DefectCode.PARTIAL_CREDIT_STALE,
        DefectCode.PARTIAL_CREDIT_MISSING,
        DefectCode.ACCEPTS_BLANK_TEXT,
        DefectCode.RUBRIC_UNJUDGED,
    ):
        assert CATALOGUE[code][0] == "verifier"
        assert f"- {code}: (verifier)" in prompts.review_system()


def test_the_rubric_items_that_read_a_file() -> None:
    pkg = good_package("code_review", turns=1)
    assert rubric_over(pkg, ["review.json"]) == ["actionable_review"]
    assert rubric_over(pkg, ["elsewhere.json"]) == []


# ---- gates ------------------------------------------------------------------------------
def gate_spec(gate: bool, scale: float = 0.5) -> dict[str, object]:
    def value(id: str, expected: object, weight: float) -> dict[str, object]:
        check = {"type": "json_value", "path": "out.json", "pointer": f"/{id}"}
        return {"id": id, "weight": weight, "gate": gate, "check": {**check, "expected": expected}}

    components = [value("total", 10, 3), value("share", 0.5, 1)]
    return {"components": components, "scoring": {"gate_scale": scale}}


@pytest.mark.parametrize(
    ("gate", "scale", "reward", "short"),
    [(False, 0.5, 0.75, []), (True, 0.5, 0.375, ["share"]), (True, 0.2, 0.15, ["share"])],
)
def test_a_gate_below_one_scales_the_reward(
    tmp_path: Path, gate: bool, scale: float, reward: float, short: list[str]
) -> None:
    (tmp_path / "out.json").write_text(json.dumps({"total": 10, "share": 0.4}))
    report = verify(gate_spec(gate, scale), tmp_path, tmp_path)
    assert report.code_score == 0.75  # the components' weighted mean is untouched
    assert report.reward == reward and report.gates_short == short
    (tmp_path / "out.json").write_text(json.dumps({"total": 10, "share": 0.5}))
    assert verify(gate_spec(gate, scale), tmp_path, tmp_path).reward == 1.0


def test_procedural_verifiers_gate_their_content_checks_not_their_shape_checks() -> None:
    for family in ("weather_report", "lead_cleanup", "fix_failing_function"):
        spec = role_outputs(family, turns=3, seed=2)[1].spec
        assert all(c.gate == (c.check.type not in SHAPE_CHECKS) for c in spec.components)
        assert any(c.gate for c in spec.components)
    plain = VerifierSpec.model_validate(gate_spec(False))
    assert [c.gate for c in gated(plain).components] == [True, True]


# ---- what the LLM Builder's submit refuses ------------------------------------------------
def refused(root: Path, turns: int) -> str:
    with pytest.raises(LayoutError) as caught:
        load_builder(root, environment_spec(turns=turns), iteration=0)
    return "\n".join(caught.value.problems)


def test_submit_refuses_a_declared_output_left_in_s0(tmp_path: Path) -> None:
    built, _ = role_outputs(turns=1)
    export_builder(built, tmp_path)
    (tmp_path / "workspace/summary.json").write_text("{}")  # even an empty start of one
    found = refused(tmp_path, turns=1)
    assert "workspace/summary.json: the declared output summary.json is already in s0" in found
    assert "report.xlsx" not in found


def test_an_output_edited_in_place_may_sit_in_s0(tmp_path: Path) -> None:
    built, _ = role_outputs("fix_failing_function", turns=1)
    assert [a.path for a in built.artifacts.outputs if a.in_place] == ["stats_utils.py"]
    export_builder(built, tmp_path)
    spec = environment_spec("fix_failing_function", turns=1)
    assert load_builder(tmp_path, spec, iteration=0).workspace == built.workspace
    with pytest.raises(ValidationError, match="only an output is edited in place"):
        Artifact(path="data.csv", role="input", format="csv", in_place=True)


def test_submit_refuses_an_invalidates_list_that_misses_a_dependent_output(
    tmp_path: Path,
) -> None:
    built, _ = role_outputs(turns=3, seed=2)
    export_builder(built, tmp_path)
    path = tmp_path / "patches/turn-02/patch.json"
    patch = TurnPatch.model_validate_json(path.read_text())
    assert patch.kind == "input_replaced" and patch.invalidates == ["report.xlsx", "summary.json"]
    path.write_text(patch.model_copy(update={"invalidates": ["report.xlsx"]}).model_dump_json())
    found = refused(tmp_path, turns=3)
    assert "patches/turn-02/patch.json: invalidates: misses summary.json" in found
    assert "from data/weather.csv" in found and "turn-01" not in found


def test_dependents_are_followed_through_intermediate_artifacts() -> None:
    graph = ArtifactGraph(
        artifacts=[
            Artifact(path="raw.csv", role="input", format="csv"),
            Artifact(path="clean.csv", role="output", format="csv", depends_on=["raw.csv"]),
            Artifact(path="chart.json", role="output", format="json", depends_on=["clean.csv"]),
        ]
    )
    patch = TurnPatch.model_validate(
        {
            "turn": 1,
            "trigger": {"kind": "after_agent_turn", "agent_turn": 1},
            "message": "new raw data",
            "kind": "input_replaced",
            "updates": [{"op": "write", "path": "raw.csv", "source": "raw.csv"}],
            "invalidates": ["clean.csv"],
        }
    )
    assert graph.unlisted_invalidations(patch) == ["chart.json"]


# ---- what the prompts tell the roles ------------------------------------------------------
def test_the_verifier_prompt_says_where_scripts_go_how_values_compare_and_how_to_gate() -> None:
    system = prompts.verifier_system()
    for promise in (
        '"script": "checks/reasons.py"',  # where a custom script goes and how it is named
        "argv[1]",
        "collapsing runs of whitespace and ignoring case",  # strings
        "the same length and order",  # lists
        '"gate": true',
        'workspace: "/app/stale"',  # scoring a failure state it built itself
        "above 0.5",
    ):
        assert promise in system, promise


def test_the_builder_prompt_says_what_submit_refuses() -> None:
    system = prompts.builder_system()
    assert '"in_place": true' in system and "refuses a declared output" in system
    assert "refuses a patch that misses one" in system

"""Specs the models refuse: the same cases the CRD refuses (tests/testbed/test_api_validation.py
applies them to a real API server), with messages that name the field. Also the paths that
turn a refused spec into a sentence: the CLI (before any work), a stage Job, the operator."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkgym.package.errors import PackageError
from coworkgym.roles import job
from coworkgym.roles.base import RoleError
from coworkgym.spec import (
    EnvironmentSpec,
    parse_spec_document,
    registered_families,
    served_problems,
)
from coworkgym.taxonomy import load_taxonomy, rule_message
from tests.support.bad_specs import (
    BAD_SPECS,
    GOOD,
    RULE_BREAKERS,
    BadSpec,
    labels,
    manifest_with,
)

ROOT = Path(__file__).resolve().parents[2]


def problems_of(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(PackageError) as caught:
        parse_spec_document(doc, "env.yaml")
    return [p.removeprefix("env.yaml: ") for p in caught.value.problems]


def test_the_good_manifest_is_accepted() -> None:
    named = parse_spec_document(copy.deepcopy(GOOD), "env.yaml")
    assert named.name == "api-validation" and named.spec.task.family == "ledger_reconciliation"


@pytest.mark.parametrize("case", BAD_SPECS, ids=[c.id for c in BAD_SPECS])
def test_each_bad_spec_is_refused_naming_its_field(case: BadSpec) -> None:
    problems = problems_of(manifest_with(case.change))
    assert any(p.startswith(f"{case.field}: ") for p in problems), problems
    assert any(case.says in p for p in problems), problems


def test_an_unknown_family_lists_the_registered_ones() -> None:
    [problem] = problems_of(manifest_with({"task": {"family": "cooking"}}))
    assert problem.startswith("spec.task.family: 'cooking' is not a registered task family")
    assert all(name in problem for name in registered_families())


def test_every_problem_is_reported_at_once() -> None:
    change = {
        "task": {
            "family": "cooking",
            "labels": {"capabilities": ["juggling"], "scenario": "cooking/recipes/dessert"},
        },
        "release": {"uri": "/tmp/envs"},
    }
    fields = [p.split(": ", 1)[0] for p in problems_of(manifest_with(change))]
    assert fields == [
        "spec.task.labels.scenario",
        "spec.task.labels.capabilities[0]",
        "spec.task.family",
        "spec.release.uri",
    ]


def test_a_bare_spec_names_fields_without_the_spec_prefix() -> None:
    bare = manifest_with({"task": {"labels": {"capabilities": ["juggling"]}}})["spec"]
    [problem] = problems_of(bare)
    assert problem.startswith("task.labels.capabilities[0]: 'juggling' is not a known capability")


def test_messages_are_sentences_not_pydantic_reprs() -> None:
    for case in BAD_SPECS:
        for problem in problems_of(manifest_with(case.change)):
            assert "[type=" not in problem and "validation error" not in problem
            assert "Value error," not in problem and "input_value" not in problem


@pytest.mark.parametrize("rule", [r.id for r in load_taxonomy().rules])
def test_a_broken_rule_reads_as_the_crd_says_it(rule: str) -> None:
    """The CLI's message for a broken rule is the CEL rule's message, word for word."""
    [found] = [r for r in load_taxonomy().rules if r.id == rule]
    field, message = rule_message(found)
    wire = {"user_role": "userRole"}.get(field, field)
    [problem] = problems_of(manifest_with(RULE_BREAKERS[rule]))
    assert problem == f"spec.task.labels.{wire}: {message}"


def test_sampled_specs_are_all_valid() -> None:
    from coworkgym.synth import sampled_specs

    named = sampled_specs(60, seed=3, max_turns=3)
    assert len(named) == 60  # each one passed EnvironmentSpec's validation


# --- the CLI refuses before doing any work ---------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task": {"family": "cooking"}}, "spec.task.family"),
        (labels(capabilities=["juggling"]), "spec.task.labels.capabilities[0]"),
        (labels(scenario="cooking/recipes/dessert"), "spec.task.labels.scenario"),
    ],
    ids=["unknown-family", "juggling", "dessert"],
)
def test_synth_refuses_a_bad_spec_before_any_work(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump(manifest_with(change)))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym", "synth", str(spec_file), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    text = " ".join((done.stdout + done.stderr).split())  # rich wraps long lines
    assert done.returncode == 2, text
    assert "invalid input" in text and f"{spec_file}: {field}:" in text
    assert not out.exists()  # nothing was built, nothing was published


# --- a stage Job: a spec error is the user's, never retried ------------------------------


def test_a_stage_given_an_invalid_spec_fails_without_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = manifest_with({"task": {"family": "cooking"}})["spec"]
    payload = {"name": "env", "spec": spec, "iteration": 0, "feedback": []}
    with pytest.raises(RoleError) as caught:
        job.run_stage("builder", payload)
    assert caught.value.retryable is False
    assert str(caught.value).startswith("the spec is invalid: spec.task.family: 'cooking'")
    log = tmp_path / "termination-log"
    monkeypatch.setenv("COWORKGYM_STAGE_INPUT", json.dumps(payload))
    monkeypatch.setenv("COWORKGYM_TERMINATION_LOG", str(log))
    monkeypatch.setenv("COWORKGYM_BUILDER_DIR", str(tmp_path / "builder"))
    assert job.main(["builder"]) == 1
    result = json.loads(log.read_text())
    assert result["retryable"] is False and "KeyError" not in result["error"]
    assert result["error"].startswith("the spec is invalid: spec.task.family:")


def test_the_default_spec_round_trips_through_the_wire() -> None:
    spec = EnvironmentSpec.model_validate(GOOD["spec"])
    assert EnvironmentSpec.model_validate(spec.to_wire()) == spec


# --- the operator: a spec the schema let through is Failed, with a sentence --------------


def test_the_operator_marks_an_invalid_spec_failed_with_a_sentence() -> None:
    from coworkgym_operator.core.settings import OperatorSettings
    from coworkgym_operator.environment.reconcile.loop import Observed, reconcile

    env = {
        **manifest_with({"task": {"family": "cooking"}}),
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
        "status": {},
    }
    plan = reconcile(env, Observed(), OperatorSettings())
    assert plan.status["phase"] == "Failed" and plan.create == []
    message = plan.status["message"]
    assert message.startswith("invalid spec: spec.task.family: 'cooking' is not a registered")
    assert "validation error" not in message and "[type=" not in message
    [failed] = [c for c in plan.status["conditions"] if c["type"] == "Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "InvalidSpec")


# --- labels no procedural family serves: refused by the CLI before work -----------------

UNSERVED = labels(
    capabilities=["file_management"],
    scenario="healthcare/records/billing_codes",
    userRole="analyst",
    deliverables=["csv"],
    modality=["files"],
    safety=[],
)
UNSERVED["task"]["family"] = None  # no family named: none of them serves these labels


def test_labels_no_family_serves_are_named_for_a_procedural_builder() -> None:
    spec = parse_spec_document(manifest_with(UNSERVED), "env.yaml").spec
    [problem] = served_problems(spec)
    assert problem.startswith("spec.task.labels.scenario 'healthcare/records/billing_codes'")
    assert "no procedural family serves them" in problem
    llm = {"backends": {"builder": {"kind": "llm", "model": "m", "baseUrl": "http://gw/v1"}}}
    spec = parse_spec_document(manifest_with({**UNSERVED, **llm}), "env.yaml").spec
    assert served_problems(spec) == []  # an LLM Builder may build any cell


def test_a_family_that_does_not_serve_the_labels_is_named() -> None:
    change = {"task": {"family": "weather_report", "labels": UNSERVED["task"]["labels"]}}
    spec = parse_spec_document(manifest_with(change), "env.yaml").spec
    [problem] = served_problems(spec)
    assert problem.startswith("spec.task.family 'weather_report' does not serve these labels")


def test_the_examples_and_sampled_specs_are_served() -> None:
    from coworkgym.spec import load_specs
    from coworkgym.synth import sampled_specs

    named = [*load_specs(ROOT / "examples" / "specs"), *sampled_specs(40, seed=9, max_turns=3)]
    assert named and all(served_problems(n.spec) == [] for n in named)
    assert served_problems(EnvironmentSpec.model_validate(GOOD["spec"])) == []


def test_synth_refuses_unserved_labels_before_any_work(tmp_path: Path) -> None:
    spec_file = tmp_path / "unserved.yaml"
    spec_file.write_text(yaml.safe_dump(manifest_with(UNSERVED, name="unserved")))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym", "synth", str(spec_file), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, text
    assert "unserved: spec.task.labels.scenario" in text and not out.exists()

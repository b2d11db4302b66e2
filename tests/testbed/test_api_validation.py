"""The API server refuses bad CoworkEnvironments at the door (no operator, no node): every
case of tests/support/bad_specs.py through a real `kubectl apply`, with a message naming the
field, the same words as the CLI where the CRD carries them (CEL rules), and nothing in the
sandbox defaulted by the server. `kubectl explain` has a description for every field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coworkgym.package.errors import PackageError
from coworkgym.spec import parse_spec_document
from coworkgym.synth import sampled_specs
from coworkgym_operator.environment.api import crd as crd_module
from coworkgym_testbed.testbed import Testbed
from tests.support.bad_specs import BAD_SPECS, GOOD, BadSpec, manifest_with

pytestmark = pytest.mark.testbed


def apply(testbed: Testbed, ns: str, doc: dict[str, Any], *extra: str) -> Any:
    return testbed.kubectl("apply", "-n", ns, *extra, "-f", "-", input=json.dumps(doc), check=False)


def cli_problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(PackageError) as caught:
        parse_spec_document(doc, "env.yaml")
    return [p.removeprefix("env.yaml: ") for p in caught.value.problems]


@pytest.fixture
def ns(testbed: Testbed, crd: None, testbed_namespace: str) -> str:
    return testbed_namespace


def test_the_good_manifest_is_created(testbed: Testbed, ns: str) -> None:
    done = apply(testbed, ns, GOOD)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("case", BAD_SPECS, ids=[c.id for c in BAD_SPECS])
def test_each_bad_spec_is_refused_naming_its_field(
    testbed: Testbed, ns: str, case: BadSpec
) -> None:
    doc = manifest_with(case.change, name=f"bad-{case.id}")
    done = apply(testbed, ns, doc)
    assert done.returncode != 0, f"{case.id} was accepted"
    assert f"{case.api_field}: " in done.stderr, done.stderr
    assert case.api_says in done.stderr, done.stderr
    got = testbed.kubectl("get", "cwe", f"bad-{case.id}", "-n", ns, check=False)
    assert got.returncode != 0  # nothing was stored


@pytest.mark.parametrize(
    "case",
    [c for c in BAD_SPECS if c.api_says == c.says or c.id.startswith("rule-")],
    ids=lambda c: c.id,
)
def test_cel_refusals_say_what_the_cli_says(testbed: Testbed, ns: str, case: BadSpec) -> None:
    """Where the CRD carries the message (CEL rules), it is the CLI's, word for word."""
    [problem] = cli_problems(manifest_with(case.change))
    field, message = problem.split(": ", 1)
    done = apply(testbed, ns, manifest_with(case.change, name=f"same-{case.id}"))
    assert done.returncode != 0
    assert field == case.api_field and f"{field}: " in done.stderr
    assert message in done.stderr, f"API server: {done.stderr}\nCLI: {message}"


def test_the_samplers_specs_all_pass_the_crds_rules(testbed: Testbed, ns: str) -> None:
    """The CEL rules agree with the Python ones on valid labels too: what the sampler
    draws (validated by the models) is accepted by the API server."""
    items = [
        {
            "apiVersion": "coworkgym.dev/v1alpha1",
            "kind": "CoworkEnvironment",
            "metadata": {"name": f"sampled-{i}"},
            "spec": named.spec.to_wire(),
        }
        for i, named in enumerate(sampled_specs(48, seed=5, max_turns=3))
    ]
    done = apply(
        testbed, ns, {"apiVersion": "v1", "kind": "List", "items": items}, "--dry-run=server"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("created (server dry run)") == len(items)


def test_setting_one_sandbox_field_defaults_no_other(testbed: Testbed, ns: str) -> None:
    """The API server must not fill in an image (or resources) over the chart's."""
    doc = manifest_with({"sandbox": {"nodeSelector": {"pool": "sandbox"}}}, name="only-selector")
    assert apply(testbed, ns, doc).returncode == 0
    stored = json.loads(
        testbed.kubectl("get", "cwe", "only-selector", "-n", ns, "-o", "json").stdout
    )
    assert stored["spec"]["sandbox"] == {"nodeSelector": {"pool": "sandbox"}}
    doc = manifest_with({"sandbox": {"resources": {"cpu": "2"}}}, name="only-cpu")
    assert apply(testbed, ns, doc).returncode == 0
    stored = json.loads(testbed.kubectl("get", "cwe", "only-cpu", "-n", ns, "-o", "json").stdout)
    assert stored["spec"]["sandbox"] == {"resources": {"cpu": "2"}}


def test_the_label_defaults_are_filled_in_for_the_rules(testbed: Testbed, ns: str) -> None:
    doc = manifest_with({}, name="defaults")
    labels = doc["spec"]["task"]["labels"]
    for name in ("difficulty", "userRole", "deliverables", "modality", "safety"):
        del labels[name]
    assert apply(testbed, ns, doc).returncode == 0
    stored = json.loads(testbed.kubectl("get", "cwe", "defaults", "-n", ns, "-o", "json").stdout)
    assert stored["spec"]["task"]["labels"] == {
        "capabilities": ["reconciliation"],
        "scenario": "finance/accounting/reconciliation",
        "difficulty": "medium",
        "userRole": "analyst",
        "deliverables": ["xlsx"],
        "modality": ["tabular"],
        "safety": [],
    }


# --- kubectl explain and kubectl get ------------------------------------------------------


def object_paths(node: dict[str, Any], path: str) -> list[str]:
    """Every object-valued field: explaining one shows its fields and their descriptions."""
    found = [path]
    for name, child in node.get("properties", {}).items():
        target = child.get("items", child)
        if "properties" in target:
            found += object_paths(target, f"{path}.{name}")
    return found


def test_kubectl_explain_describes_every_field_of_the_spec(testbed: Testbed, crd: None) -> None:
    schema = crd_module.DEFINITION.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    paths = object_paths(schema["properties"]["spec"], "coworkenvironment.spec")
    paths += object_paths(schema["properties"]["status"], "coworkenvironment.status")
    assert "coworkenvironment.spec.sandbox.tolerations" in paths and len(paths) >= 12
    for path in paths:
        text = testbed.kubectl("explain", path).stdout
        assert "<no description>" not in text, f"kubectl explain {path}:\n{text}"
        assert "``" not in text, f"kubectl explain {path}:\n{text}"


def test_kubectl_explain_shows_the_family_enum_and_the_release_rule(
    testbed: Testbed, crd: None
) -> None:
    task = testbed.kubectl("explain", "coworkenvironment.spec.task").stdout
    assert "The task to construct" in task and "labels" in task
    family = testbed.kubectl("explain", "coworkenvironment.spec.task.family").stdout
    assert "ENUM" in family and "weather_report" in family and "ledger_reconciliation" in family
    uri = " ".join(testbed.kubectl("explain", "coworkenvironment.spec.release.uri").stdout.split())
    assert "Only s3:// URIs are accepted" in uri and "local directory" not in uri
    scenario = testbed.kubectl("explain", "coworkenvironment.spec.task.labels.scenario").stdout
    assert "finance/accounting/reconciliation" in scenario


def test_kubectl_get_shows_family_and_message_and_defects_when_wide(
    testbed: Testbed, ns: str
) -> None:
    assert apply(testbed, ns, manifest_with({}, name="columns")).returncode == 0
    plain = testbed.kubectl("get", "cwe", "columns", "-n", ns).stdout.splitlines()[0].split()
    assert plain[:3] == ["NAME", "PHASE", "FAMILY"] and "MESSAGE" in plain
    assert "DEFECTS" not in plain
    wide = testbed.kubectl("get", "cwe", "columns", "-n", ns, "-o", "wide").stdout
    assert "DEFECTS" in wide.splitlines()[0] and "ledger_reconciliation" in wide

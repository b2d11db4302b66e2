"""The generated CRD: enums and CEL rules from the taxonomy, descriptions on every field,
no sandbox defaults that would override the operator's, printer columns, no drift."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkgym.spec import EnvironmentSpec, registered_families
from coworkgym.taxonomy import load_taxonomy, rule_message
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.api import crd
from coworkgym_operator.environment.api.labels import label_rules
from coworkgym_operator.environment.builders import stage_job
from tests.support.builders import environment_spec

ROOT = Path(__file__).resolve().parents[2]
Node = dict[str, Any]


@pytest.fixture(scope="module")
def version() -> Node:
    served: Node = crd.DEFINITION.crd()["spec"]["versions"][0]
    return served


@pytest.fixture(scope="module")
def spec(version: Node) -> Node:
    node: Node = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return node


def at(node: Node, path: str) -> Node:
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def fields(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    """Every property below ``node`` (what `kubectl explain --recursive` lists)."""
    for name, child in node.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from fields(child, f"{path}.{name}")
    if "items" in node:
        yield from fields(node["items"], f"{path}[]")


def test_the_files_on_disk_match_the_models() -> None:
    assert crd.DEFINITION.main(["--check"]) == 0, "run `make generate`"
    copies = [t.read_text() for t in crd.DEFINITION.targets]
    assert copies[0] == copies[1] == crd.DEFINITION.render()


def test_family_is_an_enum_of_the_registered_families(spec: Node) -> None:
    family = at(spec, "task.family")
    assert family["enum"] == registered_families()
    assert "weather_report" in family["enum"] and family["type"] == "string"


@pytest.mark.parametrize(
    ("path", "vocabulary"),
    [
        ("task.labels.capabilities.[]", "capabilities"),
        ("task.labels.userRole", "user_role"),
        ("task.labels.deliverables.[]", "deliverables"),
        ("task.labels.modality.[]", "modality"),
        ("task.labels.safety.[]", "safety"),
        ("task.labels.difficulty", "difficulty"),
    ],
)
def test_labels_are_enums_of_the_taxonomy(spec: Node, path: str, vocabulary: str) -> None:
    assert at(spec, path)["enum"] == load_taxonomy().vocabulary(vocabulary)  # type: ignore[arg-type]


def test_the_scenario_is_an_enum_of_the_leaves(spec: Node) -> None:
    scenario = at(spec, "task.labels.scenario")
    assert scenario["enum"] == load_taxonomy().leaves
    assert "finance/accounting" not in scenario["enum"]  # a prefix is not a leaf


def test_label_lists_are_sets(spec: Node) -> None:
    for name in ("capabilities", "deliverables", "modality", "safety"):
        assert at(spec, f"task.labels.{name}")["x-kubernetes-list-type"] == "set"


def test_every_incompatibility_rule_is_a_cel_rule_with_the_cli_message(spec: Node) -> None:
    generated = at(spec, "task.labels")["x-kubernetes-validations"]
    rules = load_taxonomy().rules
    assert generated == label_rules() and len(generated) == len(rules)
    for rule, cel in zip(rules, generated, strict=True):
        field, message = rule_message(rule)
        assert cel["message"] == message
        assert cel["fieldPath"] == "." + {"user_role": "userRole"}.get(field, field)


def test_cel_strings_stay_bounded_for_the_cost_estimator(spec: Node) -> None:
    labels = at(spec, "task.labels")
    for name in ("capabilities", "deliverables", "modality", "safety"):
        assert labels["properties"][name]["maxItems"] <= 8
        assert labels["properties"][name]["items"]["maxLength"] <= 64
    assert labels["properties"]["scenario"]["maxLength"] <= 160


def test_every_field_has_a_plain_description(version: Node) -> None:
    root = version["schema"]["openAPIV3Schema"]
    for top in ("spec", "status"):
        assert root["properties"][top].get("description"), top
        for path, node in fields(root["properties"][top], top):
            text = node.get("description", "")
            assert text.strip(), f"{path} has no description"
            assert "``" not in text and "\n" not in text, f"{path}: {text!r}"


def test_release_uri_says_what_the_rule_allows(spec: Node) -> None:
    release = at(spec, "release")
    text = release["properties"]["uri"]["description"]
    assert "s3://" in text and "Only s3:// URIs are accepted" in text
    assert "local directory" not in text
    scheme, shape = release["x-kubernetes-validations"]  # s3:// first, then its shape
    assert "startsWith('s3://')" in scheme["rule"] and scheme["fieldPath"] == ".uri"
    assert "matches(" in shape["rule"] and shape["fieldPath"] == ".uri"


def test_nothing_in_the_sandbox_has_a_default(spec: Node) -> None:
    """A default here would be filled in by the API server and win over the chart's
    settings (an image the nodes do not have: ErrImageNeverPull until the stage timeout)."""
    sandbox = at(spec, "sandbox")
    defaulted = [
        path
        for path, node in fields(sandbox, "sandbox")
        if "default" in node and not path.startswith("sandbox.tolerations[]")
    ]
    assert "default" not in sandbox and defaulted == []
    # a toleration's own operator default (Equal) is Kubernetes' own meaning of an unset one
    assert at(sandbox, "tolerations.[].operator")["default"] == "Equal"


def test_a_spec_setting_only_a_node_selector_gets_the_operators_image() -> None:
    settings = OperatorSettings(
        role_image="localhost/cowork-gym/role-sandbox:dev",
        sandbox_defaults=EnvironmentSpec.model_validate(
            {
                "task": environment_spec().task.model_dump(by_alias=True),
                "sandbox": {"resources": {"cpu": "3", "memory": "5Gi"}},
            }
        ).sandbox,
    )
    env_spec = environment_spec(sandbox={"nodeSelector": {"pool": "sandbox"}})
    env = {
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": env_spec.to_wire(),
    }
    pod = stage_job(env, env_spec, "builder", 0, 1, [], settings)["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "localhost/cowork-gym/role-sandbox:dev"
    assert container["resources"]["limits"] == {"cpu": "3", "memory": "5Gi"}
    assert pod["nodeSelector"] == {"pool": "sandbox"}


def test_a_spec_may_still_choose_its_image_and_part_of_its_resources() -> None:
    env_spec = environment_spec(sandbox={"image": "mine:1", "resources": {"memory": "8Gi"}})
    env = {"metadata": {"name": "demo", "namespace": "ns", "uid": "u-1"}, "spec": {}}
    pod = stage_job(env, env_spec, "builder", 0, 1, [], OperatorSettings())["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["image"] == "mine:1"
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "8Gi"}


def test_printer_columns_show_family_and_message_and_defects_when_wide(version: Node) -> None:
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["Family"]["jsonPath"] == ".spec.task.family"
    assert columns["Message"]["jsonPath"] == ".status.message"
    assert columns["Defects"]["jsonPath"] == ".status.defects[*].code"
    assert columns["Defects"]["priority"] == 1  # kubectl get -o wide
    assert all(c.get("priority", 0) == 0 for n, c in columns.items() if n != "Defects")

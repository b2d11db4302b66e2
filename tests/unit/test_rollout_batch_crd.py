"""The RolloutBatch CRD: generated from the models, no drift, the models' rules as CEL with
the models' messages, plain-text descriptions, printer columns; the harness enum matches
the registry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from coworkgym.rollout import engine as _engine  # noqa: F401 - registers every harness
from coworkgym.rollout.harness import harness_names
from coworkgym_operator.rollouts.api import crd as batch_crd
from coworkgym_operator.rollouts.api.types import (
    HARNESSES,
    MANIFEST_NOT_S3,
    ONE_SELECTION,
    OUTPUT_NOT_S3,
    POLICY_NEEDS_ENDPOINT,
    RolloutBatchSpec,
)

Node = dict[str, Any]


def spec_of(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "environments": {"names": ["a"]},
        "policies": [{"harness": "tool-calling", "model": "m", "baseUrl": "http://x/v1"}],
        "output": {"uri": "s3://bucket/out"},
    }
    return {**spec, **overrides}


@pytest.fixture(scope="module")
def version() -> Node:
    served: Node = batch_crd.DEFINITION.crd()["spec"]["versions"][0]
    return served


@pytest.fixture(scope="module")
def spec(version: Node) -> Node:
    node: Node = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return node


def fields(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    for name, child in node.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from fields(child, f"{path}.{name}")
    if "items" in node:
        yield from fields(node["items"], f"{path}[]")


def test_the_files_on_disk_match_the_models() -> None:
    assert batch_crd.DEFINITION.main(["--check"]) == 0, "run `make generate`"
    copies = [t.read_text() for t in batch_crd.DEFINITION.targets]
    assert copies[0] == copies[1] == batch_crd.DEFINITION.render()


def test_the_harness_enum_is_the_registry() -> None:
    from coworkgym.rollout.harness import _REGISTRY

    # the project's own harnesses (tests register scripted ones of their own)
    shipped = [n for n in harness_names() if _REGISTRY[n].__module__.startswith("coworkgym.")]
    assert list(HARNESSES) == shipped, "a harness was added: list it in api/batch.py"


def test_every_spec_and_status_field_reads_like_a_manual(version: Node) -> None:
    root = version["schema"]["openAPIV3Schema"]["properties"]
    missing = [
        path
        for part in ("spec", "status")
        for path, node in fields(root[part], part)
        if not node.get("description") and "items" not in path.rsplit(".", 1)[-1]
    ]
    # list items inherit their list's description; every named field has its own
    assert [m for m in missing if not m.endswith("[]")] == []


def test_cel_messages_are_the_models_own(spec: Node) -> None:
    environments = spec["properties"]["environments"]["x-kubernetes-validations"]
    assert [r["message"] for r in environments] == [ONE_SELECTION, MANIFEST_NOT_S3]
    policy = spec["properties"]["policies"]["items"]["x-kubernetes-validations"]
    assert policy[0]["message"] == POLICY_NEEDS_ENDPOINT
    assert spec["properties"]["output"]["x-kubernetes-validations"][0]["message"] == OUTPUT_NOT_S3
    assert "oldSelf" in spec["x-kubernetes-validations"][0]["rule"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"environments": {}}, ONE_SELECTION),
        ({"environments": {"names": ["a"], "selector": {}}}, ONE_SELECTION),
        ({"environments": {"manifestUri": "/tmp/manifest.jsonl"}}, MANIFEST_NOT_S3),
        ({"policies": [{"harness": "tool-calling", "model": "m"}]}, POLICY_NEEDS_ENDPOINT),
        ({"output": {"uri": "/tmp/out"}}, OUTPUT_NOT_S3),
    ],
)
def test_the_models_refuse_what_the_cel_rules_refuse(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message[:40].replace("(", r"\(")):
        RolloutBatchSpec.model_validate(spec_of(**overrides))


def test_replays_need_no_endpoint_and_the_filter_is_the_cli_settings_model() -> None:
    spec = RolloutBatchSpec.model_validate(
        spec_of(
            policies=[{"harness": "oracle", "model": "oracle"}],
            filter={"minReward": 1.0, "skipRules": ["claim_evidence"]},
        )
    )
    assert spec.filter.min_reward == 1.0 and not spec.filter.applies("claim_evidence")
    assert spec.samples_per_environment == 1 and spec.concurrency == 4


def test_printer_columns_show_progress_at_a_glance(version: Node) -> None:
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["Phase"]["jsonPath"] == ".status.phase"
    assert columns["Done"]["jsonPath"] == ".status.summary"
    assert columns["Kept"]["jsonPath"] == ".status.counts.kept"
    assert columns["Output"].get("priority") == 1  # -o wide
    assert version["subresources"] == {"status": {}}


def test_the_harness_is_an_enum_in_the_crd(spec: Node) -> None:
    harness = spec["properties"]["policies"]["items"]["properties"]["harness"]
    assert harness["enum"] == list(HARNESSES)

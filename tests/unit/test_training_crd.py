"""The TrainingRun CRD: generated from the models, no drift, the models' rules as CEL with
the models' messages, a description on every field, the objective an enum, printer
columns; the models refuse what the CRD refuses, naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from coworkgym_operator.training.api import crd as training_crd
from coworkgym_operator.training.api.types import (
    BATCH_BELOW_WORKERS,
    DATA_NOT_S3,
    DATA_REQUIRED,
    DATA_WITH_ROUNDS,
    MODEL_URI,
    OBJECTIVES,
    ONE_DATA_SOURCE,
    OPD_NEEDS_TEACHER,
    OUTPUT_NOT_S3,
    ROUNDS_NEED_ROLLOUT,
    TrainingRunSpec,
)

Node = dict[str, Any]


def spec_of(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "objective": "sft",
        "model": "s3://models/tiny",
        "data": {"uri": "s3://data/trajectories.jsonl"},
        "output": {"uri": "s3://runs/tiny-sft"},
    }
    return {**spec, **overrides}


@pytest.fixture(scope="module")
def version() -> Node:
    served: Node = training_crd.DEFINITION.crd()["spec"]["versions"][0]
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
    assert training_crd.DEFINITION.main(["--check"]) == 0, "run `make generate`"
    copies = [t.read_text() for t in training_crd.DEFINITION.targets]
    assert copies[0] == copies[1] == training_crd.DEFINITION.render()


def test_every_spec_and_status_field_reads_like_a_manual(version: Node) -> None:
    root = version["schema"]["openAPIV3Schema"]["properties"]
    missing = [
        path
        for part in ("spec", "status")
        for path, node in fields(root[part], part)
        if not node.get("description") and not path.endswith("[]")
    ]
    assert missing == []


def test_the_objective_and_selection_method_are_enums(spec: Node) -> None:
    assert spec["properties"]["objective"]["enum"] == list(OBJECTIVES)
    assert spec["required"] == ["objective", "model", "output"]  # data: CEL, by rounds
    method = spec["properties"]["selection"]["properties"]["method"]
    assert method["enum"] == ["nll", "rsr", "none"]


def test_the_lifecycle_fields_are_there_as_kuberay_names_them(spec: Node) -> None:
    for name in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
                 "suspend", "shutdownAfterJobFinishes"):  # fmt: skip
        assert name in spec["properties"], name


def test_the_cel_rules_carry_the_models_messages(spec: Node) -> None:
    messages = {
        r["message"]
        for _, node in [("spec", spec), *fields(spec, "spec")]
        for r in node.get("x-kubernetes-validations", [])
    }
    for message in (DATA_NOT_S3, MODEL_URI, ONE_DATA_SOURCE, OPD_NEEDS_TEACHER, OUTPUT_NOT_S3,
                    ROUNDS_NEED_ROLLOUT, DATA_REQUIRED, DATA_WITH_ROUNDS,
                    BATCH_BELOW_WORKERS):  # fmt: skip
        assert message in messages


def test_printer_columns(version: Node) -> None:
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["Phase", "Objective", "Progress", "Loss", "Message", "Backend",
                     "Checkpoint", "Age"]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"data": {}}, ONE_DATA_SOURCE),
        ({"data": {"uri": "s3://d/x.jsonl", "rolloutBatch": {"name": "b"}}}, ONE_DATA_SOURCE),
        ({"data": {"uri": "/data/x.jsonl"}}, DATA_NOT_S3),
        ({"model": "Qwen/Qwen3-0.6B"}, MODEL_URI),
        ({"objective": "opd"}, OPD_NEEDS_TEACHER),
        ({"rounds": 2}, ROUNDS_NEED_ROLLOUT),
        ({"data": None}, DATA_REQUIRED),
        (
            {"objective": "grpo", "rounds": 2, "rollout": {"environments": {"names": ["a"]}}},
            DATA_WITH_ROUNDS,
        ),
        ({"output": {"uri": "/out"}}, OUTPUT_NOT_S3),
        ({"objective": "dpo"}, "Input should be 'sft', 'grpo' or 'opd'"),
        ({"hyperparameters": {"batchSize": 1}, "resources": {"workers": 2}}, BATCH_BELOW_WORKERS),
    ],
)
def test_the_models_refuse_with_the_same_message(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        TrainingRunSpec.model_validate(spec_of(**overrides))
    assert message in str(raised.value)


def test_a_full_spec_round_trips() -> None:
    body = spec_of(
        objective="grpo",
        data=None,
        selection={"method": "nll", "keep": 0.7},
        hyperparameters={"learningRate": 2e-5, "maxSteps": 10, "klCoefficient": 0.01},
        resources={"workers": 2, "gpusPerWorker": 1, "memoryPerWorker": "16Gi"},
        rounds=2,
        rollout={"environments": {"names": ["a"]}, "samplesPerEnvironment": 8},
        backoffLimit=2,
        activeDeadlineSeconds=3600,
        ttlSecondsAfterFinished=600,
        suspend=True,
    )
    spec = TrainingRunSpec.model_validate(body)
    assert spec.resources.gpus_per_worker == 1
    wire = spec.to_wire()
    assert wire["hyperparameters"]["klCoefficient"] == 0.01  # type: ignore[index]
    assert TrainingRunSpec.model_validate(wire) == spec


def test_the_chart_example_is_a_valid_training_run() -> None:
    import yaml

    example = training_crd.base.REPO / "charts" / "cowork-gym" / "examples" / "trainingrun.yaml"
    body = yaml.safe_load(example.read_text())
    assert body["kind"] == "TrainingRun"
    spec = TrainingRunSpec.model_validate(body["spec"])
    assert spec.data.rollout_batch is not None and spec.resources.gpus_per_worker == 1

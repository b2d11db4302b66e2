"""The chart's training values on the test-bed's helm: GPU settings reach the operator as
the variables TrainingSettings reads (parsed by the real settings), RayJob rights are
granted only with training.ray auto, and the schema refuses a bad training value."""

from __future__ import annotations

from typing import Any

import pytest

from coworkgym_operator.training.settings import TrainingSettings
from coworkgym_testbed.testbed import Testbed
from tests.testbed.test_chart import CHART, kube_version, one, render  # noqa: F401 - fixture

pytestmark = pytest.mark.testbed

GPU_VALUES = [
    "--set", "training.image=registry.example/cowork-gym/training:1",
    "--set", "training.runtimeClassName=nvidia",
    "--set-json", 'training.nodeSelector={"nvidia.com/gpu.present": "true"}',
    "--set-json", 'training.tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",'
                  ' "effect": "NoSchedule"}]',
    "--set", "training.resources.memory=64Gi",
    "--set", "training.shmSize=16Gi",
]  # fmt: skip


def operator_env(docs: list[Any]) -> dict[str, str]:
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def rules(docs: list[Any]) -> list[dict[str, Any]]:
    role = next(
        d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
        and d["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"
    )
    found: list[dict[str, Any]] = role["rules"]
    return found


def test_gpu_values_reach_the_training_settings(
    testbed: Testbed, kube_version: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    env = operator_env(render(testbed, kube_version, *GPU_VALUES))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = TrainingSettings.from_env()
    assert settings.image == "registry.example/cowork-gym/training:1"
    assert settings.runtime_class_name == "nvidia"
    assert settings.node_selector == {"nvidia.com/gpu.present": "true"}
    assert settings.tolerations == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert (settings.memory, settings.shm_size, settings.cpu) == ("64Gi", "16Gi", "2")
    assert settings.gpu_resource == "nvidia.com/gpu" and settings.ray == "auto"
    assert settings.ttl_seconds_after_finished == 86_400 and settings.host_checkout == ""


def test_rayjob_rights_only_with_ray_auto(testbed: Testbed, kube_version: str) -> None:  # noqa: F811
    def groups(*values: str) -> set[str]:
        return {g for r in rules(render(testbed, kube_version, *values)) for g in r["apiGroups"]}

    auto = rules(render(testbed, kube_version))
    verbs = ["create", "get", "list", "watch", "delete", "deletecollection"]
    assert {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": verbs} in auto
    assert any(r["resources"] == ["trainingruns/status"] for r in auto)
    assert "ray.io" not in groups("--set", "training.ray=off")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("training.ray=always", "at '/training/ray': value must be one of 'auto', 'off'"),
        ("training.resources.memory=lots", "at '/training/resources/memory'"),
        ("training.gpuResource=nvidia.com/gpu", "gpuResource"),  # a misspelt key
    ],
)
def test_the_schema_refuses_bad_training_values(
    testbed: Testbed, kube_version: str, value: str, words: str  # noqa: F811
) -> None:
    done = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version, "--set", value,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert words in done.stderr, done.stderr

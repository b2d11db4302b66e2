"""The TrainingRun controller's writes reach the API paths of their kinds: an on-policy
round's Deployment, Service and RolloutBatch are created, its Deployment and Service
deleted (a RolloutBatch never is, from here), each with the raw answer dropped."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from coworkgym_operator.core.kube import Kube
from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.rounds import (
    round_batch,
    serving_deployment,
    serving_service,
)
from coworkgym_operator.training.kube import TrainingKube
from coworkgym_operator.training.settings import TrainingSettings

RUN = {
    "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1"},
    "spec": {"objective": "grpo", "model": "s3://models/tiny", "rounds": 2,
             "rollout": {"environments": {"names": ["env-a"]}},
             "output": {"uri": "s3://runs/tiny"}},
}  # fmt: skip


class Answer:
    """A raw answer, as the REST layer hands it back (``response``: the urllib3 one the client
    returns for _preload_content=False)."""

    status = 201

    def __init__(self, sent: list[tuple[str, str]]) -> None:
        self.sent = sent
        self.response = self

    def read(self) -> bytes:
        return b"{}"

    def release_conn(self) -> None:
        self.sent.append(("released", ""))


def recording() -> tuple[TrainingKube, list[tuple[str, str]]]:
    api = client.ApiClient()
    sent: list[tuple[str, str]] = []

    def call_api(method: str, url: str, *_: Any, **__: Any) -> Answer:
        sent.append((method, url.split("://", 1)[-1].split("/", 1)[-1]))
        return Answer(sent)

    api.call_api = call_api  # type: ignore[method-assign]
    return TrainingKube(Kube(api), ray_enabled=False), sent


def test_a_rounds_children_are_created_and_deleted_at_their_kinds_paths() -> None:
    tk, sent = recording()
    spec = TrainingRunSpec.model_validate(RUN["spec"])
    settings = TrainingSettings()
    assert tk.create(serving_deployment(RUN, spec, 0, spec.model, settings))
    assert tk.create(serving_service(RUN, 0))
    assert tk.create(round_batch(RUN, spec, 0, 1, "http://10.0.0.9:8000/v1", None, None))
    assert tk.delete("ml", "Deployment", "tiny-serve-r0")
    assert tk.delete("ml", "Service", "tiny-serve-r0")
    assert sent == [
        ("POST", "apis/apps/v1/namespaces/ml/deployments"), ("released", ""),
        ("POST", "api/v1/namespaces/ml/services"), ("released", ""),
        ("POST", "apis/coworkgym.dev/v1alpha1/namespaces/ml/rolloutbatches"), ("released", ""),
        ("DELETE", "apis/apps/v1/namespaces/ml/deployments/tiny-serve-r0"), ("released", ""),
        ("DELETE", "api/v1/namespaces/ml/services/tiny-serve-r0"), ("released", ""),
    ]  # fmt: skip

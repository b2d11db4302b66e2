"""An on-policy round's children as built, and how the controller's reads of them are taken:
the server (a Deployment of one hardened pod that holds the store credentials only when it
fetches from S3, and its Service), the NetworkPolicy that lets only the gateway and the
operator in and only the object store out, the RolloutBatch (a spec the RolloutBatch API
accepts), the round's training Job; each owned by the run and carrying its shard label."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coworkgym_operator.core.pods import PodStart
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.core.sharding import LABEL_SHARD as SHARD_LABEL
from coworkgym_operator.rollouts.api.types import ResolvedEnvironment, RolloutBatchSpec
from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.rounds import (
    round_batch,
    serve_name,
    serving_deployment,
    serving_policy,
    serving_service,
)
from coworkgym_operator.training.builders.run import RoundTraining, training_job
from coworkgym_operator.training.reconcile.observe import batch_seen, serving_seen
from coworkgym_operator.training.settings import TrainingSettings

STORE = OperatorSettings(
    s3_secret="s3-creds", s3_endpoint="http://10.244.0.1:8333", store_cidr="10.244.0.1/32",
    store_port=8333,
)  # fmt: skip
SETTINGS = TrainingSettings(operator=STORE, image="registry.example/training:1")
ENVIRONMENTS = [ResolvedEnvironment(name="env-a", uri="s3://releases/env-a/pkg")]
CHECKPOINT = "s3://runs/tiny/checkpoints/round-000/step-000002"


def run_of(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": "grpo",
        "model": "s3://models/tiny",
        "rounds": 2,
        "rollout": {"environments": {"names": ["env-a"]}, "samplesPerEnvironment": 4,
                    "sampling": {"maxSteps": 6, "temperature": 0.9}, "concurrency": 2},
        "resources": {"cpuPerWorker": "2", "memoryPerWorker": "8Gi"},
        "output": {"uri": "s3://runs/tiny"},
    }  # fmt: skip
    body.update(spec)
    return {
        "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1",
                     "labels": {SHARD_LABEL: "a", "team": "not-inherited"}},
        "spec": body,
    }  # fmt: skip


def spec_of(run: dict[str, Any]) -> TrainingRunSpec:
    return TrainingRunSpec.model_validate(run["spec"])


def owned(manifest: dict[str, Any]) -> None:
    (owner,) = manifest["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainingRun", "tiny", "u-1", True)  # fmt: skip
    labels = manifest["metadata"]["labels"]
    assert labels["coworkgym.dev/trainingrun"] == "tiny" and labels[SHARD_LABEL] == "a"
    assert "team" not in labels


# ---- the server ----------------------------------------------------------------------------
def test_the_server_is_one_hardened_pod_that_fetches_its_weights_and_nothing_more() -> None:
    run = run_of()
    deployment = serving_deployment(run, spec_of(run), 1, CHECKPOINT, SETTINGS)
    owned(deployment)
    assert deployment["metadata"]["name"] == "tiny-serve-r1"
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert spec["minReadySeconds"] > 0  # the Service's endpoint settles before the probe
    selector = spec["selector"]["matchLabels"]
    assert selector == {"coworkgym.dev/trainingrun": "tiny", "coworkgym.dev/step": "serve",
                        "coworkgym.dev/round": "1"}  # fmt: skip
    labels = spec["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items() and labels[SHARD_LABEL] == "a"
    assert (labels["coworkgym.dev/sandbox"], labels["coworkgym.dev/egress"]) == (
        "true", "object-store")  # fmt: skip
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    assert pod["restartPolicy"] == "Always"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]  # no /dev/shm to serve
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["image"] == "registry.example/training:1"
    assert container["command"] == [
        "cowork-gym", "serve-checkpoint", CHECKPOINT, "--host", "0.0.0.0", "--port", "8000",
        "--model-name", "tiny@round-1", "--device", "cpu",
    ]  # fmt: skip
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": "http"}
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]  # its only secret
    assert container["resources"]["limits"] == {"cpu": "2", "memory": "8Gi"}


def test_a_server_of_weights_in_the_image_holds_no_credentials_and_a_gpu_serves_on_cuda() -> None:
    run = run_of(model="/models/tiny", resources={"gpusPerWorker": 1})
    deployment = serving_deployment(run, spec_of(run), 0, "/models/tiny", SETTINGS)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "envFrom" not in container
    assert container["command"][-2:] == ["--device", "cuda"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_service_selects_the_rounds_server_by_a_name_that_starts_with_a_letter() -> None:
    run = run_of()
    service = serving_service(run, 0)
    owned(service)
    deployment = serving_deployment(run, spec_of(run), 0, "s3://models/tiny", SETTINGS)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]
    assert serve_name("7b-grpo", 0) == "tr-7b-grpo-serve-r0"
    assert len(serve_name("x" * 80, 12)) <= 63


def test_only_the_gateway_and_the_operator_reach_the_servers_which_reach_only_the_store() -> None:
    settings = TrainingSettings(
        operator=STORE, gateway_namespace="cowork-gym", operator_namespace="cowork-gym",
        operator_labels={"app.kubernetes.io/component": "operator"},
    )  # fmt: skip
    policy = serving_policy(run_of(), settings)
    owned(policy)
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == {"coworkgym.dev/trainingrun": "tiny",
                                                  "coworkgym.dev/step": "serve"}  # fmt: skip
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = spec["ingress"]
    namespace = {"matchLabels": {"kubernetes.io/metadata.name": "cowork-gym"}}
    assert ingress["from"] == [
        {"podSelector": {"matchLabels": {"app": "llm-gateway"}}, "namespaceSelector": namespace},
        {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "operator"}},
         "namespaceSelector": namespace},
    ]  # fmt: skip
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8000}]
    store = {"ipBlock": {"cidr": "10.244.0.1/32"}}
    assert spec["egress"] == [{"to": [store], "ports": [{"protocol": "TCP", "port": 8333}]}]
    # an operator outside the cluster: only the gateway, in the run's own namespace
    alone = serving_policy(run_of(), SETTINGS)["spec"]["ingress"][0]["from"]
    assert alone == [{"podSelector": {"matchLabels": {"app": "llm-gateway"}}}]


# ---- the RolloutBatch ------------------------------------------------------------------------
def test_the_rounds_batch_is_one_the_rollout_batch_api_accepts() -> None:
    run = run_of()
    batch = round_batch(run, spec_of(run), 1, 1, "http://10.0.0.9:8000/v1", ENVIRONMENTS, None)
    owned(batch)
    assert (batch["apiVersion"], batch["kind"]) == ("coworkgym.dev/v1alpha1", "RolloutBatch")
    assert batch["metadata"]["name"] == "tiny-rollouts-r1"
    assert batch["metadata"]["labels"]["coworkgym.dev/round"] == "1"
    spec = RolloutBatchSpec.model_validate(batch["spec"])
    (policy,) = spec.policies
    assert (policy.harness, policy.model, policy.base_url) == (
        "tool-calling", "tiny@round-1", "http://10.0.0.9:8000/v1")  # fmt: skip
    assert policy.sampling.max_steps == 6 and policy.sampling.temperature == 0.9
    assert spec.environments.names == ["env-a"]
    assert (spec.samples_per_environment, spec.concurrency) == (4, 2)
    assert spec.output.uri == "s3://runs/tiny/rounds/round-001/rollouts"
    again = round_batch(run, spec_of(run), 1, 3, "http://10.0.0.9:8000/v1", None,
                        "s3://synth/manifest.jsonl")  # fmt: skip
    assert again["metadata"]["name"] == "tiny-rollouts-r1-3"
    assert again["spec"]["output"] == {"uri": "s3://runs/tiny/rounds/round-001/rollouts-3"}
    assert again["spec"]["environments"] == {"manifestUri": "s3://synth/manifest.jsonl"}


# ---- the round's training ----------------------------------------------------------------------
def test_the_rounds_training_job_starts_from_the_weights_it_served() -> None:
    run = run_of()
    inputs = RoundTraining(1, CHECKPOINT, "s3://runs/tiny/rounds/round-001/rollouts/kept.jsonl", 2)
    job = training_job(run, spec_of(run), inputs.data_uri, 3, SETTINGS, inputs)
    owned(job)
    assert job["metadata"]["name"] == "tiny-train-r1-2"
    assert job["metadata"]["labels"]["coworkgym.dev/round"] == "1"
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"][SHARD_LABEL] == "a"
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    work = json.loads(env["COWORKGYM_POD_INPUT"])
    assert work["stage"] == {
        "/tmp/train/data": inputs.data_uri,
        "/tmp/train/model": CHECKPOINT,
        "/tmp/train/reference": run["spec"]["model"],
    }
    assert work["config"]["model"] == "/tmp/train/model"
    # the KL reference stays the run's first model; AdamW goes on from the checkpoint's state
    assert work["config"]["reference_model"] == "/tmp/train/reference"
    assert work["config"]["optimizer_state_from"] == "/tmp/train/model"
    assert work["config"]["checkpoint"] == "s3://runs/tiny/checkpoints/round-001"
    assert work["output"] == "s3://runs/tiny/rounds/round-001/train"
    assert work["argv"] == ["cowork-gym", "train", "--config", "/tmp/train/config.json"]


def test_the_rounds_training_config_is_one_the_trainer_accepts() -> None:
    trainer = pytest.importorskip("coworkgym_training.trainer")
    from coworkgym_operator.training.builders.run import train_config

    run = run_of(hyperparameters={"maxSteps": 2})
    config = train_config(spec_of(run), RoundTraining(0, "/models/tiny", "s3://d/kept.jsonl"))
    parsed = trainer.TrainConfig.model_validate(config)
    assert parsed.checkpoint == "s3://runs/tiny/checkpoints/round-000"
    assert parsed.max_steps == 2 and str(parsed.model) == "/models/tiny"
    assert parsed.optimizer_state_from is None  # round 0 starts fresh
    later = train_config(spec_of(run), RoundTraining(1, CHECKPOINT, "s3://d/kept.jsonl"))
    parsed = trainer.TrainConfig.model_validate(later)
    assert str(parsed.optimizer_state_from) == str(parsed.model) == "/tmp/train/model"
    assert str(parsed.reference_model) == "/tmp/train/reference"


# ---- reading what the controller fetched ---------------------------------------------------------
def server_pod(restarts: int = 0, message: str = "", deleting: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "serve", "restartCount": restarts,
                              "state": {"running": {}}}  # fmt: skip
    if message:
        status["lastState"] = {"terminated": {"exitCode": 1, "message": message}}
    meta = {"deletionTimestamp": "2026-12-01T10:00:00Z"} if deleting else {}
    return {"metadata": meta, "status": {"phase": "Running", "containerStatuses": [status]}}


def test_how_a_server_reads() -> None:
    deployment = {"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"},
                  "status": {"availableReplicas": 1}}  # fmt: skip
    service = {"spec": {"clusterIP": "10.0.0.42"}}
    seen = serving_seen("tiny-serve-r0", deployment, service, [server_pod()])
    assert (seen.found, seen.available, seen.cluster_ip) == (True, True, "10.0.0.42")
    assert seen.start == PodStart(started=True, scheduled=True) and seen.restarts == 0
    crashing = server_pod(3, "Traceback (most recent call last):\nFileNotFoundError: no weights")
    old = server_pod(9, "an old attempt's", deleting=True)  # a pod going away does not count
    seen = serving_seen("tiny-serve-r0", {"status": {}}, None, [crashing, old])
    assert (seen.available, seen.cluster_ip, seen.restarts) == (False, None, 3)
    assert seen.last_error == "FileNotFoundError: no weights"
    assert not serving_seen("tiny-serve-r0", None, None, []).found


def test_how_a_batch_reads() -> None:
    batch = {
        "metadata": {"deletionTimestamp": "2026-12-01T10:00:00Z"},
        "status": {"phase": "Succeeded", "outputUri": "s3://o/r",
                   "counts": {"succeeded": 3, "invalid": 1, "kept": 2},
                   "conditions": [{"type": "Complete", "status": "True"},
                                  {"type": "Failed", "status": "False"}]},
    }  # fmt: skip
    seen = batch_seen("tiny-rollouts-r0", batch)
    assert (seen.complete, seen.failed, seen.deleting) == (True, False, True)
    assert (seen.succeeded, seen.invalid, seen.kept, seen.output_uri) == (3, 1, 2, "s3://o/r")
    assert not batch_seen("tiny-rollouts-r0", None).found

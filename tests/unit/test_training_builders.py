"""The TrainingRun's children: the plain Job maps the run's lifecycle fields and the chart's
GPU settings; the RayJob carries workers × GPUs and KubeRay's lifecycle fields; both are
owned by the run and run as the sandbox user without an API token; the settings read
the chart's variables and name a bad one. (An on-policy round's children:
test_training_round_builders.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.rayjob import build_rayjob, rayjob_outcome
from coworkgym_operator.training.builders.run import (
    check_data_job,
    train_config,
    train_plan,
    training_job,
)
from coworkgym_operator.training.settings import TrainingSettings

GPU = TrainingSettings(
    image="registry.example/cowork-gym/training:1",
    node_selector={"nvidia.com/gpu.present": "true"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    runtime_class_name="nvidia",
)


def run_of(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": "sft",
        "model": "s3://models/tiny",
        "data": {"uri": "s3://data/t.jsonl"},
        "output": {"uri": "s3://runs/tiny"},
        "resources": {"workers": 2, "gpusPerWorker": 4, "cpuPerWorker": "8",
                      "memoryPerWorker": "32Gi"},
        "backoffLimit": 3,
        "activeDeadlineSeconds": 7200,
        "ttlSecondsAfterFinished": 300,
    }  # fmt: skip
    body.update(spec)
    return {
        "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1"},
        "spec": body,
        "status": {"dataUri": "s3://data/t.jsonl"},
    }


def spec_of(run: dict[str, Any]) -> TrainingRunSpec:
    return TrainingRunSpec.model_validate(run["spec"])


def test_the_job_maps_the_lifecycle_fields_and_the_gpu_settings() -> None:
    run = run_of()
    job = training_job(run, spec_of(run), "s3://data/t.jsonl", 1, GPU)
    assert job["metadata"]["name"] == "tiny-train-1"
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainingRun", "u-1", True)
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (3, 7200)
    assert spec["ttlSecondsAfterFinished"] == 300
    rule = spec["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [3]
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/cowork-gym/training:1"
    # one pod runs every worker: 2 × (8 CPU, 32Gi, 4 GPUs)
    assert container["resources"]["limits"] == {"cpu": "16", "memory": "64Gi",
                                                "nvidia.com/gpu": "8"}  # fmt: skip
    assert {"name": "shm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert container["command"][-2:] == ["coworkgym_operator.training.pod", "train"]


def test_no_deadline_and_the_operators_ttl_when_the_run_sets_none() -> None:
    run = run_of(activeDeadlineSeconds=None, ttlSecondsAfterFinished=None)
    del run["spec"]["activeDeadlineSeconds"], run["spec"]["ttlSecondsAfterFinished"]
    job = training_job(run, spec_of(run), "s3://d/t.jsonl", 2, TrainingSettings())
    assert "activeDeadlineSeconds" not in job["spec"]
    assert job["spec"]["ttlSecondsAfterFinished"] == TrainingSettings().ttl_seconds_after_finished
    assert job["metadata"]["name"] == "tiny-train-2"


def test_the_trainer_config_spells_every_setting() -> None:
    run = run_of(objective="opd", teacher="s3://models/teacher",
                 selection={"method": "rsr", "keep": 0.5},
                 hyperparameters={"maxSteps": 40, "topK": 20, "batchSize": 4},
                 resources={"workers": 2})  # fmt: skip
    plan = train_plan(spec_of(run), "s3://data/t.jsonl", TrainingSettings())
    assert plan["argv"] == ["cowork-gym", "train", "--config", "/tmp/train/config.json"]
    assert plan["stage"] == {
        "/tmp/train/data": "s3://data/t.jsonl",
        "/tmp/train/model": "s3://models/tiny",
        "/tmp/train/teacher": "s3://models/teacher",
    }
    config = plan["config"]
    assert config["objective"] == "opd" and config["teacher_model"] == "/tmp/train/teacher"
    assert config["model"] == "/tmp/train/model" and config["data"] == ["/tmp/train/data"]
    assert config["checkpoint"] == "s3://runs/tiny/checkpoints"
    assert config["selection"] == {"method": "rsr", "keep": 0.5, "bins": 5}
    assert config["max_steps"] == 40 and config["workers"] == 2 and config["device"] == "cpu"
    assert config["objective_options"] == {"opd": {"top_k": 20}}
    assert plan["output"] == "s3://runs/tiny"


def test_the_trainer_config_is_one_the_trainer_accepts() -> None:
    trainer = pytest.importorskip("coworkgym_training.trainer")
    hyperparameters = {
        "clipEpsilon": 0.1, "klCoefficient": 0.02, "maxSteps": 3, "gradientCheckpointing": True
    }  # fmt: skip
    run = run_of(objective="grpo", model="/models/tiny", hyperparameters=hyperparameters)
    config = train_config(spec_of(run))
    parsed = trainer.TrainConfig.model_validate(config)
    assert parsed.hyperparameters.gradient_checkpointing  # the long-rollout memory saver
    assert parsed.objective_options.grpo.kl_beta == 0.02
    assert parsed.objective_options.grpo.clip_epsilon_high == 0.1
    assert str(parsed.model) == "/models/tiny"  # a path in the image is used as it is


def test_the_test_bed_shortcut_mounts_the_host_checkout_read_only() -> None:
    settings = TrainingSettings(host_checkout="/work/main")
    run = run_of(resources={"workers": 1})
    job = training_job(run, spec_of(run), "s3://d/t.jsonl", 1, settings)
    pod = job["spec"]["template"]["spec"]
    assert {"name": "checkout", "hostPath": {"path": "/work/main", "type": "Directory"}} in pod[
        "volumes"
    ]
    (container,) = pod["containers"]
    assert {"name": "checkout", "mountPath": "/work/main", "readOnly": True} in container[
        "volumeMounts"
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "/work/main/.venv/lib/python3.12/site-packages" in env["PYTHONPATH"].split(":")
    assert '"argv":["python","-c"' in env["COWORKGYM_POD_INPUT"]  # not the venv's script


def test_the_data_check_is_a_fenced_sandbox_pod_with_the_store_credentials() -> None:
    settings = TrainingSettings()
    settings = TrainingSettings(
        operator=settings.operator.__class__(s3_secret="s3-creds", s3_endpoint="http://s3:8333")
    )
    job = check_data_job(run_of(), "s3://data/t.jsonl", settings)
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"]["coworkgym.dev/sandbox"] == "true"
    assert pod["metadata"]["labels"]["coworkgym.dev/egress"] == "object-store"
    (container,) = pod["spec"]["containers"]
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    assert container["command"][-1] == "check-data"


def test_the_rayjob_has_a_worker_per_worker_with_its_gpus_and_the_lifecycle() -> None:
    rayjob = build_rayjob(run_of(suspend=True, shutdownAfterJobFinishes=False), GPU)
    assert (rayjob["apiVersion"], rayjob["kind"]) == ("ray.io/v1", "RayJob")
    assert rayjob["metadata"]["ownerReferences"][0]["kind"] == "TrainingRun"
    spec = rayjob["spec"]
    assert spec["entrypoint"] == "python -m coworkgym_operator.training.pod train"
    assert spec["submissionMode"] == "K8sJobMode"
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (3, 7200)
    assert (spec["ttlSecondsAfterFinished"], spec["suspend"]) == (300, True)
    assert spec["shutdownAfterJobFinishes"] is False
    cluster = spec["rayClusterSpec"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    (group,) = cluster["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    pod = group["template"]["spec"]
    assert pod["nodeSelector"] == GPU.node_selector and pod["runtimeClassName"] == "nvidia"
    (worker,) = pod["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "4"  # per worker, not summed
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in head["env"]}
    assert '"/tmp/train/data":"s3://data/t.jsonl"' in env["COWORKGYM_POD_INPUT"]
    # the pods share no disk: each worker stages the same inputs into its own /tmp first
    (stage,) = pod["initContainers"]
    assert stage["command"] == ["python", "-m", "coworkgym_operator.training.pod", "stage"]
    staged = {e["name"]: e.get("value") for e in stage["env"]}
    assert staged["COWORKGYM_POD_INPUT"] == env["COWORKGYM_POD_INPUT"]
    assert {"name": "tmp", "mountPath": "/tmp"} in stage["volumeMounts"]
    assert "initContainers" not in cluster["headGroupSpec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ({"jobDeploymentStatus": "Initializing"}, "running"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, "running"),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "succeeded"),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, "failed"),
        ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, "failed"),
        ({"jobDeploymentStatus": "Suspended"}, "suspended"),
    ],
)
def test_how_a_rayjobs_status_reads(status: dict[str, Any], outcome: str) -> None:
    assert rayjob_outcome({"status": status})[0] == outcome


def test_the_settings_read_the_charts_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWORKGYM_TRAINING_NODE_SELECTOR", '{"pool": "gpu"}')
    monkeypatch.setenv("COWORKGYM_TRAINING_TOLERATIONS", '[{"key": "gpu", "operator": "Exists"}]')
    monkeypatch.setenv("COWORKGYM_TRAINING_RAY", "off")
    settings = TrainingSettings.from_env()
    assert settings.node_selector == {"pool": "gpu"} and settings.ray == "off"
    monkeypatch.setenv("COWORKGYM_TRAINING_NODE_SELECTOR", "pool=gpu")
    with pytest.raises(ValueError, match="COWORKGYM_TRAINING_NODE_SELECTOR='pool=gpu' is not JSON"):
        TrainingSettings.from_env()
    monkeypatch.delenv("COWORKGYM_TRAINING_NODE_SELECTOR")
    monkeypatch.setenv("COWORKGYM_TRAINING_RAY", "always")
    with pytest.raises(ValueError, match="expected auto or off"):
        TrainingSettings.from_env()
    monkeypatch.setenv("COWORKGYM_TRAINING_RAY", "auto")
    monkeypatch.setenv("COWORKGYM_OPERATOR_SELECTOR", "app.kubernetes.io/name=cowork-gym,"
                       "app.kubernetes.io/component=operator")  # fmt: skip
    monkeypatch.setenv("COWORKGYM_OPERATOR_NAMESPACE", "cowork-gym")
    settings = TrainingSettings.from_env()
    assert settings.operator_labels == {
        "app.kubernetes.io/name": "cowork-gym", "app.kubernetes.io/component": "operator",
    }  # fmt: skip
    assert settings.operator_namespace == "cowork-gym" and settings.gateway_namespace == ""
    monkeypatch.setenv("COWORKGYM_OPERATOR_SELECTOR", "operator")
    with pytest.raises(ValueError, match="COWORKGYM_OPERATOR_SELECTOR='operator': expected"):
        TrainingSettings.from_env()
    monkeypatch.delenv("COWORKGYM_OPERATOR_SELECTOR")


def test_the_fence_and_the_scheduling_deadline_come_from_the_chart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = TrainingSettings.from_env()
    assert defaults.scheduling_deadline_seconds == 900.0
    assert (defaults.dns_labels, defaults.dns_namespace, defaults.dns_cidrs) == (
        {"k8s-app": "kube-dns"}, "kube-system", ())  # fmt: skip
    assert defaults.kuberay_labels == {"app.kubernetes.io/name": "kuberay-operator"}
    monkeypatch.setenv("COWORKGYM_TRAINING_SCHEDULING_DEADLINE_SECONDS", "60")
    monkeypatch.setenv("COWORKGYM_TRAINING_DNS_SELECTOR", "k8s-app=node-local-dns")
    monkeypatch.setenv("COWORKGYM_TRAINING_DNS_NAMESPACE", "dns")
    monkeypatch.setenv("COWORKGYM_TRAINING_DNS_CIDRS", '["10.244.0.1/32"]')
    monkeypatch.setenv("COWORKGYM_TRAINING_KUBERAY_SELECTOR", "app=kuberay")
    monkeypatch.setenv("COWORKGYM_TRAINING_KUBERAY_NAMESPACE", "ray-system")
    settings = TrainingSettings.from_env()
    assert settings.scheduling_deadline_seconds == 60.0
    assert (settings.dns_labels, settings.dns_namespace, settings.dns_cidrs) == (
        {"k8s-app": "node-local-dns"}, "dns", ("10.244.0.1/32",))  # fmt: skip
    assert settings.kuberay_labels == {"app": "kuberay"}
    assert settings.kuberay_namespace == "ray-system"
    monkeypatch.setenv("COWORKGYM_TRAINING_DNS_CIDRS", "10.244.0.1/32")
    with pytest.raises(
        ValueError, match=r"COWORKGYM_TRAINING_DNS_CIDRS='10\.244\.0\.1/32' is not JSON"
    ):
        TrainingSettings.from_env()

"""A TrainingRun in a real pod on the test-bed's node, the plain-Job path: a tiny random
model (from a config, saved with its tokenizer) and a few trajectories in S3 → the check-data
pod finds them → the training Job's pod stages them, runs `cowork-gym train` (SFT, Ray Train
with one gloo worker on CPU), reports its steps → the checkpoint lands in S3 → Succeeded,
with the progress, the loss and the checkpoint in the status.

The pods run the role image with the test-bed shortcut: the host's checkout and its .venv
(the training extra) mounted read-only (training.hostCheckout), instead of a ~6 GB torch
image (docs/training.md measures both). The operator runs beside the test-bed, as in
test_node.py, with the training settings the chart makes of testbed/values.yaml, the file
docs/deploy.md installs with ("A TrainingRun on the test-bed"): one CPU and 3Gi per worker
(the chart's 2 CPU never schedules on the node), no Ray, the node's DNS by address. The
training pod is a sandbox pod under the run's own NetworkPolicy, which the node's
kube-router enforces: it still reaches the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from coworkgym_testbed import images
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster
from tests.testbed.test_node import S3_SECRET, operator_env
from tests.training.trainer_runs import workspace

pytestmark = [pytest.mark.testbed, pytest.mark.node]
ROOT = Path(__file__).resolve().parents[2]
TRAIN_TIMEOUT = 900.0


@pytest.fixture
def training_ns(testbed_env: Testbed, ns: str) -> str:
    tb = testbed_env
    tb.kubectl(
        "create", "secret", "generic", S3_SECRET, "-n", ns,
        f"--from-literal=AWS_ACCESS_KEY_ID={tb.s3_access_key}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={tb.s3_secret_key}",
        f"--from-literal=AWS_DEFAULT_REGION={tb.s3_region}",
    )  # fmt: skip
    return ns


def chart_training_env(tb: Testbed) -> dict[str, str]:
    """The operator's COWORKGYM_TRAINING_* variables as the chart sets them from
    testbed/values.yaml, with the host checkout testbed/install-operator.sh adds."""
    version = json.loads(tb.kubectl("version", "-o", "json").stdout)["serverVersion"]
    rendered = tb.helm(
        "template", "cowork-gym", str(ROOT / "charts" / "cowork-gym"), "-n", "cowork-gym",
        "--kube-version", str(version["gitVersion"]), "-f", str(ROOT / "testbed" / "values.yaml"),
        "--set", f"training.hostCheckout={ROOT}",
    ).stdout  # fmt: skip
    for doc in yaml.safe_load_all(rendered):
        if not doc or doc["kind"] != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            if "COWORKGYM_TRAINING_IMAGE" in env:
                return {k: str(v) for k, v in env.items() if k.startswith("COWORKGYM_TRAINING_")}
    raise AssertionError("the chart rendered no operator Deployment with training settings")


@pytest.fixture
def operator(testbed_env: Testbed, training_ns: str, tmp_path: Path) -> Iterator[Path]:
    """`python -m coworkgym_operator` for the namespace, with the training settings the
    chart makes of testbed/values.yaml (the role image plus the host checkout, the plain
    Job, a CPU that fits, the node's DNS)."""
    training = chart_training_env(testbed_env)
    assert training["COWORKGYM_TRAINING_IMAGE"] == images.ROLE_IMAGE
    assert training["COWORKGYM_TRAINING_CPU"] == "1"
    assert training["COWORKGYM_TRAINING_HOST_CHECKOUT"] == str(ROOT)
    env = os.environ | testbed_env.env() | operator_env(testbed_env) | training
    log = tmp_path / "operator.log"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", training_ns]
    with log.open("wb") as out:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    yield log
    # the runs go while the operator runs, so their finalizer is handled (the namespace
    # would otherwise stay Terminating)
    testbed_env.kubectl("delete", "tr", "--all", "-n", training_ns, "--wait=true",
                        "--timeout=60s", check=False)  # fmt: skip
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def upload_folder(s3: Any, folder: Path, bucket: str, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")


def get_run(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, "trainingruns", name
    )
    return got


def test_an_sft_run_trains_in_a_pod_and_checkpoints_to_s3(
    testbed_env: Testbed, cluster: Cluster, operator: Path, tmp_path: Path
) -> None:
    tb = testbed_env
    s3 = tb.s3_client()
    bucket = tb.s3_bucket
    prefix = f"tr-e2e/{uuid.uuid4().hex[:8]}"
    root = workspace(tmp_path / "inputs")  # a tiny random Llama + tokenizer, graded groups
    upload_folder(s3, root / "model", bucket, f"{prefix}/model")
    s3.upload_file(str(root / "data.jsonl"), bucket, f"{prefix}/data/trajectories.jsonl")
    run = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "TrainingRun",
        "metadata": {"name": "tiny-sft"},
        "spec": {
            "objective": "sft",
            "model": f"s3://{bucket}/{prefix}/model",
            "data": {"uri": f"s3://{bucket}/{prefix}/data/trajectories.jsonl"},
            "hyperparameters": {"maxSteps": 3, "batchSize": 2, "learningRate": 1e-3,
                                "checkpointEvery": 1},
            "output": {"uri": f"s3://{bucket}/{prefix}/run"},
            "activeDeadlineSeconds": 1800,
        },
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    started = time.monotonic()
    tb.kubectl("apply", "-n", cluster.ns, "-f", str(path))

    def ended() -> dict[str, Any] | None:
        status = get_run(cluster, "tiny-sft").get("status") or {}
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    try:
        status = cluster.wait(ended, timeout=TRAIN_TIMEOUT, message="tiny-sft finished")
    finally:
        pods = tb.kubectl("get", "pods", "-n", cluster.ns, "-o", "wide", check=False).stdout
        print(pods)
        for job in ("tiny-sft-check-data", "tiny-sft-train-1"):
            print(tb.kubectl("logs", f"job/{job}", "-n", cluster.ns, "--tail=60",
                             check=False).stdout)  # fmt: skip
        print(operator.read_text()[-4000:])
    seconds = time.monotonic() - started
    print(f"TrainingRun tiny-sft: {status.get('phase')} in {seconds:.0f} s")
    assert status["phase"] == "Succeeded", status.get("message")
    assert status["backend"] == "Job" and status["jobName"] == "tiny-sft-train-1"
    checkpoint = f"s3://{bucket}/{prefix}/run/checkpoints/step-000003"
    assert status["checkpointUri"] == checkpoint
    assert status["progress"]["summary"] == "3/3"
    assert "loss" in status["metrics"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["DataReady"]["reason"] == "DatasetFound"
    assert conds["Succeeded"]["status"] == "True" and conds["Complete"]["status"] == "True"

    keys = {
        o["Key"].removeprefix(f"{prefix}/run/")
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/run/")["Contents"]
    }
    assert "checkpoints/latest.json" in keys
    assert "checkpoints/step-000003/model.safetensors" in keys
    assert {"config.json", "metrics.jsonl", "status.json"} <= keys
    pointer = s3.get_object(Bucket=bucket, Key=f"{prefix}/run/checkpoints/latest.json")
    assert json.loads(pointer["Body"].read())["step"] == 3
    events = tb.kubectl("get", "events", "-n", cluster.ns,
                        "--field-selector", "involvedObject.name=tiny-sft").stdout  # fmt: skip
    assert "Succeeded" in events
    # the training pod was a sandbox pod, fenced by the run's own policy (which let it
    # reach the store: the checkpoint is there)
    job = json.loads(tb.kubectl("get", "job", "tiny-sft-train-1", "-n", cluster.ns,
                                "-o", "json").stdout)  # fmt: skip
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["coworkgym.dev/sandbox"] == "true"
    policy = json.loads(tb.kubectl("get", "networkpolicy", "tiny-sft-training", "-n", cluster.ns,
                                   "-o", "json").stdout)  # fmt: skip
    assert policy["metadata"]["ownerReferences"][0]["name"] == "tiny-sft"
    s3.close()


def test_a_dataset_that_is_not_in_s3_fails_the_run_naming_the_field(
    testbed_env: Testbed, cluster: Cluster, operator: Path, tmp_path: Path
) -> None:
    tb = testbed_env
    missing = f"s3://{tb.s3_bucket}/tr-e2e/{uuid.uuid4().hex[:8]}/none.jsonl"
    run = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "TrainingRun",
        "metadata": {"name": "no-data"},
        "spec": {
            "objective": "sft",
            "model": "/models/unused",
            "data": {"uri": missing},
            "output": {"uri": f"s3://{tb.s3_bucket}/tr-e2e/no-data"},
        },
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    tb.kubectl("apply", "-n", cluster.ns, "-f", str(path))

    def ended() -> dict[str, Any] | None:
        status = get_run(cluster, "no-data").get("status") or {}
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = cluster.wait(ended, timeout=300, message="no-data finished")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "DatasetNotFound")
    assert failed["message"].startswith(f"spec.data.uri: no object {missing}")
    assert "jobName" not in status  # no training pod was started
    assert not [j for j in cluster.jobs() if j.startswith("no-data-train")]

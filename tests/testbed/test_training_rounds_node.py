"""An on-policy TrainingRun (rounds: 2) in a real pod on the test-bed's node: two packages
published to S3 behind CoworkEnvironments marked Released → the operator resolves them
(DataReady EnvironmentsResolved, status.environments) → one training Job whose pod runs
`cowork-gym train --rounds 2`: each round serves the current checkpoint on 127.0.0.1,
rolls it out on both packages with the tool-calling harness, trains OPD on the round's
rollouts (a tiny random student and teacher), saves checkpoints/round-NNN/ in S3, and the
next round serves that → Succeeded, the round in the progress, the loop's bookkeeping
mirrored to <output>/loop/. The learning signal does not matter; every hand-off does.

Operator, image and shortcuts as in test_training_run_node.py (the role image with the
host checkout and its .venv mounted read-only; the plain Job)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from coworkgym.release import S3Publisher
from coworkgym_testbed.testbed import Testbed
from tests.support.builders import good_package
from tests.support.kube import Cluster, manifest
from tests.testbed.test_training_run_node import (  # noqa: F401 - fixtures
    get_run,
    operator,
    training_ns,
    upload_folder,
)
from tests.training.trainer_runs import workspace

# the loop's own deadline (LOOP_TIMEOUT) and the set-up before it, not the suite's 600 s
# default: on a loaded machine the set-up alone took 10 min
pytestmark = [pytest.mark.testbed, pytest.mark.node, pytest.mark.slow, pytest.mark.timeout(2400)]
ROUNDS = 2
STEPS = 2  # per round
SAMPLES = 2  # per environment and round
LOOP_TIMEOUT = 1500.0  # two rounds of serve, 4 rollouts and 2 steps on one CPU


@pytest.fixture
def released(testbed_env: Testbed, training_ns: str, cluster: Cluster) -> list[str]:  # noqa: F811
    """Two packages in S3, each behind a CoworkEnvironment marked Released."""
    names = []
    publisher = S3Publisher(f"s3://{testbed_env.s3_bucket}/tr-rounds/{training_ns}",
                            testbed_env.s3_client())  # fmt: skip
    for name, family in (("alpha", "weather_report"), ("beta", "meeting_notes")):
        pkg = good_package(family, turns=1)
        uri = publisher.publish(name, pkg, {"name": name})
        cluster.apply(manifest(name))
        cluster.custom.patch_namespaced_custom_object_status(
            "coworkgym.dev", "v1alpha1", training_ns, "coworkenvironments", name,
            {"status": {"phase": "Released", "packageUri": uri, "packageDigest": pkg.digest()}},
        )  # fmt: skip
        names.append(name)
    return names


def test_two_on_policy_rounds_serve_roll_out_and_train_in_one_pod(
    testbed_env: Testbed,
    cluster: Cluster,
    released: list[str],
    operator: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    tb = testbed_env
    s3 = tb.s3_client()
    bucket = tb.s3_bucket
    prefix = f"tr-rounds/{uuid.uuid4().hex[:8]}"
    root = workspace(tmp_path / "inputs")  # a tiny random Llama student and teacher
    upload_folder(s3, root / "model", bucket, f"{prefix}/model")
    upload_folder(s3, root / "teacher", bucket, f"{prefix}/teacher")
    run = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "TrainingRun",
        "metadata": {"name": "tiny-rounds"},
        "spec": {
            "objective": "opd",
            "model": f"s3://{bucket}/{prefix}/model",
            "teacher": f"s3://{bucket}/{prefix}/teacher",
            "rounds": ROUNDS,
            "rollout": {
                "environments": {"names": released},
                "samplesPerEnvironment": SAMPLES,
                "sampling": {"maxSteps": 2, "maxTokens": 12, "temperature": 1.0, "seed": 0},
            },
            "hyperparameters": {"maxSteps": STEPS, "batchSize": 2, "learningRate": 1e-2,
                                "checkpointEvery": STEPS},
            "output": {"uri": f"s3://{bucket}/{prefix}/run"},
            "activeDeadlineSeconds": 3000,
        },
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    started = time.monotonic()
    tb.kubectl("apply", "-n", cluster.ns, "-f", str(path))
    rounds_seen: set[tuple[int, int]] = set()

    def ended() -> dict[str, Any] | None:
        status = get_run(cluster, "tiny-rounds").get("status") or {}
        progress = status.get("progress") or {}
        if progress.get("round") is not None:
            rounds_seen.add((progress["round"], progress.get("rounds") or 0))
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    try:
        status = cluster.wait(ended, timeout=LOOP_TIMEOUT, message="tiny-rounds finished")
    finally:
        print(tb.kubectl("get", "pods", "-n", cluster.ns, "-o", "wide", check=False).stdout)
        print(tb.kubectl("logs", "job/tiny-rounds-train-1", "-n", cluster.ns, "--tail=120",
                         check=False).stdout)  # fmt: skip
        print(operator.read_text()[-4000:])
    seconds = time.monotonic() - started
    print(f"TrainingRun tiny-rounds: {status.get('phase')} in {seconds:.0f} s, {rounds_seen}")
    assert status["phase"] == "Succeeded", status.get("message")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["DataReady"]["reason"] == "EnvironmentsResolved"
    assert [e["name"] for e in status["environments"]] == released
    assert status["backend"] == "Job" and status["jobName"] == "tiny-rounds-train-1"
    total = ROUNDS * STEPS
    assert status["progress"]["summary"] == f"round {ROUNDS}/{ROUNDS}, step {total}/{total}"
    assert status["message"].startswith(f"trained {ROUNDS} rounds, {total}/{total} steps")
    assert (ROUNDS, ROUNDS) in rounds_seen
    run_uri = f"s3://{bucket}/{prefix}/run"
    assert status["checkpointUri"] == f"{run_uri}/checkpoints/round-001/step-{STEPS:06d}"

    keys = {
        o["Key"].removeprefix(f"{prefix}/run/")
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/run/")["Contents"]
    }
    for r in range(ROUNDS):
        assert f"checkpoints/round-{r:03d}/step-{STEPS:06d}/model.safetensors" in keys
        assert f"loop/round-{r:03d}/rollouts/trajectories.jsonl" in keys
        assert f"loop/round-{r:03d}/train/status.json" in keys
    assert not [k for k in keys if "/model/" in k]  # served copies stay in the pod
    assert {"status.json", "metrics.jsonl", "loop/rounds.json"} <= keys

    def read(key: str) -> str:
        body = s3.get_object(Bucket=bucket, Key=f"{prefix}/run/{key}")["Body"].read()
        return str(body.decode())

    records = json.loads(read("loop/rounds.json"))["rounds"]
    assert [r["state"] for r in records] == ["trained"] * ROUNDS
    first, second = records
    # round 1 served the checkpoint round 0 saved, fetched from S3 into the pod
    assert first["checkpoint"] == f"{run_uri}/checkpoints/round-000/step-{STEPS:06d}"
    assert second["served"].endswith("round-000/model")
    for r, record in enumerate(records):
        assert record["trajectories"] == len(released) * SAMPLES
        assert record["with_token_ids"] > 0  # the served model's own tokens were recorded
        lines = read(f"loop/round-{r:03d}/rollouts/trajectories.jsonl").splitlines()
        models = {json.loads(line)["policy"]["model"] for line in lines}
        assert models == {f"model@round-{r}"}
    steps = [json.loads(line) for line in read("metrics.jsonl").splitlines()]
    assert [(s["round"], s["step"]) for s in steps] == [
        (r, r * STEPS + i) for r in range(ROUNDS) for i in range(1, STEPS + 1)
    ]
    s3.close()

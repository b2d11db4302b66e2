"""An on-policy TrainingRun (rounds: 2) on the test-bed's node, driven by the operator round
by round: two packages published to S3 behind CoworkEnvironments marked Released → the
operator resolves them (DataReady EnvironmentsResolved) → per round r: a Deployment and
Service tiny-rounds-serve-r<r> serve the current checkpoint (`cowork-gym serve-checkpoint`;
spec.model, a tiny random student, in round 0) → a RolloutBatch tiny-rounds-rollouts-r<r>
rolls it out (tool-calling, rollout pods → the LLM gateway → the Service's address) → the
server is deleted and a Job tiny-rounds-train-r<r> trains OPD (a tiny random teacher) on
the batch's trajectories from the served weights, saving checkpoints/round-<r>/ in S3 →
round 1 serves round 0's checkpoint → Succeeded. The learning signal does not matter; every
hand-off does.

The operator runs beside the test-bed (as in test_training_run_node.py: the role image with
the host checkout and its .venv mounted read-only, the plain Job), with the LLM gateway as a
pod on the node (as in test_rollout_batch_node.py). Its RolloutBatch controller probes each
round's endpoint from the host: the endpoint is the Service's cluster IP, which the node's
kube-proxy routes for the host too."""

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

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from kubernetes import client

from coworkgym.release import S3Publisher
from coworkgym.rollout.trajectory import parse_line
from coworkgym_testbed import images
from coworkgym_testbed.testbed import Testbed
from tests.support.builders import good_package
from tests.support.kube import Cluster, manifest
from tests.testbed.test_node import operator_env
from tests.testbed.test_rollout_batch_node import pod, running_ip
from tests.testbed.test_training_run_node import (  # noqa: F401 - fixtures
    ROOT,
    get_run,
    training_ns,
    upload_folder,
)
from tests.training.trainer_runs import workspace

# the rounds' deadline (LOOP_TIMEOUT) and the set-up before it, not the suite's 600 s
# default: on a loaded machine the set-up alone took 10 min
pytestmark = [pytest.mark.testbed, pytest.mark.node, pytest.mark.slow, pytest.mark.timeout(2700)]
RUN = "tiny-rounds"
ROUNDS = 2
STEPS = 2  # per round
SAMPLES = 2  # per environment and round
LOOP_TIMEOUT = 1800.0  # per round: a server, 4 rollouts two at a time, 2 steps, on 2 CPUs
SIGNING_KEY = "rounds-e2e-signing-key"


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


@pytest.fixture
def gateway(testbed_env: Testbed, training_ns: str, cluster: Cluster) -> str:  # noqa: F811
    """The LLM gateway as a pod on the node (labelled as the operator's default gateway
    selector, which the servers' NetworkPolicy admits); its base URL by address."""
    testbed_env.kubectl(
        "create", "secret", "generic", "gateway-signing", "-n", training_ns,
        f"--from-literal=key={SIGNING_KEY}",
    )  # fmt: skip
    cluster.apply(
        pod(
            "gateway", training_ns, {"app": "llm-gateway"},
            ["python", "-m", "coworkgym.llm.serve"],
            env=[{"name": "COWORKGYM_GATEWAY_PORT", "value": "8000"},
                 {"name": "COWORKGYM_GATEWAY_SIGNING_KEY_FILE", "value": "/signing/key"}],
            volumeMounts=[{"name": "signing", "mountPath": "/signing", "readOnly": True}],
            pod={"volumes": [{"name": "signing", "secret": {"secretName": "gateway-signing"}}]},
        )
    )  # fmt: skip
    return f"http://{running_ip(cluster, 'gateway')}:8000/v1"


@pytest.fixture
def operator(
    testbed_env: Testbed,
    training_ns: str,  # noqa: F811
    gateway: str,
    tmp_path: Path,
) -> Iterator[Path]:
    """`python -m coworkgym_operator` for the namespace: the training settings of
    test_training_run_node.py (a server or a training pod gets 1 CPU, never both at once:
    a round's server is deleted before its training starts) and the gateway; two rollout
    pods of 400m beside the server."""
    env = os.environ | testbed_env.env() | operator_env(testbed_env) | {
        "COWORKGYM_TRAINING_IMAGE": images.ROLE_IMAGE,
        "COWORKGYM_TRAINING_HOST_CHECKOUT": str(ROOT),
        "COWORKGYM_TRAINING_RAY": "off",
        "COWORKGYM_TRAINING_CPU": "1",
        "COWORKGYM_TRAINING_MEMORY": "3Gi",
        "COWORKGYM_TRAINING_SHM_SIZE": "512Mi",
        "COWORKGYM_GATEWAY_URL": gateway,
        "COWORKGYM_GATEWAY_SIGNING_KEY": SIGNING_KEY,
        "COWORKGYM_BATCH_VOLUME_SIZE": "1Gi",
        "COWORKGYM_SANDBOX_DEFAULTS": json.dumps({"resources": {"cpu": "400m", "memory": "1Gi"}}),
    }  # fmt: skip
    log = tmp_path / "operator.log"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", training_ns]
    with log.open("wb") as out:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    yield log
    # the runs (and the batches they own) go while the operator runs, so their finalizers
    # are handled (the namespace would otherwise stay Terminating)
    for kind in ("tr", "rb"):
        testbed_env.kubectl("delete", kind, "--all", "-n", training_ns, "--wait=true",
                            "--timeout=60s", check=False)  # fmt: skip
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def get_batch(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, "rolloutbatches", name
    )
    return got


def test_two_on_policy_rounds_each_serve_roll_out_and_train(
    testbed_env: Testbed,
    cluster: Cluster,
    released: list[str],
    operator: Path,
    tmp_path: Path,
) -> None:
    tb = testbed_env
    s3 = tb.s3_client()
    bucket = tb.s3_bucket
    prefix = f"tr-rounds/{uuid.uuid4().hex[:8]}"
    root = workspace(tmp_path / "inputs")  # a tiny random Llama student and teacher
    upload_folder(s3, root / "model", bucket, f"{prefix}/model")
    upload_folder(s3, root / "teacher", bucket, f"{prefix}/teacher")
    model = f"s3://{bucket}/{prefix}/model"
    run_uri = f"s3://{bucket}/{prefix}/run"
    run = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "TrainingRun",
        "metadata": {"name": RUN},
        "spec": {
            "objective": "opd",
            "model": model,
            "teacher": f"s3://{bucket}/{prefix}/teacher",
            "rounds": ROUNDS,
            "rollout": {
                "environments": {"names": released},
                "samplesPerEnvironment": SAMPLES,
                "concurrency": 2,
                # a random model's rollouts end on the step budget, which the batch's
                # filter drops: train on every trajectory
                "trajectories": "all",
                "sampling": {"maxSteps": 2, "maxTokens": 12, "temperature": 1.0, "seed": 0},
            },
            "hyperparameters": {"maxSteps": STEPS, "batchSize": 2, "learningRate": 1e-2,
                                "checkpointEvery": STEPS},
            "output": {"uri": run_uri},
            "activeDeadlineSeconds": 1800,
        },
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    started = time.monotonic()
    tb.kubectl("apply", "-n", cluster.ns, "-f", str(path))
    apps = client.AppsV1Api(cluster.core)
    servers: dict[str, dict[str, Any]] = {}  # each round's Deployment, as seen while it ran
    summaries: list[str] = []

    def ended() -> dict[str, Any] | None:
        for deployment in apps.list_namespaced_deployment(
            cluster.ns, label_selector=f"coworkgym.dev/trainingrun={RUN}"
        ).items:
            servers.setdefault(deployment.metadata.name, cluster.core.sanitize_for_serialization(
                deployment))  # fmt: skip
        status = get_run(cluster, RUN).get("status") or {}
        summary = (status.get("progress") or {}).get("summary")
        if summary and summary not in summaries:
            summaries.append(summary)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    try:
        status = cluster.wait(ended, timeout=LOOP_TIMEOUT, message=f"{RUN} finished")
    finally:
        print(tb.kubectl("get", "pods,jobs,deploy,svc,rb,networkpolicy", "-n", cluster.ns,
                         "-o", "wide", check=False).stdout)  # fmt: skip
        for r in range(ROUNDS):
            for what in (f"deploy/{RUN}-serve-r{r}", f"job/{RUN}-train-r{r}"):
                print(tb.kubectl("logs", what, "-n", cluster.ns, "--tail=40",
                                 check=False).stdout)  # fmt: skip
        print(operator.read_text()[-6000:])
    seconds = time.monotonic() - started
    print(f"TrainingRun {RUN}: {status.get('phase')} in {seconds:.0f} s; {summaries}")
    assert status["phase"] == "Succeeded", status.get("message")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["DataReady"]["reason"] == "EnvironmentsResolved"
    assert conds["Complete"]["reason"] == "Succeeded"
    assert [e["name"] for e in status["environments"]] == released
    total = ROUNDS * STEPS
    assert status["progress"]["summary"] == f"round {ROUNDS}/{ROUNDS} done, step {total}/{total}"
    assert status["message"].startswith(f"trained {ROUNDS} rounds, {total}/{total} steps")
    assert any(s.startswith(f"round 2/{ROUNDS} rolling out") for s in summaries), summaries
    checkpoints = [f"{run_uri}/checkpoints/round-{r:03d}/step-{STEPS:06d}" for r in range(ROUNDS)]
    assert status["checkpointUri"] == checkpoints[-1]

    records = status["rounds"]
    assert [r["step"] for r in records] == ["trained"] * ROUNDS
    assert [r["served"] for r in records] == [model, checkpoints[0]]  # round 1 serves round 0's
    for r, record in enumerate(records):
        assert record["checkpointUri"] == checkpoints[r]
        assert record["trajectories"] == len(released) * SAMPLES
        assert record["jobName"] == f"{RUN}-train-r{r}"
        # the round's server: a Deployment that served the round's weights, gone now
        server = servers[f"{RUN}-serve-r{r}"]
        (container,) = server["spec"]["template"]["spec"]["containers"]
        assert container["command"][container["command"].index("serve-checkpoint") + 1] == (
            record["served"])  # fmt: skip
        assert server["metadata"]["ownerReferences"][0]["name"] == RUN
        # the round's RolloutBatch completed against that server's Service
        batch = get_batch(cluster, record["batch"])
        assert record["batch"] == f"{RUN}-rollouts-r{r}"
        assert batch["status"]["phase"] == "Succeeded", batch["status"].get("message")
        (policy,) = batch["spec"]["policies"]
        assert policy["baseUrl"] == record["endpoint"] and policy["model"] == f"{RUN}@round-{r}"
        assert batch["status"]["counts"]["total"] == len(released) * SAMPLES
        assert batch["metadata"]["ownerReferences"][0]["name"] == RUN
        # the round's training Job succeeded. The operator takes a Job's end from its pod, as
        # soon as the pod ended; the Job controller counts it a little later (CI saw the
        # last round's Job still `active` when the run was already Succeeded)
        job_name = f"{RUN}-train-r{r}"
        cluster.wait(
            lambda name=job_name: job_succeeded(cluster, name),
            timeout=60, message=f"Job {job_name} counted succeeded",
        )  # fmt: skip
    assert not apps.list_namespaced_deployment(
        cluster.ns, label_selector=f"coworkgym.dev/trainingrun={RUN}"
    ).items  # every server was deleted once its round's rollouts were done

    keys = {
        o["Key"].removeprefix(f"{prefix}/run/")
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/run/")["Contents"]
    }
    for r in range(ROUNDS):
        assert f"checkpoints/round-{r:03d}/step-{STEPS:06d}/model.safetensors" in keys
        assert f"checkpoints/round-{r:03d}/latest.json" in keys
        assert f"rounds/round-{r:03d}/rollouts/trajectories.jsonl" in keys
        assert f"rounds/round-{r:03d}/train/status.json" in keys
        body = s3.get_object(
            Bucket=bucket, Key=f"{prefix}/run/rounds/round-{r:03d}/rollouts/trajectories.jsonl"
        )
        lines = body["Body"].read().decode().splitlines()  # fmt: skip
        trajectories = [parse_line(line, f"round {r}") for line in lines if line.strip()]
        assert {t.policy.model for t in trajectories} == {f"{RUN}@round-{r}"}
        # the served model's own tokens, recorded through the gateway
        assert any(m.tokens is not None for t in trajectories for m in t.agent_messages())

    events = tb.kubectl("get", "events", "-n", cluster.ns,
                        "--field-selector", f"involvedObject.name={RUN}").stdout  # fmt: skip
    for reason in ("Serving", "RollingOut", "RolloutsDone", "TrainingStarted", "RoundTrained",
                   "Succeeded"):  # fmt: skip
        assert reason in events, (reason, events)
    s3.close()


def job_succeeded(cluster: Cluster, name: str) -> bool:
    return bool(cluster.batch.read_namespaced_job(name, cluster.ns).status.succeeded == 1)

"""A RolloutBatch in real pods on the test-bed's node: two released environments × two
samples of a scripted tool-calling policy, whose model traffic goes rollout pod → the LLM
gateway (`python -m coworkgym.llm.serve`, per-rollout signed tokens) → a scripted
OpenAI-compatible server, all pods on the node. The policy's first action is a probe of
what the agent's container can see and reach; the test reads the trajectories back from S3
and checks the counts, and that no agent pod saw a private file, a secret or the store.

The operator runs beside the test-bed (as in test_node.py); the packages are published to
S3 and their CoworkEnvironments marked Released before it starts (building them here would
only repeat test_node.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkgym.release import S3Publisher
from coworkgym.rollout.trajectory import Trajectory, parse_line
from coworkgym_testbed import images
from coworkgym_testbed.node import NODE_IP
from coworkgym_testbed.testbed import Testbed
from tests.support.builders import good_package
from tests.support.kube import Cluster, manifest
from tests.testbed.test_node import S3_SECRET, operator_env, relay_port

pytestmark = [pytest.mark.testbed, pytest.mark.node, pytest.mark.slow]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
SIGNING_KEY = "node-e2e-signing-key"
# what the user container, the verify pod and the batch volume hold, the package's private
# parts (relative: the agent's working directory), and a service-account token
PRIVATE = (
    "/package", "/record", "/data", "/episode", "/verified", "/shared",
    ".user", ".patch", "tests", "solution", "/var/run/secrets/kubernetes.io/serviceaccount",
)  # fmt: skip
BATCH_TIMEOUT = 420.0  # ~3 min on an idle node; other tests share its 2 CPUs


def probe_command(tb: Testbed) -> str:
    """What the policy runs first, in the agent's container: every private path absent,
    no secret in its environment, the object store unreachable (the gateway is not)."""
    checks = " ".join(PRIVATE)
    store = f"{NODE_IP}/{relay_port(tb)}"
    return (
        f"for p in {checks}; do if [ -e $p ]; then echo VISIBLE $p; else echo absent $p; fi; done; "
        "echo secrets=$(env | grep -c -i -E 'AWS_|TOKEN|SECRET|API_KEY'); "
        f"if timeout 3 bash -c '</dev/tcp/{store}' 2>/dev/null; then echo REACHED store; "
        "else echo blocked store; fi; id -u; pwd"
    )


def pod(name: str, ns: str, labels: dict[str, str], command: list[str], **extra: Any) -> str:
    pod_extra = extra.pop("pod", {})
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": name,
                    "image": images.ROLE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}},
                    **extra,
                }
            ],
            **pod_extra,
        },
    }
    return json.dumps(body)


def running_ip(cluster: Cluster, name: str) -> str:
    def ip() -> str | None:
        p = cluster.v1.read_namespaced_pod(name, cluster.ns)
        ready = all(s.ready for s in p.status.container_statuses or []) and p.status.pod_ip
        return str(p.status.pod_ip) if p.status.phase == "Running" and ready else None

    found: str = cluster.wait(ip, timeout=120, message=f"pod {name} running")
    return found


@pytest.fixture
def rollout_ns(testbed_env: Testbed, ns: str) -> str:
    tb = testbed_env
    tb.kubectl(
        "create", "secret", "generic", S3_SECRET, "-n", ns,
        f"--from-literal=AWS_ACCESS_KEY_ID={tb.s3_access_key}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={tb.s3_secret_key}",
        f"--from-literal=AWS_DEFAULT_REGION={tb.s3_region}",
    )  # fmt: skip
    return ns


@pytest.fixture
def released(testbed_env: Testbed, rollout_ns: str, cluster: Cluster) -> list[str]:
    """Two packages in S3, each behind a CoworkEnvironment marked Released."""
    names = []
    publisher = S3Publisher(f"s3://cowork-gym/rb-e2e/{rollout_ns}", testbed_env.s3_client())
    for name, family in (("alpha", "weather_report"), ("beta", "meeting_notes")):
        pkg = good_package(family, turns=1)
        uri = publisher.publish(name, pkg, {"name": name})
        env = json.loads(manifest(name))
        env["metadata"]["labels"] = {"suite": "rb-e2e"}
        cluster.apply(json.dumps(env))
        cluster.custom.patch_namespaced_custom_object_status(
            "coworkgym.dev", "v1alpha1", rollout_ns, "coworkenvironments", name,
            {"status": {"phase": "Released", "packageUri": uri, "packageDigest": pkg.digest()}},
        )  # fmt: skip
        names.append(name)
    return names


@pytest.fixture
def model_path(testbed_env: Testbed, rollout_ns: str, cluster: Cluster) -> dict[str, str]:
    """The scripted policy server and the gateway, as pods on the node; their addresses."""
    tb = testbed_env
    files = [f"--from-file={FIXTURES / f}" for f in ("server.py", "policy_pod.py")]
    tb.kubectl("create", "configmap", "policy", "-n", rollout_ns, *files)
    tb.kubectl(
        "create", "secret", "generic", "gateway-signing", "-n", rollout_ns,
        f"--from-literal=key={SIGNING_KEY}",
    )  # fmt: skip
    policy = pod(
        "policy", rollout_ns, {"app": "policy"}, ["python", "/policy/policy_pod.py", "8080"],
        env=[{"name": "POLICY_PROBE", "value": probe_command(tb)}],
        volumeMounts=[{"name": "policy", "mountPath": "/policy"}],
        pod={"volumes": [{"name": "policy", "configMap": {"name": "policy"}}]},
    )  # fmt: skip
    gateway = pod(
        "gateway", rollout_ns, {"app": "llm-gateway"}, ["python", "-m", "coworkgym.llm.serve"],
        env=[
            {"name": "COWORKGYM_GATEWAY_PORT", "value": "8000"},
            {"name": "COWORKGYM_GATEWAY_SIGNING_KEY_FILE", "value": "/signing/key"},
        ],
        volumeMounts=[{"name": "signing", "mountPath": "/signing", "readOnly": True}],
        pod={"volumes": [{"name": "signing", "secret": {"secretName": "gateway-signing"}}]},
    )  # fmt: skip
    cluster.apply(policy)
    cluster.apply(gateway)
    return {
        "policy": f"http://{running_ip(cluster, 'policy')}:8080/v1",
        "gateway": f"http://{running_ip(cluster, 'gateway')}:8000/v1",
    }


@pytest.fixture
def operator(
    testbed_env: Testbed, rollout_ns: str, model_path: dict[str, str], tmp_path: Path
) -> Iterator[Path]:
    env = os.environ | testbed_env.env() | operator_env(testbed_env)
    env |= {
        "COWORKGYM_GATEWAY_URL": model_path["gateway"],
        "COWORKGYM_GATEWAY_SIGNING_KEY": SIGNING_KEY,
        "COWORKGYM_BATCH_VOLUME_SIZE": "1Gi",
        # per pod (a rollout pod's two containers request half each): the four rollouts
        # fit on the node's 2 CPUs at once, beside the gateway and the policy
        "COWORKGYM_SANDBOX_DEFAULTS": json.dumps({"resources": {"cpu": "450m", "memory": "1Gi"}}),
    }
    log = tmp_path / "operator.log"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", rollout_ns]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    yield log
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def read_output(tb: Testbed, uri: str) -> dict[str, bytes]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    s3 = tb.s3_client()
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    return {
        o["Key"][len(prefix) + 1 :]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in listed
    }


def test_a_batch_rolls_out_in_isolated_pods_and_stores_verified_trajectories(
    testbed_env: Testbed,
    cluster: Cluster,
    released: list[str],
    model_path: dict[str, str],
    operator: Path,
) -> None:
    tb, ns = testbed_env, cluster.ns
    output = f"s3://cowork-gym/rb-e2e/{ns}/out"
    batch = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "RolloutBatch",
        "metadata": {"name": "e2e"},
        "spec": {
            "environments": {"selector": {"matchLabels": {"suite": "rb-e2e"}}},
            "policies": [
                {"harness": "tool-calling", "model": "scripted", "baseUrl": model_path["policy"],
                 "sampling": {"maxSteps": 6}}
            ],
            "samplesPerEnvironment": 2,
            "concurrency": 4,
            "timeoutSeconds": 120,
            "output": {"uri": output},
        },
    }  # fmt: skip
    started = time.monotonic()
    cluster.apply(json.dumps(batch))

    def complete() -> dict[str, Any] | None:
        got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
            "coworkgym.dev", "v1alpha1", ns, "rolloutbatches", "e2e"
        )
        status = got.get("status") or {}
        done = any(
            c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", [])
        )
        return status if done else None

    try:
        status = cluster.wait(complete, timeout=BATCH_TIMEOUT, message="the batch to complete")
    except AssertionError:
        print(operator.read_text()[-6000:])
        print(tb.kubectl("get", "pods,jobs,rb", "-n", ns, "-o", "wide").stdout)
        raise
    seconds = time.monotonic() - started
    print(f"batch complete in {seconds:.0f}s: {status['message']}")
    assert status["phase"] == "Succeeded", status["message"]
    counts = status["counts"]
    assert counts["total"] == 4 and counts["pending"] == 0 and counts["running"] == 0
    assert counts["succeeded"] + counts["invalid"] == 4
    assert counts["invalid"] == 0, status["outcomes"]
    assert [e["name"] for e in status["environments"]] == ["alpha", "beta"]
    assert status["passRates"][0]["policy"] == "tool-calling/scripted"
    assert status["passRates"][0]["valid"] == 4

    stored = read_output(tb, output)
    rollouts = [parse_line(v.decode(), k) for k, v in stored.items() if k.startswith("rollouts/")]
    assert len(rollouts) == 4
    def records(key: str) -> list[str]:
        return [line for line in stored[key].decode().splitlines() if line.strip()]

    assert len(records("trajectories.jsonl")) == 4
    assert len(records("kept.jsonl")) == counts["kept"]
    assert json.loads(stored["funnel.json"])["raw"] == 4

    for trajectory in rollouts:
        assert trajectory.verification is not None and trajectory.verification.valid
        assert trajectory.termination.reason == "agent_done"
        assert trajectory.usage.requests == 2  # the probe and finish, through the gateway
        probe = first_tool_result(trajectory)
        assert "VISIBLE" not in probe, probe
        assert probe.count("absent ") == len(PRIVATE)
        assert "secrets=0" in probe and "blocked store" in probe
        assert "10001" in probe.splitlines()[-2] and probe.splitlines()[-1].strip() == "/app"

    # the batch's pods are gone; its volume too (the trajectories are in the store)
    def cleaned() -> bool:
        jobs = [j for j in cluster.jobs() if j.startswith("e2e-")]
        claims = cluster.v1.list_namespaced_persistent_volume_claim(ns).items
        return not jobs and not [c for c in claims if c.metadata.name == "e2e-data"]

    cluster.wait(cleaned, timeout=60, message="the batch's Jobs and volume deleted")


def first_tool_result(trajectory: Trajectory) -> str:
    return next(m.content for m in trajectory.messages if m.role == "tool")

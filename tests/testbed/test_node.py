"""Pods that really run: on the test-bed's node (containerd + runc + kubelet), every stage of a
CoworkEnvironment runs in the role image built from sandbox-images/role-sandbox/Dockerfile,
and the package lands in the S3 server.

The operator runs as a process beside the test-bed (as `python -m coworkgym_operator`, so it
can be killed for real); its pods reach the S3 server through the node's relay, the one port
the node's firewall opens to pods.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from coworkgym_operator.core.builders import SANDBOX_UID
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment import builders
from coworkgym_testbed import images
from coworkgym_testbed.node import NODE_IP, NODE_NAME
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster, manifest

pytestmark = [pytest.mark.testbed, pytest.mark.node]
S3_SECRET = "s3-credentials"
RELEASE_TIMEOUT = 600.0
STAGES = ("builder", "verifier", "detector", "release")


def relay_port(tb: Testbed) -> int:
    return tb.ports["s3-node-relay"]


@pytest.fixture
def node_ns(testbed_env: Testbed, ns: str) -> str:
    """The namespace, with storage credentials that only the release Job mounts."""
    tb = testbed_env
    tb.kubectl(
        "create", "secret", "generic", S3_SECRET, "-n", ns,
        f"--from-literal=AWS_ACCESS_KEY_ID={tb.s3_access_key}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={tb.s3_secret_key}",
        f"--from-literal=AWS_DEFAULT_REGION={tb.s3_region}",
    )  # fmt: skip
    return ns


def operator_env(tb: Testbed) -> dict[str, str]:
    return {
        "COWORKGYM_RECONCILE_INTERVAL": "1",
        "COWORKGYM_METRICS_PORT": "0",
        "COWORKGYM_ROLE_IMAGE": images.ROLE_IMAGE,
        "COWORKGYM_IMAGE_PULL_POLICY": "Never",
        # Two stage pods fit on the node's two CPUs.
        "COWORKGYM_SANDBOX_DEFAULTS": json.dumps({"resources": {"cpu": "500m", "memory": "1Gi"}}),
        "COWORKGYM_S3_ENDPOINT": tb.s3_node_endpoint,
        "COWORKGYM_S3_SECRET": S3_SECRET,
        "COWORKGYM_STORE_CIDR": f"{NODE_IP}/32",
        "COWORKGYM_STORE_PORT": str(relay_port(tb)),
    }


@pytest.fixture
def operator(
    testbed_env: Testbed, node_ns: str, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts `python -m coworkgym_operator` for the namespace; every one is killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    env = os.environ | testbed_env.env() | operator_env(testbed_env)

    def start(**settings: str) -> subprocess.Popen[bytes]:
        """``settings``: extra operator environment variables for this start."""
        argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", node_ns]
        with (tmp_path / f"operator-{len(started)}.log").open("wb") as log:
            p = subprocess.Popen(argv, env=env | settings, stdout=log, stderr=subprocess.STDOUT)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def spec_manifest(name: str, ns: str, **spec: Any) -> str:
    return manifest(name, release={"uri": f"s3://cowork-gym/node/{ns}"}, **spec)


def wait_phase(cluster: Cluster, name: str, phases: tuple[str, ...], timeout: float) -> str:
    def reached() -> str | None:
        phase = cluster.phase(name)
        return phase if phase in phases else None

    found: str = cluster.wait(reached, timeout=timeout, message=f"{name} in {phases}")
    return found


def env_pods(cluster: Cluster, name: str) -> list[Any]:
    return list(
        cluster.v1.list_namespaced_pod(
            cluster.ns, label_selector=f"{builders.LABEL_ENV}={name}"
        ).items
    )


def running_pod(cluster: Cluster, name: str, stage: str) -> Any:
    def find() -> Any:
        return next(
            (
                p
                for p in env_pods(cluster, name)
                if p.metadata.labels.get(builders.LABEL_STAGE) == stage
                and p.status.phase == "Running"
            ),
            None,
        )

    return cluster.wait(find, timeout=180, message=f"a running {stage} pod of {name}")


def download(tb: Testbed, uri: str, dest: Path) -> Path:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    s3 = tb.s3_client()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]]
    for key in keys:
        target = dest / key[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
    return dest


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)


# ---- end to end ---------------------------------------------------------------------------
def test_an_environment_is_released_by_pods_that_really_ran(
    cluster: Cluster, operator: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # Retain keeps the finished stage pods, which this test inspects (the default, Delete,
    # removes them with the role volumes at the outcome: tested below).
    operator(COWORKGYM_VOLUME_RETENTION="Retain")
    cluster.apply(spec_manifest("real", cluster.ns))
    assert (
        wait_phase(cluster, "real", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
        == "Released"
    )
    status = cluster.env("real")["status"]

    pods = env_pods(cluster, "real")
    ran = {p.metadata.labels[builders.LABEL_STAGE] for p in pods}
    assert ran == set(STAGES)
    for pod in pods:
        assert pod.spec.node_name == NODE_NAME
        assert pod.status.phase == "Succeeded", pod.metadata.name
        terminated = pod.status.container_statuses[0].state.terminated
        assert terminated.exit_code == 0 and json.loads(terminated.message)["ok"] is True
        assert pod.status.container_statuses[0].image.endswith(images.ROLE_IMAGE.split("/", 1)[1])

    package = download(cluster.tb, status["packageUri"], tmp_path / "real")
    harbor = Path(sys.executable).parent / "harbor"
    lint = run_cli(str(harbor), "lint", str(package))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    check = run_cli(sys.executable, "-m", "coworkgym.cli", "check", str(package))
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_injected_defect_is_revised_by_real_pods(
    cluster: Cluster, operator: Callable[..., subprocess.Popen[bytes]]
) -> None:
    operator()
    faults = {"probability": 1.0, "kinds": ["leak"]}
    cluster.apply(spec_manifest("faulty", cluster.ns, faultInjection=faults))
    phase = wait_phase(cluster, "faulty", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
    status = cluster.env("faulty")["status"]
    jobs = cluster.jobs()
    # The Issue Detector's pod found the defect in iteration 0 and the owner's stage re-ran.
    assert any("-i1-" in j and not j.startswith("faulty-release") for j in jobs), jobs
    if phase == "Released":
        assert status["iteration"] >= 1
    else:
        assert phase == "Rejected" and status["defects"], status


# ---- isolation ----------------------------------------------------------------------------
PROBE = r"""
import json, os, socket, sys, time
# NetworkPolicies are enforced a moment after a pod starts (the controller sees the pod's IP
# and writes its rules: about a second, more on a loaded machine); a real CNI has the same
# window.
time.sleep(10)
def writable(path):
    try:
        with open(os.path.join(path, ".probe"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "open"
    except OSError as e:
        return type(e).__name__
def volumes():
    if not os.path.isdir("/work"):
        return {}
    return {v: writable("/work/" + v) for v in sorted(os.listdir("/work"))}
targets = json.loads(sys.argv[1])
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(),
    "token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount"),
    "volumes": volumes(),
    "rootfs_writable": writable("/"),
    "env_secrets": sorted(k for k in os.environ if k.startswith("AWS_")),
    "net": {name: reach(host, port) for name, (host, port) in targets.items()},
}))
"""


@contextmanager
def outside_host(port: int) -> Iterator[str]:
    """A host beyond the node, in a network namespace this test makes: the machine routes to
    it, a pod must not. Returns its address."""
    ns, host_if, ns_if, addr = "cgtb-outside", "cgtb-out0", "cgtb-out1", "10.250.0.2"
    sh = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns)
        sh("ip", "addr", "add", "10.250.0.1/24", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ns_if)
        sh("ip", "-n", ns, "link", "set", ns_if, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", "10.250.0.1")
        serve = [sys.executable, "-m", "http.server", str(port), "--bind", addr]
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, *serve],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while True:  # the machine itself reaches it: the route is real
                try:
                    socket.create_connection((addr, port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield addr
        finally:
            server.kill()
            server.wait()
    finally:
        subprocess.run(["ip", "link", "delete", host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


def probe_job(
    env: dict[str, Any], stage: str, settings: OperatorSettings, targets: dict[str, Any]
) -> dict[str, Any]:
    """The stage's real Job (volumes, security context, labels), running the probe instead."""
    from coworkgym.spec import EnvironmentSpec

    spec = EnvironmentSpec.model_validate(env["spec"])
    job = builders.stage_job(env, spec, stage, 0, 1, [], settings)
    job["metadata"]["name"] = f"probe-{stage}"
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", PROBE, json.dumps(targets)]
    return job


def test_sandbox_pods_are_isolated(cluster: Cluster, testbed_env: Testbed, node_ns: str) -> None:
    tb = testbed_env
    # A CoworkEnvironment with no operator running: its children are made here, from the
    # operator's own builders, so the pods are exactly the stage pods but for the command.
    cluster.apply(spec_manifest("iso", cluster.ns))
    env = cluster.env("iso")
    settings = OperatorSettings(
        role_image=images.ROLE_IMAGE,
        image_pull_policy="Never",
        s3_secret=S3_SECRET,
        s3_endpoint=tb.s3_node_endpoint,
        store_cidr=f"{NODE_IP}/32",
        store_port=relay_port(tb),
    )
    api = tb.kubernetes_client()
    from kubernetes import utils

    for obj in builders.volume_claims(env, settings) + builders.network_policies(env, settings):
        utils.create_from_dict(api, obj, namespace=cluster.ns)

    # A pod to reach (no policy selects it), and an unfenced pod to show the network itself
    # works: what stops the sandbox pods is their NetworkPolicies, not a broken bridge.
    listener = plain_pod("listener", ["python", "-m", "http.server", "8080"])
    utils.create_from_dict(api, listener, namespace=cluster.ns)
    listener_ip = cluster.wait(
        lambda: cluster.v1.read_namespaced_pod("listener", cluster.ns).status.pod_ip,
        timeout=120,
        message="the listener pod's IP",
    )
    with outside_host(8765) as outside:
        targets = {
            "s3-relay": [NODE_IP, relay_port(tb)],
            "kubelet": [NODE_IP, tb.ports["kubelet"]],
            "pod": [listener_ip, 8080],
            "outside": [outside, 8765],
        }
        for stage in STAGES:
            job = probe_job(env, stage, settings, targets)
            utils.create_from_dict(api, job, namespace=cluster.ns)
        control = plain_pod("control", ["python", "-c", PROBE, json.dumps(targets)])
        utils.create_from_dict(api, control, namespace=cluster.ns)
        results = {name: probe_result(cluster, name) for name in (*STAGES, "control")}

    control = results["control"]["net"]
    assert control["pod"] == "open" and control["s3-relay"] == "open", control
    for name, r in results.items():
        assert r["uid"] == SANDBOX_UID and r["gid"] == SANDBOX_UID, name
        assert r["token"] is False, f"{name}: a service-account token is mounted"
        assert r["rootfs_writable"] is False, name
        # The node's fence, for every pod: nothing beyond the bridge, nothing on the node but
        # the relay.
        assert r["net"]["outside"] != "open", name
        assert r["net"]["kubelet"] != "open", name
    for stage in STAGES:
        net = results[stage]["net"]
        # deny-all: no other pod; only the release pod may reach the store.
        assert net["pod"] != "open", stage
        assert (net["s3-relay"] == "open") == (stage == "release"), (stage, net)
    # Each role sees only its volumes, and writes only its own.
    assert results["builder"]["volumes"] == {"builder": True}
    assert results["verifier"]["volumes"] == {"builder": False, "verifier": True}
    assert results["detector"]["volumes"] == {"builder": False, "scratch": True, "verifier": False}
    assert results["release"]["volumes"] == {"scratch": False}
    # Only the release pod holds storage credentials.
    assert [s for s in STAGES if results[s]["env_secrets"]] == ["release"]


def plain_pod(name: str, command: list[str]) -> dict[str, Any]:
    """A pod in the role image with the sandbox's security context, but no sandbox labels:
    no NetworkPolicy selects it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": SANDBOX_UID,
                "runAsGroup": SANDBOX_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": images.ROLE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def probe_result(cluster: Cluster, name: str) -> dict[str, Any]:
    """The probe's JSON line, once its pod (`name`, or the pod of Job `probe-<name>`) is done."""
    selector = f"job-name=probe-{name}" if name in STAGES else f"app={name}"

    def done() -> Any:
        pods = cluster.v1.list_namespaced_pod(cluster.ns, label_selector=selector).items
        return next((p for p in pods if p.status.phase in ("Succeeded", "Failed")), None)

    pod = cluster.wait(done, timeout=180, message=f"probe {name} finished")
    logs = cluster.tb.kubectl("logs", "-n", cluster.ns, pod.metadata.name).stdout
    result: dict[str, Any] = json.loads(logs.strip().splitlines()[-1])
    return result


# ---- faults -------------------------------------------------------------------------------
def released_manifests(tb: Testbed, ns: str) -> list[str]:
    listing = tb.s3_client().list_objects_v2(Bucket="cowork-gym", Prefix=f"node/{ns}/manifests/")
    return [o["Key"] for o in listing.get("Contents", [])]


def test_an_operator_killed_mid_stage_completes_the_environment_once(
    cluster: Cluster, operator: Callable[..., subprocess.Popen[bytes]]
) -> None:
    first = operator()
    cluster.apply(spec_manifest("kill", cluster.ns))
    running_pod(cluster, "kill", "verifier")
    first.kill()  # SIGKILL: no cleanup, no goodbye
    first.wait()
    time.sleep(3)  # the stage's pod runs on without an operator
    operator()
    assert (
        wait_phase(cluster, "kill", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
        == "Released"
    )
    jobs = cluster.jobs()
    # One Job per stage and iteration: the restarted operator adopted the running one.
    assert not [j for j in jobs if j.endswith("-a2")], jobs
    assert len({j.rsplit("-a", 1)[0] for j in jobs}) == len(jobs)
    assert released_manifests(cluster.tb, cluster.ns) == [f"node/{cluster.ns}/manifests/kill.json"]
    finished = [c for c in cluster.env("kill")["status"]["conditions"] if c["type"] == "Released"]
    assert finished[0]["status"] == "True"


def test_a_deleted_sandbox_pod_is_retried_and_deleting_leaves_nothing(
    cluster: Cluster, operator: Callable[..., subprocess.Popen[bytes]]
) -> None:
    operator()
    cluster.apply(spec_manifest("lost", cluster.ns))
    pod = running_pod(cluster, "lost", "builder")
    cluster.v1.delete_namespaced_pod(pod.metadata.name, cluster.ns, grace_period_seconds=0)

    def bound_volumes() -> set[str]:
        return {
            v.metadata.name
            for v in cluster.v1.list_persistent_volume().items
            if v.spec.claim_ref is not None and v.spec.claim_ref.namespace == cluster.ns
        }

    volumes: set[str] = set()

    def finished() -> str | None:
        volumes.update(bound_volumes())  # seen while the stages run
        phase = cluster.phase("lost")
        return phase if phase in ("Released", "Rejected", "Failed") else None

    assert cluster.wait(finished, timeout=RELEASE_TIMEOUT, message="lost finished") == "Released"
    assert "lost-builder-i0-a2" in cluster.jobs()
    assert len(volumes) == 3, volumes

    # The outcome releases the role volumes (sandboxVolumes.retention: Delete), while the
    # finished stage Jobs and their pods stay for their TTL.
    def released() -> bool:
        claims = cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items
        return not claims and not (volumes & bound_volumes())

    cluster.wait(released, timeout=120, message="the role volumes released after the outcome")
    assert cluster.jobs()
    cluster.tb.kubectl("delete", "cwe", "lost", "-n", cluster.ns, "--wait=true", "--timeout=120s")

    def nothing_left() -> bool:
        selector = f"{builders.LABEL_ENV}=lost"
        pods = cluster.v1.list_namespaced_pod(cluster.ns, label_selector=selector).items
        jobs = cluster.batch.list_namespaced_job(cluster.ns).items
        pvcs = cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items
        pvs = {v.metadata.name for v in cluster.v1.list_persistent_volume().items}
        return not pods and not jobs and not pvcs and not (volumes & pvs)

    cluster.wait(nothing_left, timeout=120, message="no pod, Job, claim or volume left")
    leftovers = list((cluster.tb.run_dir / "volumes").glob("pvc-*"))
    assert not [p for p in leftovers if p.name in volumes], leftovers


# ---- the operator itself as a pod -----------------------------------------------------------
CHART = Path(__file__).resolve().parents[2] / "charts" / "cowork-gym"


def test_the_chart_runs_the_operator_as_a_pod_on_the_node(
    cluster: Cluster, testbed_env: Testbed, node_ns: str, tmp_path: Path
) -> None:
    """`helm install` with the operator image built here: the operator pod, then every stage
    pod, run on the node. The operator reaches the API server through the `kubernetes`
    Service, with the chart's defaults: the node's kube-proxy routes it."""
    tb = testbed_env
    values = {
        "operator": {
            "image": {"repository": images.OPERATOR_IMAGE.rsplit(":", 1)[0], "tag": "dev",
                      "pullPolicy": "Never"},
            "peering": {"enabled": False},
            "reconcileIntervalSeconds": 1,
        },
        "sandbox": {"image": images.ROLE_IMAGE, "resources": {"cpu": "500m", "memory": "1Gi"}},
        "sandboxImagePullPolicy": "Never",
        "sandboxVolumes": {"retention": "Retain"},  # keep the stage pods this test inspects
        "s3": {"endpoint": tb.s3_node_endpoint, "credentialsSecret": S3_SECRET},
        "networkPolicy": {"objectStore": {
            "cidr": f"{NODE_IP}/32", "port": relay_port(tb), "dns": {"enabled": False},
        }},
    }  # fmt: skip
    (tmp_path / "values.json").write_text(json.dumps(values))
    tb.helm("install", "op", str(CHART), "-n", node_ns, "-f", str(tmp_path / "values.json"))
    try:
        selector = "app.kubernetes.io/instance=op"

        def operator_pod() -> Any:
            pods = cluster.v1.list_namespaced_pod(node_ns, label_selector=selector).items
            return next((p for p in pods if p.status.phase == "Running"), None)

        pod = cluster.wait(operator_pod, timeout=180, message="the operator pod running")
        assert pod.spec.node_name == NODE_NAME
        cluster.apply(spec_manifest("inpod", node_ns))
        phase = wait_phase(cluster, "inpod", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
        assert phase == "Released", tb.kubectl("logs", "-n", node_ns, pod.metadata.name).stdout
        stages = {p.metadata.labels[builders.LABEL_STAGE]: p for p in env_pods(cluster, "inpod")}
        assert set(stages) == set(STAGES)
        assert all(p.spec.node_name == NODE_NAME for p in stages.values())
        assert all(p.status.phase == "Succeeded" for p in stages.values())
    finally:
        tb.helm("uninstall", "op", "-n", node_ns, check=False)

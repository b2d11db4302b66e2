"""An environment built by LLM-backed roles on the test-bed's node, through the chart's LLM
gateway: `helm install` with gateway.enabled runs the operator and the gateway as pods; a
scripted OpenAI-compatible server (tests/fixtures/llm/server.py replaying build_ok, from a
ConfigMap) runs as a pod too and refuses any key but its own. The upstream key is in a
Secret that only the gateway mounts; the Builder's and the Verifier Constructor's stage
pods get the gateway's address and a token the operator signed for the environment, and
their NetworkPolicies let them reach the gateway and nothing else (a probe pod with the
builder's labels shows it). The environment is released; its token usage is in its status,
in the gateway's metrics and in the operator's.

Services route on the node (kube-proxy, CoreDNS): the chart's default gateway URL, the
gateway Service's name, is resolved by the operator and handed to the stage pods as the
Service's cluster IP, which kube-proxy sends on to the gateway pod; the NetworkPolicies
apply to the translated packets. The operator reaches the API server through the
`kubernetes` Service, as on any cluster.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from coworkgym.spec import EnvironmentSpec
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment import builders
from coworkgym_testbed import images
from coworkgym_testbed.node import NODE_IP, NODE_NAME
from coworkgym_testbed.testbed import Testbed
from tests.integration.test_llm_roles import MODEL, llm_spec
from tests.support.kube import Cluster
from tests.testbed.test_node import (
    CHART,
    PROBE,
    S3_SECRET,
    download,
    env_pods,
    node_ns,
    relay_port,
    run_cli,
    wait_phase,
)
from tests.testbed.test_rollout_batch_node import pod, running_ip

pytestmark = [pytest.mark.testbed, pytest.mark.node]
__all__ = ["node_ns"]  # the fixture, used by name
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
UPSTREAM_KEY = "sk-scripted-upstream-key"
KEYS_SECRET = "llm-upstream-keys"  # gateway.upstreamKeysSecret: the gateway's alone
RELEASE_TIMEOUT = 300.0
REPLY_TOKENS = (100, 20)  # prompt, completion: what the scripted server reports per reply


def chart_values(tb: Testbed) -> dict[str, Any]:
    return {
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
        "gateway": {"enabled": True, "upstreamKeysSecret": KEYS_SECRET,
                    "environmentTokenBudget": 50_000},
    }  # fmt: skip


def helm(tb: Testbed, verb: str, ns: str, values: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / f"values-{verb}.json"
    path.write_text(json.dumps(values))
    tb.helm(verb, "op", str(CHART), "-n", ns, "-f", str(path))


@pytest.fixture
def upstream(testbed_env: Testbed, cluster: Cluster, node_ns: str) -> str:
    """The scripted model server as a pod; its OpenAI base URL. It knows its own key (a
    Secret of its own); the gateway's copy is in KEYS_SECRET, named `scripted`."""
    tb = testbed_env
    files = [f"--from-file={FIXTURES / f}" for f in ("server.py", "build_ok.json")]
    tb.kubectl("create", "configmap", "upstream", "-n", node_ns, *files)
    tb.kubectl("create", "secret", "generic", "upstream-accepts", "-n", node_ns,
               f"--from-literal=key={UPSTREAM_KEY}")  # fmt: skip
    tb.kubectl("create", "secret", "generic", KEYS_SECRET, "-n", node_ns,
               f"--from-literal=scripted={UPSTREAM_KEY}")  # fmt: skip
    server = pod(
        "upstream", node_ns, {"app": "scripted-upstream"},
        ["python", "/upstream/server.py", "build_ok", "8080", "/accepts/key"],
        volumeMounts=[{"name": "script", "mountPath": "/upstream"},
                      {"name": "accepts", "mountPath": "/accepts", "readOnly": True}],
        pod={"volumes": [{"name": "script", "configMap": {"name": "upstream"}},
                         {"name": "accepts", "secret": {"secretName": "upstream-accepts"}}]},
    )  # fmt: skip
    cluster.apply(server)
    return f"http://{running_ip(cluster, 'upstream')}:8080/v1"


@pytest.fixture
def installed(
    testbed_env: Testbed, cluster: Cluster, node_ns: str, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The chart with its gateway, at the chart's default URL (the gateway Service's name).
    The gateway's and the operator's pod addresses, and the gateway Service's cluster IP."""
    tb = testbed_env
    helm(tb, "install", node_ns, chart_values(tb), tmp_path)
    try:
        gateway_pod = cluster.wait(
            lambda: next(iter(pods(cluster, "app=llm-gateway", ready=True)), None),
            timeout=120, message="the gateway pod ready",
        )  # fmt: skip
        gateway = f"http://{gateway_pod.status.pod_ip}:8000"
        service = cluster.v1.list_namespaced_service(
            node_ns, label_selector="app.kubernetes.io/component=gateway"
        ).items[0]
        selector = "app.kubernetes.io/instance=op,app.kubernetes.io/component=operator"
        operator_pod = cluster.wait(
            lambda: next(iter(pods(cluster, selector, ready=True)), None),
            timeout=180, message="the operator pod ready",
        )  # fmt: skip
        yield {
            "gateway": gateway,
            "gateway_pod": gateway_pod.metadata.name,
            "gateway_service_ip": service.spec.cluster_ip,
            "operator": f"http://{operator_pod.status.pod_ip}:8080",
            "operator_pod": operator_pod.metadata.name,
        }
    finally:
        tb.kubectl("delete", "cwe", "--all", "-n", node_ns, "--wait=true", "--timeout=60s",
                   check=False)  # fmt: skip
        tb.helm("uninstall", "op", "-n", node_ns, check=False)


def pods(cluster: Cluster, selector: str, *, ready: bool = False) -> list[Any]:
    found = cluster.v1.list_namespaced_pod(cluster.ns, label_selector=selector).items
    if not ready:
        return list(found)
    return [
        p
        for p in found
        if p.status.phase == "Running"
        and p.status.pod_ip
        and all(s.ready for s in p.status.container_statuses or [])
    ]


def llm_environment(name: str, ns: str, upstream: str) -> tuple[dict[str, Any], EnvironmentSpec]:
    spec = llm_spec()
    for role in ("builder", "verifier"):
        backend = getattr(spec.backends, role)
        backend.kind, backend.model, backend.base_url = "llm", MODEL, upstream
        backend.api_key_secret = "scripted"
    spec.release.uri = f"s3://cowork-gym/node-llm/{ns}"
    body = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "CoworkEnvironment",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec.to_wire(),
    }
    return body, spec


def start_probe(cluster: Cluster, env: dict[str, Any], spec: EnvironmentSpec, targets: Any) -> None:
    """The LLM Builder's real Job (labels, security context: the policies that select it)
    running the isolation probe, without its volumes and token (it only knocks)."""
    settings = OperatorSettings(role_image=images.ROLE_IMAGE, image_pull_policy="Never")
    job = builders.stage_job(env, spec, "builder", 0, 1, [], settings)
    job["metadata"]["name"] = "probe-builder"
    job["metadata"].pop("ownerReferences")
    pod_spec = job["spec"]["template"]["spec"]
    pod_spec["volumes"] = [v for v in pod_spec["volumes"] if "emptyDir" in v]
    container = pod_spec["containers"][0]
    kept = {v["name"] for v in pod_spec["volumes"]}
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] in kept]
    container["env"] = []
    small = {"cpu": "100m", "memory": "256Mi"}
    container["resources"] = {"requests": small, "limits": small}
    container["command"] = ["python", "-c", PROBE, json.dumps(targets)]
    from kubernetes import utils

    utils.create_from_dict(cluster.tb.kubernetes_client(), job, namespace=cluster.ns)


def probe_result(cluster: Cluster) -> dict[str, Any]:
    def done() -> Any:
        found = pods(cluster, "job-name=probe-builder")
        return next((p for p in found if p.status.phase in ("Succeeded", "Failed")), None)

    finished = cluster.wait(done, timeout=180, message="the probe finished")
    logs = cluster.tb.kubectl("logs", "-n", cluster.ns, finished.metadata.name).stdout
    result: dict[str, Any] = json.loads(logs.strip().splitlines()[-1])
    return result


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        series, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


def test_an_llm_role_environment_is_released_on_the_node_through_the_in_cluster_gateway(
    testbed_env: Testbed,
    cluster: Cluster,
    node_ns: str,
    upstream: str,
    installed: dict[str, str],
    tmp_path: Path,
) -> None:
    tb, ns = testbed_env, node_ns
    body, spec = llm_environment("llm", ns, upstream)
    started = time.monotonic()
    cluster.apply(json.dumps(body))

    # while the roles work: a pod with the LLM Builder's labels may reach the gateway only
    from kubernetes import client

    net = client.NetworkingV1Api(cluster.core)

    def policies() -> bool:
        names = {p.metadata.name for p in net.list_namespaced_network_policy(ns).items}
        return "llm-egress-gateway" in names

    cluster.wait(policies, timeout=60, message="the environment's NetworkPolicies")
    upstream_host = upstream.removeprefix("http://").split(":")[0]
    targets = {  # the gateway as the stage pods are handed it: its Service's cluster IP
        "gateway": [installed["gateway_service_ip"], 8000],
        "upstream": [upstream_host, 8080],
        "s3-relay": [NODE_IP, relay_port(tb)],
        "kubelet": [NODE_IP, tb.ports["kubelet"]],
    }
    start_probe(cluster, cluster.env("llm"), spec, targets)

    try:
        phase = wait_phase(cluster, "llm", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
    except AssertionError:
        print(tb.kubectl("logs", "-n", ns, installed["operator_pod"], "--tail=80").stdout)
        print(tb.kubectl("get", "pods,jobs", "-n", ns, "-o", "wide").stdout)
        raise
    seconds = time.monotonic() - started
    status = cluster.env("llm")["status"]
    if phase != "Released":
        print(tb.kubectl("logs", "-n", ns, installed["gateway_pod"], "--tail=40").stdout)
    assert phase == "Released", status["message"]

    # the usage the stage pods reported, per role: 5 Builder and 4 Verifier Constructor
    # replies in the script, each reporting REPLY_TOKENS
    prompt, completion = REPLY_TOKENS
    assert status["llmUsage"] == [
        {"role": "builder", "requests": 5, "promptTokens": 5 * prompt,
         "completionTokens": 5 * completion},
        {"role": "verifier", "requests": 4, "promptTokens": 4 * prompt,
         "completionTokens": 4 * completion},
    ]  # fmt: skip
    total = 9 * (prompt + completion)
    print(f"released in {seconds:.0f}s through the gateway: {total} tokens, 9 model calls")

    # every call reached the upstream with the key only the gateway holds
    seen = httpx.get(upstream.removesuffix("/v1") + "/requests", timeout=10).json()["requests"]
    assert sorted(r["lane"] for r in seen) == ["builder"] * 5 + ["verifier"] * 4
    assert all(r["keyed"] and r["model"] == MODEL for r in seen), seen
    # the gateway's metrics and the operator's say the same
    gateway_metrics = httpx.get(installed["gateway"] + "/metrics", timeout=10).text
    assert metric(gateway_metrics, "coworkgym_llm_tokens_total", role="builder") == 5 * (
        prompt + completion
    )
    assert metric(gateway_metrics, "coworkgym_llm_tokens_total") == total
    assert metric(gateway_metrics, "coworkgym_llm_requests_total", outcome="ok") == 9
    operator_metrics = httpx.get(installed["operator"] + "/metrics", timeout=10).text
    assert metric(operator_metrics, "coworkgym_role_tokens_total", namespace=ns) == total
    assert metric(operator_metrics, "coworkgym_role_model_requests_total", role="verifier") == 4

    # the model-backed stages ran on the node, fenced to the gateway, with a token, no key
    stages = {
        p.metadata.labels[builders.LABEL_STAGE]: p
        for p in env_pods(cluster, "llm")
        if p.metadata.labels.get("job-name", "").startswith("llm-")
    }
    assert set(stages) == {"builder", "verifier", "detector", "release"}
    for stage, stage_pod in stages.items():
        assert stage_pod.spec.node_name == NODE_NAME and stage_pod.status.phase == "Succeeded"
        egress = stage_pod.metadata.labels[builders.LABEL_EGRESS]
        assert egress == {"builder": "gateway", "verifier": "gateway"}.get(
            stage, "object-store" if stage == "release" else "none"
        )
        variables = {e.name: e for e in stage_pod.spec.containers[0].env or []}
        assert ("COWORKGYM_GATEWAY_TOKEN" in variables) == (egress == "gateway")
        if egress == "gateway":  # the Service's cluster IP: kube-proxy took it to the pod
            url = variables["COWORKGYM_GATEWAY_URL"].value
            assert url == f"http://{installed['gateway_service_ip']}:8000/v1", url
    mounting = [
        p.metadata.name
        for p in pods(cluster, "")
        if any(v.secret and v.secret.secret_name == KEYS_SECRET for v in p.spec.volumes or [])
    ]
    assert mounting == [installed["gateway_pod"]]
    probe = probe_result(cluster)["net"]
    assert probe["gateway"] == "open", probe
    assert probe["upstream"] != "open" and probe["s3-relay"] != "open", probe
    assert probe["kubelet"] != "open", probe

    # a real package, in the store
    package = download(tb, status["packageUri"], tmp_path / "llm")
    check = run_cli(sys.executable, "-m", "coworkgym.cli", "check", str(package))
    assert check.returncode == 0, check.stdout + check.stderr

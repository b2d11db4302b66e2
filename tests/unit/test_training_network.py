"""A TrainingRun's training pods are sandbox pods, fenced by the run's own NetworkPolicy as
built: every training pod (the plain Job's, a round's, a RayJob's head, workers and
submitter) carries the sandbox labels the chart's policies select and the labels the run's
``<run>-training`` policy selects; that policy, owned by the run, lets them reach each other
(any port: Ray's and torch's), the object store and the cluster DNS, and lets in only each
other and KubeRay's operator on the dashboard port; a round's server is left to its own
policy. Checked against a small evaluator of NetworkPolicy peers, so that "nothing else"
is asked of the policy, not of its spelling."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from coworkgym_operator.core.builders import LABEL_EGRESS, LABEL_SANDBOX
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.core.sharding import LABEL_SHARD
from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.network import training_policy
from coworkgym_operator.training.builders.rayjob import build_rayjob
from coworkgym_operator.training.builders.rounds import serving_deployment
from coworkgym_operator.training.builders.run import RoundTraining, training_job
from coworkgym_operator.training.settings import TrainingSettings

ROOT = Path(__file__).resolve().parents[2]
STORE = OperatorSettings(store_cidr="10.9.0.0/24", store_port=9000)
SETTINGS = TrainingSettings(operator=STORE)


def run_of(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": "sft",
        "model": "s3://models/tiny",
        "data": {"uri": "s3://data/t.jsonl"},
        "output": {"uri": "s3://runs/tiny"},
        "resources": {"workers": 2},
    }
    body.update(spec)
    return {
        "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1", "labels": {LABEL_SHARD: "a"}},
        "spec": body,
        "status": {"dataUri": "s3://data/t.jsonl"},
    }


def spec_of(run: dict[str, Any]) -> TrainingRunSpec:
    return TrainingRunSpec.model_validate(run["spec"])


def training_pods(run: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Every training pod the run can have, by what it is: its labels."""
    spec = spec_of(run)
    job = training_job(run, spec, "s3://data/t.jsonl", 1, SETTINGS)
    rounds = RoundTraining(1, "s3://runs/tiny/checkpoints/round-000", "s3://d/kept.jsonl")
    round_job = training_job(run, spec, "s3://d/kept.jsonl", 1, SETTINGS, rounds)
    ray = build_rayjob(run, SETTINGS)["spec"]
    cluster = ray["rayClusterSpec"]
    return {
        "job": job["spec"]["template"]["metadata"]["labels"],
        "round job": round_job["spec"]["template"]["metadata"]["labels"],
        "ray head": cluster["headGroupSpec"]["template"]["metadata"]["labels"],
        "ray worker": cluster["workerGroupSpecs"][0]["template"]["metadata"]["labels"],
        "ray submitter": ray["submitterPodTemplate"]["metadata"]["labels"],
    }


# ---- a NetworkPolicy evaluator, for one namespace ------------------------------------------
Peer = dict[str, Any]  # {"labels": ..., "namespace": ...} or {"ip": ...}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(rule_peer: dict[str, Any], peer: Peer, own_namespace: str) -> bool:
    if "ipBlock" in rule_peer:
        cidr = rule_peer["ipBlock"]["cidr"]
        return "ip" in peer and _in_cidr(peer["ip"], cidr)
    if "ip" in peer:
        return False
    namespaces = rule_peer.get("namespaceSelector")
    if namespaces is None:
        if peer["namespace"] != own_namespace:
            return False
    elif not _matches(namespaces, {"kubernetes.io/metadata.name": peer["namespace"]}):
        return False
    return _matches(rule_peer.get("podSelector") or {}, peer["labels"])


def _in_cidr(ip: str, cidr: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


def _port_matches(rule: dict[str, Any], protocol: str, port: int) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    return any(p.get("protocol", "TCP") == protocol and p["port"] == port for p in ports)


def allows(policy: dict[str, Any], direction: str, peer: Peer, protocol: str, port: int) -> bool:
    """Whether ``policy`` lets traffic from (ingress) or to (egress) ``peer`` through."""
    key, peers = ("ingress", "from") if direction == "in" else ("egress", "to")
    namespace = policy["metadata"]["namespace"]
    for rule in policy["spec"].get(key) or []:
        if not _port_matches(rule, protocol, port):
            continue
        if any(_peer_matches(p, peer, namespace) for p in rule.get(peers) or []):
            return True
    return False


def pod(labels: dict[str, str], namespace: str = "ml") -> Peer:
    return {"labels": labels, "namespace": namespace}


# ---- the labels --------------------------------------------------------------------------------
def test_every_training_pod_is_a_sandbox_pod_the_runs_policy_selects() -> None:
    run = run_of()
    selector = training_policy(run, SETTINGS)["spec"]["podSelector"]
    for what, labels in training_pods(run).items():
        assert (labels[LABEL_SANDBOX], labels[LABEL_EGRESS]) == ("true", "object-store"), what
        assert _matches(selector, labels), what
        assert labels[LABEL_SHARD] == "a", what  # its replica sees it


def test_a_rounds_server_is_left_to_its_own_policy() -> None:
    run = run_of(objective="grpo", rounds=2, rollout={"environments": {"names": ["env-a"]}})
    del run["spec"]["data"]
    server = serving_deployment(run, spec_of(run), 0, "s3://models/tiny", SETTINGS)
    labels = server["spec"]["template"]["metadata"]["labels"]
    assert labels[LABEL_SANDBOX] == "true"  # the chart's deny-all applies to it
    assert not _matches(training_policy(run, SETTINGS)["spec"]["podSelector"], labels)


def test_the_charts_sandbox_policies_select_the_same_label() -> None:
    helpers = (ROOT / "charts/cowork-gym/templates/_helpers.tpl").read_text()
    key = re.search(r'define "cowork-gym.sandboxLabelKey" -}}\s*(\S+)', helpers)
    assert key is not None and key.group(1) == LABEL_SANDBOX


# ---- the policy --------------------------------------------------------------------------------
def test_the_policy_is_the_runs_and_goes_with_it() -> None:
    policy = training_policy(run_of(), SETTINGS)
    assert policy["metadata"]["name"] == "tiny-training"
    assert policy["metadata"]["namespace"] == "ml"
    (owner,) = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainingRun", "tiny", "u-1", True)  # fmt: skip
    assert policy["metadata"]["labels"]["coworkgym.dev/trainingrun"] == "tiny"  # deletecollection
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]


RAY_PORTS = [6379, 8265, 10001, 10002, 19999, 52365, 29500, 45123]  # GCS ... torch's, random


@pytest.mark.parametrize("port", RAY_PORTS)
def test_the_runs_training_pods_reach_each_other_on_any_port(port: int) -> None:
    run = run_of()
    policy = training_policy(run, SETTINGS)
    pods = training_pods(run)
    for labels in pods.values():
        assert allows(policy, "in", pod(labels), "TCP", port)
        assert allows(policy, "out", pod(labels), "TCP", port)


def test_they_reach_the_object_store_and_the_cluster_dns_and_nothing_else() -> None:
    policy = training_policy(run_of(), SETTINGS)
    assert allows(policy, "out", {"ip": "10.9.0.7"}, "TCP", 9000)
    assert not allows(policy, "out", {"ip": "10.9.0.7"}, "TCP", 443)
    dns = pod({"k8s-app": "kube-dns"}, "kube-system")
    assert allows(policy, "out", dns, "UDP", 53) and allows(policy, "out", dns, "TCP", 53)
    nowhere = [
        {"ip": "10.0.0.1"},  # the API server's Service
        {"ip": "8.8.8.8"},
        pod({"app": "llm-gateway"}),
        pod({"coworkgym.dev/trainingrun": "other", "coworkgym.dev/step": "train"}),
        pod({"coworkgym.dev/trainingrun": "tiny", "coworkgym.dev/step": "train"}, "elsewhere"),
        pod({"coworkgym.dev/trainingrun": "tiny", "coworkgym.dev/step": "serve"}),
        pod({"k8s-app": "kube-dns"}, "ml"),  # not the cluster DNS
    ]
    for peer in nowhere:
        for protocol, port in (("TCP", 443), ("TCP", 6379), ("UDP", 53), ("TCP", 8000)):
            assert not allows(policy, "out", peer, protocol, port), (peer, port)


def test_only_each_other_and_kuberay_on_the_dashboard_port_come_in() -> None:
    policy = training_policy(run_of(), SETTINGS)
    kuberay = pod({"app.kubernetes.io/name": "kuberay-operator"}, "ray-system")
    assert allows(policy, "in", kuberay, "TCP", 8265)
    assert not allows(policy, "in", kuberay, "TCP", 6379)
    strangers = [
        pod({"app": "llm-gateway"}),
        pod({"coworkgym.dev/sandbox": "true", "coworkgym.dev/environment": "env-a"}),
        pod({"coworkgym.dev/trainingrun": "other", "coworkgym.dev/step": "train"}),
        {"ip": "10.9.0.7"},
    ]
    for peer in strangers:
        for port in (8265, 6379, 10001, 29500):
            assert not allows(policy, "in", peer, "TCP", port), (peer, port)


def test_where_the_cluster_dns_is_not_a_pod_it_is_reached_by_address() -> None:
    node = TrainingSettings(operator=STORE, dns_cidrs=("10.244.0.1/32",), kuberay_namespace="ray")
    policy = training_policy(run_of(), node)
    assert allows(policy, "out", {"ip": "10.244.0.1"}, "UDP", 53)
    assert not allows(policy, "out", {"ip": "10.244.0.1"}, "TCP", 22)
    assert not allows(policy, "out", pod({"k8s-app": "kube-dns"}, "kube-system"), "UDP", 53)
    kuberay = {"app.kubernetes.io/name": "kuberay-operator"}
    assert allows(policy, "in", pod(kuberay, "ray"), "TCP", 8265)
    assert not allows(policy, "in", pod(kuberay, "elsewhere"), "TCP", 8265)

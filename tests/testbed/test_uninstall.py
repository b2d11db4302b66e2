"""What `helm uninstall`'s pre-delete hook does (python -m coworkgym_operator.uninstall), on a
real API server: with the operator running, every object of the four kinds is deleted and
finished by the operator, nothing is left to drop; with no operator, the finalizers are
dropped at the deadline so the objects (and their namespace) can go; `--keep` releases the
objects without deleting them and leaves other finalizers alone. The chart's hook itself
runs on the node (tests/testbed/test_docs_path.py's clean-up)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from coworkgym_operator.uninstall import FINALIZERS, Cluster, everything, uninstall
from coworkgym_testbed.kopfkit import kopf_runner
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster as KubeCluster

pytestmark = pytest.mark.testbed
GROUP, VERSION = "coworkgym.dev", "v1alpha1"
CLEANUP = FINALIZERS[0]
OTHER = "example.com/keep-me"
# nothing runs the environments' stage pods here: no node is named like this
PLAYED = {"nodeSelector": {"coworkgym.dev/kubelet": "played-by-test"}}


def objects(finalizers: list[str]) -> dict[str, dict[str, Any]]:
    """One valid object of each kind, by plural."""
    meta = {"finalizers": finalizers}
    return {
        "coworkenvironments": {
            "kind": "CoworkEnvironment",
            "metadata": {"name": "env", **meta},
            "spec": {
                "task": {"labels": {"capabilities": ["data_analysis"],
                                    "scenario": "data_analysis/reporting/periodic_report"}},
                "release": {"uri": "s3://cowork-gym/envs"},
                "sandbox": PLAYED,
            },
        },
        "rolloutbatches": {
            "kind": "RolloutBatch",
            "metadata": {"name": "batch", **meta},
            "spec": {"environments": {"names": ["env"]},
                     "policies": [{"harness": "oracle", "model": "oracle"}],
                     "output": {"uri": "s3://cowork-gym/rollouts/batch"}},
        },
        "synthesiscampaigns": {
            "kind": "SynthesisCampaign",
            "metadata": {"name": "campaign", **meta},
            "spec": {"quotas": {"total": 1}, "release": {"uri": "s3://cowork-gym/envs"},
                     "sandbox": PLAYED},
        },
        "trainingruns": {
            "kind": "TrainingRun",
            "metadata": {"name": "run", **meta},
            "spec": {"objective": "sft", "model": "s3://models/tiny",
                     "data": {"uri": "s3://cowork-gym/trajectories.jsonl"},
                     "output": {"uri": "s3://cowork-gym/runs/tiny"}},
        },
    }  # fmt: skip


@pytest.fixture
def api(cluster: KubeCluster) -> client.CustomObjectsApi:
    return cluster.custom


def create_all(api: client.CustomObjectsApi, ns: str, finalizers: list[str]) -> None:
    for plural, body in objects(finalizers).items():
        body["apiVersion"] = f"{GROUP}/{VERSION}"
        api.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body)


def finalizers_of(api: client.CustomObjectsApi, ns: str) -> dict[str, list[str]]:
    return {
        f"{ref.plural}/{ref.name}": api.get_namespaced_custom_object(
            GROUP, VERSION, ns, ref.plural, ref.name
        )["metadata"].get("finalizers")
        or []
        for ref in everything(Cluster(api, ns))
    }


@pytest.fixture
def leave_nothing(api: client.CustomObjectsApi, ns: str) -> Iterator[None]:
    """Whatever a failed test left is released and deleted, so the shared test-bed's
    namespace can go."""
    yield
    left = Cluster(api, ns)
    for ref in everything(left):
        api.patch_namespaced_custom_object(
            GROUP, VERSION, ns, ref.plural, ref.name, {"metadata": {"finalizers": None}}
        )
        left.delete(ref)


def test_with_no_operator_the_finalizers_are_dropped_at_the_deadline(
    api: client.CustomObjectsApi, ns: str, leave_nothing: None
) -> None:
    create_all(api, ns, [CLEANUP])
    started = time.monotonic()
    dropped = uninstall(Cluster(api, ns), keep=False, timeout=3)
    assert sorted(r.plural for r in dropped) == sorted(objects([]))
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 20
    while everything(Cluster(api, ns)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert everything(Cluster(api, ns)) == []


def test_keep_releases_the_objects_and_leaves_other_finalizers(
    api: client.CustomObjectsApi, ns: str, leave_nothing: None
) -> None:
    create_all(api, ns, [CLEANUP, OTHER])
    released = uninstall(Cluster(api, ns), keep=True, timeout=3)
    assert len(released) == 4
    left = finalizers_of(api, ns)
    assert len(left) == 4 and all(f == [OTHER] for f in left.values()), left


def test_with_the_operator_running_it_finishes_every_object(
    api: client.CustomObjectsApi,
    ns: str,
    testbed_env: Testbed,
    monkeypatch: pytest.MonkeyPatch,
    leave_nothing: None,
) -> None:
    from coworkgym_operator.core import kube as shared
    from coworkgym_operator.environment import handlers as environment

    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    monkeypatch.setattr(shared, "_shared", None)  # log in afresh to this test-bed
    monkeypatch.setattr(environment, "_kube", None)
    args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
    with kopf_runner(args, timeout=120):
        create_all(api, ns, [])
        deadline = time.monotonic() + 60  # the operator puts its finalizer on each
        while time.monotonic() < deadline:
            if all(CLEANUP in f for f in finalizers_of(api, ns).values()):
                break
            time.sleep(0.5)
        assert all(CLEANUP in f for f in finalizers_of(api, ns).values()), finalizers_of(api, ns)
        dropped = uninstall(Cluster(api, ns), keep=False, timeout=90)
    assert dropped == []
    assert everything(Cluster(api, ns)) == []

"""The RolloutBatch resource on a real API server: the CRD refuses what the models refuse,
with the models' messages; kubectl get shows the printer columns; and the operator stops a
batch that selects no environment, names one that is not Released, or names an endpoint
that does not answer, with a condition saying why and no pod, volume or Secret created.
(test_rollout_batch_node.py runs a batch in real pods.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kopf.testing import KopfRunner

from coworkgym_operator.core.metrics import REGISTRY
from coworkgym_operator.rollouts.api.types import (
    ONE_SELECTION,
    OUTPUT_NOT_S3,
    POLICY_NEEDS_ENDPOINT,
    SPEC_FROZEN,
)
from coworkgym_testbed.kopfkit import kopf_runner
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster

pytestmark = pytest.mark.testbed
BATCH_CRD = Path(__file__).resolve().parents[2] / "crds" / "rolloutbatches.yaml"
PLURAL = "rolloutbatches"


@pytest.fixture(scope="session")
def batch_crd(testbed: Testbed) -> None:
    testbed.kubectl("apply", "-f", str(BATCH_CRD))
    testbed.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.coworkgym.dev"
    )


def batch(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "environments": {"names": ["alpha"]},
        "policies": [{"harness": "tool-calling", "model": "m", "baseUrl": "http://10.9.9.9/v1"}],
        "samplesPerEnvironment": 2,
        "output": {"uri": "s3://cowork-gym/rollouts"},
    }
    body.update(spec)
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "RolloutBatch",
        "metadata": {"name": name},
        "spec": body,
    }


def apply(
    tb: Testbed, ns: str, body: dict[str, Any], tmp: Path
) -> subprocess.CompletedProcess[str]:
    path = tmp / f"{body['metadata']['name']}.json"
    path.write_text(json.dumps(body))
    return tb.kubectl("apply", "-n", ns, "-f", str(path), check=False)


def get(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, PLURAL, name
    )
    return got


def condition(cluster: Cluster, name: str, kind: str) -> dict[str, Any] | None:
    conds = (get(cluster, name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == kind), None)


# ---- the CRD ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"environments": {}}, ONE_SELECTION),
        ({"environments": {"names": ["a"], "manifestUri": "s3://b/m.jsonl"}}, ONE_SELECTION),
        ({"policies": [{"harness": "tool-calling", "model": "m"}]}, POLICY_NEEDS_ENDPOINT),
        ({"output": {"uri": "/data/out"}}, OUTPUT_NOT_S3),
        ({"policies": [{"harness": "juggler", "model": "m"}]}, 'Unsupported value: "juggler"'),
        ({"samplesPerEnvironment": 0}, "should be greater than or equal to 1"),
        ({"environments": {"names": ["a", "a"]}}, "Duplicate value"),
    ],
)
def test_the_api_server_refuses_what_the_models_refuse(
    testbed_env: Testbed, ns: str, batch_crd: None, tmp_path: Path, spec: dict[str, Any],
    message: str,
) -> None:  # fmt: skip
    done = apply(testbed_env, ns, batch("bad", **spec), tmp_path)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_the_spec_is_frozen_except_concurrency_and_filter(
    testbed_env: Testbed, ns: str, batch_crd: None, tmp_path: Path
) -> None:
    body = batch("frozen")
    assert apply(testbed_env, ns, body, tmp_path).returncode == 0
    body["spec"]["concurrency"] = 9
    body["spec"]["filter"] = {"minReward": 1.0}
    assert apply(testbed_env, ns, body, tmp_path).returncode == 0
    body["spec"]["samplesPerEnvironment"] = 8
    refused = apply(testbed_env, ns, body, tmp_path)
    assert refused.returncode != 0 and SPEC_FROZEN in refused.stderr


def test_kubectl_get_shows_progress_columns(
    testbed_env: Testbed, ns: str, batch_crd: None, tmp_path: Path
) -> None:
    assert apply(testbed_env, ns, batch("columns"), tmp_path).returncode == 0
    header = testbed_env.kubectl("get", "rb", "-n", ns).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "DONE", "RUNNING", "KEPT", "MESSAGE", "AGE"]
    wide = testbed_env.kubectl("get", "rb", "-n", ns, "-o", "wide").stdout.splitlines()[0]
    assert "PENDING" in wide and "OUTPUT" in wide
    explained = testbed_env.kubectl("explain", "rolloutbatch.spec.samplesPerEnvironment").stdout
    assert "GRPO group size" in explained


# ---- bad input: a condition with the reason and no pod ---------------------------------
@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], AbstractContextManager[KopfRunner]]]:
    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    from coworkgym_operator.environment import handlers as environment
    from coworkgym_operator.rollouts import handlers as controller

    monkeypatch.setattr(environment, "_kube", None)  # log in afresh to this test-bed
    monkeypatch.setattr(controller, "_batch_kube", None)
    monkeypatch.setattr(
        controller,
        "SETTINGS",
        replace(
            controller.SETTINGS,
            gateway_url="http://10.0.0.77:8000/v1",
            gateway_signing_key="testbed-signing-key",
            probe_timeout_seconds=2.0,
        ),
    )

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=120)

    yield start


def no_children(cluster: Cluster) -> None:
    assert cluster.jobs() == []
    assert cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items == []
    assert cluster.v1.list_namespaced_pod(cluster.ns).items == []


def failed_with(cluster: Cluster, name: str) -> dict[str, Any]:
    def complete() -> dict[str, Any] | None:
        c = condition(cluster, name, "Complete")
        return c if c and c["status"] == "True" else None

    cluster.wait(complete, timeout=60, message=f"{name} Complete")
    found = condition(cluster, name, "Failed")
    assert found is not None
    return found


def test_a_batch_that_selects_no_environment_starts_nothing(
    cluster: Cluster,
    operator: Callable[[], AbstractContextManager[KopfRunner]],
    testbed_env: Testbed,
    tmp_path: Path,
) -> None:
    labels = {"namespace": cluster.ns, "outcome": "failed"}
    before = REGISTRY.get_sample_value("coworkgym_rollout_batches_finished_total", labels) or 0
    spec = {"environments": {"selector": {"matchLabels": {"suite": "none-such"}}}}
    with operator():
        assert apply(testbed_env, cluster.ns, batch("empty", **spec), tmp_path).returncode == 0
        failed = failed_with(cluster, "empty")
        assert failed["reason"] == "NoEnvironments"
        assert "suite=none-such" in failed["message"]
        assert get(cluster, "empty")["status"]["phase"] == "Failed"
        no_children(cluster)
        events = testbed_env.kubectl(
            "get", "events", "-n", cluster.ns, "--field-selector", "involvedObject.name=empty"
        ).stdout
        assert "NoEnvironments" in events
    after = REGISTRY.get_sample_value("coworkgym_rollout_batches_finished_total", labels)
    assert after == before + 1


def test_a_named_environment_that_does_not_exist_is_named(
    cluster: Cluster,
    operator: Callable[[], AbstractContextManager[KopfRunner]],
    testbed_env: Testbed,
    tmp_path: Path,
) -> None:
    with operator():
        body = batch("missing", environments={"names": ["ghost"]})
        assert apply(testbed_env, cluster.ns, body, tmp_path).returncode == 0
        failed = failed_with(cluster, "missing")
        assert failed["reason"] == "EnvironmentsNotReleased"
        assert "ghost (not found)" in failed["message"]
        no_children(cluster)


def test_an_unreachable_endpoint_is_named_and_starts_nothing(
    cluster: Cluster,
    operator: Callable[[], AbstractContextManager[KopfRunner]],
    testbed_env: Testbed,
    tmp_path: Path,
) -> None:
    # a manifest batch: the environments are read by the fetch pod, after the probe
    policies = [
        {"harness": "oracle", "model": "oracle"},
        {"harness": "tool-calling", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"},
    ]
    body = batch(
        "unreachable",
        environments={"manifestUri": "s3://cowork-gym/manifest.jsonl"},
        policies=policies,
    )
    with operator():
        assert apply(testbed_env, cluster.ns, body, tmp_path).returncode == 0
        failed = failed_with(cluster, "unreachable")
        assert failed["reason"] == "EndpointUnreachable"
        assert "policies[1] (tool-calling/m) at http://127.0.0.1:9/v1" in failed["message"]
        reachable = condition(cluster, "unreachable", "EndpointsReachable")
        assert reachable is not None and reachable["status"] == "False"
        no_children(cluster)
        listed = testbed_env.kubectl("get", "rb", "unreachable", "-n", cluster.ns).stdout
        assert "Failed" in listed and "unreachable endpoint" in listed

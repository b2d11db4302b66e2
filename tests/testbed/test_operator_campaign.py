"""SynthesisCampaigns on a real API server + controller-manager: what the API server refuses,
waves under the concurrency limit, the status a person follows, the failure threshold, and
deletion. The tests play the kubelet for the children's stage pods (as test_operator.py
does): the pods select a node that does not exist."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from kopf.testing import KopfRunner

from coworkgym_operator.core.metrics import REGISTRY
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_testbed.kopfkit import kopf_runner
from tests.support.kube import Cluster

pytestmark = pytest.mark.testbed
PLAYED = {"nodeSelector": {"coworkgym.dev/kubelet": "played-by-test"}}
STAGES = ("builder", "verifier", "detector", "release")


@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], AbstractContextManager[KopfRunner]]:
    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    from coworkgym_operator.campaign import handlers as campaign
    from coworkgym_operator.environment import handlers as environment

    monkeypatch.setattr(environment, "_kube", None)  # log in afresh to this test-bed
    monkeypatch.setattr(campaign, "_campaign_kube", None)
    monkeypatch.setattr(environment, "SETTINGS", OperatorSettings.from_env())

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=180)

    return start


def campaign(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "SynthesisCampaign",
        "metadata": {"name": name},
        "spec": {"release": {"uri": "s3://cowork-gym/envs"}, "sandbox": PLAYED, **spec},
    }


def kubectl_apply(cluster: Cluster, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = f"/tmp/scamp-{cluster.ns}.json"
    with open(path, "w") as out:
        json.dump(body, out)
    return cluster.tb.kubectl("apply", "-n", cluster.ns, "-f", path, check=False)


def get_campaign(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, "synthesiscampaigns", name
    )
    return got


def children(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    listed = cluster.custom.list_namespaced_custom_object(
        "coworkgym.dev",
        "v1alpha1",
        cluster.ns,
        "coworkenvironments",
        label_selector=f"coworkgym.dev/campaign={name}",
    )
    return list(listed["items"])


def play(cluster: Cluster, env: dict[str, Any], fail: bool) -> None:
    """Finish the stage Job the child waits for (if its pod is there yet): each stage
    succeeds, or with ``fail`` the Builder fails for good."""
    loop = (env.get("status") or {}).get("loop") or {}
    stage, attempt = loop.get("stage"), loop.get("attempt", 1)
    if not stage:
        return
    iteration = env["status"].get("iteration", 0)
    job = f"{env['metadata']['name']}-{stage}-i{iteration}-a{attempt}"
    pods = cluster.v1.list_namespaced_pod(cluster.ns, label_selector=f"job-name={job}").items
    if not pods or (pods[0].status.phase in ("Succeeded", "Failed")):
        return
    if fail:
        result = {"stage": stage, "ok": False, "error": "played failure", "retryable": False}
        cluster.finish(job, result, ok=False)
        return
    result = {"stage": stage, "ok": True}
    if stage == "detector":
        result |= {"defects": [], "digest": "sha256:abc"}
    if stage == "release":
        result |= {"uri": f"s3://cowork-gym/envs/{env['metadata']['name']}", "digest": "sha256:abc"}
    cluster.finish(job, result)


def drive(
    cluster: Cluster, name: str, limit: int, fail: bool = False, timeout: float = 240
) -> Iterator[dict[str, Any]]:
    """Play every child's pods until the campaign is Complete; check the limit on the way.
    Yields the campaign at each round."""

    def complete() -> dict[str, Any] | None:
        kids = children(cluster, name)
        in_flight = [k for k in kids if (k.get("status") or {}).get("phase") not in TERMINAL_PHASES]
        assert len(in_flight) <= limit, [k["metadata"]["name"] for k in in_flight]
        for kid in in_flight:
            play(cluster, kid, fail)
        found = get_campaign(cluster, name)
        seen.append(found)
        conditions = (found.get("status") or {}).get("conditions") or []
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)
        return found if done else None

    seen: list[dict[str, Any]] = []
    cluster.wait(complete, timeout=timeout, message=f"campaign {name} Complete")
    yield from seen


TERMINAL_PHASES = ("Released", "Rejected", "Failed")


def test_the_api_server_refuses_unknown_duplicate_and_unserved_cells(cluster: Cluster) -> None:
    unknown = kubectl_apply(
        cluster,
        campaign(
            "bad", quotas={"cells": [{"domain": "cooking", "capability": "debugging", "count": 1}]}
        ),
    )
    assert unknown.returncode != 0
    assert 'spec.quotas.cells[0].domain: Unsupported value: "cooking"' in unknown.stderr
    cell = {"domain": "finance", "capability": "reconciliation", "count": 1}
    twice = kubectl_apply(cluster, campaign("bad", quotas={"cells": [cell, cell]}))
    assert twice.returncode != 0 and "Duplicate value" in twice.stderr, twice.stderr
    unserved = {"domain": "software", "capability": "scheduling", "count": 2}
    refused = kubectl_apply(cluster, campaign("bad", quotas={"cells": [unserved]}))
    assert refused.returncode != 0
    assert "spec.quotas.cells: Invalid value" in refused.stderr
    assert "served by no procedural family with up to spec.maxTurns" in refused.stderr
    llm = {"kind": "llm", "model": "m", "baseUrl": "http://llm-gateway:8000/v1"}
    allowed = kubectl_apply(
        cluster, campaign("llm-any-cell", quotas={"cells": [unserved]}, backends={"builder": llm})
    )
    assert allowed.returncode == 0, allowed.stderr  # an LLM Builder may build any cell
    neither = kubectl_apply(cluster, campaign("bad", quotas={}))
    assert "exactly one of cells" in neither.stderr
    long_name = kubectl_apply(cluster, campaign("x" * 39, quotas={"total": 1}))
    assert "at most 38 characters" in long_name.stderr
    # quotas are frozen; the concurrency is not
    ok = kubectl_apply(cluster, campaign("frozen", quotas={"total": 2}, concurrency=1))
    assert ok.returncode == 0, ok.stderr
    changed = kubectl_apply(cluster, campaign("frozen", quotas={"total": 3}, concurrency=1))
    assert "immutable" in changed.stderr
    assert (
        kubectl_apply(cluster, campaign("frozen", quotas={"total": 2}, concurrency=2)).returncode
        == 0
    )


def test_a_campaign_creates_waves_under_its_limit_and_reports_coverage(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    with operator() as runner:
        assert (
            kubectl_apply(cluster, campaign("demo", quotas={"total": 5}, concurrency=2)).returncode
            == 0
        )
        rounds = list(drive(cluster, "demo", limit=2))
        printed = cluster.tb.kubectl("get", "scamp", "-n", cluster.ns).stdout
    assert runner.exception is None
    status = get_campaign(cluster, "demo")["status"]
    assert status["phase"] == "Succeeded" and status["progress"] == "5/5"
    counts = status["counts"]
    assert (counts["planned"], counts["created"], counts["released"], counts["inFlight"]) == (
        5,
        5,
        5,
        0,
    )
    assert sum(c["planned"] for c in status["coverage"]) == 5
    assert all(c["released"] == c["planned"] == c["created"] for c in status["coverage"])
    assert len(status["coverage"]) == 5  # balanced: five cells, one each
    assert status["observedGeneration"] == 1
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {
        "Planned": "Planned",
        "Created": "AllCreated",
        "FailureRateExceeded": "BelowThreshold",
        "Failed": "Succeeded",
        "Complete": "Succeeded",
    }
    # children: owned by the campaign, named by index, labelled with their cell
    kids = sorted(children(cluster, "demo"), key=lambda k: k["metadata"]["name"])
    assert [k["metadata"]["name"] for k in kids] == [f"demo-{i:05d}" for i in range(5)]
    owner = kids[0]["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "SynthesisCampaign" and owner["controller"] is True
    assert {"coworkgym.dev/domain", "coworkgym.dev/capability"} <= set(
        kids[0]["metadata"]["labels"]
    )
    # progress a person can follow: a phase that moved, and the columns
    assert "Running" in {r.get("status", {}).get("phase") for r in rounds}
    header = printed.splitlines()[0].split()
    assert header[:6] == ["NAME", "PHASE", "FINISHED", "RELEASED", "INFLIGHT", "FAILURERATIO"]
    assert "Succeeded" in printed and "5/5" in printed
    cluster.tb.kubectl(
        "wait", "--for=condition=Complete", "--timeout=5s", "scamp/demo", "-n", cluster.ns
    )


def test_failing_children_stop_the_campaign_and_deleting_it_deletes_them(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    threshold = {"maxFailureRatio": 0.5, "minFinished": 2}
    body = campaign("failing", quotas={"total": 8}, concurrency=2, failureThreshold=threshold)
    with operator() as runner:
        assert kubectl_apply(cluster, body).returncode == 0
        list(drive(cluster, "failing", limit=2, fail=True))
        status = get_campaign(cluster, "failing")["status"]
        stopped = REGISTRY.get_sample_value(
            "coworkgym_campaign_stopped", {"namespace": cluster.ns, "campaign": "failing"}
        )

        def warned() -> str | None:  # kopf posts events in the background
            events = cluster.tb.kubectl(
                "get", "events", "-n", cluster.ns, "--field-selector",
                "involvedObject.kind=SynthesisCampaign",
            ).stdout  # fmt: skip
            return events if "FailureRateExceeded" in events else None

        events = cluster.wait(warned, timeout=30, message="the FailureRateExceeded event")
        cluster.tb.kubectl(
            "delete", "scamp", "failing", "-n", cluster.ns, "--wait=true", "--timeout=60s"
        )
        cluster.wait(lambda: not children(cluster, "failing"), timeout=60, message="children gone")
    assert runner.exception is None
    assert status["phase"] == "Failed"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Failed"]["reason"] == "FailureRateExceeded"
    assert conditions["Created"]["reason"] == "Stopped"
    # two in flight at once; they both failed: judged, stopped, no third wave
    assert (
        status["counts"]["created"] <= 4
        and status["counts"]["failed"] == status["counts"]["created"]
    )
    assert status["failureRatio"] == 1.0
    assert stopped == 1.0
    assert "FailureRateExceeded" in events

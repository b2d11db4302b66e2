"""No silent stalls, on a real API server, scheduler and controller-manager: a stage pod
that cannot be scheduled (it selects a node that does not exist) is named in the stage's
condition and an event from the operator within seconds, its attempt ends after the
grace, and the retry policy takes over; a corrected spec.sandbox applies to the stuck
stage's next attempt at once. No node is needed: without one nothing ever starts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from kopf.testing import KopfRunner

from coworkgym_testbed.kopfkit import kopf_runner
from tests.support.kube import Cluster, manifest

pytestmark = pytest.mark.testbed
GRACE_S = 10.0
NOWHERE = {"coworkgym.dev/kubelet": "played-by-test"}  # no node carries this label


@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], AbstractContextManager[KopfRunner]]]:
    monkeypatch.setenv("COWORKGYM_STAGE_START_GRACE_SECONDS", str(GRACE_S))
    monkeypatch.setenv("COWORKGYM_SANDBOX_DEFAULTS", json.dumps({"nodeSelector": NOWHERE}))
    from coworkgym_operator.core.settings import OperatorSettings
    from coworkgym_operator.environment import handlers as environment

    monkeypatch.setattr(environment, "_kube", None)  # log in afresh to this test-bed
    # the module may have been imported (and its settings read) by an earlier test
    monkeypatch.setattr(environment, "SETTINGS", OperatorSettings.from_env())

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=120)

    yield start


def condition(cluster: Cluster, name: str, kind: str) -> dict[str, Any]:
    status = cluster.env(name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def events(cluster: Cluster, name: str) -> list[Any]:
    listed = cluster.v1.list_namespaced_event(
        cluster.ns, field_selector=f"involvedObject.name={name}"
    ).items
    return sorted(listed, key=lambda e: e.metadata.creation_timestamp)


def test_an_unschedulable_stage_says_why_and_its_attempts_end_after_the_grace(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    with operator() as runner:
        cluster.apply(manifest("stuck"))
        created = time.monotonic()
        cluster.job("stuck-builder-i0-a1")
        built = cluster.wait(
            lambda: "Unschedulable" in condition(cluster, "stuck", "Built").get("message", "")
            and condition(cluster, "stuck", "Built"),
            timeout=GRACE_S,
            message="the Built condition naming the scheduling problem",
        )
        seen_after = time.monotonic() - created
        assert built["status"] == "Unknown" and built["reason"] == "Building"
        # the scheduler's own words: no node carries the selected label (or, on a test-bed
        # without a node, there is none at all)
        assert any(
            words in built["message"]
            for words in ("didn't match Pod's node affinity/selector", "no nodes available")
        ), built["message"]
        warned = cluster.wait(
            lambda: [e for e in events(cluster, "stuck") if e.reason == "StagePodNotStarting"],
            timeout=10,
            message="a StagePodNotStarting event",
        )
        assert warned[0].source.component == "cowork-gym-operator"
        assert warned[0].reporting_component == "cowork-gym-operator"
        assert "stuck-builder-i0-a1" in warned[0].message
        # past the grace: attempt 1 is deleted, attempt 2 runs
        cluster.job("stuck-builder-i0-a2")
        cluster.wait(
            lambda: "stuck-builder-i0-a1" not in cluster.jobs(), message="attempt 1 deleted"
        )
        cluster.wait(lambda: cluster.phase("stuck") == "Failed", timeout=30, message="Failed")
        ended_after = time.monotonic() - created
        cluster.wait(lambda: cluster.jobs() == [], message="attempt 2 deleted")
        # kopf posts events from a queue of its own: both ends are in before it stops
        cluster.wait(
            lambda: [e.reason for e in events(cluster, "stuck")].count("StageNotStarted") == 2,
            timeout=15,
            message="a StageNotStarted event per attempt",
        )
    assert runner.exception is None
    status = cluster.env("stuck")["status"]
    assert status["message"].startswith(
        f"builder failed: the builder pod did not start within {GRACE_S:g} s: Unschedulable"
    )
    complete = condition(cluster, "stuck", "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "Failed")
    reasons = [e.reason for e in events(cluster, "stuck")]
    assert reasons.count("StageNotStarted") == 2 and reasons.count("StagePodNotStarting") <= 2
    assert {e.source.component for e in events(cluster, "stuck")} == {"cowork-gym-operator"}
    # the role volumes go with the outcome (sandboxVolumes.retention: Delete)
    cluster.wait(
        lambda: not [
            p
            for p in cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items
            if p.metadata.deletion_timestamp is None
        ],
        message="the role volumes released",
    )
    print(f"condition message after {seen_after:.1f} s; Failed after {ended_after:.1f} s")
    assert seen_after < GRACE_S and ended_after < 3 * GRACE_S + 15


def test_a_sandbox_fix_applies_to_the_stuck_stage_at_once(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    elsewhere = {"coworkgym.dev/kubelet": "fixed-by-user"}
    with operator() as runner:
        cluster.apply(manifest("fixed"))
        cluster.job("fixed-builder-i0-a1")
        cluster.wait(
            lambda: "cannot start" in condition(cluster, "fixed", "Built").get("message", ""),
            timeout=GRACE_S,
            message="the pod problem in the Built condition",
        )
        patch = {"spec": {"sandbox": {"nodeSelector": elsewhere}}}
        cluster.tb.kubectl(
            "patch", "cwe", "fixed", "-n", cluster.ns, "--type=merge", "-p", json.dumps(patch)
        )
        patched = time.monotonic()
        second = cluster.job("fixed-builder-i0-a2")
        replaced_after = time.monotonic() - patched
    assert runner.exception is None
    assert second.spec.template.spec.node_selector == elsewhere
    assert second.metadata.labels["coworkgym.dev/generation"] == "2"
    assert replaced_after < GRACE_S, "replaced on the spec change, not after the grace"
    assert "the spec changed" in cluster.env("fixed")["status"]["message"]

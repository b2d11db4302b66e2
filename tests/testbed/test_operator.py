"""The operator on a real API server + controller-manager, with the tests playing the
kubelet: they mark each stage's pod finished, with the result a real stage would write to its
termination log, and watch the environment walk the loop. (test_node.py has pods that really
run; here the pods select a node that does not exist, so a test-bed node leaves them alone.)"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from kopf.testing import KopfRunner

from coworkgym_operator.core.metrics import REGISTRY
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.handlers import family_of
from coworkgym_operator.environment.metrics import FINISHED
from coworkgym_testbed.kopfkit import kopf_runner
from tests.support.kube import Cluster, manifest, stage_input

pytestmark = pytest.mark.testbed


@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], AbstractContextManager[KopfRunner]]:
    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    monkeypatch.setenv(
        "COWORKGYM_SANDBOX_DEFAULTS",
        '{"nodeSelector": {"coworkgym.dev/kubelet": "played-by-test"}}',
    )
    from coworkgym_operator.environment import handlers as environment

    monkeypatch.setattr(environment, "_kube", None)  # log in afresh to this test-bed
    # the module may have been imported (and its settings read) before this fixture ran
    monkeypatch.setattr(environment, "SETTINGS", OperatorSettings.from_env())

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=120)

    return start


def stages_timed(cluster: Cluster, name: str) -> list[str]:
    """The stages with a time in the environment's ``status.stageTimings``."""
    return [t["stage"] for t in cluster.env(name).get("status", {}).get("stageTimings", [])]


def test_an_environment_walks_build_execute_release(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    body = json.loads(manifest("demo"))
    finished = {"namespace": cluster.ns, "family": family_of(body["spec"]), "outcome": "released"}
    released_before = (
        REGISTRY.get_sample_value("coworkgym_environments_finished_total", finished) or 0.0
    )
    taken = {"namespace": cluster.ns, "family": finished["family"]}
    created_before = REGISTRY.get_sample_value("coworkgym_environments_created_total", taken) or 0.0
    with operator() as runner:
        cluster.apply(manifest("demo"))
        builder = cluster.job("demo-builder-i0-a1")
        # the sandbox Job as designed: no token, non-root, read-only root, own volume only
        pod = builder.spec.template.spec
        container = pod.containers[0]
        assert pod.automount_service_account_token is False
        assert (
            pod.security_context.run_as_non_root
            and pod.security_context.seccomp_profile.type == "RuntimeDefault"
        )
        assert container.security_context.read_only_root_filesystem
        assert container.security_context.allow_privilege_escalation is False
        assert container.security_context.capabilities.drop == ["ALL"]
        assert [(m.name, bool(m.read_only)) for m in container.volume_mounts] == [
            ("builder", False),
            ("tmp", False),
        ]
        assert builder.spec.backoff_limit == 0
        assert builder.metadata.owner_references[0].kind == "CoworkEnvironment"
        pvcs = {
            p.metadata.name
            for p in cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items
        }
        assert pvcs == {"demo-builder", "demo-verifier", "demo-scratch"}
        from kubernetes import client

        policies = (
            client.NetworkingV1Api(cluster.core).list_namespaced_network_policy(cluster.ns).items
        )
        deny = next(p for p in policies if p.metadata.name == "demo-deny-all")
        assert deny.spec.egress is None or deny.spec.egress == []
        assert cluster.wait(lambda: cluster.phase("demo") == "Building")

        cluster.finish("demo-builder-i0-a1", {"stage": "builder", "ok": True})
        # the stage's time is in the status as soon as the stage ends, not at the outcome
        cluster.wait(
            lambda: stages_timed(cluster, "demo") == ["builder"], message="the builder's timing"
        )
        verifier = cluster.job("demo-verifier-i0-a1")
        mounts = [
            (m.name, bool(m.read_only))
            for m in verifier.spec.template.spec.containers[0].volume_mounts
        ]
        assert mounts == [("builder", True), ("verifier", False), ("tmp", False)]
        cluster.finish("demo-verifier-i0-a1", {"stage": "verifier", "ok": True})
        detector = cluster.job("demo-detector-i0-a1")
        mounts = [
            (m.name, bool(m.read_only))
            for m in detector.spec.template.spec.containers[0].volume_mounts
        ]
        assert mounts == [("builder", True), ("verifier", True), ("scratch", False), ("tmp", False)]
        cluster.finish(
            "demo-detector-i0-a1",
            {"stage": "detector", "ok": True, "defects": [], "digest": "sha256:abc"},
        )
        release = cluster.job("demo-release-i1-a1")
        assert release.spec.template.metadata.labels["coworkgym.dev/egress"] == "object-store"
        cluster.finish(
            "demo-release-i1-a1",
            {
                "stage": "release",
                "ok": True,
                "uri": "s3://cowork-gym/envs/demo",
                "digest": "sha256:abc",
            },
        )
        cluster.wait(lambda: cluster.phase("demo") == "Released", message="Released")
        printed = cluster.tb.kubectl("get", "cwe", "-n", cluster.ns).stdout
    assert runner.exception is None
    status = cluster.env("demo")["status"]
    assert status["packageUri"] == "s3://cowork-gym/envs/demo" and status["iteration"] == 1
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Built": "True",
        "VerifierBuilt": "True",
        "Executed": "True",
        "Released": "True",
        "Failed": "False",
        "Complete": "True",
    }
    # kubectl wait works on the outcome, whichever it is
    cluster.tb.kubectl(
        "wait", "--for=condition=Complete", "--timeout=5s", "cwe/demo", "-n", cluster.ns
    )
    assert status["observedGeneration"] == 1
    assert stages_timed(cluster, "demo") == ["builder", "detector", "release", "verifier"]
    assert all(t["seconds"] >= 0 for t in status["stageTimings"]), status["stageTimings"]
    assert "Released" in printed and "s3://cowork-gym/envs/demo" in printed
    assert cluster.jobs() == [
        "demo-builder-i0-a1",
        "demo-detector-i0-a1",
        "demo-release-i1-a1",
        "demo-verifier-i0-a1",
    ]
    released_after = (
        REGISTRY.get_sample_value("coworkgym_environments_finished_total", finished) or 0.0
    )
    assert released_after == released_before + 1
    # taken up once, however many reconciles it saw
    created_after = REGISTRY.get_sample_value("coworkgym_environments_created_total", taken)
    assert created_after == created_before + 1
    assert FINISHED is not None


def test_defects_are_routed_to_their_owner_and_budget_exhaustion_rejects(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    defect = {
        "code": "VERIFIER_PERMISSIVE_CHECK",
        "owner": "verifier",
        "severity": "error",
        "message": "component total: tolerance 90%",
    }
    with operator() as runner:
        cluster.apply(manifest("strict", budget={"maxIterations": 2}))
        cluster.finish(
            cluster.job("strict-builder-i0-a1").metadata.name, {"stage": "builder", "ok": True}
        )
        cluster.finish(
            cluster.job("strict-verifier-i0-a1").metadata.name, {"stage": "verifier", "ok": True}
        )
        cluster.job("strict-detector-i0-a1")
        cluster.finish(
            "strict-detector-i0-a1", {"stage": "detector", "ok": True, "defects": [defect]}
        )
        # only the owner's stage re-runs, with the defect as feedback
        revise = cluster.job("strict-verifier-i1-a1")
        assert stage_input(revise)["feedback"][0]["code"] == "VERIFIER_PERMISSIVE_CHECK"
        cluster.wait(lambda: cluster.phase("strict") == "Revising")
        cluster.finish("strict-verifier-i1-a1", {"stage": "verifier", "ok": True})
        cluster.job("strict-detector-i1-a1")
        cluster.finish(
            "strict-detector-i1-a1", {"stage": "detector", "ok": True, "defects": [defect]}
        )
        cluster.wait(lambda: cluster.phase("strict") == "Rejected", message="Rejected")
    assert runner.exception is None
    status = cluster.env("strict")["status"]
    assert status["defects"][0]["code"] == "VERIFIER_PERMISSIVE_CHECK"
    assert not any(j.startswith("strict-builder-i1") for j in cluster.jobs())
    released = next(c for c in status["conditions"] if c["type"] == "Released")
    assert (released["status"], released["reason"]) == ("False", "Rejected")
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "Rejected")
    cluster.tb.kubectl(
        "wait", "--for=condition=Complete", "--timeout=5s", "cwe/strict", "-n", cluster.ns
    )


def test_a_failed_sandbox_job_is_retried_once(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    with operator():
        cluster.apply(manifest("flaky"))
        cluster.job("flaky-builder-i0-a1")
        cluster.finish(
            "flaky-builder-i0-a1",
            {"stage": "builder", "ok": False, "retryable": True, "error": "OOMKilled"},
            ok=False,
        )
        cluster.job("flaky-builder-i0-a2")
        cluster.finish(
            "flaky-builder-i0-a2",
            {"stage": "builder", "ok": False, "retryable": True, "error": "OOMKilled"},
            ok=False,
        )
        cluster.wait(lambda: cluster.phase("flaky") == "Failed", message="Failed")
    status = cluster.env("flaky")["status"]
    assert "OOMKilled" in status["message"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Built"]["status"], conditions["Built"]["reason"]) == (
        "False",
        "BuilderFailed",
    )
    assert "OOMKilled" in conditions["Built"]["message"]
    assert conditions["VerifierBuilt"]["reason"] == "NotReached"
    complete = conditions["Complete"]
    assert (complete["status"], complete["reason"]) == ("True", "Failed")
    cluster.tb.kubectl(
        "wait", "--for=condition=Complete", "--timeout=5s", "cwe/flaky", "-n", cluster.ns
    )


def test_operator_restart_mid_stage_duplicates_nothing(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    with operator():
        cluster.apply(manifest("sturdy"))
        cluster.job("sturdy-builder-i0-a1")
    assert cluster.jobs() == ["sturdy-builder-i0-a1"]
    cluster.finish("sturdy-builder-i0-a1", {"stage": "builder", "ok": True})  # while it is down
    with operator() as runner:
        cluster.job("sturdy-verifier-i0-a1")
        time.sleep(2)  # several reconciles: nothing more may appear
    assert runner.exception is None
    assert cluster.jobs() == ["sturdy-builder-i0-a1", "sturdy-verifier-i0-a1"]


def test_deleting_the_environment_removes_every_child(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    with operator():
        cluster.apply(manifest("gone"))
        cluster.job("gone-builder-i0-a1")
        cluster.tb.kubectl(
            "delete", "cwe", "gone", "-n", cluster.ns, "--wait=true", "--timeout=60s"
        )
        from kubernetes import client

        net = client.NetworkingV1Api(cluster.core)

        def nothing_left() -> bool:
            return not (
                cluster.jobs()
                or cluster.v1.list_namespaced_persistent_volume_claim(cluster.ns).items
                or net.list_namespaced_network_policy(cluster.ns).items
                or cluster.v1.list_namespaced_pod(cluster.ns).items
            )

        cluster.wait(nothing_left, timeout=60, message="children gone")


def test_invalid_specs_are_refused_with_field_names(cluster: Cluster) -> None:
    bad = json.loads(manifest("bad"))
    bad["spec"]["task"]["turns"] = 7
    bad["spec"]["backends"] = {"builder": {"kind": "llm"}}
    done = cluster.tb.kubectl(
        "apply", "-n", cluster.ns, "-f", "-", input=json.dumps(bad), check=False
    )
    assert done.returncode != 0
    assert "spec.task.turns" in done.stderr
    assert "spec.backends.builder" in done.stderr and "baseUrl" in done.stderr

"""The TrainingRun resource on a real API server: the CRD refuses what the models refuse,
with the models' messages; the spec is frozen but for suspend and the deadlines; kubectl
get and explain read well; and the operator takes a run through its lifecycle — waits for
for its RolloutBatch, fails when that batch failed, creates the training Job (owned, with the
run's lifecycle fields), deletes it on suspend and starts the next one on resume, and
removes its children when the run is deleted. No pod runs here (test_training_run_node.py
trains in a real one)."""

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

from coworkgym_operator.training.api.types import (
    BATCH_BELOW_WORKERS,
    DATA_NOT_S3,
    MODEL_URI,
    ONE_DATA_SOURCE,
    OPD_NEEDS_TEACHER,
    OUTPUT_NOT_S3,
    ROUNDS_NEED_ROLLOUT,
    SPEC_FROZEN,
)
from coworkgym_testbed.kopfkit import kopf_runner
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster

pytestmark = pytest.mark.testbed
PLURAL = "trainingruns"


def run_body(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": "sft",
        "model": "s3://models/tiny",
        "data": {"uri": "s3://cowork-gym/trajectories.jsonl"},
        "output": {"uri": "s3://cowork-gym/runs/tiny"},
        "backoffLimit": 1,
        "activeDeadlineSeconds": 3600,
        "ttlSecondsAfterFinished": 120,
    }
    body.update(spec)
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "TrainingRun",
        "metadata": {"name": name},
        "spec": body,
    }


def apply(
    tb: Testbed, ns: str, body: dict[str, Any], tmp: Path
) -> subprocess.CompletedProcess[str]:
    path = tmp / f"{body['kind']}-{body['metadata']['name']}.json"
    path.write_text(json.dumps(body))
    return tb.kubectl("apply", "-n", ns, "-f", str(path), check=False)


def get(cluster: Cluster, name: str, plural: str = PLURAL) -> dict[str, Any]:
    got: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, plural, name
    )
    return got


def condition(cluster: Cluster, name: str, kind: str) -> dict[str, Any] | None:
    conds = (get(cluster, name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == kind), None)


def phase(cluster: Cluster, name: str) -> str:
    return str((get(cluster, name).get("status") or {}).get("phase") or "")


# ---- the CRD ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"data": {}}, ONE_DATA_SOURCE),
        ({"data": {"uri": "s3://b/t.jsonl", "rolloutBatch": {"name": "b"}}}, ONE_DATA_SOURCE),
        ({"data": {"uri": "/data/t.jsonl"}}, DATA_NOT_S3),
        ({"model": "Qwen/Qwen3-0.6B"}, MODEL_URI),
        ({"objective": "opd"}, OPD_NEEDS_TEACHER),
        ({"objective": "sft", "rounds": 2, "rollout": {"environments": {"names": ["a"]}}},
         ROUNDS_NEED_ROLLOUT),
        ({"output": {"uri": "/runs"}}, OUTPUT_NOT_S3),
        ({"objective": "dpo"}, 'Unsupported value: "dpo"'),
        ({"selection": {"method": "random"}}, 'Unsupported value: "random"'),
        ({"resources": {"workers": 4}, "hyperparameters": {"batchSize": 2}}, BATCH_BELOW_WORKERS),
        ({"resources": {"gpusPerWorker": -1}}, "should be greater than or equal to 0"),
    ],
)  # fmt: skip
def test_the_api_server_refuses_what_the_models_refuse(
    testbed_env: Testbed, ns: str, tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    done = apply(testbed_env, ns, run_body("bad", **spec), tmp_path)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_the_spec_is_frozen_except_suspend_and_the_deadlines(
    testbed_env: Testbed, ns: str, tmp_path: Path
) -> None:
    body = run_body("frozen")
    assert apply(testbed_env, ns, body, tmp_path).returncode == 0
    body["spec"].update(suspend=True, activeDeadlineSeconds=7200, ttlSecondsAfterFinished=0)
    assert apply(testbed_env, ns, body, tmp_path).returncode == 0
    changes: list[dict[str, Any]] = [
        {"model": "s3://models/other"},
        {"data": {"uri": "s3://b/other.jsonl"}},
        {"teacher": "s3://models/t"},
        {"hyperparameters": {"learningRate": 0.1}},
        {"resources": {"workers": 2}},
    ]
    for change in changes:
        changed = json.loads(json.dumps(body))
        changed["spec"].update(change)
        refused = apply(testbed_env, ns, changed, tmp_path)
        assert refused.returncode != 0 and SPEC_FROZEN in refused.stderr, change


def test_kubectl_get_and_explain(testbed_env: Testbed, ns: str, tmp_path: Path) -> None:
    assert apply(testbed_env, ns, run_body("columns"), tmp_path).returncode == 0
    header = testbed_env.kubectl("get", "tr", "-n", ns).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "OBJECTIVE", "PROGRESS", "LOSS", "MESSAGE", "AGE"]
    wide = testbed_env.kubectl("get", "tr", "-n", ns, "-o", "wide").stdout.splitlines()[0]
    assert "BACKEND" in wide and "CHECKPOINT" in wide
    explained = testbed_env.kubectl("explain", "trainingrun.spec.suspend").stdout
    assert "resumes it from the last checkpoint" in explained
    explained = testbed_env.kubectl("explain", "trainingrun.status.progress").stdout
    assert "Step of total" in explained or "step" in explained


# ---- the operator ----------------------------------------------------------------------
@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], AbstractContextManager[KopfRunner]]]:
    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    from coworkgym_operator.environment import handlers as environment
    from coworkgym_operator.training import handlers as controller

    monkeypatch.setattr(environment, "_kube", None)  # log in afresh to this test-bed
    monkeypatch.setattr(controller, "_training_kube", None)
    settings = controller.SETTINGS
    monkeypatch.setattr(
        controller,
        "SETTINGS",
        replace(settings, operator=replace(settings.operator, stage_start_grace_seconds=600)),
    )

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=120)

    yield start


def a_batch(name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "environments": {"names": ["ghost"]},
        "policies": [{"harness": "oracle", "model": "oracle"}],
        "output": {"uri": f"s3://cowork-gym/rollouts/{name}"},
        **spec,
    }
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "RolloutBatch",
        "metadata": {"name": name},
        "spec": body,
    }


def finished_batch(cluster: Cluster, name: str) -> None:
    """A batch whose status says it succeeded (as the batch controller leaves one): the
    controller leaves a Complete batch as it is."""
    status = {
        "phase": "Succeeded",
        "step": "done",
        "outputUri": f"s3://cowork-gym/rollouts/{name}",
        "counts": {"total": 4, "succeeded": 4, "kept": 3},
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": "", "lastTransitionTime":
             "2026-12-01T00:00:00Z"}
            for t, s, r in (("Complete", "True", "Succeeded"), ("Failed", "False", "Succeeded"))
        ],
    }  # fmt: skip
    cluster.custom.patch_namespaced_custom_object_status(
        "coworkgym.dev", "v1alpha1", cluster.ns, "rolloutbatches", name, {"status": status}
    )


def leave_no_finalizers(tb: Testbed, ns: str) -> None:
    """Delete the namespace's runs and batches while the operator still runs, so that its
    finalizer goes with them (else the namespace would stay Terminating on the shared
    test-bed after the test)."""
    tb.kubectl("delete", "tr,rb", "--all", "-n", ns, "--wait=true", "--timeout=60s")


def test_a_run_on_a_failed_batch_fails_naming_it(
    cluster: Cluster,
    operator: Callable[[], AbstractContextManager[KopfRunner]],
    testbed_env: Testbed,
    tmp_path: Path,
) -> None:
    with operator():
        # the batch names an environment that does not exist: its controller fails it
        assert apply(testbed_env, cluster.ns, a_batch("doomed"), tmp_path).returncode == 0
        run = run_body("on-doomed", data={"rolloutBatch": {"name": "doomed"}})
        assert apply(testbed_env, cluster.ns, run, tmp_path).returncode == 0
        failed = cluster.wait(
            lambda: (c := condition(cluster, "on-doomed", "Failed")) and c["status"] == "True"
            and c,
            timeout=60,
            message="on-doomed Failed",
        )  # fmt: skip
        assert failed["reason"] == "BatchFailed"
        assert failed["message"].startswith("spec.data.rolloutBatch.name: RolloutBatch doomed")
        assert "ghost (not found)" in failed["message"]
        assert phase(cluster, "on-doomed") == "Failed"
        assert not [j for j in cluster.jobs() if j.startswith("on-doomed")]
        events = testbed_env.kubectl(
            "get", "events", "-n", cluster.ns, "--field-selector", "involvedObject.name=on-doomed"
        ).stdout
        assert "BatchFailed" in events
        leave_no_finalizers(testbed_env, cluster.ns)


def test_the_lifecycle_wait_train_suspend_resume_delete(
    cluster: Cluster,
    operator: Callable[[], AbstractContextManager[KopfRunner]],
    testbed_env: Testbed,
    tmp_path: Path,
) -> None:
    ns = cluster.ns
    # a finished batch, made before the operator starts (its controller then keeps it)
    assert apply(testbed_env, ns, a_batch("rollouts"), tmp_path).returncode == 0
    finished_batch(cluster, "rollouts")
    resources = {"workers": 2, "cpuPerWorker": "500m", "memoryPerWorker": "1Gi"}
    run = run_body("tiny", data={"rolloutBatch": {"name": "rollouts"}}, resources=resources)
    early = run_body("early", data={"rolloutBatch": {"name": "not-yet"}})
    with operator():
        # a run whose batch is not there yet waits for it (within the grace time)
        assert apply(testbed_env, ns, early, tmp_path).returncode == 0
        cluster.wait(lambda: phase(cluster, "early") == "WaitingForData", message="waiting")
        ready = condition(cluster, "early", "DataReady")
        assert ready is not None and ready["reason"] == "WaitingForBatch"
        assert ready["message"] == "RolloutBatch not-yet not found yet"

        assert apply(testbed_env, ns, run, tmp_path).returncode == 0
        job = cluster.job("tiny-train-1")
        status = cluster.wait(
            lambda: (s := get(cluster, "tiny").get("status") or {}).get("phase") == "Starting"
            and s,
            message="Starting",
        )  # fmt: skip
        assert status["dataUri"] == "s3://cowork-gym/rollouts/rollouts/kept.jsonl"
        assert status["backend"] == "Job" and status["jobName"] == "tiny-train-1"
        (owner,) = job.metadata.owner_references
        assert (owner.kind, owner.name, owner.controller) == ("TrainingRun", "tiny", True)
        assert (job.spec.backoff_limit, job.spec.active_deadline_seconds) == (1, 3600)
        assert job.spec.ttl_seconds_after_finished == 120
        limits = job.spec.template.spec.containers[0].resources.limits
        assert limits == {"cpu": "1", "memory": "2Gi"}  # two workers in one pod
        assert job.spec.template.spec.automount_service_account_token is False

        # suspend: the Job goes, the run waits
        testbed_env.kubectl("patch", "tr", "tiny", "-n", ns, "--type=merge",
                            "-p", '{"spec": {"suspend": true}}')  # fmt: skip
        cluster.wait(lambda: phase(cluster, "tiny") == "Suspended", message="Suspended")
        cluster.wait(lambda: "tiny-train-1" not in cluster.jobs(), message="Job deleted")
        running = condition(cluster, "tiny", "Running")
        assert running is not None and running["reason"] == "Suspended"
        # resume: a new Job (the trainer resumes from the checkpoint store)
        testbed_env.kubectl("patch", "tr", "tiny", "-n", ns, "--type=merge",
                            "-p", '{"spec": {"suspend": false}}')  # fmt: skip
        cluster.job("tiny-train-2")
        cluster.wait(lambda: get(cluster, "tiny")["status"].get("starts") == 2, message="starts")
        listed = testbed_env.kubectl("get", "tr", "tiny", "-n", ns).stdout
        assert "Starting" in listed and "sft" in listed

        # deletion: the finalizer removes the children first
        testbed_env.kubectl("delete", "tr", "tiny", "-n", ns, "--wait=true", "--timeout=60s")
        cluster.wait(lambda: not [j for j in cluster.jobs() if j.startswith("tiny-")],
                     message="children deleted")  # fmt: skip
        leave_no_finalizers(testbed_env, ns)


def test_the_charts_example_passes_the_crd(testbed_env: Testbed, ns: str) -> None:
    example = Path(__file__).resolve().parents[2] / "charts/cowork-gym/examples/trainingrun.yaml"
    done = testbed_env.kubectl("apply", "--dry-run=server", "-n", ns, "-f", str(example))
    assert "trainingrun.coworkgym.dev/sft-qwen-small created (server dry run)" in done.stdout

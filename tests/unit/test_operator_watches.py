"""The CoworkEnvironment controller reads its stage Jobs, their pods and its children from
the watches' indices: the same reading as a GET + LIST, small summaries in memory, and a
watch that lags never turns a finished stage into one "without a result"."""

from __future__ import annotations

import json
from typing import Any

from coworkgym_operator.core.observe import job_observation, job_summary, pod_summary
from coworkgym_operator.environment.watches import WATCHES, Indices

JOB = {
    "metadata": {
        "name": "demo-builder-i0-a1",
        "creationTimestamp": "2026-12-01T09:00:00Z",
        "labels": {"coworkgym.dev/generation": "2", "coworkgym.dev/environment": "demo"},
        "managedFields": [{"big": "x" * 1000}],
        "ownerReferences": [{"kind": "CoworkEnvironment", "uid": "env-uid", "controller": True}],
    },
    "spec": {"template": {"spec": {"containers": [{"env": [{"value": "x" * 5000}]}]}}},
    "status": {
        "startTime": "2026-12-01T09:00:01Z",
        "completionTime": "2026-12-01T09:00:31Z",
        "conditions": [{"type": "Complete", "status": "True", "reason": "", "message": ""}],
    },
}


def pod(phase: str, message: str | None = None) -> dict[str, Any]:
    state = {"terminated": {"exitCode": 0, "message": message}} if message else {"running": {}}
    return {
        "metadata": {"name": "p", "labels": {"job-name": JOB["metadata"]["name"]}},
        "spec": {"nodeName": "n1", "containers": [{"image": "role"}]},
        "status": {"phase": phase, "containerStatuses": [{"name": "role", "state": state}]},
    }


def test_a_finished_job_reads_the_same_from_the_summaries() -> None:
    done = pod("Succeeded", json.dumps({"stage": "builder", "ok": True}))
    whole = job_observation("j", JOB, [done])
    small = job_observation("j", job_summary(JOB), [pod_summary(done)], wait_for_pods=True)
    assert whole == small
    assert small.state == "succeeded" and small.result == {"stage": "builder", "ok": True}
    assert small.seconds == 30.0
    assert len(json.dumps(job_summary(JOB))) < 400  # the spec and managed fields are not kept


def test_a_lagging_pod_watch_keeps_the_stage_running_until_its_result_arrives() -> None:
    running = pod_summary(pod("Running"))
    assert job_observation("j", job_summary(JOB), [running]).state == "succeeded"  # GET + LIST
    waited = job_observation("j", job_summary(JOB), [running], wait_for_pods=True)
    assert waited.state == "running" and waited.start.started


class FakeIndex(dict[Any, list[Any]]):
    pass


def test_indices_give_the_job_and_the_children_and_a_fresh_create_is_not_missing() -> None:
    ns = "team"
    indices = Indices(
        jobs=FakeIndex({(ns, "demo-builder-i0-a1"): [job_summary(JOB)]}),
        pods=FakeIndex(),
        owned=(
            FakeIndex({(ns, "demo"): ["PersistentVolumeClaim/demo-builder"]}),
            FakeIndex({(ns, "demo"): ["NetworkPolicy/demo-deny-all"]}),
        ),
    )
    assert indices.job(ns, "demo-builder-i0-a1", created=False).state == "succeeded"
    assert indices.job(ns, "demo-verifier-i0-a1", created=False).state == "missing"
    assert indices.job(ns, "demo-verifier-i0-a1", created=True).state == "running"
    # a stage pod's event finds its environment through the Job's owner
    assert indices.owner(ns, "demo-builder-i0-a1") == "env-uid"
    assert indices.owner(ns, "demo-verifier-i0-a1") is None
    assert indices.children(ns, "demo") == {
        "PersistentVolumeClaim/demo-builder",
        "NetworkPolicy/demo-deny-all",
    }
    assert WATCHES.of({"env_jobs": {}}) is None  # not all registered: ask the API
    names = ("env_jobs", "env_pods", *WATCHES.owned)
    assert WATCHES.of(dict.fromkeys(names, FakeIndex())) is not None

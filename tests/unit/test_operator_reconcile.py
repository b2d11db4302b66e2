"""The operator's pure parts: CRD generation, child builders, reconcile decisions."""

from __future__ import annotations

import copy
import json
from typing import Any

from coworkgym.loop.machine import Phase
from coworkgym_operator.core.conditions import merge
from coworkgym_operator.core.observe import (
    JobObservation,
    job_observation,
    job_summary,
    pod_summary,
)
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.api import crd
from coworkgym_operator.environment.builders import MOUNTS, stage_job
from coworkgym_operator.environment.reconcile.conditions import PHASES, conditions_for
from coworkgym_operator.environment.reconcile.loop import (
    Observed,
    Plan,
    pending_job_name,
    reconcile,
)
from tests.support.builders import environment_spec

SETTINGS = OperatorSettings()


def resource(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "CoworkEnvironment",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": environment_spec(**spec).to_wire(),
        "status": {},
    }


def after(env: dict[str, Any], plan: Plan) -> dict[str, Any]:
    return {**env, "status": plan.status}


def children(plan: Plan) -> set[str]:
    return {f"{c['kind']}/{c['metadata']['name']}" for c in plan.create}


def test_crd_on_disk_matches_the_models() -> None:
    assert crd.DEFINITION.main(["--check"]) == 0, "run `make generate`"


def test_crd_schema_is_structural_and_validates() -> None:
    version = crd.DEFINITION.crd()["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    text = str(spec)
    assert "$ref" not in text and "anyOf" not in text and "title" not in text
    turns = spec["properties"]["task"]["properties"]["turns"]
    assert (turns["minimum"], turns["maximum"]) == (1, 3)
    assert "x-kubernetes-validations" in spec
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase",
        "Family",
        "Iteration",
        "Package",
        "Message",
        "Defects",
        "Age",
    ]


def test_first_reconcile_creates_volumes_policies_and_the_builder_job() -> None:
    plan = reconcile(resource(), Observed(), SETTINGS)
    assert children(plan) == {
        "PersistentVolumeClaim/demo-builder",
        "PersistentVolumeClaim/demo-verifier",
        "PersistentVolumeClaim/demo-scratch",
        "NetworkPolicy/demo-deny-all",
        "NetworkPolicy/demo-egress-gateway",
        "NetworkPolicy/demo-egress-store",
        "Job/demo-builder-i0-a1",
    }
    assert plan.status["phase"] == "Building"
    assert pending_job_name(after(resource(), plan)) == "demo-builder-i0-a1"


def test_reconcile_is_idempotent() -> None:
    env = resource()
    first = reconcile(env, Observed(), SETTINGS)
    env = after(env, first)
    existing = frozenset(children(first))
    running = Observed(JobObservation("demo-builder-i0-a1", "running"), existing)
    second = reconcile(env, running, SETTINGS)
    third = reconcile(after(env, second), running, SETTINGS)
    assert second.create == [] and third.create == []
    strip = lambda s: {k: v for k, v in s.items() if k != "conditions"}  # noqa: E731
    assert strip(second.status) == strip(third.status) == strip(env["status"])


def test_a_missing_job_is_recreated_under_the_same_name() -> None:
    env = after(resource(), reconcile(resource(), Observed(), SETTINGS))
    plan = reconcile(env, Observed(JobObservation("demo-builder-i0-a1", "missing")), SETTINGS)
    assert "Job/demo-builder-i0-a1" in children(plan)


def test_a_finished_stage_advances_and_creates_the_next_job_once() -> None:
    env = after(resource(), reconcile(resource(), Observed(), SETTINGS))
    done = JobObservation("demo-builder-i0-a1", "succeeded", {"ok": True}, seconds=4.0)
    plan = reconcile(env, Observed(done), SETTINGS)
    assert "Job/demo-verifier-i0-a1" in children(plan)
    assert plan.status["phase"] == "ConstructingVerifier"
    assert plan.stage_seconds == ("builder", 4.0)


def test_invalid_spec_is_marked_not_crash_looped() -> None:
    env = resource()
    env["spec"]["task"]["turns"] = 99
    plan = reconcile(env, Observed(), SETTINGS)
    assert plan.status["phase"] == "Failed" and plan.finished == "failed"
    assert "turns" in plan.status["message"]
    again = reconcile(after(env, plan), Observed(), SETTINGS)
    assert again.finished is None and again.events == []  # counted and announced once


def test_role_jobs_mount_only_their_volumes() -> None:
    spec = environment_spec()
    env = resource()
    for stage, mounts in MOUNTS.items():
        job = stage_job(env, spec, stage, 0, 1, [], SETTINGS)
        container = job["spec"]["template"]["spec"]["containers"][0]
        got = [(m["name"], not m.get("readOnly", False)) for m in container["volumeMounts"]]
        assert got[:-1] == [(v, w) for v, w in mounts]
        assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
        assert ("envFrom" in container) == (stage == "release" and SETTINGS.s3_secret is not None)


def test_phase_derived_from_conditions_matches_the_loop() -> None:
    from coworkgym.loop.machine import LoopStatus

    for phase, pending in [
        (Phase.PENDING, None),
        (Phase.BUILDING, "builder"),
        (Phase.CONSTRUCTING_VERIFIER, "verifier"),
        (Phase.EXECUTING, "detector"),
        (Phase.RELEASING, "release"),
        (Phase.RELEASED, None),
        (Phase.REJECTED, None),
        (Phase.FAILED, "builder"),
    ]:
        loop = LoopStatus(phase=phase)
        conditions = merge([], conditions_for(loop, pending), 1)
        assert PHASES.derive(conditions) is phase, phase
    revising = copy.deepcopy(LoopStatus(phase=Phase.REVISING))
    from coworkgym.detector.defects import Defect, DefectCode
    from coworkgym.loop.machine import Round

    revising.rounds = [Round(iteration=1, defects=[Defect.of(DefectCode.ACCEPTS_SHORTCUT, "x")])]
    assert PHASES.derive(merge([], conditions_for(revising, "verifier"), 1)) is Phase.REVISING


# ---- stage timings: as the API serves a finished stage -----------------------------------

JOB_STARTED = "2026-12-01T09:00:01Z"


def served_job(name: str, *conditions: dict[str, str], completed: str | None = None) -> Any:
    """A stage Job as the API serves it: started, with these True conditions."""
    status: dict[str, Any] = {"startTime": JOB_STARTED, "conditions": list(conditions)}
    if completed:
        status["completionTime"] = completed
    return {
        "metadata": {"name": name, "creationTimestamp": "2026-12-01T09:00:00Z"},
        "status": status,
    }


def ended_pod(result: dict[str, Any], finished_at: str) -> dict[str, Any]:
    """A stage pod whose container ended, its result in the termination message."""
    ok = bool(result.get("ok"))
    terminated = {
        "exitCode": 0 if ok else 1,
        "message": json.dumps(result),
        "startedAt": "2026-12-01T09:00:05Z",
        "finishedAt": finished_at,
    }
    return {
        "spec": {"nodeName": "node-1"},
        "status": {
            "phase": "Succeeded" if ok else "Failed",
            "containerStatuses": [{"name": "role", "state": {"terminated": terminated}}],
        },
    }


def as_watched(name: str, job: Any, *pods: dict[str, Any]) -> Observed:
    """What the reconcile reads from the watches' indices (their small summaries)."""
    summaries = [pod_summary(p) for p in pods]
    return Observed(job_observation(name, job_summary(job), summaries, wait_for_pods=True))


def timings(plan: Plan) -> dict[str, float]:
    return {t["stage"]: t["seconds"] for t in plan.status["stageTimings"]}


def test_a_stage_timing_is_in_the_status_as_soon_as_its_pod_ends() -> None:
    # the pod's watch event comes before the Job controller marks the Job Complete (and
    # sets its completionTime): the reconcile it wakes moves the stage on, so that is when
    # the time must be taken
    env = after(resource(), reconcile(resource(), Observed(), SETTINGS))
    name = "demo-builder-i0-a1"
    pod = ended_pod({"stage": "builder", "ok": True}, "2026-12-01T09:00:43Z")
    plan = reconcile(env, as_watched(name, served_job(name), pod), SETTINGS)
    assert plan.status["phase"] == "ConstructingVerifier"
    assert timings(plan) == {"builder": 42.0} and plan.stage_seconds == ("builder", 42.0)
    # the Job's completion, seen by a later reconcile, is not counted again
    env = after(env, plan)
    complete = {"type": "Complete", "status": "True", "reason": "", "message": ""}
    completed = served_job(name, complete, completed="2026-12-01T09:00:44Z")
    again = reconcile(env, as_watched(name, completed, pod), SETTINGS)
    assert timings(again) == {"builder": 42.0} and again.stage_seconds is None
    # the next stage's time is added beside it, when that stage ends
    verifier = "demo-verifier-i0-a1"
    pod = ended_pod({"stage": "verifier", "ok": True}, "2026-12-01T09:00:11Z")
    plan = reconcile(after(env, again), as_watched(verifier, served_job(verifier), pod), SETTINGS)
    assert timings(plan) == {"builder": 42.0, "verifier": 10.0}


def test_a_failed_attempt_counts_in_its_stage_timing() -> None:
    # a failed Job never gets a completionTime; its Failed condition says when it ended
    env = after(resource(), reconcile(resource(), Observed(), SETTINGS))
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "DeadlineExceeded",
        "message": "Job was active longer than specified deadline",
        "lastTransitionTime": "2026-12-01T09:10:01Z",
    }
    name = "demo-builder-i0-a1"
    plan = reconcile(env, as_watched(name, served_job(name, failed)), SETTINGS)
    assert plan.job_failed == "builder" and plan.status["loop"]["attempt"] == 2
    assert timings(plan) == {"builder": 600.0}
    retry = "demo-builder-i0-a2"
    pod = ended_pod({"stage": "builder", "ok": True}, "2026-12-01T09:00:31Z")
    plan = reconcile(after(env, plan), as_watched(retry, served_job(retry), pod), SETTINGS)
    assert timings(plan) == {"builder": 630.0}  # summed over the attempts

"""No silent stalls: a stage whose pod cannot start says why at once, and its attempt ends
after a short grace instead of the stage timeout (the pure part: reading pods, deciding)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.pods import PodProblem, PodStart, pod_start
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.reconcile.loop import (
    Observed,
    Plan,
    pending_job_name,
    reconcile,
)
from tests.support.builders import environment_spec

SETTINGS = OperatorSettings(stage_start_grace_seconds=120)
CREATED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NEVER_PULL = PodProblem(
    "ImagePull",
    "ErrImageNeverPull",
    'Container image "ghcr.io/cowork-gym/role-sandbox:0.1.0" is not present with pull '
    'policy of "Never"',
)


def waiting_pod(reason: str, message: str = "", node: str = "node-1") -> dict[str, Any]:
    return {
        "spec": {"nodeName": node},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "role", "state": {"waiting": {"reason": reason, "message": message}}}
            ],
        },
    }


def unscheduled_pod(message: str) -> dict[str, Any]:
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    return {"spec": {}, "status": {"phase": "Pending", "conditions": [condition]}}


# ---- reading a pod -----------------------------------------------------------------------


def test_image_pull_errors_are_problems() -> None:
    for reason in ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"):
        start = pod_start([waiting_pod(reason, "no such image")])
        assert start == PodStart(False, True, PodProblem("ImagePull", reason, "no such image"))


def test_a_pod_no_node_fits_is_unschedulable() -> None:
    why = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    start = pod_start([unscheduled_pod(why)])
    assert start == PodStart(False, False, PodProblem("Unschedulable", "Unschedulable", why))


def test_volumes_that_cannot_be_bound_are_named_as_such() -> None:
    for why in (
        "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind.",
        "0/2 nodes are available: 2 node(s) had volume node affinity conflict.",
    ):
        problem = pod_start([unscheduled_pod(why)]).problem
        assert problem is not None and problem.kind == "VolumeBinding", why


def test_a_pod_pulling_its_image_or_running_has_no_problem() -> None:
    assert pod_start([waiting_pod("ContainerCreating")]) == PodStart(False, True, None)
    running = {"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    assert pod_start([running]) == PodStart(True, True, None)
    assert pod_start([]) == PodStart(False, False, None)  # the Job made no pod yet


# ---- deciding ---------------------------------------------------------------------------


class Stuck:
    """An environment whose builder Job exists but whose pod does not start."""

    def __init__(self, **spec: Any) -> None:
        self.env: dict[str, Any] = {
            "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
            "spec": environment_spec(**spec).to_wire(),
            "status": {},
        }
        self.step(Observed())

    def step(self, observed: Observed, settings: OperatorSettings = SETTINGS) -> Plan:
        plan = reconcile(self.env, observed, settings)
        self.env = {**self.env, "status": plan.status}
        return plan

    def observe(
        self, after_s: float, start: PodStart, generation: int = 1, created_s: float = 0
    ) -> Observed:
        """The pending Job ``after_s`` into the test, created ``created_s`` into it."""
        name = pending_job_name(self.env)
        assert name is not None
        created = CREATED + timedelta(seconds=created_s)
        job = JobObservation(
            name, "running", created_at=created, generation=generation, start=start
        )
        return Observed(job, now=CREATED + timedelta(seconds=after_s))

    def condition(self, kind: str) -> dict[str, Any]:
        return next(c for c in self.env["status"]["conditions"] if c["type"] == kind)


def jobs(plan: Plan) -> list[dict[str, Any]]:
    return [c for c in plan.create if c["kind"] == "Job"]


def test_a_pod_that_cannot_start_is_in_the_condition_and_one_event_at_once() -> None:
    run = Stuck()
    plan = run.step(run.observe(3, PodStart(False, True, NEVER_PULL)))
    built = run.condition("Built")
    assert built["status"] == "Unknown" and "ErrImageNeverPull" in built["message"]
    assert "120 s" in built["message"]
    # within the grace it may still start: Normal; the Warning comes with the deadline
    assert [(t, r) for t, r, _ in plan.events] == [("Normal", "StagePodNotStarting")]
    assert "demo-builder-i0-a1" in plan.events[0][2] and "ErrImageNeverPull" in plan.events[0][2]
    assert plan.delete == [] and jobs(plan) == []
    # announced once: the next reconciles see the same problem and stay quiet
    again = run.step(run.observe(6, PodStart(False, True, NEVER_PULL)))
    assert again.events == [] and again.status == plan.status


VOLUMES_UNBOUND = PodProblem(
    "VolumeBinding",
    "Unschedulable",
    "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
)
NO_CPU = PodProblem("Unschedulable", "Unschedulable", "0/1 nodes are available: Insufficient cpu.")


def event_kinds(plans: list[Plan]) -> list[tuple[str, str]]:
    return [(t, r) for plan in plans for t, r, _ in plan.events]


def test_scheduling_waits_are_normal_events_once_each_per_attempt() -> None:
    run = Stuck()
    waits = [
        (2, VOLUMES_UNBOUND),
        (3, VOLUMES_UNBOUND),  # the same wait, reconciled again
        (5, None),  # bound; the scheduler has not placed the pod yet
        (8, NO_CPU),
        (9, VOLUMES_UNBOUND),  # back again: already announced in this attempt
        (30, NO_CPU),
    ]
    plans = [run.step(run.observe(t, PodStart(False, False, p))) for t, p in waits]
    assert event_kinds(plans) == [("Normal", "StagePodNotStarting")] * 2
    assert "PersistentVolumeClaims" in plans[0].events[0][2]
    assert "Insufficient cpu" in plans[3].events[0][2]
    assert run.env["status"]["loop"]["startProblems"] == ["VolumeBinding", "Unschedulable"]
    # the deadline: the attempt ends with the one Warning; the next attempt's waits are news
    ended = run.step(run.observe(121, PodStart(False, False, NO_CPU)))
    assert event_kinds([ended]) == [("Warning", "StageNotStarted")]
    assert "startProblems" not in run.env["status"]["loop"]
    again = run.step(run.observe(122, PodStart(False, False, NO_CPU), created_s=121))
    assert event_kinds([again]) == [("Normal", "StagePodNotStarting")]
    assert "demo-builder-i0-a2" in again.events[0][2]


def test_a_healthy_environment_that_waits_for_its_pods_posts_no_warning() -> None:
    run = Stuck()
    plans = []
    for stage in ("builder", "verifier", "detector", "release"):
        for after_s, problem in ((1, VOLUMES_UNBOUND), (2, NO_CPU), (3, NO_CPU)):
            plans.append(run.step(run.observe(after_s, PodStart(False, False, problem))))
        name = pending_job_name(run.env)
        assert name is not None and stage in name
        result = {"ok": True, "defects": [], "uri": "s3://b/e", "digest": "sha256:abc"}
        plans.append(run.step(Observed(JobObservation(name, "succeeded", result, seconds=1.0))))
    assert run.env["status"]["phase"] == "Released"
    assert [t for t, _ in event_kinds(plans)] and {t for t, _ in event_kinds(plans)} == {"Normal"}
    assert event_kinds(plans).count(("Normal", "StagePodNotStarting")) == 8


def test_past_the_grace_the_attempt_ends_and_the_retry_policy_decides() -> None:
    run = Stuck()
    plan = run.step(run.observe(121, PodStart(False, True, NEVER_PULL)))
    assert plan.delete == [("Job", "demo-builder-i0-a1")]
    assert [j["metadata"]["name"] for j in jobs(plan)] == ["demo-builder-i0-a2"]
    assert plan.job_failed == "builder"
    assert ("Warning", "StageNotStarted") in [(t, r) for t, r, _ in plan.events]
    assert run.env["status"]["phase"] == "Building"
    assert "did not start within 120 s" in run.condition("Built")["message"]
    # the second attempt does not start either: the environment fails, saying why
    plan = run.step(run.observe(121, PodStart(False, True, NEVER_PULL)))
    assert plan.delete == [("Job", "demo-builder-i0-a2")] and jobs(plan) == []
    status = run.env["status"]
    assert status["phase"] == "Failed"
    assert "builder failed: the builder pod did not start within 120 s" in status["message"]
    assert "ErrImageNeverPull" in run.condition("Built")["message"]
    assert run.condition("Complete")["reason"] == "Failed"


def test_before_the_grace_nothing_is_ended() -> None:
    run = Stuck()
    plan = run.step(run.observe(119, PodStart(False, False, None)))
    assert plan.delete == [] and run.env["status"]["loop"]["attempt"] == 1


def test_a_pod_never_scheduled_is_ended_after_the_grace_too() -> None:
    run = Stuck()
    plan = run.step(run.observe(300, PodStart(False, False, None)))
    assert plan.delete == [("Job", "demo-builder-i0-a1")]
    assert "its pod was not scheduled" in run.condition("Built")["message"]


def test_a_scheduled_pod_pulling_its_image_is_left_to_the_stage_timeout() -> None:
    run = Stuck()
    plan = run.step(run.observe(600, PodStart(False, True, None)))
    assert plan.delete == [] and jobs(plan) == []


def test_the_grace_is_a_setting() -> None:
    run = Stuck()
    quick = OperatorSettings(stage_start_grace_seconds=5)
    plan = run.step(run.observe(6, PodStart(False, True, NEVER_PULL)), quick)
    assert plan.delete == [("Job", "demo-builder-i0-a1")]


def test_without_a_clock_no_attempt_is_ended() -> None:
    run = Stuck()
    observed = run.observe(10_000, PodStart(False, True, NEVER_PULL))
    plan = run.step(Observed(observed.job))
    assert plan.delete == []


def test_a_sandbox_fix_applies_to_the_stuck_stage_at_once() -> None:
    run = Stuck(sandbox={"nodeSelector": {"pool": "sandboxes"}})
    run.step(run.observe(3, PodStart(False, True, NEVER_PULL)))
    run.env["spec"]["sandbox"]["image"] = "registry.local/role-sandbox:dev"
    run.env["metadata"]["generation"] = 2
    plan = run.step(run.observe(4, PodStart(False, True, NEVER_PULL), generation=1))
    assert plan.delete == [("Job", "demo-builder-i0-a1")]
    (job,) = jobs(plan)
    assert job["metadata"]["name"] == "demo-builder-i0-a2"
    assert job["metadata"]["labels"]["coworkgym.dev/generation"] == "2"
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.local/role-sandbox:dev"
    assert pod["nodeSelector"] == {"pool": "sandboxes"}
    assert "the spec changed" in run.condition("Built")["message"]


# ---- role volumes after the outcome ------------------------------------------------------

CLAIMS = frozenset(f"PersistentVolumeClaim/demo-{r}" for r in ("builder", "verifier", "scratch"))


def rejected(settings: OperatorSettings) -> Plan:
    run = Stuck(budget={"maxIterations": 1})
    defect = {"code": "VERIFIER_PERMISSIVE_CHECK", "owner": "verifier", "message": "90%"}
    for result in ({"ok": True}, {"ok": True}, {"ok": True, "defects": [defect]}):
        name = pending_job_name(run.env)
        assert name is not None
        plan = run.step(
            Observed(JobObservation(name, "succeeded", result), CLAIMS), settings
        )
    assert run.env["status"]["phase"] == "Rejected"
    return plan


def test_an_outcome_releases_the_role_volumes_by_default() -> None:
    plan = rejected(OperatorSettings())
    assert sorted(plan.delete) == sorted(("PersistentVolumeClaim", c.split("/")[1]) for c in CLAIMS)
    assert plan.delete_stage_pods  # finished pods would keep the claims in use


def test_retain_keeps_the_role_volumes() -> None:
    plan = rejected(OperatorSettings(volume_retention="Retain"))
    assert plan.delete == [] and not plan.delete_stage_pods


def test_a_failed_environment_releases_its_volumes_and_only_existing_ones() -> None:
    run = Stuck()
    for _ in range(2):
        plan = run.step(
            Observed(
                JobObservation(pending_job_name(run.env) or "", "failed", {"ok": False}),
                frozenset({"PersistentVolumeClaim/demo-builder"}),
            )
        )
    assert run.env["status"]["phase"] == "Failed"
    assert plan.delete == [("PersistentVolumeClaim", "demo-builder")]

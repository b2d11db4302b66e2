"""An on-policy TrainingRun's rounds, driven by the pure reconcile: each round serves its
weights (a Deployment and Service), rolls them out (a RolloutBatch against the Service's
address), tears the server down and trains (a Job) from the same weights on the batch's
trajectories; the next round serves that checkpoint. Every hand-off, the same plan for the
same observation, a finished round never redone, a round with nothing to train on
skipped, each failure named with its round and object, suspend and resume, and every step
of the round's state machine taken."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.pods import PodProblem, PodStart
from coworkgym_operator.rollouts.api.types import ResolvedEnvironment
from coworkgym_operator.training.api.types import TrainingRunStatus
from coworkgym_operator.training.reconcile.conditions import watched_for_progress
from coworkgym_operator.training.reconcile.plan import (
    BatchSeen,
    EnvironmentsSeen,
    ServingSeen,
    TrainingObserved,
    TrainingPlan,
    reconcile_training,
)
from coworkgym_operator.training.reconcile.rounds import ROUND_STEPS
from coworkgym_operator.training.settings import TrainingSettings

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SETTINGS = TrainingSettings()
ENVIRONMENTS = [
    ResolvedEnvironment(name="env-a", uri="s3://releases/env-a/pkg", digest="sha256:a"),
    ResolvedEnvironment(name="env-b", uri="s3://releases/env-b/pkg", digest="sha256:b"),
]
CHECKPOINT_0 = "s3://runs/tiny/checkpoints/round-000/step-000002"
CHECKPOINT_1 = "s3://runs/tiny/checkpoints/round-001/step-000002"
ROUND_0 = "s3://runs/tiny/rounds/round-000/rollouts"
ROUND_1 = "s3://runs/tiny/rounds/round-001/rollouts"


def rounds_run(**rollout: Any) -> dict[str, Any]:
    spec = {
        "objective": "grpo",
        "model": "s3://models/tiny",
        "rounds": 2,
        "rollout": {"environments": {"names": ["env-a", "env-b"]},
                    "samplesPerEnvironment": 2, **rollout},
        "hyperparameters": {"maxSteps": 2, "batchSize": 2},
        "output": {"uri": "s3://runs/tiny"},
    }  # fmt: skip
    return {
        "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1", "generation": 1},
        "spec": spec,
        "status": {},
    }


@dataclass
class Cluster:
    """What the plans made and deleted, so that each observation lists the children that
    exist, as the controller's LIST would; and every round step the plans took."""

    children: set[str] = field(default_factory=set)
    steps: set[tuple[str, str]] = field(default_factory=set)
    created: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, plan: TrainingPlan) -> None:
        for manifest in plan.create:
            self.children.add(f"{manifest['kind']}/{manifest['metadata']['name']}")
            self.created.append(manifest)
        for kind, name in plan.delete:
            self.children.discard(f"{kind}/{name}")
        self.steps |= {(before, after) for _, before, after in plan.round_steps}


def step(run: dict[str, Any], cluster: Cluster, **observed: Any) -> TrainingPlan:
    seen = TrainingObserved(now=NOW, existing_children=frozenset(cluster.children), **observed)
    plan = reconcile_training(run, seen, SETTINGS)
    run["status"] = plan.status
    cluster.apply(plan)
    return plan


def names(plan: TrainingPlan) -> list[str]:
    return [f"{m['kind']}/{m['metadata']['name']}" for m in plan.create]


def cond(plan: TrainingPlan, kind: str) -> dict[str, Any]:
    return next(c for c in plan.status["conditions"] if c["type"] == kind)


def current(plan: TrainingPlan) -> dict[str, Any]:
    last: dict[str, Any] = plan.status["rounds"][-1]
    return last


def reasons(plan: TrainingPlan) -> list[str]:
    return [reason for _, reason, _ in plan.events]


def available(index: int, ip: str = "10.0.0.42") -> ServingSeen:
    return ServingSeen(name=f"tiny-serve-r{index}", found=True, available=True, cluster_ip=ip,
                       created_at=NOW, start=PodStart(started=True, scheduled=True))  # fmt: skip


def batch_done(name: str, succeeded: int = 4, invalid: int = 0, kept: int = 3) -> BatchSeen:
    output = ROUND_0 if "-r0" in name else ROUND_1
    return BatchSeen(found=True, name=name, phase="Succeeded", complete=True, output_uri=output,
                     succeeded=succeeded, invalid=invalid, kept=kept)  # fmt: skip


def job(name: str, state: str, result: dict[str, Any] | None = None, **kw: Any) -> JobObservation:
    return JobObservation(name, state, result, created_at=NOW, **kw)  # type: ignore[arg-type]


def trained(checkpoint: str, steps: int = 2) -> dict[str, Any]:
    return {"ok": True, "step": steps, "totalSteps": 2, "metrics": {"loss": 0.5},
            "checkpoint": checkpoint}  # fmt: skip


def pod_env(manifest: dict[str, Any]) -> dict[str, Any]:
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


# ---- the scenarios -------------------------------------------------------------------------
def to_first_server(run: dict[str, Any], cluster: Cluster) -> TrainingPlan:
    """The environments resolve: round 0 starts serving spec.model."""
    return step(run, cluster, environments=EnvironmentsSeen(released=list(ENVIRONMENTS)))


def to_first_batch(run: dict[str, Any], cluster: Cluster) -> TrainingPlan:
    to_first_server(run, cluster)
    return step(run, cluster, serving=available(0))


def to_first_training(run: dict[str, Any], cluster: Cluster) -> TrainingPlan:
    to_first_batch(run, cluster)
    return step(run, cluster, round_batch=batch_done("tiny-rollouts-r0"))


def to_second_round(run: dict[str, Any], cluster: Cluster) -> TrainingPlan:
    to_first_training(run, cluster)
    return step(run, cluster, train_job=job("tiny-train-r0", "succeeded", trained(CHECKPOINT_0)))


def to_the_end(run: dict[str, Any], cluster: Cluster) -> TrainingPlan:
    to_second_round(run, cluster)
    step(run, cluster, serving=available(1, "10.0.0.43"))
    step(run, cluster, round_batch=batch_done("tiny-rollouts-r1"))
    return step(run, cluster, train_job=job("tiny-train-r1", "succeeded", trained(CHECKPOINT_1)))


# ---- each hand-off ---------------------------------------------------------------------------
def test_round_zero_serves_the_model_behind_a_service_first() -> None:
    run, cluster = rounds_run(), Cluster()
    plan = to_first_server(run, cluster)
    assert names(plan) == [
        "NetworkPolicy/tiny-serving", "Deployment/tiny-serve-r0", "Service/tiny-serve-r0",
    ]  # fmt: skip
    assert current(plan)["step"] == "serve" and current(plan)["served"] == "s3://models/tiny"
    assert plan.status["phase"] == "Starting"
    assert (cond(plan, "Running")["status"], cond(plan, "Running")["reason"]) == (
        "Unknown", "Starting")  # fmt: skip
    assert plan.status["progress"]["summary"] == "round 1/2 serving"
    assert plan.status["message"].startswith("round 1/2: serving s3://models/tiny")
    assert "Serving" in reasons(plan)
    # not available yet: nothing more to do, nothing made twice
    waiting = ServingSeen(name="tiny-serve-r0", found=True, created_at=NOW)
    again = step(run, cluster, serving=waiting)
    assert not again.create and not again.delete and current(again)["step"] == "serve"


def test_an_available_server_gets_a_rollout_batch_against_its_service() -> None:
    run, cluster = rounds_run(), Cluster()
    plan = to_first_batch(run, cluster)
    (batch,) = plan.create
    assert (batch["kind"], batch["metadata"]["name"]) == ("RolloutBatch", "tiny-rollouts-r0")
    (policy,) = batch["spec"]["policies"]
    assert policy["baseUrl"] == "http://10.0.0.42:8000/v1"
    assert policy["model"] == "tiny@round-0" and policy["harness"] == "tool-calling"
    assert batch["spec"]["environments"] == {"names": ["env-a", "env-b"]}
    assert batch["spec"]["samplesPerEnvironment"] == 2
    assert batch["spec"]["output"] == {"uri": ROUND_0}
    assert current(plan)["endpoint"] == "http://10.0.0.42:8000/v1"
    assert current(plan)["batch"] == "tiny-rollouts-r0"
    assert cond(plan, "Running")["reason"] == "RollingOut" and plan.status["phase"] == "Running"
    assert plan.status["progress"]["summary"] == "round 1/2 rolling out"
    assert "RollingOut" in reasons(plan)
    running = BatchSeen(found=True, name="tiny-rollouts-r0", phase="Running",
                        message="2 of 4 rollouts ended")  # fmt: skip
    again = step(run, cluster, round_batch=running)
    assert not again.create and not again.delete
    assert again.status["message"].endswith("2 of 4 rollouts ended")


def test_a_complete_batch_tears_the_server_down_and_trains_on_what_it_kept() -> None:
    run, cluster = rounds_run(), Cluster()
    plan = to_first_training(run, cluster)
    assert plan.delete == [("Deployment", "tiny-serve-r0"), ("Service", "tiny-serve-r0")]
    policy, job_manifest = plan.create  # the training pods' fence first (builders/network.py)
    assert policy["metadata"]["name"] == "tiny-training"
    assert job_manifest["metadata"]["name"] == "tiny-train-r0"
    work = json.loads(pod_env(job_manifest)["COWORKGYM_POD_INPUT"])
    assert work["stage"] == {"/tmp/train/data": f"{ROUND_0}/kept.jsonl",
                             "/tmp/train/model": "s3://models/tiny"}  # fmt: skip
    assert work["config"]["checkpoint"] == "s3://runs/tiny/checkpoints/round-000"
    record = current(plan)
    assert record["step"] == "train" and record["dataUri"] == f"{ROUND_0}/kept.jsonl"
    assert (record["trajectories"], record["kept"], record["jobName"]) == (4, 3, "tiny-train-r0")
    assert plan.status["jobName"] == "tiny-train-r0"
    assert reasons(plan)[:2] == ["RolloutsDone", "TrainingStarted"]
    report = {"step": 1, "totalSteps": 2, "metrics": {"loss": 1.5}}
    started = job("tiny-train-r0", "running", start=PodStart(started=True, scheduled=True))
    plan = step(run, cluster, train_job=started, report=report)
    assert cond(plan, "Running")["reason"] == "Training" and not plan.create
    assert plan.status["progress"]["summary"] == "round 1/2 training, step 1/4"
    assert plan.status["message"] == "round 1/2: training, step 1/2"
    assert plan.status["metrics"] == {"loss": 1.5}


def test_all_trajectories_when_the_run_asks_for_them() -> None:
    run, cluster = rounds_run(trajectories="all"), Cluster()
    plan = to_first_training(run, cluster)
    assert current(plan)["dataUri"] == f"{ROUND_0}/trajectories.jsonl"


def test_a_trained_round_hands_its_checkpoint_to_the_next_round() -> None:
    run, cluster = rounds_run(), Cluster()
    plan = to_second_round(run, cluster)
    first, second = plan.status["rounds"]
    assert (first["step"], first["checkpointUri"], first["steps"]) == ("trained", CHECKPOINT_0, 2)
    assert (second["round"], second["step"], second["served"]) == (1, "serve", CHECKPOINT_0)
    assert names(plan) == ["Deployment/tiny-serve-r1", "Service/tiny-serve-r1"]
    command = plan.create[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("serve-checkpoint") + 1] == CHECKPOINT_0
    assert command[command.index("--model-name") + 1] == "tiny@round-1"
    progress = plan.status["progress"]
    assert (progress["round"], progress["rounds"], progress["step"]) == (2, 2, 2)
    assert plan.status["checkpointUri"] == CHECKPOINT_0
    assert "jobName" not in plan.status
    assert "RoundTrained" in reasons(plan)


def test_the_last_round_ends_the_run_with_its_checkpoint() -> None:
    run, cluster = rounds_run(), Cluster()
    plan = to_the_end(run, cluster)
    assert plan.status["phase"] == "Succeeded" and plan.finished == "succeeded"
    assert plan.status["checkpointUri"] == CHECKPOINT_1
    assert plan.status["progress"]["summary"] == "round 2/2 done, step 4/4"
    assert plan.status["message"].startswith("trained 2 rounds, 4/4 steps, loss 0.5")
    assert [r["step"] for r in plan.status["rounds"]] == ["trained", "trained"]
    second_job = next(m for m in cluster.created if m["metadata"]["name"] == "tiny-train-r1")
    work = json.loads(pod_env(second_job)["COWORKGYM_POD_INPUT"])
    assert work["stage"]["/tmp/train/model"] == CHECKPOINT_0  # trains from what it served
    assert work["config"]["checkpoint"] == "s3://runs/tiny/checkpoints/round-001"
    assert work["output"] == "s3://runs/tiny/rounds/round-001/train"
    assert cluster.children == {"NetworkPolicy/tiny-serving", "NetworkPolicy/tiny-training",
                                "RolloutBatch/tiny-rollouts-r0", "RolloutBatch/tiny-rollouts-r1",
                                "Job/tiny-train-r0", "Job/tiny-train-r1"}  # fmt: skip


def test_a_manifest_selection_is_handed_to_each_batch() -> None:
    run, cluster = rounds_run(environments={"manifestUri": "s3://synth/manifest.jsonl"}), Cluster()
    step(run, cluster)
    plan = step(run, cluster, serving=available(0))
    assert plan.create[0]["spec"]["environments"] == {"manifestUri": "s3://synth/manifest.jsonl"}


# ---- idempotence ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "observed"),
    [
        (to_first_server, {"serving": available(0)}),
        (to_first_batch, {"round_batch": batch_done("tiny-rollouts-r0")}),
        (to_first_training,
         {"train_job": job("tiny-train-r0", "succeeded", trained(CHECKPOINT_0))}),
        (to_second_round, {"serving": available(1)}),
    ],
)  # fmt: skip
def test_the_same_observation_gives_the_same_plan(
    scenario: Callable[[dict[str, Any], Cluster], TrainingPlan], observed: dict[str, Any]
) -> None:
    run, cluster = rounds_run(), Cluster()
    scenario(run, cluster)
    seen = TrainingObserved(now=NOW, existing_children=frozenset(cluster.children), **observed)
    first = reconcile_training(run, seen, SETTINGS)
    second = reconcile_training(run, seen, SETTINGS)
    assert (first.status, first.create, first.delete) == (
        second.status, second.create, second.delete)  # fmt: skip


def test_a_restarted_operator_makes_nothing_that_exists() -> None:
    run, cluster = rounds_run(), Cluster()
    before = copy.deepcopy(run["status"])
    to_first_server(run, cluster)
    run["status"] = before  # killed after the creates, before the status write
    plan = to_first_server(run, cluster)
    assert not plan.create  # every child of round 0 is listed already
    assert current(plan)["step"] == "serve"


def test_a_finished_round_is_never_redone() -> None:
    run, cluster = rounds_run(), Cluster()
    to_second_round(run, cluster)
    # round 0's children gone (a TTL, a hand), its Job seen failed: round 1 goes on alone
    cluster.children -= {"Job/tiny-train-r0", "RolloutBatch/tiny-rollouts-r0"}
    plan = step(run, cluster, train_job=job("tiny-train-r0", "failed", {"ok": False}),
                round_batch=batch_done("tiny-rollouts-r0"))  # fmt: skip
    assert not plan.create and not plan.delete
    first = plan.status["rounds"][0]
    assert (first["step"], first["checkpointUri"]) == ("trained", CHECKPOINT_0)
    assert current(plan)["round"] == 1 and cond(plan, "Failed")["status"] == "False"


# ---- nothing to train on ---------------------------------------------------------------------
def test_a_batch_that_kept_nothing_skips_the_round_and_the_next_serves_the_same_weights() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_batch(run, cluster)
    plan = step(run, cluster, round_batch=batch_done("tiny-rollouts-r0", kept=0))
    first, second = plan.status["rounds"]
    assert first["step"] == "skipped" and "its filter kept none" in first["message"]
    assert second["served"] == "s3://models/tiny"
    assert names(plan) == ["Deployment/tiny-serve-r1", "Service/tiny-serve-r1"]
    assert ("Deployment", "tiny-serve-r0") in plan.delete and "RoundSkipped" in reasons(plan)


def test_a_trainer_that_finds_no_example_skips_the_round() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_training(run, cluster)
    none = {"ok": False, "reason": "NoExamples", "error": "no group has a reward spread"}
    plan = step(run, cluster, train_job=job("tiny-train-r0", "failed", none))
    assert plan.status["rounds"][0]["step"] == "skipped"
    assert "no group has a reward spread" in plan.status["rounds"][0]["message"]
    assert cond(plan, "Failed")["status"] == "False" and current(plan)["round"] == 1


def test_no_round_with_anything_to_train_on_fails_the_run() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_batch(run, cluster)
    step(run, cluster, round_batch=batch_done("tiny-rollouts-r0", kept=0))
    step(run, cluster, serving=available(1))
    plan = step(run, cluster, round_batch=batch_done("tiny-rollouts-r1", kept=0))
    failed = cond(plan, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "NoExamples")
    assert failed["message"].startswith("no round of 2 had anything to train on (round 1:")


# ---- failures --------------------------------------------------------------------------------
def test_a_failed_batch_fails_the_run_naming_the_round_and_the_batch() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_batch(run, cluster)
    failed = BatchSeen(found=True, name="tiny-rollouts-r0", complete=True, failed=True,
                       message="unreachable endpoint, no rollout started")  # fmt: skip
    plan = step(run, cluster, round_batch=failed)
    condition = cond(plan, "Failed")
    assert (condition["status"], condition["reason"]) == ("True", "BatchFailed")
    assert condition["message"] == (
        "round 1/2: RolloutBatch tiny-rollouts-r0 failed: unreachable endpoint, no rollout started"
    )
    assert plan.delete == [("Deployment", "tiny-serve-r0"), ("Service", "tiny-serve-r0")]
    assert plan.status["phase"] == "Failed" and plan.finished == "failed"


@pytest.mark.parametrize(
    ("seen", "words"),
    [
        (ServingSeen(name="tiny-serve-r0", found=True, created_at=NOW - timedelta(seconds=600),
                     start=PodStart(problem=PodProblem("ImagePull", "ErrImagePull", "no such"))),
         "did not start within 120 s: ImagePull (ErrImagePull: no such)"),
        (ServingSeen(name="tiny-serve-r0", found=True, created_at=NOW,
                     start=PodStart(started=True, scheduled=True), restarts=3,
                     last_error="FileNotFoundError: s3://models/tiny: no model files under it"),
         "exited 3 times: FileNotFoundError: s3://models/tiny: no model files under it"),
    ],
)  # fmt: skip
def test_a_server_that_cannot_come_up_fails_the_run(seen: ServingSeen, words: str) -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_server(run, cluster)
    plan = step(run, cluster, serving=seen)
    failed = cond(plan, "Failed")
    assert failed["reason"] == "ServingFailed"
    assert failed["message"] == f"round 1/2: the checkpoint server tiny-serve-r0 {words}"
    assert ("Deployment", "tiny-serve-r0") in plan.delete


def test_a_failed_training_job_fails_the_run_keeping_the_last_good_checkpoint() -> None:
    run, cluster = rounds_run(), Cluster()
    to_second_round(run, cluster)
    step(run, cluster, serving=available(1))
    step(run, cluster, round_batch=batch_done("tiny-rollouts-r1"))
    broke = {"ok": False, "reason": "TrainerFailed", "error": "exited with status 1"}
    ended = job("tiny-train-r1", "failed", broke, reason="BackoffLimitExceeded: backoff limit")
    plan = step(run, cluster, train_job=ended)
    failed = cond(plan, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"].startswith(
        "round 2/2: Job tiny-train-r1: spec.backoffLimit: the training pod failed 1 time(s)"
    )
    assert failed["message"].endswith(f"the last good checkpoint is {CHECKPOINT_0}")
    assert plan.status["checkpointUri"] == CHECKPOINT_0


def test_a_nan_loss_in_a_round_is_counted_as_one() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_training(run, cluster)
    nan = {"ok": False, "reason": "NaNLoss", "error": "loss=nan at step 2"}
    plan = step(run, cluster, train_job=job("tiny-train-r0", "failed", nan))
    assert cond(plan, "Failed")["reason"] == "NaNLoss" and plan.nan_loss


def test_a_training_pod_that_cannot_be_scheduled_waits_then_is_stopped() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_training(run, cluster)
    problem = PodProblem("Unschedulable", "Unschedulable", "0/1 nodes: Insufficient cpu")

    def pending(seconds: float) -> JobObservation:
        return JobObservation("tiny-train-r0", "running", start=PodStart(problem=problem),
                              created_at=NOW - timedelta(seconds=seconds))  # fmt: skip

    plan = step(run, cluster, train_job=pending(600))
    running = cond(plan, "Running")
    assert (running["status"], running["reason"]) == ("Unknown", "PodPending")
    assert running["message"].startswith(
        "round 1/2: the training pod cannot start yet: Unschedulable (Unschedulable: 0/1 "
        "nodes: Insufficient cpu); it is waited for until 2026-12-01T10:05:00Z"
    )
    assert plan.status["message"] == running["message"]
    assert reasons(plan) == ["PodPending"] and not plan.delete
    plan = step(run, cluster, train_job=pending(900))
    assert cond(plan, "Failed")["reason"] == "PodCannotStart"
    assert cond(plan, "Failed")["message"].startswith(
        "round 1/2: the training pod did not start within 900 s: Unschedulable"
    )
    assert plan.delete == [("Job", "tiny-train-r0")]


def test_a_server_that_cannot_be_scheduled_waits_until_the_deadline() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_server(run, cluster)
    problem = PodProblem("Unschedulable", "Unschedulable", "0/1 nodes: Insufficient memory")

    def server(seconds: float) -> ServingSeen:
        return ServingSeen(name="tiny-serve-r0", found=True, start=PodStart(problem=problem),
                           created_at=NOW - timedelta(seconds=seconds))  # fmt: skip

    plan = step(run, cluster, serving=server(600))
    running = cond(plan, "Running")
    assert (running["status"], running["reason"]) == ("Unknown", "PodPending")
    assert running["message"].startswith(
        "round 1/2: the checkpoint server's pod cannot start yet: Unschedulable"
    )
    assert reasons(plan) == ["PodPending"]
    plan = step(run, cluster, serving=server(900))
    assert cond(plan, "Failed")["reason"] == "ServingFailed"
    assert "did not start within 900 s: Unschedulable" in cond(plan, "Failed")["message"]


# ---- what the no-progress alert watches ------------------------------------------------------
def watched(plan: TrainingPlan) -> bool:
    """coworkgym_trainingrun_running, as the controller sets it from the status it wrote."""
    return watched_for_progress(TrainingRunStatus.model_validate(plan.status))


def at(run: dict[str, Any], cluster: Cluster, minutes: float, **observed: Any) -> TrainingPlan:
    """A reconcile ``minutes`` after NOW."""
    later = NOW + timedelta(minutes=minutes)
    seen = TrainingObserved(now=later, existing_children=frozenset(cluster.children), **observed)
    plan = reconcile_training(run, seen, SETTINGS)
    run["status"] = plan.status
    cluster.apply(plan)
    return plan


def last_progress(plan: TrainingPlan) -> str:
    return str(plan.status["progress"]["lastReportTime"])


def test_a_round_stuck_in_its_rollouts_is_watched_and_stops_advancing() -> None:
    run, cluster = rounds_run(), Cluster()
    assert watched(to_first_server(run, cluster))  # the round's server starting
    plan = to_first_batch(run, cluster)
    assert watched(plan) and cond(plan, "Running")["reason"] == "RollingOut"
    assert last_progress(plan) == "2026-12-01T10:00:00Z"  # serve -> rollout
    # rollouts ending are progress ...
    one = BatchSeen(found=True, name="tiny-rollouts-r0", phase="Running", succeeded=1)
    plan = at(run, cluster, 10, round_batch=one)
    assert last_progress(plan) == "2026-12-01T10:10:00Z"
    assert current(plan)["trajectories"] == 1
    # ... and a batch that ends nothing more for 40 minutes leaves the time where it was:
    # the chart's alert (time() - last progress > trainingStallSeconds, while running is 1;
    # charts/cowork-gym/rules/tests/coworkgym-training.test.yaml) fires on it
    plan = at(run, cluster, 50, round_batch=one)
    assert watched(plan) and last_progress(plan) == "2026-12-01T10:10:00Z"


def test_waiting_for_data_a_pending_pod_and_suspend_are_not_watched() -> None:
    run, cluster = rounds_run(), Cluster()
    assert not watched(step(run, cluster))  # the environments not looked up yet
    to_first_training(run, cluster)
    problem = PodProblem("Unschedulable", "Unschedulable", "0/1 nodes: Insufficient cpu")
    pending = JobObservation("tiny-train-r0", "running", created_at=NOW,
                             start=PodStart(problem=problem))  # fmt: skip
    assert not watched(step(run, cluster, train_job=pending))  # it has its own deadline
    running = job("tiny-train-r0", "running", start=PodStart(started=True, scheduled=True))
    assert watched(step(run, cluster, train_job=running))
    run["spec"]["suspend"] = True
    assert not watched(step(run, cluster, train_job=running))


# ---- suspend and resume --------------------------------------------------------------------
def test_suspended_while_rolling_out_the_round_serves_and_rolls_out_again() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_batch(run, cluster)
    run["spec"]["suspend"] = True
    plan = step(run, cluster, round_batch=BatchSeen(found=True, name="tiny-rollouts-r0"))
    assert plan.delete == [("Deployment", "tiny-serve-r0"), ("Service", "tiny-serve-r0")]
    record = current(plan)
    assert (record["step"], record["attempt"], record["suspended"]) == ("serve", 2, True)
    assert plan.status["phase"] == "Suspended" and "Suspended" in reasons(plan)
    assert plan.status["progress"]["summary"] == "round 1/2 suspended"
    again = step(run, cluster)
    assert not again.delete and not again.events and again.status["phase"] == "Suspended"
    run["spec"]["suspend"] = False
    plan = step(run, cluster)
    assert names(plan) == ["Deployment/tiny-serve-r0", "Service/tiny-serve-r0"]
    assert plan.status["starts"] == 2 and "Resumed" in reasons(plan)
    plan = step(run, cluster, serving=available(0, "10.0.0.50"))
    (batch,) = plan.create
    assert batch["metadata"]["name"] == "tiny-rollouts-r0-2"
    assert batch["spec"]["output"] == {"uri": "s3://runs/tiny/rounds/round-000/rollouts-2"}
    assert batch["spec"]["policies"][0]["baseUrl"] == "http://10.0.0.50:8000/v1"


def test_suspended_while_training_a_new_job_resumes_the_round() -> None:
    run, cluster = rounds_run(), Cluster()
    to_first_training(run, cluster)
    run["spec"]["suspend"] = True
    plan = step(run, cluster, train_job=job("tiny-train-r0", "running"))
    assert plan.delete == [("Job", "tiny-train-r0")]
    assert "jobName" not in plan.status and current(plan)["attempt"] == 2
    run["spec"]["suspend"] = False
    plan = step(run, cluster)
    (resumed,) = plan.create
    assert resumed["metadata"]["name"] == "tiny-train-r0-2"
    work = json.loads(pod_env(resumed)["COWORKGYM_POD_INPUT"])
    assert work["config"]["checkpoint"] == "s3://runs/tiny/checkpoints/round-000"  # resumes
    assert work["stage"]["/tmp/train/data"] == f"{ROUND_0}/kept.jsonl"  # same rollouts


# ---- the state machine -----------------------------------------------------------------------
def test_every_round_step_of_the_table_is_taken_and_no_other() -> None:
    cluster = Cluster()
    to_the_end(rounds_run(), cluster)
    run = rounds_run()
    to_first_batch(run, cluster)
    step(run, cluster, round_batch=batch_done("tiny-rollouts-r0", kept=0))
    run = rounds_run()
    to_first_training(run, cluster)
    none = {"ok": False, "reason": "NoExamples"}
    step(run, cluster, train_job=job("tiny-train-r0", "failed", none))
    run = rounds_run()
    to_first_batch(run, cluster)
    run["spec"]["suspend"] = True
    step(run, cluster)
    assert cluster.steps == set(ROUND_STEPS)

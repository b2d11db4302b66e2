"""The TrainingRun reconcile, a pure function: data → train → done on the Job and RayJob
paths, suspend and resume, the failures with their field-named reasons, NaN loss keeping
the last good checkpoint, the on-policy rounds' data step (environments resolved before the
first round's server starts; the rounds themselves: test_training_rounds.py), and the same
plan for the same observation (idempotent)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.pods import PodProblem, PodStart
from coworkgym_operator.rollouts.api.types import ResolvedEnvironment
from coworkgym_operator.training.reconcile.plan import (
    BatchSeen,
    EnvironmentsSeen,
    TrainingObserved,
    TrainingPlan,
    last_report,
    reconcile_training,
)
from coworkgym_operator.training.settings import TrainingSettings

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SETTINGS = TrainingSettings()


def run_of(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": "sft",
        "model": "s3://models/tiny",
        "data": {"uri": "s3://data/trajectories.jsonl"},
        "output": {"uri": "s3://runs/tiny"},
    }
    body.update(spec)
    return {
        "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1", "generation": 1},
        "spec": body,
        "status": status or {},
    }


def step(run: dict[str, Any], **observed: Any) -> TrainingPlan:
    plan = reconcile_training(run, TrainingObserved(now=NOW, **observed), SETTINGS)
    run["status"] = plan.status
    return plan


def cond(plan: TrainingPlan, kind: str) -> dict[str, Any]:
    return next(c for c in plan.status["conditions"] if c["type"] == kind)


def job(name: str, state: str, result: dict[str, Any] | None = None, **kw: Any) -> JobObservation:
    return JobObservation(name, state, result, created_at=NOW, **kw)  # type: ignore[arg-type]


def started() -> PodStart:
    return PodStart(started=True, scheduled=True)


# the run's children once its training Job is made
TRAINING_CHILDREN = frozenset({"NetworkPolicy/tiny-training", "Job/tiny-train-1"})


def to_training(run: dict[str, Any]) -> TrainingPlan:
    """Through the data step of an s3:// dataset."""
    step(run)
    found = {"ok": True, "found": True, "detail": "1 file"}
    return step(run, check_job=job("tiny-check-data", "succeeded", found))


# ---- data --------------------------------------------------------------------------------
def test_a_dataset_is_checked_by_a_job_before_training() -> None:
    run = run_of()
    plan = step(run)
    assert [c["metadata"]["name"] for c in plan.create] == ["tiny-check-data"]
    assert cond(plan, "DataReady")["status"] == "Unknown"
    assert cond(plan, "DataReady")["reason"] == "CheckingDataset"
    assert plan.status["phase"] == "WaitingForData"
    assert cond(plan, "Running")["reason"] == "Waiting"

    plan = to_training(run_of())
    assert cond(plan, "DataReady")["reason"] == "DatasetFound"
    assert ("Job", "tiny-check-data") in plan.delete
    # the run's training NetworkPolicy first, so that its pod never runs unfenced
    assert [c["metadata"]["name"] for c in plan.create] == ["tiny-training", "tiny-train-1"]
    assert plan.status["backend"] == "Job" and plan.status["starts"] == 1
    assert plan.status["dataUri"] == "s3://data/trajectories.jsonl"


def test_a_missing_dataset_fails_naming_the_field() -> None:
    run = run_of()
    step(run)
    missing = {"ok": True, "found": False, "detail": "no object s3://data/trajectories.jsonl"}
    plan = step(run, check_job=job("tiny-check-data", "succeeded", missing))
    failed = cond(plan, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "DatasetNotFound")
    assert failed["message"].startswith("spec.data.uri: no object s3://data/trajectories.jsonl")
    assert cond(plan, "DataReady")["status"] == "False"
    assert cond(plan, "Running")["reason"] == "NotReached"
    assert plan.status["phase"] == "Failed" and plan.finished == "failed"
    assert not plan.create
    assert plan.events[0][:2] == ("Warning", "DatasetNotFound")


def test_an_unreachable_store_is_a_failed_check() -> None:
    run = run_of()
    step(run)
    down = {"ok": False, "error": "EndpointConnectionError: could not connect"}
    plan = step(run, check_job=job("tiny-check-data", "failed", down))
    assert cond(plan, "Failed")["reason"] == "DataCheckFailed"
    assert "could not connect" in cond(plan, "Failed")["message"]


BATCH = {"data": {"rolloutBatch": {"name": "rollouts"}}}


def test_a_batch_reference_waits_for_the_batch_then_trains_on_what_it_kept() -> None:
    run = run_of(**BATCH)
    plan = step(run, batch=BatchSeen(found=True, phase="Running", message="1 of 4 ended"))
    assert cond(plan, "DataReady")["reason"] == "WaitingForBatch"
    assert "RolloutBatch rollouts is Running: 1 of 4 ended" in cond(plan, "DataReady")["message"]
    assert not plan.create
    done = BatchSeen(found=True, phase="Succeeded", complete=True, output_uri="s3://o/b/", kept=3)
    plan = step(run, batch=done)
    assert plan.status["dataUri"] == "s3://o/b/kept.jsonl"
    assert cond(plan, "DataReady")["reason"] == "BatchComplete"
    assert [m["kind"] for m in plan.create] == ["NetworkPolicy", "Job"]


@pytest.mark.parametrize(
    ("seen", "reason", "words"),
    [
        (BatchSeen(found=True, complete=True, failed=True, message="no gateway"),
         "BatchFailed", "RolloutBatch rollouts failed: no gateway"),
        (BatchSeen(found=True, complete=True, output_uri="s3://o/b", kept=0),
         "DatasetNotFound", "filter kept no trajectory"),
    ],
)  # fmt: skip
def test_a_batch_that_gives_nothing_fails_the_run(seen: BatchSeen, reason: str, words: str) -> None:
    plan = step(run_of(**BATCH), batch=seen)
    assert cond(plan, "Failed")["reason"] == reason
    assert words in cond(plan, "Failed")["message"]
    assert cond(plan, "Failed")["message"].startswith("spec.data.rolloutBatch")


def test_a_batch_that_does_not_exist_fails_after_the_grace_time() -> None:
    run = run_of(**BATCH)
    young = TrainingObserved(batch=BatchSeen(found=False), now=NOW, created_at=NOW)
    assert cond(reconcile_training(run, young, SETTINGS), "DataReady")["status"] == "Unknown"
    old = TrainingObserved(
        batch=BatchSeen(found=False), now=NOW, created_at=NOW - timedelta(seconds=600)
    )
    plan = reconcile_training(run, old, SETTINGS)
    assert cond(plan, "Failed")["reason"] == "BatchNotFound"
    assert "no RolloutBatch 'rollouts' in namespace ml" in cond(plan, "Failed")["message"]


# ---- training on the plain Job --------------------------------------------------------------
def test_progress_metrics_and_checkpoint_come_from_the_pods_report() -> None:
    run = run_of()
    to_training(run)
    report = {"step": 5, "totalSteps": 20, "metrics": {"loss": 1.25, "tokens_per_s": 900.0},
              "checkpoint": "s3://runs/tiny/checkpoints/step-4"}  # fmt: skip
    plan = step(
        run,
        train_job=job("tiny-train-1", "running", start=started()),
        report=report,
        existing_children=TRAINING_CHILDREN,
    )
    assert plan.status["phase"] == "Running"
    assert cond(plan, "Running")["status"] == "True"
    assert plan.status["progress"]["summary"] == "5/20"
    assert plan.status["metrics"]["loss"] == 1.25
    assert plan.status["checkpointUri"] == "s3://runs/tiny/checkpoints/step-4"
    assert plan.status["message"] == "training, step 5/20"
    assert not plan.create


def test_a_finished_job_succeeds_with_its_checkpoint() -> None:
    run = run_of()
    to_training(run)
    result = {"ok": True, "step": 20, "totalSteps": 20, "metrics": {"loss": 0.5},
              "checkpoint": "s3://runs/tiny/checkpoints/step-20"}  # fmt: skip
    plan = step(run, train_job=job("tiny-train-1", "succeeded", result))
    assert plan.status["phase"] == "Succeeded" and plan.finished == "succeeded"
    assert cond(plan, "Succeeded")["status"] == "True"
    assert cond(plan, "Complete")["reason"] == "Succeeded"
    assert plan.status["checkpointUri"] == "s3://runs/tiny/checkpoints/step-20"
    assert "trained 20/20 steps, loss 0.5" in plan.status["message"]
    assert plan.events[-1][:2] == ("Normal", "Succeeded")
    again = step(run, train_job=job("tiny-train-1", "missing"))  # TTL removed it: no change
    assert again.status == plan.status and not again.create and not again.events


def test_a_nan_loss_fails_the_run_and_keeps_the_last_good_checkpoint() -> None:
    run = run_of()
    to_training(run)
    good = {"step": 8, "metrics": {"loss": 2.0}, "checkpoint": "s3://runs/tiny/checkpoints/step-8"}
    step(run, train_job=job("tiny-train-1", "running", start=started()), report=good)
    nan = {"ok": False, "reason": "NaNLoss", "step": 9, "checkpoint": "s3://runs/tiny/checkpoints/step-8",
           "error": "the loss stopped being finite (loss=nan at step 9)"}  # fmt: skip
    plan = step(run, train_job=job("tiny-train-1", "failed", nan, reason="PodFailurePolicy: x"))
    failed = cond(plan, "Failed")
    assert failed["reason"] == "NaNLoss"
    assert "loss=nan at step 9" in failed["message"]
    assert "the last good checkpoint is s3://runs/tiny/checkpoints/step-8" in failed["message"]
    assert plan.status["checkpointUri"] == "s3://runs/tiny/checkpoints/step-8"
    assert plan.nan_loss and not plan.delete  # the ended pod keeps its log until the TTL
    assert plan.status["metrics"]["loss"] == 2.0  # the NaN never reaches the status


@pytest.mark.parametrize(
    ("job_reason", "reason", "field"),
    [
        ("BackoffLimitExceeded: Job has reached the specified backoff limit",
         "BackoffLimitExceeded", "spec.backoffLimit"),
        ("DeadlineExceeded: Job was active longer than specified deadline", "DeadlineExceeded",
         "spec.activeDeadlineSeconds"),
        ("", "TrainerFailed", "the trainer failed"),
    ],
)  # fmt: skip
def test_job_failures_name_the_lifecycle_field(job_reason: str, reason: str, field: str) -> None:
    run = run_of(backoffLimit=2, activeDeadlineSeconds=600)
    to_training(run)
    result = {"ok": False, "reason": "TrainerFailed", "error": "exited with status 1"}
    plan = step(run, train_job=job("tiny-train-1", "failed", result, reason=job_reason))
    assert cond(plan, "Failed")["reason"] == reason
    assert cond(plan, "Failed")["message"].startswith(field)


def pending(seconds: float, problem: PodProblem | None) -> JobObservation:
    """tiny-train-1, made ``seconds`` ago, its pod not started (``problem``: why)."""
    return JobObservation("tiny-train-1", "running", created_at=NOW - timedelta(seconds=seconds),
                          start=PodStart(problem=problem))  # fmt: skip


NO_CPU = PodProblem("Unschedulable", "Unschedulable",
                    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                    "available: 1 No preemption victims found for incoming pod.")  # fmt: skip


def test_an_unschedulable_training_pod_waits_with_the_schedulers_reason_until_the_deadline() -> (
    None
):
    run = run_of()
    to_training(run)
    plan = step(run, train_job=pending(600, NO_CPU), existing_children=TRAINING_CHILDREN)
    running = cond(plan, "Running")
    assert (running["status"], running["reason"]) == ("Unknown", "PodPending")
    assert running["message"] == (
        "the training pod cannot start yet: Unschedulable (Unschedulable: 0/1 nodes are "
        "available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption "
        "victims found for incoming pod.); it is waited for until 2026-12-01T10:05:00Z "
        "(training.schedulingDeadlineSeconds: 900 s), then the run fails"
    )
    assert plan.status["phase"] == "Starting" and cond(plan, "Failed")["status"] == "False"
    assert plan.status["message"].startswith("starting Job tiny-train-1: the training pod cannot")
    assert plan.events == [("Normal", "PodPending", running["message"])]  # not a Warning
    assert not plan.delete and not plan.create
    # the same wait seen again later (a pod event, a resync): nothing new to say or do
    later = TrainingObserved(train_job=pending(600, NO_CPU), existing_children=TRAINING_CHILDREN,
                             now=NOW + timedelta(seconds=200))  # fmt: skip
    again = reconcile_training(run, later, SETTINGS)
    assert again.status == plan.status and not again.events and not again.delete
    # past the deadline: Failed, in the scheduler's words, and the pending pod goes
    past = replace(later, now=NOW + timedelta(seconds=300))
    plan = reconcile_training(run, past, SETTINGS)
    failed = cond(plan, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "PodCannotStart")
    assert failed["message"].startswith(
        "the training pod did not start within 900 s: Unschedulable (Unschedulable: 0/1 nodes "
        "are available: 1 Insufficient cpu."
    )
    assert plan.delete == [("Job", "tiny-train-1")]  # once
    assert plan.events[-1][:2] == ("Warning", "PodCannotStart")


def test_the_scheduling_deadline_is_a_setting() -> None:
    run = run_of()
    to_training(run)
    quick = replace(SETTINGS, scheduling_deadline_seconds=300.0)
    observed = TrainingObserved(train_job=pending(301, NO_CPU), now=NOW,
                                existing_children=TRAINING_CHILDREN)  # fmt: skip
    plan = reconcile_training(run, observed, quick)
    assert cond(plan, "Failed")["message"].startswith("the training pod did not start within 300 s")


def test_a_pod_that_starts_before_the_deadline_trains() -> None:
    run = run_of()
    to_training(run)
    step(run, train_job=pending(600, NO_CPU), existing_children=TRAINING_CHILDREN)
    plan = step(run, train_job=job("tiny-train-1", "running", start=started()),
                existing_children=TRAINING_CHILDREN)  # fmt: skip
    running = cond(plan, "Running")
    assert (running["status"], running["reason"]) == ("True", "Training")
    assert plan.status["phase"] == "Running" and not plan.delete


def test_an_image_that_cannot_be_pulled_fails_after_the_start_grace_not_the_deadline() -> None:
    run = run_of()
    to_training(run)
    pull = PodProblem("ImagePull", "ErrImagePull", "pull access denied")
    plan = step(run, train_job=pending(60, pull), existing_children=TRAINING_CHILDREN)
    assert cond(plan, "Running")["reason"] == "PodPending"
    assert "(operator.stageStartGraceSeconds: 120 s)" in cond(plan, "Running")["message"]
    plan = step(run, train_job=pending(121, pull), existing_children=TRAINING_CHILDREN)
    assert cond(plan, "Failed")["reason"] == "PodCannotStart"
    assert cond(plan, "Failed")["message"] == (
        "the training pod did not start within 120 s: ImagePull (ErrImagePull: pull access denied)"
    )


def test_a_pod_the_scheduler_has_not_looked_at_yet_says_nothing_until_the_deadline() -> None:
    run = run_of()
    to_training(run)
    plan = step(run, train_job=pending(5, None), existing_children=TRAINING_CHILDREN)
    assert cond(plan, "Running")["reason"] == "Starting" and not plan.events
    plan = step(run, train_job=pending(901, None), existing_children=TRAINING_CHILDREN)
    assert cond(plan, "Failed")["message"] == (
        "the training pod did not start within 900 s: its pod was not scheduled"
    )


def test_suspend_deletes_the_job_and_resume_starts_a_new_one() -> None:
    run = run_of()
    to_training(run)
    step(run, train_job=job("tiny-train-1", "running", start=started()),
         report={"step": 3, "checkpoint": "s3://runs/tiny/checkpoints/step-3"})  # fmt: skip
    run["spec"]["suspend"] = True
    plan = step(run, train_job=job("tiny-train-1", "running", start=started()))
    assert ("Job", "tiny-train-1") in plan.delete
    assert plan.status["phase"] == "Suspended"
    assert cond(plan, "Running")["reason"] == "Suspended"
    assert "jobName" not in plan.status
    assert not plan.create
    assert step(run).status["phase"] == "Suspended"  # stays, nothing more to do
    run["spec"]["suspend"] = False
    plan = step(run, existing_children=frozenset({"NetworkPolicy/tiny-training"}))
    assert [c["metadata"]["name"] for c in plan.create] == ["tiny-train-2"]
    assert plan.status["starts"] == 2 and plan.status["phase"] == "Starting"
    assert plan.status["checkpointUri"] == "s3://runs/tiny/checkpoints/step-3"


def test_the_same_observation_gives_the_same_plan() -> None:
    run = run_of()
    to_training(run)
    observed = TrainingObserved(
        train_job=job("tiny-train-1", "missing"), existing_children=TRAINING_CHILDREN, now=NOW
    )
    first = reconcile_training(run, observed, SETTINGS)
    second = reconcile_training(run, observed, SETTINGS)
    assert first.status == second.status and first.create == second.create == []


# ---- the RayJob path -------------------------------------------------------------------------
def test_where_kuberay_is_installed_the_run_is_a_rayjob() -> None:
    run = run_of(resources={"workers": 2, "gpusPerWorker": 1})
    step(run)
    found = {"ok": True, "found": True}
    plan = step(run, check_job=job("tiny-check-data", "succeeded", found), ray_available=True)
    policy, rayjob = plan.create
    assert rayjob["kind"] == "RayJob" and plan.status["backend"] == "RayJob"
    assert policy["metadata"]["name"] == "tiny-training"  # fences the head and workers
    running = {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}}
    plan = step(run, rayjob=running, report={"step": 2, "totalSteps": 4}, ray_available=True)
    assert plan.status["phase"] == "Running" and plan.status["progress"]["summary"] == "2/4"
    done = {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}}
    result = {"ok": True, "step": 4, "checkpoint": "s3://runs/tiny/checkpoints/step-4"}
    plan = step(run, rayjob=done, logged_result=result, ray_available=True)
    assert plan.status["phase"] == "Succeeded"
    assert plan.status["checkpointUri"] == "s3://runs/tiny/checkpoints/step-4"


def test_a_failed_rayjob_says_kuberays_reason() -> None:
    run = run_of()
    step(run)
    step(run, check_job=job("tiny-check-data", "succeeded", {"ok": True, "found": True}),
         ray_available=True)  # fmt: skip
    failed = {"status": {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED",
                         "reason": "DeadlineExceeded", "message": "ran too long"}}  # fmt: skip
    plan = step(run, rayjob=failed)
    assert cond(plan, "Failed")["reason"] == "DeadlineExceeded"


# ---- bad specs -------------------------------------------------------------------------------
def test_an_invalid_spec_fails_naming_the_field() -> None:
    plan = step(run_of(objective="dpo"))
    assert cond(plan, "Failed")["reason"] == "InvalidSpec"
    assert "spec.objective" in cond(plan, "Failed")["message"]
    assert not plan.create


# ---- the on-policy loop (rounds > 1) ---------------------------------------------------------
ENV_A = ResolvedEnvironment(name="env-a", uri="s3://releases/env-a/pkg", digest="sha256:a")
ENV_B = ResolvedEnvironment(name="env-b", uri="s3://releases/env-b/pkg", digest="sha256:b")


def rounds_run(environments: dict[str, Any] | None = None) -> dict[str, Any]:
    rollout = {"environments": environments or {"names": ["env-a", "env-b"]},
               "samplesPerEnvironment": 2}  # fmt: skip
    run = run_of(objective="grpo", rounds=2, rollout=rollout)
    del run["spec"]["data"]
    return run


def kinds(plan: TrainingPlan) -> list[str]:
    return [f"{m['kind']}/{m['metadata']['name']}" for m in plan.create]


def test_rounds_wait_for_the_environments_then_serve_the_first_round() -> None:
    run = rounds_run()
    plan = step(run)  # not looked up yet
    assert cond(plan, "DataReady")["reason"] == "WaitingForEnvironments"
    assert not plan.create
    pending = EnvironmentsSeen(released=[ENV_A], not_released={"env-b": "Verifying"})
    plan = step(run, environments=pending)
    assert cond(plan, "DataReady")["status"] == "Unknown"
    assert "env-b (Verifying)" in cond(plan, "DataReady")["message"]
    assert plan.status["phase"] == "WaitingForData" and not plan.create
    released = EnvironmentsSeen(released=[ENV_A, ENV_B])
    plan = step(run, environments=released, ray_available=True)  # each round: a plain Job
    ready = cond(plan, "DataReady")
    assert (ready["status"], ready["reason"]) == ("True", "EnvironmentsResolved")
    assert ready["message"] == "2 rounds on 2 released environment(s): env-a, env-b"
    assert [e["name"] for e in plan.status["environments"]] == ["env-a", "env-b"]
    assert kinds(plan) == [
        "NetworkPolicy/tiny-serving", "Deployment/tiny-serve-r0", "Service/tiny-serve-r0",
    ]  # fmt: skip
    assert plan.status["backend"] == "Job"
    # resolved once: a later observation (env-b gone) changes nothing of the plan
    children = frozenset(kinds(plan))
    again = step(run, existing_children=children)
    assert [e["name"] for e in again.status["environments"]] == ["env-a", "env-b"]
    assert not again.create


@pytest.mark.parametrize("phase", ["Failed", "Rejected"])
def test_a_named_environment_that_will_never_be_released_fails_the_run(phase: str) -> None:
    seen = EnvironmentsSeen(released=[ENV_A], not_released={"env-b": phase})
    plan = step(rounds_run(), environments=seen)
    failed = cond(plan, "Failed")
    assert failed["reason"] == "EnvironmentsNotReleased"
    assert failed["message"].startswith(f"spec.rollout.environments.names: env-b ({phase})")
    assert cond(plan, "DataReady")["status"] == "False" and not plan.create


def test_a_named_environment_that_does_not_exist_fails_after_the_grace_time() -> None:
    seen = EnvironmentsSeen(released=[ENV_A], not_released={"env-b": "not found"})
    young = TrainingObserved(environments=seen, now=NOW, created_at=NOW)
    run = rounds_run()
    assert cond(reconcile_training(run, young, SETTINGS), "DataReady")["status"] == "Unknown"
    old = TrainingObserved(environments=seen, now=NOW, created_at=NOW - timedelta(seconds=600))
    failed = cond(reconcile_training(run, old, SETTINGS), "Failed")
    assert failed["reason"] == "EnvironmentsNotReleased"
    assert "no CoworkEnvironment env-b in this namespace" in failed["message"]


def test_a_selector_that_matches_nothing_released_yet_keeps_waiting() -> None:
    run = rounds_run({"selector": {"matchLabels": {"suite": "weather"}}})
    plan = step(run, environments=EnvironmentsSeen(released=[]))
    assert cond(plan, "DataReady")["reason"] == "WaitingForEnvironments"
    message = cond(plan, "DataReady")["message"]
    assert message == (
        "spec.rollout.environments: no Released environment matches the selector suite=weather yet"
    )
    assert cond(plan, "Failed")["status"] == "False"


def test_a_manifest_of_packages_needs_no_lookup() -> None:
    run = rounds_run({"manifestUri": "s3://synth/out/manifest.jsonl"})
    plan = step(run)
    assert cond(plan, "DataReady")["reason"] == "EnvironmentsResolved"
    assert plan.status["dataUri"] == "s3://synth/out/manifest.jsonl"
    assert "environments" not in plan.status
    assert "Deployment/tiny-serve-r0" in kinds(plan)


def test_the_same_rounds_observation_gives_the_same_plan() -> None:
    run = rounds_run()
    observed = TrainingObserved(environments=EnvironmentsSeen(released=[ENV_A]), now=NOW)
    first = reconcile_training(run, observed, SETTINGS)
    second = reconcile_training(run, observed, SETTINGS)
    assert first.status == second.status and first.create == second.create


# ---- the log ---------------------------------------------------------------------------------
def test_the_last_readable_report_of_the_log_counts() -> None:
    log = "\n".join(
        [
            'coworkgym-train-status {"step": 1}',
            "torch warning: something",
            'coworkgym-train-status {"step": 2, "metrics": {"loss": 1.0}}',
            "coworkgym-train-status {broken",
            '2026-12-01 (pid=12) coworkgym-train-result {"ok": true, "step": 2}',
        ]
    )
    report, result = last_report(log)
    assert report == {"step": 2, "metrics": {"loss": 1.0}}
    assert result == {"ok": True, "step": 2}
    assert last_report("nothing here") == (None, None)


def test_a_run_whose_step_does_not_advance_says_so() -> None:
    run = run_of()
    to_training(run)
    step(run, train_job=job("tiny-train-1", "running", start=started()), report={"step": 4})
    later = NOW + timedelta(seconds=SETTINGS.stall_seconds + 600)
    observed = TrainingObserved(
        train_job=job("tiny-train-1", "running", start=started()), report={"step": 4}, now=later
    )
    plan = reconcile_training(run, observed, SETTINGS)
    assert plan.status["message"] == "training, step 4; no new step for 40 min"


# ---- when the controller looks again -------------------------------------------------------
def test_a_pending_pod_is_looked_at_again_at_its_deadline_not_polled() -> None:
    """Between the pod's events (its watch wakes the run: scheduled, started), only the
    deadline: one wake-up, not the reconcile interval nor the progress reads."""
    from coworkgym_operator.training.handlers import SETTINGS as HANDLERS_SETTINGS
    from coworkgym_operator.training.handlers import _clock

    deadline = HANDLERS_SETTINGS.scheduling_deadline_seconds
    observed = TrainingObserved(train_job=pending(600, NO_CPU), now=NOW)
    assert _clock(observed) == pytest.approx(deadline - 600 + 0.1)
    running = TrainingObserved(train_job=job("tiny-train-1", "running", start=started()), now=NOW)
    assert _clock(running) == HANDLERS_SETTINGS.progress_interval_seconds

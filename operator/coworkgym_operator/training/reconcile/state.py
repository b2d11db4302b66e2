"""What a TrainingRun reconcile reads (the observations), what it decides (the plan) and the
state it carries between its steps, shared by the run's reconcile (training.py) and the
on-policy rounds' (training_rounds.py). Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coworkgym_operator.core.conditions import Cond
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.plan import ReconcileInputs, ReconcilePlan
from coworkgym_operator.core.pods import PodStart
from coworkgym_operator.rollouts.api.types import ResolvedEnvironment
from coworkgym_operator.training.api.conditions import TrainingReason as R
from coworkgym_operator.training.api.types import TrainingRunSpec, TrainingRunStatus
from coworkgym_operator.training.builders.network import training_policy, training_policy_name
from coworkgym_operator.training.builders.run import Manifest
from coworkgym_operator.training.reconcile.conditions import Activity, Failure
from coworkgym_operator.training.settings import TrainingSettings


@dataclass(frozen=True)
class BatchSeen:
    """A RolloutBatch as the controller read it (``found`` False: not there): the one
    spec.data names, or an on-policy round's."""

    found: bool
    phase: str = ""
    complete: bool = False
    failed: bool = False
    output_uri: str | None = None
    kept: int | None = None
    message: str = ""
    name: str = ""
    succeeded: int = 0  # rollouts with a valid reward
    invalid: int = 0
    deleting: bool = False  # its deletion is under way (its finalizer still runs)


@dataclass(frozen=True)
class EnvironmentsSeen:
    """rounds > 1 with names or a selector: the Released environments the selection takes,
    and the named ones missing or not Released (name → phase, or "not found")."""

    released: list[ResolvedEnvironment]
    not_released: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServingSeen:
    """An on-policy round's checkpoint server: its Deployment (``found``), whether a pod
    is available (ready for minReadySeconds), its Service's cluster IP, and its pod's start
    and restarts (with the server's last termination message)."""

    name: str
    found: bool
    available: bool = False
    cluster_ip: str | None = None
    created_at: datetime | None = None
    start: PodStart = field(default_factory=PodStart)
    restarts: int = 0
    last_error: str = ""


@dataclass(frozen=True)
class TrainingObserved:
    """What the controller saw. ``report``: the last status line of the training pod's log
    (None: none yet, or not read); ``logged_result``: the last result line (the RayJob's
    driver prints it; a plain Job's pod also leaves it in its termination message).
    ``serving`` and ``round_batch``: the running on-policy round's server and RolloutBatch
    (rounds > 1; None: not looked at)."""

    batch: BatchSeen | None = None
    environments: EnvironmentsSeen | None = None
    check_job: JobObservation | None = None
    train_job: JobObservation | None = None
    rayjob: Manifest | None = None
    report: dict[str, Any] | None = None
    logged_result: dict[str, Any] | None = None
    serving: ServingSeen | None = None
    round_batch: BatchSeen | None = None
    ray_available: bool = False
    existing_children: frozenset[str] = frozenset()  # "Kind/name"
    now: datetime | None = None
    created_at: datetime | None = None  # the run's creationTimestamp


@dataclass
class TrainingPlan(ReconcilePlan):
    nan_loss: bool = False
    # rounds > 1: the round steps taken in this reconcile, (round, from, to)
    round_steps: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass
class RunState:
    """The reconcile's working state: the status being written, the DataReady condition,
    what runs now, the failure (if any), the plan, a message for the rounds, why a pod
    waits to start, and whether a round's rollouts advanced."""

    status: TrainingRunStatus
    data: Cond = ("Unknown", R.WAITING, "not looked at yet")
    activity: Activity = "none"
    failure: Failure | None = None
    plan: TrainingPlan = field(default_factory=lambda: TrainingPlan(status={}))
    settings: TrainingSettings | None = None
    note: str = ""  # rounds > 1: where the round is, for status.message
    # why the pod starting (the training pod, a round's server) cannot start yet, and
    # until when it is waited for (reconcile/starting.py): the Running condition's message
    waiting: str = ""
    # rounds > 1: the round moved on without a step or a round step: its RolloutBatch
    # ended more rollouts (progress, for the no-progress alert)
    progressed: bool = False

    def fail(self, reason: R, message: str) -> None:
        self.failure = Failure(self.status.step, reason, message[:1000])


# what one reconcile of a run reads (core/plan.py)
RunInputs = ReconcileInputs[TrainingRunSpec, TrainingObserved, TrainingSettings]


def create_once(state: RunState, manifest: Manifest) -> bool:
    """Plan ``manifest`` unless this reconcile planned it already (two steps taken in one
    reconcile may both make sure of the same child); whether it was planned now."""
    key = (manifest["kind"], manifest["metadata"]["name"])
    if any((m["kind"], m["metadata"]["name"]) == key for m in state.plan.create):
        return False
    state.plan.create.append(manifest)
    return True


def ensure_training_policy(state: RunState, inputs: RunInputs) -> None:
    """Plan the run's <run>-training NetworkPolicy when it is missing (first, or deleted
    under us), ahead of the training Job or RayJob it fences."""
    name = training_policy_name(inputs.name)
    if f"NetworkPolicy/{name}" not in inputs.observed.existing_children:
        create_once(state, training_policy(inputs.manifest, inputs.settings))


def training_failed(
    state: RunState, spec: TrainingRunSpec, result: dict[str, Any], job_reason: str, where: str = ""
) -> None:
    """The training Job (or RayJob) ended without a checkpoint to show: the run fails with
    job_failure's reason, remembering a NaN loss for the metrics."""
    reason, message = job_failure(spec, result, job_reason, state.status.checkpoint_uri)
    state.plan.nan_loss = reason is R.NAN_LOSS
    state.fail(reason, f"{where}{message}")


def job_failure(
    spec: TrainingRunSpec, result: dict[str, Any], job_reason: str, kept: str | None
) -> tuple[R, str]:
    """Why a training Job failed, as the run's reason and message: the trainer's own
    reason from its result first (NaN loss, no data), then the Job's (backoff limit,
    deadline); the message names the field that governs it and the checkpoint kept."""
    keep = f"; the last good checkpoint is {kept}" if kept else "; no checkpoint was saved"
    if result.get("reason") == "NaNLoss":
        return R.NAN_LOSS, f"{result.get('error') or 'the loss became NaN'}{keep}"
    if result.get("reason") in ("NoExamples", "DatasetNotFound"):
        reason = R.NO_EXAMPLES if result["reason"] == "NoExamples" else R.DATASET_NOT_FOUND
        what = "gave nothing to train on" if reason is R.NO_EXAMPLES else "is not there"
        return reason, f"spec.data: the data {what}: {result.get('error') or ''}{keep}"
    if "BackoffLimitExceeded" in job_reason or "backoff limit" in job_reason.lower():
        reason = R.BACKOFF_LIMIT_EXCEEDED
        head = f"spec.backoffLimit: the training pod failed {spec.backoff_limit + 1} time(s)"
    elif "DeadlineExceeded" in job_reason or "deadline" in job_reason.lower():
        reason = R.DEADLINE_EXCEEDED
        head = f"spec.activeDeadlineSeconds: the training ran past {spec.active_deadline_seconds} s"
    else:
        reason = R.TRAINER_FAILED
        head = "the trainer failed"
    detail = result.get("error") or job_reason or "no result"
    return reason, f"{head}: {detail}{keep}"


def finite_metrics(metrics: Any) -> dict[str, float] | None:
    """A report's metrics, finite numbers only (None: the report has none)."""
    if not isinstance(metrics, dict):
        return None
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def age(observed: TrainingObserved) -> float | None:
    """Seconds since the run was created (None: no clock)."""
    if observed.now is None or observed.created_at is None:
        return None
    return (observed.now - observed.created_at).total_seconds()


__all__ = [
    "BatchSeen",
    "EnvironmentsSeen",
    "RunInputs",
    "RunState",
    "ServingSeen",
    "TrainingObserved",
    "TrainingPlan",
    "age",
    "create_once",
    "ensure_training_policy",
    "finite_metrics",
    "job_failure",
    "stamp",
    "training_failed",
]

"""One reconcile of a CoworkEnvironment, as a pure function of what was observed.

Level-triggered: given the object (spec + the status we wrote last time) and the state of the
pending stage's Job, decide the new status and which children to create. Running it twice on
the same observation gives the same answer, so a restarted operator duplicates nothing: Job
names are deterministic (environment, stage, iteration, attempt) and the pending stage is
part of the status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coworkgym.detector.defects import Defect
from coworkgym.loop.machine import (
    Budget,
    Event,
    Executed,
    LoopStatus,
    Phase,
    RunStage,
    StageFailed,
    StageSucceeded,
    Start,
    step,
)
from coworkgym.spec import EnvironmentSpec, spec_problems

from ..api.types import (
    MAX_DEFECTS_IN_STATUS,
    CoworkEnvironmentStatus,
    DefectSummary,
    StageTiming,
)
from ..builders import Manifest, job_name, network_policies, stage_job, volume_claims
from ..settings import OperatorSettings
from .conditions import conditions_for, derive_phase, merge

JobState = Literal["missing", "running", "succeeded", "failed"]


@dataclass(frozen=True)
class JobObservation:
    name: str
    state: JobState
    result: dict[str, Any] | None = None  # the stage's termination message
    reason: str = ""
    seconds: float | None = None


@dataclass(frozen=True)
class Observed:
    job: JobObservation | None = None
    existing_children: frozenset[str] = frozenset()  # "Kind/name" of children that exist


@dataclass
class Plan:
    status: dict[str, Any]
    create: list[Manifest] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # type, reason, message
    finished: str | None = None  # outcome, when the environment reached a terminal phase
    defects: list[Defect] = field(default_factory=list)
    stage_seconds: tuple[str, float] | None = None
    job_failed: str | None = None


class LoopState(BaseModel):
    """What the controller keeps in ``status.loop`` between reconciles."""

    model_config = ConfigDict(populate_by_name=True)

    status: LoopStatus = Field(default_factory=LoopStatus)
    pending: RunStagePayload | None = None
    timings: dict[str, float] = Field(default_factory=dict)


class RunStagePayload(BaseModel):
    stage: str
    feedback: list[Defect] = Field(default_factory=list)

    def action(self) -> RunStage:
        return RunStage(self.stage, list(self.feedback))  # type: ignore[arg-type]


LoopState.model_rebuild()


def pending_job_name(env: Manifest) -> str | None:
    """The Job the environment is waiting for, read from its status (for the observer)."""
    state = _state(env)
    if state.pending is None:
        return None
    return job_name(
        env["metadata"]["name"], state.pending.stage, state.status.iteration, state.status.attempts
    )


def _state(env: Manifest) -> LoopState:
    raw = (env.get("status") or {}).get("loop") or {}
    try:
        return LoopState.model_validate(raw)
    except ValidationError:
        return LoopState()  # unreadable bookkeeping: start over rather than crash-loop


def _to_event(stage: str, job: JobObservation) -> Event:
    result = job.result or {}
    if job.state == "succeeded" and result.get("ok", False):
        if stage == "detector":
            defects = [
                Defect.model_validate({**d, "evidence": {}}) for d in result.get("defects", [])
            ]
            return Executed(defects)
        return StageSucceeded(stage)  # type: ignore[arg-type]
    why = result.get("error") or job.reason or "the stage's pod failed without a result"
    return StageFailed(stage, str(why), bool(result.get("retryable", True)))  # type: ignore[arg-type]


def reconcile(env: Manifest, observed: Observed, settings: OperatorSettings) -> Plan:
    meta = env["metadata"]
    generation = meta.get("generation")
    previous = CoworkEnvironmentStatus.model_validate(env.get("status") or {})
    try:
        spec = EnvironmentSpec.model_validate(env.get("spec") or {})
    except ValidationError as exc:
        return _invalid(previous, generation, "; ".join(spec_problems(exc, "spec.")))
    state = _state(env)
    budget = Budget(max_iterations=spec.budget.max_iterations)
    plan = Plan(status={})
    before = state.status.phase

    if state.status.phase is Phase.PENDING and state.pending is None:
        _apply(state, step(state.status, Start(), budget))

    if state.pending is not None:
        job = observed.job
        if job is not None and job.state in ("succeeded", "failed"):
            stage = state.pending.stage
            if job.seconds is not None:
                state.timings[stage] = state.timings.get(stage, 0.0) + job.seconds
                plan.stage_seconds = (stage, job.seconds)
            if job.state == "failed":
                plan.job_failed = stage
            event = _to_event(stage, job)
            if isinstance(event, Executed):
                plan.defects = event.defects
            if stage == "release" and isinstance(event, StageSucceeded) and job.result:
                previous.package_uri = job.result.get("uri")
                previous.package_digest = job.result.get("digest")
            _apply(state, step(state.status, event, budget))

    if not state.status.phase.is_terminal():
        for child in [*volume_claims(env, settings), *network_policies(env, settings)]:
            if f"{child['kind']}/{child['metadata']['name']}" not in observed.existing_children:
                plan.create.append(child)
    if state.pending is not None:
        name = job_name(
            meta["name"], state.pending.stage, state.status.iteration, state.status.attempts
        )
        if observed.job is None or observed.job.name != name or observed.job.state == "missing":
            plan.create.append(
                stage_job(
                    env,
                    spec,
                    state.pending.stage,
                    state.status.iteration,
                    state.status.attempts,
                    state.pending.feedback,
                    settings,
                )
            )

    after = state.status.phase
    if after != before:
        kind = "Warning" if after in (Phase.REJECTED, Phase.FAILED) else "Normal"
        plan.events.append((kind, str(after), state.status.message or str(after)))
        if after.is_terminal():
            plan.finished = str(after).lower()
    plan.status = _status(previous, state, generation).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return plan


def _apply(state: LoopState, decision: Any) -> None:
    state.status = decision.status
    action = decision.actions[0] if decision.actions else None
    state.pending = (
        RunStagePayload(stage=action.stage, feedback=action.feedback) if action else None
    )


def _status(
    previous: CoworkEnvironmentStatus, state: LoopState, generation: int | None
) -> CoworkEnvironmentStatus:
    pending = state.pending.stage if state.pending else None
    conditions = merge(previous.conditions, conditions_for(state.status, pending), generation)
    defects = [
        DefectSummary(code=d.code, owner=d.owner, severity=d.severity, message=d.message[:512])
        for d in state.status.defects[:MAX_DEFECTS_IN_STATUS]
    ]
    return CoworkEnvironmentStatus(
        phase=str(derive_phase(conditions)),
        iteration=state.status.iteration,
        observed_generation=generation,
        conditions=conditions,
        defects=defects,
        stage_timings=[
            StageTiming(stage=k, seconds=round(v, 3)) for k, v in sorted(state.timings.items())
        ],
        package_uri=previous.package_uri,
        package_digest=previous.package_digest,
        message=state.status.message,
        loop=state.model_dump(mode="json"),
    )


def _invalid(previous: CoworkEnvironmentStatus, generation: int | None, why: str) -> Plan:
    """A spec the schema let through but the models refuse: marked, never crash-looped."""
    from ..api.conditions import ConditionReason as R
    from ..api.conditions import ConditionType as T

    conditions = merge(
        previous.conditions, {T.FAILED: ("True", R.INVALID_SPEC, why[:1000])}, generation
    )
    status = previous.model_copy(
        update={
            "phase": str(Phase.FAILED),
            "conditions": conditions,
            "observed_generation": generation,
            "message": f"invalid spec: {why[:400]}",
        }
    )
    first_time = previous.phase != str(Phase.FAILED)
    return Plan(
        status=status.model_dump(mode="json", by_alias=True, exclude_none=True),
        events=[("Warning", "InvalidSpec", why[:400])] if first_time else [],
        finished="failed" if first_time else None,
    )

"""One reconcile of a CoworkEnvironment, as a pure function of what was observed.

Level-triggered: given the object (spec + the status we wrote last time), the state of the
pending stage's Job and its pod, and the time, decide the new status, which children to
create and which to delete. Running it twice on the same observation gives the same
answer, so a restarted operator duplicates nothing: Job names are deterministic
(environment, stage, iteration, attempt) and the pending stage is part of the status.

A stage whose pod cannot start is not left waiting for the stage timeout: the reason
(image pull, scheduling, volume binding) goes into the running stage's condition at once,
with a Normal event (one per kind of problem and attempt: waiting for a volume to be bound
or a node to be free is what a healthy environment does), and once the pod has not
started ``stage_start_grace_seconds`` after its Job was created, the attempt ends (the Job
is deleted, a Warning event) and the loop's retry policy decides, like for a crashed
stage. The next attempt's Job is built from the spec as it is then, so a corrected
``spec.sandbox`` applies to it; a spec changed while the pod cannot start ends the attempt
without waiting for the grace. (Should the operator stop between
deleting a stuck Job and writing the status, the next reconcile finds that Job missing and
creates it again under its own name: the same attempt, started afresh, never two.)

An LLM-backed stage's Job comes with the environment's gateway tokens (a Secret, created
each time such a Job is; an existing one is fine), and the model calls its pod reports are
added to ``status.llmUsage``. An operator without a gateway fails such a stage at once,
saying so, rather than let it run without a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from coworkgym.detector.defects import Defect
from coworkgym.loop.machine import (
    Budget,
    Event,
    Executed,
    LoopStatus,
    Phase,
    Round,
    Stage,
    StageFailed,
    StageSucceeded,
    Start,
    step,
)
from coworkgym.spec import EnvironmentSpec
from coworkgym_operator.core.api import read_spec
from coworkgym_operator.core.builders import Manifest
from coworkgym_operator.core.conditions import merge
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.plan import ReconcilePlan
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.api.types import (
    MAX_DEFECTS_IN_STATUS,
    CoworkEnvironmentStatus,
    DefectSummary,
    RoleUsage,
    StageTiming,
)
from coworkgym_operator.environment.builders import (
    ROLE_VOLUMES,
    gateway_tokens,
    job_name,
    llm_stages,
    network_policies,
    stage_job,
    volume_claims,
    volume_name,
)
from coworkgym_operator.environment.reconcile.conditions import (
    PHASES,
    conditions_for,
    invalid_spec_conditions,
)


@dataclass(frozen=True)
class Observed:
    job: JobObservation | None = None
    existing_children: frozenset[str] = frozenset()  # "Kind/name" of children that exist
    now: datetime | None = None  # None: no clock, so no attempt is ended for not starting


@dataclass
class Plan(ReconcilePlan):
    # the finished stage pods, which keep the role volumes in use (kept by pvc-protection
    # until no pod names them), go with the volumes; their Jobs stay, with their results.
    # The controller deletes after it has written the status (the pods hold the results).
    delete_stage_pods: bool = False
    defects: list[Defect] = field(default_factory=list)
    stage_seconds: tuple[str, float] | None = None
    job_failed: str | None = None
    llm_usage: RoleUsage | None = None  # what the finished stage's model calls used


class LoopRecord(BaseModel):
    """``status.loop``: the loop engine's bookkeeping that the rest of the status does not
    already say (the phase, iteration, message and stage timings are read back from there).
    camelCase on the wire, like every other status field."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    stage: Stage | None = Field(None, description="the stage whose Job the environment waits for")
    attempt: int = Field(0, description="the try of that stage in this iteration")
    builder_feedback: list[Defect] = Field(default_factory=list)
    verifier_feedback: list[Defect] = Field(default_factory=list)
    rounds: list[Round] = Field(default_factory=list)
    failed_stage: Stage | None = None
    start_problems: list[str] | None = Field(
        None,
        description="the kinds of start problem already announced for the pending stage's "
        "Job (one event per kind and attempt, however many reconciles see it)",
    )


class RunStagePayload(BaseModel):
    """``status.loop.pending`` as operators before 0.2 wrote it (read once, on upgrade)."""

    stage: Stage | None = None


@dataclass
class LoopState:
    """The machine's status, the stage waited for, the summed seconds per stage, and the
    kinds of start problem announced for the pending stage's Job."""

    loop: LoopStatus
    stage: Stage | None
    timings: dict[str, float]
    start_problems: list[str] = field(default_factory=list)

    @property
    def feedback(self) -> list[Defect]:
        """What the pending stage works on: the defects routed to it (the machine hands a
        constructor its own feedback list, and nothing to the detector or the release)."""
        by_stage = {"builder": self.loop.builder_feedback, "verifier": self.loop.verifier_feedback}
        return list(by_stage.get(self.stage or "", []))

    def record(self) -> LoopRecord:
        return LoopRecord(
            stage=self.stage,
            attempt=self.loop.attempts,
            builder_feedback=self.loop.builder_feedback,
            verifier_feedback=self.loop.verifier_feedback,
            rounds=self.loop.rounds,
            failed_stage=self.loop.failed_stage,
            start_problems=self.start_problems or None,
        )


def pending_job_name(env: Manifest) -> str | None:
    """The Job the environment is waiting for, read from its status (for the observer)."""
    state = _state(env)
    if state.stage is None:
        return None
    return job_name(env["metadata"]["name"], state.stage, state.loop.iteration, state.loop.attempts)


def _state(env: Manifest) -> LoopState:
    status = env.get("status") or {}
    raw = status.get("loop") or {}
    try:
        if isinstance(raw.get("status"), dict):  # written by an operator before 0.2
            loop = LoopStatus.model_validate(raw["status"])
            pending = RunStagePayload.model_validate(raw.get("pending") or {})
            return LoopState(loop, pending.stage, dict(raw.get("timings") or {}))
        record = LoopRecord.model_validate(raw)
        phase = Phase(status.get("phase", Phase.PENDING))
        loop = LoopStatus(
            phase=phase,
            iteration=int(status.get("iteration", 0)),
            attempts=record.attempt,
            builder_feedback=record.builder_feedback,
            verifier_feedback=record.verifier_feedback,
            rounds=record.rounds,
            message=str(status.get("message", "")),
            failed_stage=record.failed_stage,
        )
        timings = {t["stage"]: float(t["seconds"]) for t in status.get("stageTimings") or []}
    except (ValidationError, ValueError, KeyError, TypeError):
        # unreadable bookkeeping: start over rather than crash-loop
        return LoopState(LoopStatus(), None, {})
    return LoopState(loop, record.stage, timings, list(record.start_problems or []))


def _to_event(stage: Stage, job: JobObservation) -> Event:
    result = job.result or {}
    if job.state == "succeeded" and result.get("ok", False):
        if stage == "detector":
            defects = [
                Defect.model_validate({**d, "evidence": {}}) for d in result.get("defects", [])
            ]
            return Executed(defects)
        return StageSucceeded(stage)
    why = result.get("error") or job.reason or "the stage's pod failed without a result"
    return StageFailed(stage, str(why), bool(result.get("retryable", True)))


def reconcile(env: Manifest, observed: Observed, settings: OperatorSettings) -> Plan:
    meta = env["metadata"]
    generation = meta.get("generation")
    previous = CoworkEnvironmentStatus.model_validate(env.get("status") or {})
    spec = read_spec(EnvironmentSpec, env)
    if isinstance(spec, str):
        return _invalid(previous, generation, spec)
    state = _state(env)
    budget = Budget(max_iterations=spec.budget.max_iterations)
    plan = Plan(status={})
    before = state.loop.phase
    note = ""  # why the running stage's pod cannot start, for its condition

    if state.loop.phase is Phase.PENDING and state.stage is None:
        _apply(state, step(state.loop, Start(), budget))

    job = observed.job
    if state.stage is not None and job is not None and job.name == _job_of(meta, state):
        if job.state in ("succeeded", "failed"):
            _fold_finished(state, job, plan, previous, budget)
        elif job.state == "running" and not job.start.started:
            note = _fold_not_started(state, job, plan, budget, observed, generation, settings)

    terminal = state.loop.phase.is_terminal()
    if not terminal:
        for child in [*volume_claims(env, settings), *network_policies(env, settings)]:
            if f"{child['kind']}/{child['metadata']['name']}" not in observed.existing_children:
                plan.create.append(child)
    elif settings.volume_retention == "Delete":
        for role in ROLE_VOLUMES:
            claim = volume_name(meta["name"], role)
            if f"PersistentVolumeClaim/{claim}" in observed.existing_children:
                plan.delete.append(("PersistentVolumeClaim", claim))
                plan.delete_stage_pods = True
    if state.stage is not None:
        name = _job_of(meta, state)
        if job is None or job.name != name or job.state == "missing":
            uses_model = state.stage in llm_stages(spec)
            if uses_model and not (settings.gateway_url and settings.gateway_signing_key):
                why = (
                    f"spec.backends.{state.stage} is an llm backend, but this operator has no "
                    "LLM gateway (the chart's gateway.enabled)"
                )
                _apply(state, step(state.loop, StageFailed(state.stage, why, False), budget))
            else:
                if uses_model:
                    plan.create.append(gateway_tokens(env, spec, settings))
                plan.create.append(
                    stage_job(
                        env,
                        spec,
                        state.stage,
                        state.loop.iteration,
                        state.loop.attempts,
                        state.feedback,
                        settings,
                    )
                )

    after = state.loop.phase
    if after != before:
        kind = "Warning" if after in (Phase.REJECTED, Phase.FAILED) else "Normal"
        plan.events.append((kind, str(after), state.loop.message or str(after)))
        plan.transition = (str(before), str(after))
        if after.is_terminal():
            plan.finished = str(after).lower()
    plan.status = _status(previous, state, generation, note).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return plan


def _fold_finished(
    state: LoopState,
    job: JobObservation,
    plan: Plan,
    previous: CoworkEnvironmentStatus,
    budget: Budget,
) -> None:
    """The pending stage's Job finished: its result moves the loop on."""
    assert state.stage is not None
    stage = state.stage
    if job.seconds is not None:
        state.timings[stage] = state.timings.get(stage, 0.0) + job.seconds
        plan.stage_seconds = (stage, job.seconds)
    if job.state == "failed":
        plan.job_failed = stage
    plan.llm_usage = _usage(stage, job.result)
    if plan.llm_usage is not None:
        previous.llm_usage = _add_usage(previous.llm_usage, plan.llm_usage)
    event = _to_event(stage, job)
    if isinstance(event, Executed):
        plan.defects = event.defects
    if stage == "release" and isinstance(event, StageSucceeded) and job.result:
        previous.package_uri = job.result.get("uri")
        previous.package_digest = job.result.get("digest")
    _apply(state, step(state.loop, event, budget))


def _usage(stage: str, result: dict[str, Any] | None) -> RoleUsage | None:
    """The model calls a stage's pod reported in its result (failed or not), if any."""
    raw = (result or {}).get("usage")
    if not isinstance(raw, dict):
        return None
    try:
        return RoleUsage(
            role=stage,
            requests=int(raw.get("requests", 0)),
            prompt_tokens=int(raw.get("prompt_tokens", 0)),
            completion_tokens=int(raw.get("completion_tokens", 0)),
        )
    except (TypeError, ValueError):  # a pod's report is not trusted to be well formed
        return None


def _add_usage(known: list[RoleUsage], more: RoleUsage) -> list[RoleUsage]:
    by_role = {u.role: u for u in known}
    was = by_role.get(more.role, RoleUsage(role=more.role))
    by_role[more.role] = RoleUsage(
        role=more.role,
        requests=was.requests + more.requests,
        prompt_tokens=was.prompt_tokens + more.prompt_tokens,
        completion_tokens=was.completion_tokens + more.completion_tokens,
    )
    return [by_role[r] for r in sorted(by_role)]


def _fold_not_started(
    state: LoopState,
    job: JobObservation,
    plan: Plan,
    budget: Budget,
    observed: Observed,
    generation: int | None,
    settings: OperatorSettings,
) -> str:
    """The pending stage's pod has not started: end the attempt if it is stuck (the loop's
    retry policy decides what follows: a Warning), else return a note on why it cannot start
    (for the running stage's condition, announced by a Normal event: within the grace, a
    volume being bound or a node being freed is a wait, not a fault)."""
    assert state.stage is not None
    stage = state.stage
    ended = _not_started(job, stage, observed.now, generation, settings)
    if ended:
        plan.delete.append(("Job", job.name))
        plan.job_failed = stage
        plan.events.append(("Warning", "StageNotStarted", f"{job.name}: {ended}"))
        _apply(state, step(state.loop, StageFailed(stage, ended), budget))
        return ""
    problem = job.start.problem
    if problem is None:
        return ""
    note = (
        f"its pod cannot start: {problem.describe()}; the attempt ends if it has not "
        f"started {settings.stage_start_grace_seconds:g} s after its Job was created"
    )
    if problem.kind not in state.start_problems:  # a problem that comes back is not news
        state.start_problems.append(problem.kind)
        plan.events.append(("Normal", "StagePodNotStarting", f"{job.name}: {note}"))
    return note


def _not_started(
    job: JobObservation,
    stage: Stage,
    now: datetime | None,
    generation: int | None,
    settings: OperatorSettings,
) -> str:
    """Why the attempt ends now without having started, or "" while it may still start.

    Stuck means: a problem is reported, or no node was chosen. A scheduled pod that is
    still pulling its image is left alone (a large image takes minutes; the stage timeout
    bounds it)."""
    problem = job.start.problem
    why = problem.describe() if problem else "its pod was not scheduled"
    outdated = job.generation is not None and generation is not None and job.generation < generation
    if problem and outdated:
        return f"the spec changed while the {stage} pod could not start: {why}"
    if now is None or job.created_at is None or (job.start.scheduled and problem is None):
        return ""
    waited = (now - job.created_at).total_seconds()
    if waited < settings.stage_start_grace_seconds:
        return ""
    return f"the {stage} pod did not start within {settings.stage_start_grace_seconds:g} s: {why}"


def _job_of(meta: Manifest, state: LoopState) -> str:
    assert state.stage is not None
    return job_name(meta["name"], state.stage, state.loop.iteration, state.loop.attempts)


def _apply(state: LoopState, decision: Any) -> None:
    attempt = (state.stage, state.loop.iteration, state.loop.attempts)
    state.loop = decision.status
    action = decision.actions[0] if decision.actions else None
    state.stage = action.stage if action else None
    if (state.stage, state.loop.iteration, state.loop.attempts) != attempt:
        state.start_problems = []  # another Job: its problems are announced afresh


def _status(
    previous: CoworkEnvironmentStatus, state: LoopState, generation: int | None, note: str
) -> CoworkEnvironmentStatus:
    wanted = conditions_for(state.loop, state.stage, note, previous.package_uri)
    conditions = merge(previous.conditions, wanted, generation)
    defects = [
        DefectSummary(code=d.code, owner=d.owner, severity=d.severity, message=d.message[:512])
        for d in state.loop.defects[:MAX_DEFECTS_IN_STATUS]
    ]
    return CoworkEnvironmentStatus(
        phase=str(PHASES.derive(conditions)),
        iteration=state.loop.iteration,
        observed_generation=generation,
        conditions=conditions,
        defects=defects,
        stage_timings=[
            StageTiming(stage=k, seconds=round(v, 3)) for k, v in sorted(state.timings.items())
        ],
        llm_usage=previous.llm_usage,
        package_uri=previous.package_uri,
        package_digest=previous.package_digest,
        message=state.loop.message,
        loop=state.record().model_dump(mode="json", by_alias=True, exclude_none=True),
    )


def _invalid(previous: CoworkEnvironmentStatus, generation: int | None, why: str) -> Plan:
    """A spec the schema let through but the models refuse: marked, never crash-looped."""
    conditions = merge(previous.conditions, invalid_spec_conditions(why[:1000]), generation)
    status = previous.model_copy(
        update={
            "phase": str(Phase.FAILED),
            "conditions": conditions,
            "observed_generation": generation,
            "message": f"invalid spec: {why[:400]}",
            "loop": {},
        }
    )
    first_time = previous.phase != str(Phase.FAILED)
    return Plan(
        status=status.model_dump(mode="json", by_alias=True, exclude_none=True),
        events=[("Warning", "InvalidSpec", why[:400])] if first_time else [],
        finished="failed" if first_time else None,
    )


__all__ = [
    "LoopRecord",
    "Observed",
    "Plan",
    "pending_job_name",
    "reconcile",
]

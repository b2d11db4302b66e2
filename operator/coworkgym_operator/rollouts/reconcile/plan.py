"""One reconcile of a RolloutBatch, as a pure function of what was observed.

Level-triggered: from the batch (spec + the status written last time), the Released
environments it may select, the endpoints' reachability, the batch's Jobs and which
children exist, decide the new status, what to create and what to delete. Every child has
a deterministic name (``rollouts/builders.py``), a child is created only when it does not exist
and a finished rollout's Jobs are deleted only once its outcome is in the status, so
running it twice on the same observation gives the same plan and a restarted operator
duplicates nothing.

    resolve ─▶ probe ─▶ fetch ─▶ rollout (≤ concurrency at once: rollout pod, then verify pod)
            ─▶ collect ─▶ done

Bad input stops the batch before any pod starts: no environment selected, a named one not
Released, an endpoint that does not answer. A rollout that goes wrong (its endpoint
failed, its pod died) is an *invalid* outcome with the reason; the batch goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coworkgym_operator.core.api import read_spec, read_status
from coworkgym_operator.core.conditions import merge
from coworkgym_operator.core.observe import JobObservation, stuck
from coworkgym_operator.core.plan import ReconcileInputs, ReconcilePlan
from coworkgym_operator.rollouts.api.conditions import BatchReason as R
from coworkgym_operator.rollouts.api.types import (
    Counts,
    FunnelStep,
    HarnessPassRate,
    ResolvedEnvironment,
    RolloutBatchSpec,
    RolloutBatchStatus,
)
from coworkgym_operator.rollouts.builders import (
    Manifest,
    batch_volume,
    collect_job,
    fetch_job,
    gateway_tokens,
    job_name,
    network_policies,
    parse_rollout_id,
    rollout_id,
    rollout_job,
    tokens_secret_name,
    verify_job,
    volume_name,
)
from coworkgym_operator.rollouts.reconcile.conditions import (
    PHASES,
    Failure,
    batch_conditions,
)
from coworkgym_operator.rollouts.settings import BatchSettings

PASSED, FAILED = "passed", "failed"
INVALID = "invalid"  # outcomes read "invalid: <reason>"


@dataclass(frozen=True)
class BatchObserved:
    """What the controller saw. ``released``: the Released environments the selection
    matches, in name order (None: not looked up, e.g. a manifest batch); ``not_released``:
    named environments that are missing or not Released, with their phase;
    ``unreachable``: endpoint → why it did not answer (``probed`` once the probe ran);
    ``jobs``: the Jobs the status says are running, observed."""

    released: list[ResolvedEnvironment] | None = None
    not_released: dict[str, str] = field(default_factory=dict)
    probed: bool = False
    unreachable: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, JobObservation] = field(default_factory=dict)
    existing_children: frozenset[str] = frozenset()  # "Kind/name"
    now: datetime | None = None  # the conditions' transition time (None: the clock's)


@dataclass(frozen=True)
class RolloutFinished:
    """A rollout pod ended: for the metrics."""

    policy: str
    seconds: float
    tokens: int
    simulator_faults: int
    termination: str


@dataclass(frozen=True)
class OutcomeRecorded:
    policy: str
    outcome: str  # passed, failed, invalid
    reason: str = ""


@dataclass
class BatchPlan(ReconcilePlan):
    rollouts: list[RolloutFinished] = field(default_factory=list)
    outcomes: list[OutcomeRecorded] = field(default_factory=list)


# ---- what the controller must look at -------------------------------------------------
def jobs_to_observe(batch: Manifest) -> list[str]:
    """The Jobs whose state this reconcile needs (from the status written last time)."""
    status = _previous(batch)
    name = batch["metadata"]["name"]
    if status.step == "fetch":
        return [job_name(name, "fetch")]
    if status.step == "collect":
        return [job_name(name, "collect")]
    if status.step == "rollout":
        return [job_name(name, where, rid) for rid, where in sorted(status.running.items())]
    return []


def needs_probe(batch: Manifest) -> bool:
    return _previous(batch).step in ("resolve", "probe")


def model_endpoints(spec: RolloutBatchSpec) -> list[str]:
    return sorted({p.base_url for p in spec.policies if p.base_url})


def _previous(batch: Manifest) -> RolloutBatchStatus:
    return read_status(RolloutBatchStatus, batch)


# ---- the reconcile --------------------------------------------------------------------
@dataclass
class _State:
    status: RolloutBatchStatus
    failure: Failure | None = None
    plan: BatchPlan = field(default_factory=lambda: BatchPlan(status={}))

    def fail(self, reason: R, message: str) -> None:
        self.failure = Failure(self.status.step, reason, message[:1000])


# what one reconcile of a batch reads (core/plan.py)
_Inputs = ReconcileInputs[RolloutBatchSpec, BatchObserved, BatchSettings]


def reconcile_batch(batch: Manifest, observed: BatchObserved, settings: BatchSettings) -> BatchPlan:
    meta = batch["metadata"]
    generation = meta.get("generation")
    previous = _previous(batch)
    state = _State(previous.model_copy(deep=True))
    before = previous.phase
    if previous.step == "done" or _completed(previous):
        _sweep(state, meta["name"], observed)
        return _finish(state, batch, observed, generation, before)
    spec = read_spec(RolloutBatchSpec, batch)
    if isinstance(spec, str):
        state.fail(R.INVALID_SPEC, spec)
        return _finish(state, batch, observed, generation, before)

    inputs = _Inputs(batch, spec, observed, settings)
    if state.status.step == "resolve":
        _resolve(state, inputs)
    if state.failure is None and state.status.step == "probe":
        _probe(state, inputs)
    if state.failure is None and state.status.step in ("fetch", "rollout", "collect"):
        _ensure_children(state, inputs)
    if state.failure is None and state.status.step == "fetch":
        _fetch(state, inputs)
    if state.failure is None and state.status.step == "rollout":
        _rollouts(state, inputs)
    if state.failure is None and state.status.step == "collect":
        _collect(state, inputs)
    _sweep(state, batch["metadata"]["name"], observed)
    return _finish(state, batch, observed, generation, before, spec)


def _completed(status: RolloutBatchStatus) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in status.conditions)


def _resolve(state: _State, inputs: _Inputs) -> None:
    observed, meta = inputs.observed, inputs.manifest["metadata"]
    selection = inputs.spec.environments
    if selection.manifest_uri is not None:  # the fetch pod reads it
        state.status.step = "probe"
        return
    if observed.not_released:
        listed = ", ".join(f"{n} ({phase})" for n, phase in sorted(observed.not_released.items()))
        state.fail(
            R.ENVIRONMENTS_NOT_RELEASED,
            f"spec.environments.names: not Released in namespace {meta['namespace']}: "
            f"{listed}; name Released CoworkEnvironments only",
        )
        return
    if not observed.released:
        if selection.selector is not None:
            query = selection.selector.to_query() or "(everything)"
            what = f"the selector {query}"
        else:
            what = "spec.environments.names"
        state.fail(
            R.NO_ENVIRONMENTS,
            f"no Released CoworkEnvironment in namespace {meta['namespace']} matches {what}; "
            "no rollout started",
        )
        return
    state.status.environments = list(observed.released)
    state.status.step = "probe"


def _probe(state: _State, inputs: _Inputs) -> None:
    spec, observed = inputs.spec, inputs.observed
    endpoints = model_endpoints(spec)
    if endpoints and not inputs.settings.gateway_url:
        state.fail(
            R.NO_GATEWAY,
            "a policy calls a model, but the operator knows no LLM gateway (Helm value "
            "gateway.enabled, or COWORKGYM_GATEWAY_URL); only nop and oracle run without one",
        )
        return
    if endpoints and not observed.probed:
        return  # the controller probes before the next reconcile
    down = [u for u in endpoints if u in observed.unreachable]
    if down:
        named = "; ".join(
            f"policies[{i}] ({p.harness}/{p.model}) at {p.base_url}: "
            f"{observed.unreachable[p.base_url]}"
            for i, p in enumerate(spec.policies)
            if p.base_url in down
        )
        state.fail(R.ENDPOINT_UNREACHABLE, f"unreachable endpoint, no rollout started: {named}")
        return
    state.status.step = "fetch"


def _ensure_children(state: _State, inputs: _Inputs) -> None:
    batch, spec, settings = inputs.manifest, inputs.spec, inputs.settings
    wanted = [batch_volume(batch, settings), *network_policies(batch, settings)]
    environments = state.status.environments
    # the tokens before the first rollout pod; Secrets are not listed (the operator may
    # not read them), so it is made while fetching and a second create is refused (409)
    if model_endpoints(spec) and environments is not None and state.status.step == "fetch":
        wanted.append(gateway_tokens(batch, spec, len(environments), settings))
    for child in wanted:
        _create(state, inputs.observed, child)


def _create(state: _State, observed: BatchObserved, child: Manifest) -> None:
    if f"{child['kind']}/{child['metadata']['name']}" not in observed.existing_children:
        state.plan.create.append(child)


# the batch's one-shot Jobs: the reason the batch fails with when one does, and what it does
ONE_SHOT_JOBS: dict[str, tuple[R, str]] = {
    "fetch": (R.FETCH_FAILED, "fetching the packages"),
    "collect": (R.COLLECT_FAILED, "collecting the trajectories"),
}


def _ended_well(
    state: _State, inputs: _Inputs, stage: str, job: JobObservation
) -> dict[str, Any] | None:
    """The result of the batch's fetch or collect Job (there, as observed) once it ended
    well; None while it runs, or when the batch failed: its pod did not start within the
    grace (the Job is deleted), or it ended without a good result."""
    reason, doing = ONE_SHOT_JOBS[stage]
    if job.state == "running":
        why = stuck(job, inputs.observed.now, inputs.settings.operator.stage_start_grace_seconds)
        if why:
            state.plan.delete.append(("Job", job_name(inputs.name, stage)))
            state.fail(reason, f"{doing} failed: the {stage} pod {why}")
        return None
    result = job.result or {}
    if not result.get("ok"):
        why = result.get("error") or job.reason or f"the {stage} pod failed without a result"
        state.fail(reason, f"{doing} failed: {why}")
        return None
    return result


def _fetch(state: _State, inputs: _Inputs) -> None:
    batch, spec, observed, settings = inputs.manifest, inputs.spec, inputs.observed, inputs.settings
    name = job_name(inputs.name, "fetch")
    job = observed.jobs.get(name)
    # None: not looked for (the step began in this reconcile), made unless it exists;
    # missing: looked for and not there (deleted under us), made again
    if job is None or job.state == "missing":
        if job is not None or f"Job/{name}" not in observed.existing_children:
            state.plan.create.append(fetch_job(batch, spec, state.status.environments, settings))
        return
    result = _ended_well(state, inputs, "fetch", job)
    if result is None:
        return
    found = [ResolvedEnvironment.model_validate(e) for e in result.get("environments", [])]
    known = state.status.environments
    if known is not None and len(found) == len(known):  # digests and workdirs, now known
        state.status.environments = [
            k.model_copy(update={"digest": f.digest, "workdir": f.workdir})
            for k, f in zip(known, found, strict=True)
        ]
    if state.status.environments is None:  # a manifest: the fetch pod says what it held
        if not found:
            state.fail(
                R.NO_ENVIRONMENTS,
                f"the manifest {spec.environments.manifest_uri} lists no package; "
                "no rollout started",
            )
            return
        state.status.environments = found
        # the token Secret needs the count: made now, before any rollout pod
        _ensure_children(state, inputs)
    state.plan.delete.append(("Job", name))
    state.status.step = "rollout"


def _sweep(state: _State, name: str, observed: BatchObserved) -> None:
    """Delete the Jobs whose results the status already holds, whatever the step: a
    restart between the status write and the delete must not leave them behind once the
    batch has moved on (or finished, when no later step would look at them again)."""
    status = state.status
    done_with = [
        job_name(name, step, rid) for rid in status.outcomes for step in ("rollout", "verify")
    ]
    if status.step in ("rollout", "collect", "done"):
        done_with.append(job_name(name, "fetch"))
    if status.step == "done":
        done_with.append(job_name(name, "collect"))
    planned = set(state.plan.delete)
    for child in done_with:
        if f"Job/{child}" in observed.existing_children and ("Job", child) not in planned:
            state.plan.delete.append(("Job", child))


def all_ids(spec: RolloutBatchSpec, environments: int) -> list[str]:
    return [
        rollout_id(e, p, s)
        for e in range(environments)
        for p in range(len(spec.policies))
        for s in range(spec.samples_per_environment)
    ]


def _rollouts(state: _State, inputs: _Inputs) -> None:
    batch, spec, observed, settings = inputs.manifest, inputs.spec, inputs.observed, inputs.settings
    status = state.status
    environments = status.environments or []
    name = inputs.name
    grace = settings.operator.stage_start_grace_seconds
    for rid, where in sorted(status.running.items()):
        job = observed.jobs.get(job_name(name, where, rid))
        if job is None:
            continue
        if job.state == "running":
            why = stuck(job, observed.now, grace)
            if why:  # an infrastructure fault: that rollout is invalid, the batch goes on
                policy = spec.policies[parse_rollout_id(rid)[1]]
                outcome = f"{INVALID}: infrastructure: the {where} pod {why}"
                _record(state, rid, policy.label, outcome)
            continue
        if job.state == "missing":  # deleted under us, or never made: make it again
            state.plan.create.append(_step_job(inputs, rid, where, environments))
            continue
        policy = spec.policies[parse_rollout_id(rid)[1]]
        result = job.result or {}
        if where == "rollout":
            _rollout_ended(state, inputs, rid, policy.label, job, result)
        else:
            if result.get("ok"):
                outcome = _verified(result)
            else:
                why = result.get("error") or job.reason or "no result"
                outcome = f"{INVALID}: infrastructure: the verify pod failed: {why}"
            _record(state, rid, policy.label, outcome)
    ids = all_ids(spec, len(environments))
    for rid in ids:
        if len(status.running) >= spec.concurrency:
            break
        if rid in status.outcomes or rid in status.running:
            continue
        status.running[rid] = "rollout"
        job_manifest = rollout_job(
            batch, spec, rid, environments[parse_rollout_id(rid)[0]], settings
        )
        _create(state, observed, job_manifest)
    if len(status.outcomes) >= len(ids):
        status.step = "collect"


def _step_job(
    inputs: _Inputs, rid: str, where: str, environments: list[ResolvedEnvironment]
) -> Manifest:
    batch, spec, settings = inputs.manifest, inputs.spec, inputs.settings
    if where == "verify":
        return verify_job(batch, spec, rid, settings)
    return rollout_job(batch, spec, rid, environments[parse_rollout_id(rid)[0]], settings)


def _rollout_ended(
    state: _State,
    inputs: _Inputs,
    rid: str,
    policy: str,
    job: JobObservation,
    result: dict[str, Any],
) -> None:
    if not result.get("ok"):  # no record: the pod died, the node went away, ...
        why = result.get("error") or job.reason or "the rollout pod failed without a result"
        _record(state, rid, policy, f"{INVALID}: infrastructure: {why}")
        return
    tokens = int(result.get("tokens") or 0)
    state.status.tokens += tokens
    state.plan.rollouts.append(
        RolloutFinished(
            policy=policy,
            seconds=float(result.get("seconds") or job.seconds or 0.0),
            tokens=tokens,
            simulator_faults=int(result.get("simulatorFaults") or 0),
            termination=str(result.get("termination") or ""),
        )
    )
    if result.get("verify"):
        state.status.running[rid] = "verify"
        state.plan.create.append(verify_job(inputs.manifest, inputs.spec, rid, inputs.settings))
        # not there yet: the status said "rollout", so the controller did not look for it
        return
    reason = str(result.get("reason") or result.get("termination") or "not verifiable")
    _record(state, rid, policy, f"{INVALID}: {reason}")


def _verified(result: dict[str, Any]) -> str:
    if not result.get("valid"):
        return f"{INVALID}: {result.get('reason') or 'the verifier gave no valid reward'}"
    return PASSED if result.get("passed") else FAILED


def _record(state: _State, rid: str, policy: str, outcome: str) -> None:
    state.status.outcomes[rid] = outcome[:300]
    state.status.running.pop(rid, None)
    kind, _, reason = outcome.partition(": ")
    state.plan.outcomes.append(OutcomeRecorded(policy, kind, reason))


def _collect(state: _State, inputs: _Inputs) -> None:
    spec = inputs.spec
    name = job_name(inputs.name, "collect")
    job = inputs.observed.jobs.get(name)
    ids = all_ids(spec, len(state.status.environments or []))
    if job is None or job.state == "missing":
        _create(state, inputs.observed, collect_job(inputs.manifest, spec, ids, inputs.settings))
        return
    result = _ended_well(state, inputs, "collect", job)
    if result is None:
        return
    state.status.counts.kept = int(result.get("kept") or 0)
    state.status.funnel = [FunnelStep.model_validate(f) for f in result.get("funnel", [])]
    state.status.output_uri = str(result.get("uri") or spec.output.uri)
    state.status.step = "done"
    state.plan.delete.append(("Job", name))  # its result is in the status now


# ---- the status -----------------------------------------------------------------------
def _counts(status: RolloutBatchStatus, spec: RolloutBatchSpec | None) -> Counts:
    environments = len(status.environments or [])
    total = len(all_ids(spec, environments)) if spec is not None else len(status.outcomes)
    invalid = sum(1 for o in status.outcomes.values() if o.startswith(INVALID))
    succeeded = len(status.outcomes) - invalid
    running = len(status.running)
    return Counts(
        total=total,
        pending=max(0, total - succeeded - invalid - running),
        running=running,
        succeeded=succeeded,
        invalid=invalid,
        kept=status.counts.kept,
    )


def _pass_rates(status: RolloutBatchStatus, spec: RolloutBatchSpec | None) -> list[HarnessPassRate]:
    if spec is None:
        return status.pass_rates
    rates = []
    for index, policy in enumerate(spec.policies):
        mine = [o for rid, o in status.outcomes.items() if parse_rollout_id(rid)[1] == index]
        valid = [o for o in mine if not o.startswith(INVALID)]
        passed = sum(1 for o in valid if o == PASSED)
        rates.append(
            HarnessPassRate(
                policy=policy.label,
                finished=len(mine),
                valid=len(valid),
                passed=passed,
                pass_rate=round(passed / len(valid), 4) if valid else None,
            )
        )
    return rates


def _finish(
    state: _State,
    batch: Manifest,
    observed: BatchObserved,
    generation: int | None,
    before: str,
    spec: RolloutBatchSpec | None = None,
) -> BatchPlan:
    status, plan = state.status, state.plan
    name = batch["metadata"]["name"]
    status.counts = _counts(status, spec)
    status.summary = f"{status.counts.succeeded}/{status.counts.invalid}/{status.counts.total}"
    status.pass_rates = _pass_rates(status, spec)
    already = _completed(status)
    if not already:
        wanted = batch_conditions(status, state.failure)
        status.conditions = merge(status.conditions, wanted, generation, observed.now)
        status.phase = str(PHASES.derive(status.conditions))
        status.message = _message(status, state.failure)
    status.observed_generation = generation
    if state.failure is not None and not already:
        plan.events.append(("Warning", str(state.failure.reason), state.failure.message[:400]))
    if status.step == "done":  # the trajectories are in the store: free the volume
        if f"PersistentVolumeClaim/{volume_name(name)}" in observed.existing_children:
            plan.delete.append(("PersistentVolumeClaim", volume_name(name)))
    if (status.step == "done" or state.failure is not None) and not already:
        plan.delete.append(("Secret", tokens_secret_name(name)))  # the tokens are void
    if status.phase != before:
        plan.transition = (before, status.phase)
        if status.phase in ("Succeeded", "Failed") and not already:
            plan.finished = status.phase.lower()
            if state.failure is None:
                plan.events.append(("Normal", "Succeeded", status.message))
    plan.status = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return plan


def _message(status: RolloutBatchStatus, failure: Failure | None) -> str:
    if failure is not None:
        return failure.message
    c = status.counts
    if status.step == "done":
        return (
            f"{c.succeeded} verified, {c.invalid} invalid of {c.total}; {c.kept} kept, "
            f"in {status.output_uri}"
        )
    if status.step == "collect":
        return f"all {c.total} rollouts ended; filtering and uploading"
    if status.step == "rollout":
        return f"{c.succeeded + c.invalid} of {c.total} rollouts ended, {c.running} running"
    if status.step == "fetch":
        return "fetching the packages"
    return "resolving environments and probing endpoints"


__all__ = [
    "BatchObserved",
    "BatchPlan",
    "OutcomeRecorded",
    "RolloutFinished",
    "all_ids",
    "jobs_to_observe",
    "model_endpoints",
    "needs_probe",
    "reconcile_batch",
]

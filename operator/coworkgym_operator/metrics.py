"""Every metric the operator exports, in one place, with one prefix (coworkgym_)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

ENVIRONMENTS = Gauge(
    "coworkgym_environments", "CoworkEnvironments by phase", ["phase"], registry=REGISTRY
)
FINISHED = Counter(
    "coworkgym_environments_finished",
    "Environments that reached a verdict, by outcome (released, rejected, failed)",
    ["outcome"],
    registry=REGISTRY,
)
DEFECTS = Counter(
    "coworkgym_defects", "Defects found by the Issue Detector", ["code", "owner"], registry=REGISTRY
)
ITERATIONS = Histogram(
    "coworkgym_iterations",
    "Build → execute → revise iterations per finished environment",
    buckets=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
    registry=REGISTRY,
)
BUDGET_EXHAUSTED = Counter(
    "coworkgym_revise_budget_exhausted",
    "Environments rejected because the revise budget ran out",
    registry=REGISTRY,
)
STAGE_SECONDS = Histogram(
    "coworkgym_stage_duration_seconds",
    "Wall time of a role stage's Job",
    ["stage"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
    registry=REGISTRY,
)
JOB_FAILURES = Counter(
    "coworkgym_job_failures", "Sandbox Jobs that failed", ["stage"], registry=REGISTRY
)
RECONCILES = Counter("coworkgym_reconcile", "Reconciles run", ["kind"], registry=REGISTRY)
RECONCILE_ERRORS = Counter(
    "coworkgym_reconcile_errors", "Reconciles that raised", ["kind"], registry=REGISTRY
)

_phases: dict[str, str] = {}  # "namespace/name" → phase, to keep the gauge exact
_seen: set[str] = set()


def observe_phase(key: str, phase: str | None) -> None:
    """Record one environment's phase (None: it is gone) and refresh the gauge."""
    if phase is None:
        _phases.pop(key, None)
    else:
        _phases[key] = phase
        _seen.add(phase)
    for known in _seen:
        ENVIRONMENTS.labels(known).set(sum(1 for p in _phases.values() if p == known))

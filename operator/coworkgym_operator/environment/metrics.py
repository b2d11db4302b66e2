"""The CoworkEnvironment metrics, on the operator's registry (core/metrics.py), prefix coworkgym_.

Environment metrics carry ``namespace`` (the CoworkEnvironment's: bounded by the
namespaces the operator watches) and ``family`` (the procedural family: a fixed set), so
rules can be per namespace and per family without a label per object. The chart's
ServiceMonitor scrapes with honorLabels, so this ``namespace`` is the environment's, not
the operator pod's.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally

from coworkgym_operator.core.metrics import counter, gauge, histogram

ENV_LABELS = ["namespace", "family"]

ENVIRONMENTS = gauge(
    "coworkgym_environments", [*ENV_LABELS, "phase"], "CoworkEnvironments by phase"
)
TAKEN_UP = counter(
    "coworkgym_environments_created",
    ENV_LABELS,
    "Environments the operator took up: their first status written (the funnel's start)",
)
FINISHED = counter(
    "coworkgym_environments_finished",
    [*ENV_LABELS, "outcome"],
    "Environments that reached a verdict, by outcome (released, rejected, failed)",
)
DEFECTS = counter(
    "coworkgym_defects", [*ENV_LABELS, "code", "owner"], "Defects found by the Issue Detector"
)
ITERATIONS = histogram(
    "coworkgym_iterations",
    ENV_LABELS,
    "Build → execute → revise iterations per finished environment",
    (1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
)
BUDGET_EXHAUSTED = counter(
    "coworkgym_revise_budget_exhausted",
    ENV_LABELS,
    "Environments rejected because the revise budget ran out",
)
STAGE_SECONDS = histogram(
    "coworkgym_stage_duration_seconds",
    [*ENV_LABELS, "stage"],
    "Wall time of a role stage's Job",
    (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)
JOB_FAILURES = counter(
    "coworkgym_job_failures",
    [*ENV_LABELS, "stage"],
    "Sandbox Jobs that failed, or were ended because their pod could not start",
)
ROLE_TOKENS = counter(
    "coworkgym_role_tokens",
    [*ENV_LABELS, "role", "kind"],
    "Model tokens the LLM-backed roles used through the gateway, by kind (prompt, completion)",
)
ROLE_REQUESTS = counter(
    "coworkgym_role_model_requests",
    [*ENV_LABELS, "role"],
    "Model calls of the LLM-backed roles through the gateway",
)

# (namespace, name) → (namespace, family, phase), and how many environments each such label
# set has: kept in step, so one update costs the same however many environments there are.
# kopf runs sync handlers in a pool of threads, so every read and write holds the lock.
_phases: dict[tuple[str, str], tuple[str, str, str]] = {}
_counts: Tally[tuple[str, str, str]] = Tally()
_lock = threading.Lock()


def observe_phase(namespace: str, name: str, family: str, phase: str | None) -> None:
    """Record one environment's phase (None: it is gone) and refresh the gauge."""
    with _lock:
        before = _phases.pop((namespace, name), None)
        if phase is not None:
            # an environment keeps the family it was first counted with (on deletion
            # the caller no longer knows it)
            after = (namespace, before[1] if before else family, phase)
            _phases[(namespace, name)] = after
            _counts[after] += 1
            ENVIRONMENTS.labels(*after).set(_counts[after])
        if before is not None:
            _counts[before] -= 1  # a label set left empty reads 0, not its last value
            ENVIRONMENTS.labels(*before).set(_counts[before])

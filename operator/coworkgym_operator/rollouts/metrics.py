"""The RolloutBatch metrics, on the operator's registry (metrics.py), prefix coworkgym_.

Labels: ``namespace`` (the batch's), ``harness`` (a fixed set) and ``model`` (what the
batch's policies name: a few per cluster). The chart's alerts read invalid rate and
user-simulator fault rate from these (rules/coworkgym-alerts.yaml).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from coworkgym_operator.core.metrics import REGISTRY

POLICY_LABELS = ["namespace", "harness", "model"]

ROLLOUTS = Counter(
    "coworkgym_rollouts",
    "Rollouts with an outcome: passed, failed (valid, below the pass threshold) or invalid",
    [*POLICY_LABELS, "outcome"],
    registry=REGISTRY,
)
ROLLOUT_PODS = Counter(
    "coworkgym_rollout_episodes",
    "Rollout pods that ended with a record (the denominator of the simulator fault rate)",
    POLICY_LABELS,
    registry=REGISTRY,
)
SIMULATOR_FAULTS = Counter(
    "coworkgym_rollout_simulator_faults",
    "Rollouts whose user simulator faulted (leaked private state, contradicted the patch, "
    "stopped early)",
    POLICY_LABELS,
    registry=REGISTRY,
)
DURATION = Histogram(
    "coworkgym_rollout_duration_seconds",
    "Wall time of a rollout (the episode, without verification)",
    POLICY_LABELS,
    buckets=(5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600),
    registry=REGISTRY,
)
TOKENS = Counter(
    "coworkgym_rollout_tokens",
    "Model tokens rollouts used through the gateway",
    POLICY_LABELS,
    registry=REGISTRY,
)
BATCHES_FINISHED = Counter(
    "coworkgym_rollout_batches_finished",
    "RolloutBatches that completed, by outcome (succeeded, failed)",
    ["namespace", "outcome"],
    registry=REGISTRY,
)
BATCH_RUNNING = Gauge(
    "coworkgym_rollouts_running",
    "Rollouts in a rollout or verify pod now",
    ["namespace", "batch"],
    registry=REGISTRY,
)


def split_policy(label: str) -> tuple[str, str]:
    """harness/model → (harness, model); a model name may hold slashes itself."""
    harness, _, model = label.partition("/")
    return harness, model

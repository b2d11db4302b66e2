"""The RolloutBatch metrics, on the operator's registry (core/metrics.py), prefix coworkgym_.

Labels: ``namespace`` (the batch's), ``harness`` (a fixed set) and ``model`` (what the
batch's policies name: a few per cluster). The chart's alerts read invalid rate and
user-simulator fault rate from these (rules/coworkgym-alerts.yaml).
"""

from __future__ import annotations

from coworkgym_operator.core.metrics import counter, gauge, histogram

POLICY_LABELS = ["namespace", "harness", "model"]

ROLLOUTS = counter(
    "coworkgym_rollouts",
    [*POLICY_LABELS, "outcome"],
    "Rollouts with an outcome: passed, failed (valid, below the pass threshold) or invalid",
)
ROLLOUT_PODS = counter(
    "coworkgym_rollout_episodes",
    POLICY_LABELS,
    "Rollout pods that ended with a record (the denominator of the simulator fault rate)",
)
SIMULATOR_FAULTS = counter(
    "coworkgym_rollout_simulator_faults",
    POLICY_LABELS,
    "Rollouts whose user simulator faulted (leaked private state, contradicted the patch, "
    "stopped early)",
)
DURATION = histogram(
    "coworkgym_rollout_duration_seconds",
    POLICY_LABELS,
    "Wall time of a rollout (the episode, without verification)",
    (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600),
)
TOKENS = counter(
    "coworkgym_rollout_tokens", POLICY_LABELS, "Model tokens rollouts used through the gateway"
)
BATCHES_FINISHED = counter(
    "coworkgym_rollout_batches_finished",
    ["namespace", "outcome"],
    "RolloutBatches that completed, by outcome (succeeded, failed)",
)
BATCH_RUNNING = gauge(
    "coworkgym_rollouts_running", ["namespace", "batch"], "Rollouts in a rollout or verify pod now"
)


def split_policy(label: str) -> tuple[str, str]:
    """harness/model → (harness, model); a model name may hold slashes itself."""
    harness, _, model = label.partition("/")
    return harness, model

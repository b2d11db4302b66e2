"""The TrainingRun metrics, on the operator's registry (metrics.py), prefix coworkgym_.

Labels: ``namespace`` (the run's), ``objective`` (sft, grpo, opd) and, on the per-run
gauges, ``run`` (the TrainingRun's name: a few per namespace; a run's series are removed
when it is deleted). The chart's training alerts read these (rules/coworkgym-alerts.yaml:
a run failed, no progress for N minutes, a NaN loss).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from .metrics import REGISTRY

RUN_LABELS = ["namespace", "run", "objective"]

RUNS_FINISHED = Counter(
    "coworkgym_training_runs_finished",
    "TrainingRuns that completed, by outcome (succeeded, failed) and failure reason",
    ["namespace", "objective", "outcome", "reason"],
    registry=REGISTRY,
)
NAN_LOSS = Counter(
    "coworkgym_training_nan_loss",
    "TrainingRuns stopped because the loss stopped being finite",
    ["namespace", "objective"],
    registry=REGISTRY,
)
RUNNING = Gauge(
    "coworkgym_training_running",
    "1 while the run's training pod runs (not waiting for data, suspended or finished)",
    RUN_LABELS,
    registry=REGISTRY,
)
STEP = Gauge(
    "coworkgym_training_step",
    "Optimizer steps the run's trainer last reported",
    RUN_LABELS,
    registry=REGISTRY,
)
LOSS = Gauge(
    "coworkgym_training_loss",
    "The loss the run's trainer last reported (finite values only)",
    RUN_LABELS,
    registry=REGISTRY,
)
LAST_PROGRESS = Gauge(
    "coworkgym_training_last_progress_timestamp_seconds",
    "When the run's step last advanced (or its training started), Unix time",
    RUN_LABELS,
    registry=REGISTRY,
)
PER_RUN = (RUNNING, STEP, LOSS, LAST_PROGRESS)

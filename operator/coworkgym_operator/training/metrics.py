"""The TrainingRun metrics, on the operator's registry (metrics.py), prefix
coworkgym_trainingrun_ (the trainer's own gauges are coworkgym_training_*, labelled by its
run folder; these are the operator's view of each TrainingRun).

Labels: ``namespace`` (the run's), ``objective`` (sft, grpo, opd) and, on the per-run
gauges, ``run`` (the TrainingRun's name: a few per namespace; a run's series are removed
when it is deleted). The chart's training alerts read these (rules/coworkgym-alerts.yaml:
a run failed, no progress for N minutes, a NaN loss).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from coworkgym_operator.core.metrics import REGISTRY

RUN_LABELS = ["namespace", "run", "objective"]

RUNS_FINISHED = Counter(
    "coworkgym_trainingruns_finished",
    "TrainingRuns that completed, by outcome (succeeded, failed) and failure reason",
    ["namespace", "objective", "outcome", "reason"],
    registry=REGISTRY,
)
NAN_LOSS = Counter(
    "coworkgym_trainingrun_nan_loss",
    "TrainingRuns stopped because the loss stopped being finite",
    ["namespace", "objective"],
    registry=REGISTRY,
)
RUNNING = Gauge(
    "coworkgym_trainingrun_running",
    "1 while the run's training pod runs (not waiting for data, suspended or finished)",
    RUN_LABELS,
    registry=REGISTRY,
)
STEP = Gauge(
    "coworkgym_trainingrun_step",
    "Optimizer steps the run's trainer last reported",
    RUN_LABELS,
    registry=REGISTRY,
)
LOSS = Gauge(
    "coworkgym_trainingrun_loss",
    "The loss the run's trainer last reported (finite values only)",
    RUN_LABELS,
    registry=REGISTRY,
)
LAST_PROGRESS = Gauge(
    "coworkgym_trainingrun_last_progress_timestamp_seconds",
    "When the run's step last advanced (or its training started), Unix time",
    RUN_LABELS,
    registry=REGISTRY,
)
FAILED = Gauge(
    "coworkgym_trainingrun_failed",
    "1 while the run is Failed (until it is deleted), with the Failed condition's reason",
    [*RUN_LABELS, "reason"],
    registry=REGISTRY,
)
PER_RUN = (RUNNING, STEP, LOSS, LAST_PROGRESS)

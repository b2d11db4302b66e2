"""The TrainingRun metrics, on the operator's registry (core/metrics.py), prefix
coworkgym_trainingrun_ (the trainer's own gauges are coworkgym_training_*, labelled by its
run folder; these are the operator's view of each TrainingRun).

Labels: ``namespace`` (the run's), ``objective`` (sft, grpo, opd) and, on the per-run
gauges, ``run`` (the TrainingRun's name: a few per namespace; a run's series are removed
when it is deleted). The chart's training alerts read these (rules/coworkgym-alerts.yaml:
a run failed, no progress for N minutes, a NaN loss).
"""

from __future__ import annotations

from coworkgym_operator.core.metrics import counter, gauge

RUN_LABELS = ["namespace", "run", "objective"]

RUNS_FINISHED = counter(
    "coworkgym_trainingruns_finished",
    ["namespace", "objective", "outcome", "reason"],
    "TrainingRuns that completed, by outcome (succeeded, failed) and failure reason",
)
NAN_LOSS = counter(
    "coworkgym_trainingrun_nan_loss",
    ["namespace", "objective"],
    "TrainingRuns stopped because the loss stopped being finite",
)
RUNNING = gauge(
    "coworkgym_trainingrun_running",
    RUN_LABELS,
    "1 while the run must keep advancing: its training pod runs, or an on-policy round "
    "serves its checkpoint or rolls out (not waiting for data, a pod not started yet, "
    "suspended or finished)",
)
STEP = gauge(
    "coworkgym_trainingrun_step", RUN_LABELS, "Optimizer steps the run's trainer last reported"
)
LOSS = gauge(
    "coworkgym_trainingrun_loss",
    RUN_LABELS,
    "The loss the run's trainer last reported (finite values only)",
)
LAST_PROGRESS = gauge(
    "coworkgym_trainingrun_last_progress_timestamp_seconds",
    RUN_LABELS,
    "When the run last advanced (its training started, a new optimizer step, a round's "
    "step, a round's rollout ending), Unix time",
)
FAILED = gauge(
    "coworkgym_trainingrun_failed",
    [*RUN_LABELS, "reason"],
    "1 while the run is Failed (until it is deleted), with the Failed condition's reason",
)
PER_RUN = (RUNNING, STEP, LOSS, LAST_PROGRESS)

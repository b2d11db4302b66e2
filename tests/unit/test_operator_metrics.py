"""The operator's metrics: labels of bounded sets, and a phase gauge that kopf's worker
threads can update at once."""

from __future__ import annotations

import threading

from coworkgym_operator.core.metrics import REGISTRY
from coworkgym_operator.environment import metrics
from coworkgym_operator.environment.handlers import family_of


def gauge(namespace: str, family: str, phase: str) -> float:
    value = REGISTRY.get_sample_value(
        "coworkgym_environments", {"namespace": namespace, "family": family, "phase": phase}
    )
    return value or 0.0


def test_the_phase_gauge_is_exact_under_concurrent_updates() -> None:
    # kopf runs sync handlers in a thread pool: many environments report at once. Before
    # the lock, counting while another thread added an environment raised "dictionary
    # changed size during iteration".
    errors: list[BaseException] = []

    def report(worker: int) -> None:
        try:
            for i in range(400):
                name = f"env-{worker}-{i}"
                metrics.observe_phase("threads", name, "weather_report", "Building")
                metrics.observe_phase("threads", name, "weather_report", "Released")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=report, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert gauge("threads", "weather_report", "Released") == 8 * 400
    assert gauge("threads", "weather_report", "Building") == 0
    for w in range(8):
        for i in range(400):
            metrics.observe_phase("threads", f"env-{w}-{i}", "", None)
    assert gauge("threads", "weather_report", "Released") == 0  # gone: 0, not the last value


def test_environment_metrics_are_per_namespace_and_family() -> None:
    metrics.FINISHED.labels("team-a", "meeting_notes", "failed").inc()
    value = REGISTRY.get_sample_value(
        "coworkgym_environments_finished_total",
        {"namespace": "team-a", "family": "meeting_notes", "outcome": "failed"},
    )
    assert value == 1.0
    for metric in (metrics.FINISHED, metrics.DEFECTS, metrics.JOB_FAILURES, metrics.ITERATIONS):
        assert {"namespace", "family"} <= set(metric._labelnames)


def test_the_family_label_is_one_of_the_registered_families() -> None:
    labels = {"scenario": "data_analysis/reporting/periodic_report", "capabilities": []}
    assert family_of({"task": {"family": "ledger_reconciliation", "labels": labels}}) == (
        "ledger_reconciliation"
    )
    chosen = family_of({"task": {"labels": labels, "seed": 3}})
    from coworkgym.families import FAMILIES

    assert chosen in FAMILIES
    assert family_of({"task": {"family": "made-up", "labels": labels}}) == "unknown"


# ---- what kopf is told at start-up --------------------------------------------------------


def test_kopf_uses_the_projects_finalizer_event_source_and_a_quiet_log() -> None:
    import logging

    import kopf

    from coworkgym_operator.core.startup import configure
    from coworkgym_operator.environment import handlers  # noqa: F401  (its child events' ids)

    settings = kopf.OperatorSettings()
    configure(settings=settings)
    assert settings.persistence.finalizer == "coworkgym.dev/cleanup"
    assert settings.posting.reporting_component == "cowork-gym-operator"
    (quiet,) = [f for f in logging.getLogger("kopf.objects").filters if hasattr(f, "filter")]

    def passes(message: str, level: int = logging.INFO) -> bool:
        record = logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)
        return bool(quiet.filter(record))

    assert not passes("Timer 'on_timer' succeeded.")
    assert not passes("Handler 'on_stage_pod' succeeded.")  # every pod event: not logged
    assert not passes("Handler 'on_stage_job' succeeded.")
    assert passes("Handler 'on_change' succeeded.")  # a change: once per event, kept
    assert passes("created Job/demo-builder-i0-a1")
    assert passes("Timer 'on_timer' failed with an exception. Will retry.", logging.ERROR)

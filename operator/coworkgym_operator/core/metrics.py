"""The operator's metrics registry, and the metrics every kind shares (reconciles, API
calls, transitions, the wake-up queue); each kind's own are in ``<kind>/metrics.py``.
One prefix: coworkgym_."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
Labels = Sequence[str]


def counter(name: str, labels: Labels, doc: str) -> Counter:
    """A counter on the operator's registry (as every metric below and in each kind's)."""
    return Counter(name, doc, labels, registry=REGISTRY)


def gauge(name: str, labels: Labels, doc: str) -> Gauge:
    return Gauge(name, doc, labels, registry=REGISTRY)


def histogram(name: str, labels: Labels, doc: str, buckets: Sequence[float]) -> Histogram:
    return Histogram(name, doc, labels, buckets=buckets, registry=REGISTRY)


RECONCILES = Counter(
    "coworkgym_reconcile", "Reconciles run", ["namespace", "kind"], registry=REGISTRY
)

RECONCILE_ERRORS = Counter(
    "coworkgym_reconcile_errors", "Reconciles that raised", ["namespace", "kind"], registry=REGISTRY
)

API_CALLS = Counter(
    "coworkgym_api_calls",
    "Kubernetes API requests the operator's handlers made (kopf's own watches, annotations "
    "and events not included), by verb (get, list, create, patch, delete, deletecollection) "
    "and resource",
    ["verb", "resource"],
    registry=REGISTRY,
)

WAKEUPS_PENDING = Gauge(
    "coworkgym_wakeups_pending",
    "Objects with a wake-up queued (for the clock, work in flight or a retry)",
    registry=REGISTRY,
)

TRANSITIONS = Counter(
    "coworkgym_transitions",
    "Phase changes written, by kind: API calls per transition = "
    "rate(coworkgym_api_calls_total) / rate(coworkgym_transitions_total)",
    ["namespace", "kind"],
    registry=REGISTRY,
)

NUDGES = Counter(
    "coworkgym_nudges",
    "What may have changed an object (source: a child's event, or a wakeup: for the clock, "
    "work in flight, a retry, the resync), and whether a reconcile ran (reconciled) or the "
    "indices showed nothing it reads had changed (unchanged: no API call)",
    ["kind", "source", "outcome"],
    registry=REGISTRY,
)

"""The SynthesisCampaign metrics, on the operator's registry (metrics.py), prefix coworkgym_.

Labels: ``namespace`` and ``campaign`` (a campaign is a long-lived, deliberately made object:
a few per namespace, so a label per campaign stays bounded). The chart's alert
CoworkGymCampaignFailureRateHigh reads the ratio, the campaign's own threshold and whether
it stopped creating (rules/coworkgym-alerts.yaml).
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge

from coworkgym_operator.core.metrics import REGISTRY

CAMPAIGN_LABELS = ["namespace", "campaign"]
STATES = ("planned", "created", "inFlight", "released", "rejected", "failed")

CHILDREN = Gauge(
    "coworkgym_campaign_environments",
    "A campaign's child environments by state (planned, created, inFlight, released, "
    "rejected, failed)",
    [*CAMPAIGN_LABELS, "state"],
    registry=REGISTRY,
)
FAILURE_RATIO = Gauge(
    "coworkgym_campaign_failure_ratio",
    "(rejected + failed) / finished children of a campaign",
    CAMPAIGN_LABELS,
    registry=REGISTRY,
)
FAILURE_THRESHOLD = Gauge(
    "coworkgym_campaign_failure_threshold",
    "The campaign's spec.failureThreshold.maxFailureRatio",
    CAMPAIGN_LABELS,
    registry=REGISTRY,
)
STOPPED = Gauge(
    "coworkgym_campaign_stopped",
    "1 while a campaign creates no new children because it passed its failure threshold",
    CAMPAIGN_LABELS,
    registry=REGISTRY,
)
CAMPAIGNS_FINISHED = Counter(
    "coworkgym_campaigns_finished",
    "Campaigns that completed, by outcome (succeeded, failed)",
    ["namespace", "outcome"],
    registry=REGISTRY,
)


def forget(namespace: str, campaign: str) -> None:
    """A deleted campaign's series go (a gauge would otherwise keep its last value)."""
    for gauge in (FAILURE_RATIO, FAILURE_THRESHOLD, STOPPED):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, campaign)
    for state in STATES:
        with contextlib.suppress(KeyError):
            CHILDREN.remove(namespace, campaign, state)

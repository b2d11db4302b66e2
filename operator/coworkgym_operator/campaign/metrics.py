"""The SynthesisCampaign metrics, on the operator's registry (core/metrics.py), prefix coworkgym_.

Labels: ``namespace`` and ``campaign`` (a campaign is a long-lived, deliberately made object:
a few per namespace, so a label per campaign stays bounded). The chart's alert
CoworkGymCampaignFailureRateHigh reads the ratio, the campaign's own threshold and whether
it stopped creating (rules/coworkgym-alerts.yaml).
"""

from __future__ import annotations

import contextlib

from coworkgym_operator.core.metrics import counter, gauge

CAMPAIGN_LABELS = ["namespace", "campaign"]
STATES = ("planned", "created", "inFlight", "released", "rejected", "failed")

CHILDREN = gauge(
    "coworkgym_campaign_environments",
    [*CAMPAIGN_LABELS, "state"],
    "A campaign's child environments by state (planned, created, inFlight, released, "
    "rejected, failed)",
)
FAILURE_RATIO = gauge(
    "coworkgym_campaign_failure_ratio",
    CAMPAIGN_LABELS,
    "(rejected + failed) / finished children of a campaign",
)
FAILURE_THRESHOLD = gauge(
    "coworkgym_campaign_failure_threshold",
    CAMPAIGN_LABELS,
    "The campaign's spec.failureThreshold.maxFailureRatio",
)
STOPPED = gauge(
    "coworkgym_campaign_stopped",
    CAMPAIGN_LABELS,
    "1 while a campaign creates no new children because it passed its failure threshold",
)
CAMPAIGNS_FINISHED = counter(
    "coworkgym_campaigns_finished",
    ["namespace", "outcome"],
    "Campaigns that completed, by outcome (succeeded, failed)",
)


def forget(namespace: str, campaign: str) -> None:
    """A deleted campaign's series go (a gauge would otherwise keep its last value)."""
    for series in (FAILURE_RATIO, FAILURE_THRESHOLD, STOPPED):
        with contextlib.suppress(KeyError):
            series.remove(namespace, campaign)
    for state in STATES:
        with contextlib.suppress(KeyError):
            CHILDREN.remove(namespace, campaign, state)

"""Filtering trajectories as a typed pipeline with reasons (see ``rules`` for the rules,
``pipeline`` for the funnel, ``settings`` for what is configurable)."""

from .claims import claims_in_text
from .pipeline import (
    FilterPipeline,
    FunnelReport,
    FunnelStage,
    Verdict,
    filter_files,
    filter_trajectories,
    funnel_table,
)
from .rules import (
    ClaimEvidence,
    Drop,
    InfrastructureFaults,
    RecordIntegrity,
    Rule,
    SimulatorFaults,
    VerifiedOutcome,
    build_rules,
)
from .settings import RULE_ORDER, FilterSettings, RuleName

__all__ = [
    "RULE_ORDER",
    "ClaimEvidence",
    "Drop",
    "FilterPipeline",
    "FilterSettings",
    "FunnelReport",
    "FunnelStage",
    "InfrastructureFaults",
    "RecordIntegrity",
    "Rule",
    "RuleName",
    "SimulatorFaults",
    "Verdict",
    "VerifiedOutcome",
    "build_rules",
    "claims_in_text",
    "filter_files",
    "filter_trajectories",
    "funnel_table",
]

"""Filtering trajectories as a typed pipeline with reasons (see ``rules`` and
``consistency`` for the rules, ``pipeline`` for the funnel, ``context`` for the packages and
stored workspaces the rules may consult, ``settings`` for what is configurable)."""

from .base import Drop, Note, Rule
from .claims import claims_in_text
from .consistency import (
    AgentEcho,
    FinalWorkspace,
    PrivateState,
    RewardConsistency,
    TurnConsistency,
    UniqueRecords,
    VerdictConsistency,
    content_digest,
)
from .context import FilterContext, PackageFacts, load_package_facts
from .pipeline import (
    Examined,
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
    InfrastructureFaults,
    RecordIntegrity,
    SimulatorFaults,
    VerifiedOutcome,
    build_rules,
)
from .settings import RULE_ORDER, FilterSettings, RuleName

__all__ = [
    "RULE_ORDER",
    "AgentEcho",
    "ClaimEvidence",
    "Drop",
    "Examined",
    "FilterContext",
    "FilterPipeline",
    "FilterSettings",
    "FinalWorkspace",
    "FunnelReport",
    "FunnelStage",
    "InfrastructureFaults",
    "Note",
    "PackageFacts",
    "PrivateState",
    "RecordIntegrity",
    "RewardConsistency",
    "Rule",
    "RuleName",
    "SimulatorFaults",
    "TurnConsistency",
    "UniqueRecords",
    "Verdict",
    "VerdictConsistency",
    "VerifiedOutcome",
    "build_rules",
    "claims_in_text",
    "content_digest",
    "filter_files",
    "filter_trajectories",
    "funnel_table",
    "load_package_facts",
]

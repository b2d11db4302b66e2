"""What the filter pipeline keeps: one settings model, shared by ``cowork-gym filter`` and
(later) the ``filter`` block of a RolloutBatch spec, so its fields are camelCase on the
wire like the rest of the API (``coworkgym.spec``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

# The rules, in the order the pipeline applies them. A trajectory is charged to the first
# rule that drops it, so the order decides which reason a funnel shows: root causes
# (infrastructure, the simulated user) come before their symptoms (unpaired tool calls,
# an invalid verification).
# Duplicates go first: a later copy is charged to them whatever else is wrong with it.
RuleName = Literal[
    "unique_records",
    "infrastructure_faults",
    "simulator_faults",
    "private_state",
    "record_integrity",
    "turn_consistency",
    "agent_echo",
    "verified_outcome",
    "verdict_consistency",
    "reward_consistency",
    "final_workspace",
    "claim_evidence",
]
RULE_ORDER: tuple[RuleName, ...] = (
    "unique_records",
    "infrastructure_faults",
    "simulator_faults",
    "private_state",
    "record_integrity",
    "turn_consistency",
    "agent_echo",
    "verified_outcome",
    "verdict_consistency",
    "reward_consistency",
    "final_workspace",
    "claim_evidence",
)
# The rollout engine's default cap on one workspace file (RolloutLimits.workspace_disk_mb,
# enforced as the agent's RLIMIT_FSIZE): a recorded file larger than this was not written.
DEFAULT_MAX_FILE_BYTES = 2048 * 1024 * 1024


class CamelModel(BaseModel):
    """camelCase on the wire (YAML, JSON reports, a CRD), snake_case in Python."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


class FilterSettings(CamelModel):
    drop_truncated: bool = Field(
        True,
        description=(
            "drop rollouts that ended on a budget (max_steps, timeout, budget_exhausted): "
            "their last turn is unfinished, so their reward says little about the policy"
        ),
    )
    drop_unrecovered_tool_errors: bool = Field(
        False,
        description=(
            "drop rollouts whose last tool error was never followed by a successful tool "
            "call; recovered errors are always kept (recovering is a skill worth training)"
        ),
    )
    min_reward: float | None = Field(
        None,
        description=(
            "keep only valid rollouts with reward >= this (1.0 keeps passes only, as for "
            "rejection-sampling SFT); unset keeps every valid reward, as GRPO needs"
        ),
    )
    parse_claims_from_message: bool = Field(
        True,
        description=(
            "when a trajectory records no claimed deliverables, read them from the agent's "
            "final message (file paths it says it saved, wrote or created)"
        ),
    )
    max_file_bytes: int = Field(
        DEFAULT_MAX_FILE_BYTES,
        gt=0,
        description=(
            "the largest file a rollout can leave (the engine's per-file workspace limit, "
            "2 GiB by default); a final-workspace entry above it is dropped as impossible"
        ),
    )
    skip_rules: list[RuleName] = Field(
        default_factory=list, description="rules not to apply (they pass everything)"
    )

    def applies(self, rule: RuleName) -> bool:
        return rule not in self.skip_rules

    def to_wire(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def load(cls, path: Path) -> FilterSettings:
        """Settings from a YAML or JSON file (camelCase or snake_case keys)."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML or JSON: {exc}") from exc
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise ValueError(f"{path}: filter settings must be a mapping, got {kind}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(f"{path}: {problems}") from exc

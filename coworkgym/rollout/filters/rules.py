"""The filter rules: one concern each, each a pure check of one trajectory.

A rule returns ``None`` to keep a trajectory or a ``Drop``: a stable ``reason`` code (what
the funnel counts, e.g. ``truncated:max_steps``) and a ``detail`` for a person (which
message, which file); or a ``Note`` when it kept the trajectory without checking all it
could (see ``base``). Rules never look at other trajectories, so the pipeline can stream
and split the work freely; the one exception, de-duplication (``consistency``), runs where
the pipeline counts. The rules that check the record against itself, its package and the
stored workspace are in ``consistency``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..trajectory import TerminationReason, Trajectory
from .base import Drop, Note, Rule
from .claims import baseline_digests, claimed_deliverables, matching_paths
from .consistency import (
    AgentEcho,
    FinalWorkspace,
    PrivateState,
    RewardConsistency,
    TurnConsistency,
    VerdictConsistency,
)
from .context import FilterContext
from .settings import RULE_ORDER, FilterSettings, RuleName

# Terminations that mean nothing the policy did: the rollout says nothing about it.
INFRASTRUCTURE_TERMINATIONS: frozenset[TerminationReason] = frozenset(
    {"infrastructure_error", "model_error"}
)
# Terminations on a budget: the episode's last turn is unfinished.
TRUNCATING_TERMINATIONS: frozenset[TerminationReason] = frozenset(
    {"max_steps", "timeout", "budget_exhausted"}
)


@dataclass(frozen=True)
class InfrastructureFaults:
    name: ClassVar[RuleName] = "infrastructure_faults"
    concern: ClassVar[str] = "sandbox, storage, node or model endpoint failed"

    def check(self, trajectory: Trajectory) -> Drop | None:
        end = trajectory.termination
        if end.reason in INFRASTRUCTURE_TERMINATIONS:
            return Drop(f"termination:{end.reason}", end.detail or end.reason)
        return None


@dataclass(frozen=True)
class SimulatorFaults:
    name: ClassVar[RuleName] = "simulator_faults"
    concern: ClassVar[str] = "the simulated user misbehaved (leak, contradiction, early stop)"

    def check(self, trajectory: Trajectory) -> Drop | None:
        if trajectory.simulator_faults:
            fault = trajectory.simulator_faults[0]
            more = len(trajectory.simulator_faults) - 1
            suffix = f" (+{more} more)" if more else ""
            return Drop(
                f"simulator_fault:{fault.kind}", f"turn {fault.turn}: {fault.detail}{suffix}"
            )
        if trajectory.termination.reason == "simulator_fault":
            return Drop("termination:simulator_fault", trajectory.termination.detail)
        return None


@dataclass(frozen=True)
class RecordIntegrity:
    """Complete, not crashed, not truncated (configurable), every tool call answered once."""

    drop_truncated: bool = True
    drop_unrecovered_tool_errors: bool = False
    name: ClassVar[RuleName] = "record_integrity"
    concern: ClassVar[str] = "complete record: finished, paired tool calls, not truncated"

    def check(self, trajectory: Trajectory) -> Drop | None:
        end = trajectory.termination
        if trajectory.timings.finished_at is None:
            return Drop("incomplete", f"no finished_at (termination {end.reason})")
        if end.reason == "harness_crash":
            return Drop("harness_crash", end.detail or "the harness raised")
        if self.drop_truncated and end.reason in TRUNCATING_TERMINATIONS:
            return Drop(f"truncated:{end.reason}", end.detail or end.reason)
        return _unpaired_tool_call(trajectory) or (
            _unrecovered_tool_error(trajectory) if self.drop_unrecovered_tool_errors else None
        )


def _unpaired_tool_call(trajectory: Trajectory) -> Drop | None:
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, message in enumerate(trajectory.messages):
        for call in message.tool_calls:
            if call.id in open_calls or call.id in answered:
                return Drop("duplicate_tool_call_id", f"messages[{index}]: call id {call.id!r}")
            open_calls[call.id] = index
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id in answered:
                return Drop("duplicate_tool_result", f"messages[{index}]: {call_id!r} again")
            if call_id not in open_calls:
                return Drop("orphan_tool_result", f"messages[{index}]: no call {call_id!r} before")
            del open_calls[call_id]
            answered.add(call_id)
    if open_calls:
        call_id, index = next(iter(open_calls.items()))
        return Drop("unanswered_tool_call", f"messages[{index}]: call {call_id!r} has no result")
    return None


def _unrecovered_tool_error(trajectory: Trajectory) -> Drop | None:
    last_error: int | None = None
    for index, message in enumerate(trajectory.messages):
        if message.role == "tool":
            last_error = index if message.is_error else None
    if last_error is None:
        return None
    return Drop(
        "unrecovered_tool_error",
        f"messages[{last_error}]: tool error with no successful tool call after it",
    )


@dataclass(frozen=True)
class VerifiedOutcome:
    """A verdict to train on: verification present and valid; optionally a minimum reward."""

    min_reward: float | None = None
    name: ClassVar[RuleName] = "verified_outcome"
    concern: ClassVar[str] = "verified in a fresh sandbox, valid reward (invalid is not 0)"

    def check(self, trajectory: Trajectory) -> Drop | None:
        verdict = trajectory.verification
        if verdict is None:
            return Drop("unverified", "no verification record")
        if not verdict.valid:
            return Drop("verification_invalid", verdict.invalid_reason or "invalid")
        reward = verdict.reward
        if reward is None or not math.isfinite(reward):
            return Drop("reward_not_finite", f"reward {reward!r}")
        if self.min_reward is not None and reward < self.min_reward:
            return Drop("below_min_reward", f"reward {reward:g} < {self.min_reward:g}")
        return None


@dataclass(frozen=True)
class ClaimEvidence:
    """Every deliverable the agent claims exists in the final workspace and differs from
    what was there before it worked (the initial files, as the user's patches left them)."""

    parse_claims_from_message: bool = True
    name: ClassVar[RuleName] = "claim_evidence"
    concern: ClassVar[str] = "claimed deliverables exist and were changed by the agent"

    def check(self, trajectory: Trajectory) -> Drop | None:
        claims = claimed_deliverables(trajectory, self.parse_claims_from_message)
        if not claims:
            return None
        final = {f.path: f.sha256 for f in trajectory.final_workspace}
        before = baseline_digests(trajectory)
        for claim in claims:
            paths = matching_paths(claim, final)
            if not paths:
                return Drop("claimed_missing", f"claims {claim!r}; absent from the final workspace")
            if all(before.get(path) == final[path] for path in paths):
                return Drop("claimed_unchanged", f"claims {claim!r}; {paths[0]} is unchanged")
        return None


def build_rules(settings: FilterSettings, context: FilterContext | None = None) -> list[Rule]:
    """The pipeline's per-trajectory rules for these settings, in ``RULE_ORDER``, skipped
    ones left out (``unique_records`` is the pipeline's own: it remembers earlier ones)."""
    context = context or FilterContext()
    made: dict[RuleName, Rule] = {
        "infrastructure_faults": InfrastructureFaults(),
        "simulator_faults": SimulatorFaults(),
        "private_state": PrivateState(context),
        "record_integrity": RecordIntegrity(
            drop_truncated=settings.drop_truncated,
            drop_unrecovered_tool_errors=settings.drop_unrecovered_tool_errors,
        ),
        "turn_consistency": TurnConsistency(context),
        "agent_echo": AgentEcho(),
        "verified_outcome": VerifiedOutcome(min_reward=settings.min_reward),
        "verdict_consistency": VerdictConsistency(context),
        "reward_consistency": RewardConsistency(context),
        "final_workspace": FinalWorkspace(settings.max_file_bytes, context),
        "claim_evidence": ClaimEvidence(
            parse_claims_from_message=settings.parse_claims_from_message
        ),
    }
    return [made[name] for name in RULE_ORDER if name in made and settings.applies(name)]


__all__ = [
    "ClaimEvidence",
    "Drop",
    "InfrastructureFaults",
    "Note",
    "RecordIntegrity",
    "Rule",
    "SimulatorFaults",
    "VerifiedOutcome",
    "build_rules",
]

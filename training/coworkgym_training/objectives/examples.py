"""Trajectories → training examples for one objective, with a report of what was kept.

Every objective trains on the agent tokens of ``tokenize_trajectory`` (the policy's own
ids where recorded). GRPO adds each trajectory's reward and group-relative advantage;
trajectories whose reward cannot be trusted are masked out (dropped, and counted), groups
without reward variance are dropped. OPD examples may carry the teacher's top-k
distribution, filled in beforehand by ``opd.attach_teacher_topk``.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from transformers import PreTrainedTokenizerBase

from coworkgym.rollout.trajectory import Trajectory

from ..tokenize import TokenizationError, tokenize_trajectory
from .config import ObjectiveConfig, ObjectiveName
from .reward import group_advantages, trajectory_reward

# How many dropped trajectories the report names, per reason.
_NAMED_PER_REASON = 20


@dataclass(frozen=True)
class TrainExample:
    """One trajectory as a trainer consumes it.

    ``agent_mask[t]`` marks the tokens the policy generated (the targets; position 0 is
    never one, it has no context). ``behaviour_logprobs[t]`` is the policy's recorded
    log-probability of token t, None where not recorded. ``group_id`` names the GRPO group
    (one environment under one harness and policy model). ``teacher_topk_ids`` and
    ``teacher_topk_logprobs`` hold, for each target position in order, the teacher's k
    most likely next tokens and their log-probabilities (OPD, when precomputed)."""

    trajectory_id: str
    input_ids: list[int]
    agent_mask: list[bool]
    behaviour_logprobs: list[float | None]
    env_id: str
    group_id: str
    reward: float | None = None
    advantage: float | None = None
    teacher_topk_ids: list[list[int]] | None = None
    teacher_topk_logprobs: list[list[float]] | None = None

    @property
    def target_positions(self) -> list[int]:
        return [t for t, on in enumerate(self.agent_mask) if on and t > 0]

    @property
    def agent_tokens(self) -> int:
        return len(self.target_positions)

    def __len__(self) -> int:
        return len(self.input_ids)

    def with_teacher(self, ids: list[list[int]], logprobs: list[list[float]]) -> TrainExample:
        if len(ids) != self.agent_tokens or len(logprobs) != self.agent_tokens:
            raise ValueError(
                f"teacher top-k for {self.trajectory_id}: {len(ids)} rows for "
                f"{self.agent_tokens} agent tokens; they must align"
            )
        return replace(self, teacher_topk_ids=ids, teacher_topk_logprobs=logprobs)


class PrepReport(BaseModel):
    """What ``examples_from_trajectories`` kept and dropped, and why."""

    model_config = ConfigDict(extra="forbid")

    objective: ObjectiveName
    trajectories: int = 0
    examples: int = 0
    dropped: dict[str, int] = Field(
        default_factory=dict,
        description="reason → count: tokenization_error, no_agent_tokens, invalid_reward, "
        "singleton_group, zero_variance_group",
    )
    dropped_ids: dict[str, list[str]] = Field(
        default_factory=dict, description=f"reason → up to {_NAMED_PER_REASON} trajectory ids"
    )
    groups: int = Field(0, description="GRPO groups with at least one valid reward")
    groups_kept: int = 0
    groups_zero_variance: int = 0
    groups_singleton: int = 0
    reward_mean: float | None = Field(None, description="over the valid rewards (GRPO)")
    tokens: int = 0
    agent_tokens: int = 0
    agent_tokens_without_behaviour_logprobs: int = Field(
        0, description="GRPO treats these as on-policy (ratio 1)"
    )
    prompt_divergences: int = 0

    def drop(self, reason: str, trajectory_id: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        named = self.dropped_ids.setdefault(reason, [])
        if len(named) < _NAMED_PER_REASON:
            named.append(trajectory_id)


def group_key(trajectory: Trajectory) -> str:
    """The GRPO group: rollouts of one environment package under one harness and model
    (everything of the rollout key but its sample number)."""
    key = trajectory.key
    wire = f"{key.package_digest}|{key.harness}|{key.model}"
    return hashlib.sha256(wire.encode()).hexdigest()[:16]


def examples_from_trajectories(
    trajectories: Iterable[Trajectory],
    tokenizer: PreTrainedTokenizerBase,
    objective: ObjectiveName,
    config: ObjectiveConfig | None = None,
    *,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[list[TrainExample], PrepReport]:
    """Tokenize `trajectories` for `objective`; examples come out in input order."""
    config = config or ObjectiveConfig()
    report = PrepReport(objective=objective)
    examples: list[TrainExample] = []
    for trajectory in trajectories:
        report.trajectories += 1
        example = _example(trajectory, tokenizer, config, objective, tools, report)
        if example is not None:
            examples.append(example)
    if objective == "grpo":
        examples = _with_advantages(examples, config, report)
    report.examples = len(examples)
    report.tokens = sum(len(e) for e in examples)
    report.agent_tokens = sum(e.agent_tokens for e in examples)
    report.agent_tokens_without_behaviour_logprobs = sum(
        sum(1 for t in e.target_positions if e.behaviour_logprobs[t] is None) for e in examples
    )
    return examples, report


def _example(
    trajectory: Trajectory,
    tokenizer: PreTrainedTokenizerBase,
    config: ObjectiveConfig,
    objective: ObjectiveName,
    tools: list[dict[str, Any]] | None,
    report: PrepReport,
) -> TrainExample | None:
    reward: float | None = None
    if objective == "grpo":
        outcome = trajectory_reward(trajectory, config.grpo.reward)
        if outcome.reward is None:
            report.drop("invalid_reward", trajectory.id)
            return None
        reward = outcome.reward
    try:
        tokenized = tokenize_trajectory(trajectory, tokenizer, tools=tools)
    except TokenizationError:
        report.drop("tokenization_error", trajectory.id)
        return None
    report.prompt_divergences += tokenized.prompt_divergences
    mask = list(tokenized.agent_mask)
    if mask:
        mask[0] = False  # the first token has no context to predict it from
    if not any(mask):
        report.drop("no_agent_tokens", trajectory.id)
        return None
    return TrainExample(
        trajectory_id=trajectory.id,
        input_ids=tokenized.input_ids,
        agent_mask=mask,
        behaviour_logprobs=tokenized.behaviour_logprobs,
        env_id=trajectory.environment.name,
        group_id=group_key(trajectory),
        reward=reward,
    )


def _with_advantages(
    examples: list[TrainExample], config: ObjectiveConfig, report: PrepReport
) -> list[TrainExample]:
    members: dict[str, list[int]] = defaultdict(list)
    for index, example in enumerate(examples):
        members[example.group_id].append(index)
    rewards = [e.reward for e in examples if e.reward is not None]
    report.reward_mean = sum(rewards) / len(rewards) if rewards else None
    report.groups = len(members)
    advantage: dict[int, float] = {}
    outcomes: Counter[str] = Counter()
    for indices in members.values():
        group = group_advantages([_valid_reward(examples[i]) for i in indices], config.grpo)
        if group.advantages is None:
            outcomes[group.dropped or "dropped"] += 1
            for i in indices:
                report.drop(f"{group.dropped}_group", examples[i].trajectory_id)
            continue
        outcomes["kept"] += 1
        advantage.update(zip(indices, group.advantages, strict=True))
    report.groups_kept = outcomes["kept"]
    report.groups_zero_variance = outcomes["zero_variance"]
    report.groups_singleton = outcomes["singleton"]
    return [replace(e, advantage=advantage[i]) for i, e in enumerate(examples) if i in advantage]


def _valid_reward(example: TrainExample) -> float:
    if example.reward is None:  # masked before grouping; never stands in as 0
        raise AssertionError(f"{example.trajectory_id} reached grouping without a reward")
    return example.reward


__all__ = ["PrepReport", "TrainExample", "examples_from_trajectories", "group_key"]

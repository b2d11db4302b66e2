"""Trajectories → training examples for one objective, with a report of what was kept.

Every objective trains on the agent tokens of ``tokenize_trajectory`` (the policy's own
ids where recorded). A trajectory id seen before is dropped (the first one is kept). SFT
keeps the trajectories ``sft_min_reward`` admits (the verifier's passes by default). GRPO
adds each trajectory's reward and group-relative advantage; trajectories whose reward
cannot be trusted are masked out (dropped, and counted), groups without reward variance
are dropped. OPD examples may carry the teacher's top-k distribution, filled in
beforehand by ``opd.attach_teacher_topk``.

Each example carries the temperature its logits are divided by: ``ObjectiveConfig.
temperature`` when set, else its trajectory's sampling temperature (1.0 when none is
recorded). GRPO refuses a dataset sampled at several temperatures.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field
from transformers import PreTrainedTokenizerBase

from coworkgym.rollout.trajectory import Trajectory

from ..tokenize import TokenizationError, tokenize_trajectory
from .base import ObjectiveError
from .config import DEFAULT_TEMPERATURE, ObjectiveConfig, ObjectiveName
from .reward import group_advantages, sft_drop_reason, trajectory_reward

log = structlog.get_logger(__name__)

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
    most likely next tokens and their log-probabilities (OPD, when precomputed).
    ``temperature`` divides the logits when the objective scores the example: the one its
    behaviour log-probs are of (the trajectory's sampling temperature, 1.0 by default)."""

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
    temperature: float = DEFAULT_TEMPERATURE

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
        description="reason → count: duplicate_id, invalid_reward (GRPO; SFT unless "
        "sft_min_reward is null), below_sft_min_reward, tokenization_error, no_agent_tokens, "
        "singleton_group, zero_variance_group",
    )
    dropped_ids: dict[str, list[str]] = Field(
        default_factory=dict, description=f"reason → up to {_NAMED_PER_REASON} trajectory ids"
    )
    groups: int = Field(0, description="GRPO groups with at least one valid reward")
    groups_kept: int = 0
    groups_zero_variance: int = 0
    groups_singleton: int = 0
    packages_in_several_groups: int = Field(
        0,
        description="GRPO: packages whose valid rollouts fall into more than one group "
        "(rolled out under several harnesses or models: each is its own group)",
    )
    group_harnesses: list[str] = Field(
        default_factory=list, description="GRPO: the harnesses of the groups seen"
    )
    temperature: float | None = Field(
        None,
        description="the temperature the examples are scored at (None: several, per "
        "example; SFT and OPD only)",
    )
    sampling_temperatures: dict[str, int] = Field(
        default_factory=dict,
        description="the sampling temperatures the examples' trajectories record → count "
        "('unrecorded' for none: scored at 1.0 unless temperature is set)",
    )
    warnings: list[str] = Field(
        default_factory=list, description="settings that disagree with the data, and how"
    )
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

    def no_usable_group_reason(self) -> str | None:
        """Why GRPO has nothing to train on, or None (see ``no_usable_group_reason``)."""
        return no_usable_group_reason(self)


def no_usable_group_reason(report: PrepReport) -> str | None:
    """For a GRPO report that kept no group, why, in words a user can act on; None when
    the report is not GRPO's or some group was kept."""
    if report.objective != "grpo" or report.groups_kept:
        return None
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(report.dropped.items()))
    if not report.groups:
        return (
            f"no GRPO group: none of the {report.trajectories} trajectories reached grouping "
            f"(dropped: {dropped or 'none'}); GRPO needs valid verifier rewards"
        )
    counts = []
    if report.groups_singleton:
        counts.append(f"{report.groups_singleton} singleton group(s)")
    if report.groups_zero_variance:
        counts.append(f"{report.groups_zero_variance} zero-variance group(s)")
    reason = f"no GRPO group with reward spread: {', '.join(counts)}"
    if report.packages_in_several_groups:
        harnesses = ", ".join(report.group_harnesses)
        reason += (
            f"; {report.packages_in_several_groups} package(s) were rolled out under several "
            f"harnesses or models ({harnesses}), and each of those is its own group"
        )
    return (
        reason + "; a group is one package under one harness and model: roll out at least 2 "
        "samples per package with the same harness and model (e.g. --samples 4 --harness "
        "tool-calling), not oracle + nop, which are different groups; a group whose samples "
        "all get the same reward carries no signal either"
    )


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
    """Tokenize `trajectories` for `objective`; examples come out in input order.

    Raises ObjectiveError for GRPO data sampled at several temperatures (unless
    ``config.temperature`` chooses one)."""
    config = config or ObjectiveConfig()
    report = PrepReport(objective=objective)
    examples: list[TrainExample] = []
    seen: set[str] = set()
    groups: dict[str, Trajectory] = {}  # GRPO: a member of each group, for the report
    sampled: dict[str, float | None] = {}  # trajectory id → its recorded temperature
    for trajectory in trajectories:
        report.trajectories += 1
        if trajectory.id in seen:
            report.drop("duplicate_id", trajectory.id)
            continue
        seen.add(trajectory.id)
        example = _example(trajectory, tokenizer, config, objective, tools, report)
        if example is not None:
            examples.append(example)
            groups.setdefault(example.group_id, trajectory)
            sampled[trajectory.id] = sampling_temperature(trajectory)
    if objective == "grpo":
        _describe_groups(groups, report)
        examples = _with_advantages(examples, config, report)
    _settle_temperature(examples, sampled, config, objective, report)
    report.examples = len(examples)
    report.tokens = sum(len(e) for e in examples)
    report.agent_tokens = sum(e.agent_tokens for e in examples)
    report.agent_tokens_without_behaviour_logprobs = sum(
        sum(1 for t in e.target_positions if e.behaviour_logprobs[t] is None) for e in examples
    )
    for warning in report.warnings:
        log.warning("training data and settings disagree", objective=objective, detail=warning)
    return examples, report


def sampling_temperature(trajectory: Trajectory) -> float | None:
    """The temperature the policy sampled `trajectory` at (``policy.sampling``), or None
    when it records none usable (an oracle replay; 0, greedy, has no tempered log-probs)."""
    value = trajectory.policy.sampling.get("temperature")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _settle_temperature(
    examples: list[TrainExample],
    sampled: dict[str, float | None],
    config: ObjectiveConfig,
    objective: ObjectiveName,
    report: PrepReport,
) -> None:
    """Record the sampling temperatures; refuse GRPO data sampled at several; warn where
    an explicit setting differs from what recorded behaviour log-probs were sampled at.
    The examples already carry the temperature they are scored at (``_example``)."""
    recorded = [sampled[e.trajectory_id] for e in examples]
    report.sampling_temperatures = dict(
        sorted(Counter("unrecorded" if t is None else _show(t) for t in recorded).items())
    )
    if config.temperature is not None:
        report.temperature = config.temperature
        if objective != "grpo":
            return
        differing = Counter(
            _show(t)
            for e, t in zip(examples, recorded, strict=True)
            if t is not None and t != config.temperature and _has_behaviour_logprobs(e)
        )
        if differing:
            at = ", ".join(f"{t} ({n})" for t, n in sorted(differing.items()))
            report.warnings.append(
                f"temperature is set to {_show(config.temperature)}, but trajectories with "
                f"recorded behaviour log-probs were sampled at {at}: their policy ratios "
                "compare the current policy at one temperature with the behaviour policy at "
                "another. The setting wins; leave temperature unset to use the sampling one"
            )
        return
    used = Counter(_show(e.temperature) for e in examples)
    if len(used) <= 1:
        report.temperature = examples[0].temperature if examples else None
        return
    at = ", ".join(f"{t} ({n})" for t, n in sorted(used.items()))
    if objective == "grpo":
        raise ObjectiveError(
            f"the GRPO trajectories were sampled at several temperatures: {at} (1.0 where "
            "none is recorded). One run optimizes the policy at one temperature, and each "
            "trajectory's ratio needs the temperature it was sampled at: train on rollouts "
            "of one sampling temperature (split the data), or set objective_options."
            "temperature to choose one"
        )
    report.warnings.append(
        f"the trajectories were sampled at several temperatures ({at}): each example is "
        "scored at its own; set temperature to score them all at one"
    )


def _has_behaviour_logprobs(example: TrainExample) -> bool:
    return any(example.behaviour_logprobs[t] is not None for t in example.target_positions)


def _show(temperature: float) -> str:
    return f"{temperature:g}" if temperature != int(temperature) else f"{temperature:.1f}"


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
    elif objective == "sft":
        reason = sft_drop_reason(trajectory, config.sft_min_reward)
        if reason is not None:
            report.drop(reason, trajectory.id)
            return None
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
    temperature = config.temperature
    if temperature is None:
        temperature = sampling_temperature(trajectory) or DEFAULT_TEMPERATURE
    return TrainExample(
        trajectory_id=trajectory.id,
        input_ids=tokenized.input_ids,
        agent_mask=mask,
        behaviour_logprobs=tokenized.behaviour_logprobs,
        env_id=trajectory.environment.name,
        group_id=group_key(trajectory),
        reward=reward,
        temperature=temperature,
    )


def _describe_groups(groups: dict[str, Trajectory], report: PrepReport) -> None:
    packages = Counter(t.key.package_digest for t in groups.values())
    report.packages_in_several_groups = sum(1 for n in packages.values() if n > 1)
    report.group_harnesses = sorted({t.key.harness for t in groups.values()})


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


__all__ = [
    "PrepReport",
    "TrainExample",
    "examples_from_trajectories",
    "group_key",
    "no_usable_group_reason",
    "sampling_temperature",
]

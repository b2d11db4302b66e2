"""The GRPO reward and group-relative advantages.

R(τ) = exp((w_s·ln s + w_c·ln c) / (w_s + w_c)), and 0 when s = 0 or c = 0: the weighted
geometric mean of the code score s and the rubric score c. A trajectory without a
trustworthy reward (invalid verification, none at all, a non-finite value) is *masked*: it
leaves its group and the batch, and is never counted as a 0.

Within a group (rollouts of one environment under one harness and policy):
A_i = (R_i − mean R) / (std R + 1e-4) (unbiased std and the same epsilon as TRL), or
R_i − mean R without scaling. A
group whose rewards span no more than the tolerance carries no signal and is dropped, as
is a group with a single valid member.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from coworkgym.rollout.trajectory import Trajectory
from coworkgym.verifier.engine.scoring import Scoring

from .config import GRPOSettings, RewardSettings

# Added to a group's reward std before dividing by it, as TRL's GRPOTrainer does: a group
# whose spread is barely above the zero-variance tolerance cannot give huge advantages.
ADVANTAGE_EPSILON: Final = 1e-4
# The verifier's default pass threshold, for records that predate ``verification.passed``.
DEFAULT_PASS_THRESHOLD: Final = Scoring.pass_threshold


def geometric_reward(
    code_score: float, rubric_score: float, code_weight: float, rubric_weight: float
) -> float:
    """The paper's R_E for one pair of scores in [0, 1]."""
    if code_score <= 0 or rubric_score <= 0:
        return 0.0
    log_mean = (code_weight * math.log(code_score) + rubric_weight * math.log(rubric_score)) / (
        code_weight + rubric_weight
    )
    return math.exp(log_mean)


@dataclass(frozen=True)
class RewardOutcome:
    reward: float | None
    invalid_reason: str | None = None


def trajectory_reward(trajectory: Trajectory, settings: RewardSettings) -> RewardOutcome:
    """R for `trajectory`, or the reason it has none to train on."""
    verification = trajectory.verification
    if verification is None:
        return RewardOutcome(None, "no verification")
    if not verification.valid:
        return RewardOutcome(None, f"invalid verification: {verification.invalid_reason}")
    if settings.code_weight is None or settings.rubric_weight is None:
        reward = verification.reward
    elif verification.code_score is None:
        return RewardOutcome(None, "no code_score to recompute the reward from")
    elif verification.rubric_score is None:
        reward = verification.code_score  # no rubric judged: R = s, as the verifier does
    else:
        reward = geometric_reward(
            verification.code_score,
            verification.rubric_score,
            settings.code_weight,
            settings.rubric_weight,
        )
    if reward is None or not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        return RewardOutcome(None, f"reward {reward!r} is not a finite value in [0, 1]")
    return RewardOutcome(reward)


@dataclass(frozen=True)
class GroupAdvantages:
    """The advantages of one group's members, or why the group was dropped."""

    advantages: list[float] | None
    dropped: str | None = None  # "zero_variance" | "singleton"


def group_advantages(rewards: Sequence[float], settings: GRPOSettings) -> GroupAdvantages:
    if len(rewards) < 2:
        return GroupAdvantages(None, "singleton")
    if max(rewards) - min(rewards) <= settings.zero_variance_tolerance:
        return GroupAdvantages(None, "zero_variance")
    mean = statistics.fmean(rewards)
    centred = [r - mean for r in rewards]
    if not settings.scale_advantages:
        return GroupAdvantages(centred)
    std = statistics.stdev(rewards)
    return GroupAdvantages([c / (std + ADVANTAGE_EPSILON) for c in centred])


def sft_drop_reason(
    trajectory: Trajectory, min_reward: float | Literal["passed"] | None
) -> str | None:
    """Why SFT does not train on `trajectory` under ``sft_min_reward`` (None: it does).

    ``"passed"`` is the verifier's pass as the rollout summary's pass_rate counts it:
    ``verification.passed``, recorded as reward ≥ the package's ``scoring.pass_threshold``;
    a record without it (an older one) is judged by the default threshold (0.99)."""
    if min_reward is None:
        return None
    reward = trajectory.reward
    if reward is None or not math.isfinite(reward):
        return "invalid_reward"
    if min_reward == "passed":
        verification = trajectory.verification
        passed = verification.passed if verification is not None else None
        if passed is None:
            passed = reward >= DEFAULT_PASS_THRESHOLD
        return None if passed else "below_sft_min_reward"
    return None if reward >= min_reward else "below_sft_min_reward"


__all__ = [
    "ADVANTAGE_EPSILON",
    "DEFAULT_PASS_THRESHOLD",
    "GroupAdvantages",
    "RewardOutcome",
    "geometric_reward",
    "group_advantages",
    "sft_drop_reason",
    "trajectory_reward",
]

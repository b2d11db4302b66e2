"""Settings of the three objectives, as one pydantic model the trainer and the TrainingRun
resource pass through unchanged."""

from __future__ import annotations

from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

ObjectiveName = Literal["sft", "grpo", "opd"]
OBJECTIVES: tuple[ObjectiveName, ...] = ("sft", "grpo", "opd")
# The temperature of a trajectory that records none (an oracle replay, a scripted policy).
DEFAULT_TEMPERATURE: Final = 1.0


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RewardSettings(_Settings):
    """The GRPO reward R = weighted geometric mean of the code score s and the rubric score
    c, 0 when either is 0 (the paper's R_E).

    Left unset, the weights are the package's own: R is the verifier's recorded reward,
    which is that mean with the package's ``scoring`` weights (0.7 : 0.3 by default) and
    its red-line cap. Set both to retune w_s : w_c for training; R is then recomputed from
    the recorded s and c (and is s alone when no rubric was judged, as the verifier does)."""

    code_weight: float | None = Field(None, gt=0, description="w_s; set with rubric_weight")
    rubric_weight: float | None = Field(None, gt=0, description="w_c; set with code_weight")

    @model_validator(mode="after")
    def _both_or_neither(self) -> Self:
        if (self.code_weight is None) != (self.rubric_weight is None):
            raise ValueError(
                "reward.code_weight and reward.rubric_weight go together: set both to "
                "recompute R from s and c, or neither to use the verifier's reward"
            )
        return self

    @property
    def recomputed(self) -> bool:
        return self.code_weight is not None


class GRPOSettings(_Settings):
    reward: RewardSettings = Field(default_factory=RewardSettings)
    scale_advantages: bool = Field(
        True, description="divide by the group's reward std (False: mean-centred only, Dr. GRPO)"
    )
    zero_variance_tolerance: float = Field(
        1e-6, ge=0, description="a group whose rewards span no more than this is dropped"
    )
    clip_epsilon_low: float = Field(0.2, ge=0, lt=1, description="ratio floor 1 - ε_low")
    clip_epsilon_high: float = Field(0.2, ge=0, description="ratio ceiling 1 + ε_high")
    kl_beta: float = Field(0.0, ge=0, description="weight of the KL to the reference model")
    log_ratio_clamp: float = Field(
        20.0,
        gt=0,
        description="ℓ − ℓ_b is clamped to ±this before exp (as verl does), so one token "
        "the behaviour policy found very unlikely cannot overflow the ratio",
    )
    dual_clip_ratio: float | None = Field(
        3.0,
        gt=1,
        description="dual-clip PPO (verl's clip_ratio_c): for a negative advantage the "
        "per-token loss is capped at −A·c, so a ratio far above 1 cannot blow up the loss "
        "and its gradient; None: no cap (TRL's GRPO loss)",
    )
    loss_aggregation: Literal["token", "sequence"] = Field(
        "token",
        description="token: mean over every agent token of the batch (TRL's bnpo); "
        "sequence: mean per trajectory, then over trajectories (TRL's grpo)",
    )


class OPDSettings(_Settings):
    top_k: int | None = Field(
        None,
        ge=1,
        description="restrict the teacher to its k most likely tokens (renormalized); "
        "None: the full vocabulary",
    )


class ObjectiveConfig(_Settings):
    temperature: float | None = Field(
        None,
        gt=0,
        description="logits are divided by it; None: each trajectory's own sampling "
        "temperature (policy.sampling.temperature, 1.0 where none is recorded), the one its "
        "behaviour log-probs are of. Set, it wins over what the trajectories record",
    )
    sft_min_reward: float | Literal["passed"] | None = Field(
        "passed",
        description="which trajectories SFT trains on: passed (default): those the verifier "
        "passed (verification.passed: reward at least the package's pass_threshold, as the "
        "rollout summary's pass_rate counts them); a number: a valid reward at least this; "
        "None: every trajectory, whatever its reward. GRPO and OPD ignore it",
    )
    freeze_moe_router: bool | None = Field(
        None,
        description="freeze MoE router weights; None: frozen for GRPO (as the paper does), "
        "trained for SFT and OPD",
    )
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    opd: OPDSettings = Field(default_factory=OPDSettings)

    @model_validator(mode="after")
    def _reward_in_range(self) -> Self:
        bound = self.sft_min_reward
        if isinstance(bound, float) and not 0.0 <= bound <= 1.0:
            raise ValueError(
                f"sft_min_reward {bound} is outside the reward range [0, 1]: use a value in "
                "it, 'passed' (the verifier's pass) or null (keep every trajectory)"
            )
        return self

    def router_frozen_for(self, objective: ObjectiveName) -> bool:
        if self.freeze_moe_router is not None:
            return self.freeze_moe_router
        return objective == "grpo"


__all__ = [
    "DEFAULT_TEMPERATURE",
    "OBJECTIVES",
    "GRPOSettings",
    "OPDSettings",
    "ObjectiveConfig",
    "ObjectiveName",
    "RewardSettings",
]

"""GRPO: the clipped policy-ratio loss on agent tokens, against the behaviour policy.

For a target token with current log-prob ℓ, behaviour log-prob ℓ_b (recorded in the
trajectory when the rollout was sampled) and its trajectory's advantage A:

    ρ = exp(clamp(ℓ − ℓ_b, −L, L)),  l_t = −min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)
    loss_t = min(l_t, −c·A) if A < 0 else l_t,  plus β·KL_t

Two guards against a behaviour log-prob far below the current one (a token the sampler
found very unlikely, or a stale record): the log-ratio is clamped to ±L (20, as verl does)
so ρ stays finite, and for a negative advantage the token's loss is capped at −c·A (dual
clip, c = 3 as verl's ``clip_ratio_c``; Ye et al. 2020, "Mastering Complex Control in MOBA
Games with Deep RL"). The PPO clip alone bounds only the side that favours the update: for
A < 0 and ρ ≫ 1 the unclipped term ρ·A is the one min() keeps, and it is unbounded.

KL_t = exp(ℓ_ref − ℓ) − (ℓ_ref − ℓ) − 1, the k3 estimator of KL(π_θ‖π_ref), as TRL and
DeepSeekMath use. A token whose behaviour log-prob was not recorded is taken as on-policy:
ℓ_b = ℓ detached (ρ = 1), as TRL does when the old policy is the current one. The per-token
losses are averaged over all agent tokens of the batch (``token``) or per trajectory first
(``sequence``).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from .base import Metrics, ObjectiveError
from .batching import Batch
from .config import ObjectiveConfig
from .logprobs import flat_targets, per_row_mean, target_logprobs
from .moe import freeze_router


class GRPOObjective:
    name: Literal["grpo"] = "grpo"
    needs_teacher = False

    def __init__(self, config: ObjectiveConfig) -> None:
        self.config = config
        self.settings = config.grpo
        self.needs_reference = self.settings.kl_beta > 0

    def prepare(self, model: torch.nn.Module) -> list[str]:
        return freeze_router(model) if self.config.router_frozen_for("grpo") else []

    def loss(
        self,
        model: Any,
        batch: Batch,
        *,
        reference_model: Any | None = None,
        teacher_model: Any | None = None,
    ) -> tuple[torch.Tensor, Metrics]:
        settings = self.settings
        if self.needs_reference and reference_model is None:
            raise ObjectiveError(
                f"grpo.kl_beta is {settings.kl_beta}: pass reference_model, or set kl_beta to 0"
            )
        scored = target_logprobs(model, batch, temperature=self.config.temperature)
        logprobs = scored.logprobs
        device = logprobs.device
        behaviour = flat_targets(batch, batch["behaviour_logprobs"]).to(device)
        recorded = ~torch.isnan(behaviour)
        behaviour = torch.where(recorded, behaviour, logprobs.detach())
        advantages = batch["advantages"].to(device)[scored.rows]

        bound = settings.log_ratio_clamp
        ratio = torch.exp(torch.clamp(logprobs - behaviour, -bound, bound))
        clipped = torch.clamp(ratio, 1 - settings.clip_epsilon_low, 1 + settings.clip_epsilon_high)
        per_token = -torch.min(ratio * advantages, clipped * advantages)
        dual_clipped = None
        if settings.dual_clip_ratio is not None:
            cap = -settings.dual_clip_ratio * advantages
            dual_clipped = (advantages < 0) & (per_token > cap)
            per_token = torch.where(dual_clipped, cap, per_token)
        kl = None
        if self.needs_reference:
            with torch.no_grad():
                reference = target_logprobs(
                    reference_model, batch, temperature=self.config.temperature
                ).logprobs
            delta = reference.to(device) - logprobs
            kl = torch.exp(delta) - delta - 1
            per_token = per_token + settings.kl_beta * kl

        rows = batch["input_ids"].shape[0]
        if settings.loss_aggregation == "token":
            loss = per_token.sum() / max(per_token.numel(), 1)
        else:
            loss = per_row_mean(per_token, scored.rows, rows).mean()

        with torch.no_grad():
            low = (ratio < 1 - settings.clip_epsilon_low) & (advantages < 0)
            high = (ratio > 1 + settings.clip_epsilon_high) & (advantages > 0)
            count = max(per_token.numel(), 1)
            metrics: Metrics = {
                "loss": float(loss.detach()),
                "tokens": float(per_token.numel()),
                "clip_fraction": float((low | high).sum()) / count,
                "dual_clip_fraction": (
                    float(dual_clipped.sum()) / count if dual_clipped is not None else 0.0
                ),
                "log_ratio_clamped_fraction": float(
                    ((logprobs.detach() - behaviour).abs() > bound).sum()
                )
                / count,
                "ratio_mean": float(ratio.mean()) if per_token.numel() else 1.0,
                "ratio_max": float(ratio.max()) if per_token.numel() else 1.0,
                "behaviour_recorded_fraction": float(recorded.sum()) / count,
                "advantage_mean": float(batch["advantages"].mean()),
            }
            rewards = batch["rewards"]
            if not torch.isnan(rewards).all():
                metrics["reward_mean"] = float(rewards.nanmean())
            if kl is not None:
                metrics["kl"] = float(kl.mean()) if kl.numel() else 0.0
        return loss, metrics


__all__ = ["GRPOObjective"]

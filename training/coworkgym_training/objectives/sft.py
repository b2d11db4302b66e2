"""SFT: cross-entropy on the agent tokens only, averaged over every target token of the
batch (the loss TRL's SFTTrainer computes with a completion or assistant mask)."""

from __future__ import annotations

from typing import Any, Literal

import torch

from .base import Metrics
from .batching import Batch
from .config import ObjectiveConfig
from .logprobs import target_logprobs
from .moe import freeze_router


class SFTObjective:
    name: Literal["sft"] = "sft"
    needs_reference = False
    needs_teacher = False

    def __init__(self, config: ObjectiveConfig) -> None:
        self.config = config

    def prepare(self, model: torch.nn.Module) -> list[str]:
        return freeze_router(model) if self.config.router_frozen_for("sft") else []

    def loss(
        self,
        model: Any,
        batch: Batch,
        *,
        reference_model: Any | None = None,
        teacher_model: Any | None = None,
    ) -> tuple[torch.Tensor, Metrics]:
        scored = target_logprobs(model, batch, temperature=self.config.temperature, top1=True)
        count = float(scored.logprobs.numel())
        # A batch without targets gives a differentiable 0, not 0/0.
        loss = -scored.logprobs.sum() / max(count, 1.0)
        top1 = scored.is_top1
        accuracy = float(top1.float().mean()) if top1 is not None and count else 0.0
        return loss, {"loss": float(loss.detach()), "tokens": count, "accuracy": accuracy}


__all__ = ["SFTObjective"]

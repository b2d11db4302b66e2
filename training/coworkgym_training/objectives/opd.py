"""On-policy distillation: the student's own rollouts, the teacher's next-token
distribution at each agent token, and the forward KL

    KL(π_T ‖ π_θ) = Σ_v π_T(v | h_t) · (log π_T(v | h_t) − log π_θ(v | h_t)),

averaged over the agent tokens of the batch (user, tool and workspace tokens are context).

With ``opd.top_k = k`` the teacher is truncated to its k most likely tokens and
renormalized (p̃_T); the loss is KL(p̃_T ‖ π_θ) = Σ_{v∈top-k} p̃_T(v)·(log p̃_T(v) −
log π_θ(v)), with the student's full-vocabulary log-probs, so it is still ≥ 0 and is 0 only
when the student puts exactly p̃_T's mass on the support (none outside it). Top-k makes
the teacher's part storable: ``attach_teacher_topk`` computes it once per example, and a
batch that carries it needs no teacher model at training time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from .base import Metrics, ObjectiveError
from .batching import Batch, collate
from .config import ObjectiveConfig
from .examples import TrainExample
from .logprobs import target_logits
from .moe import freeze_router


class OPDObjective:
    name: Literal["opd"] = "opd"
    needs_reference = False
    needs_teacher = True

    def __init__(self, config: ObjectiveConfig) -> None:
        self.config = config
        self.top_k = config.opd.top_k

    def prepare(self, model: torch.nn.Module) -> list[str]:
        return freeze_router(model) if self.config.router_frozen_for("opd") else []

    def loss(
        self,
        model: Any,
        batch: Batch,
        *,
        reference_model: Any | None = None,
        teacher_model: Any | None = None,
    ) -> tuple[torch.Tensor, Metrics]:
        temperature = self.config.temperature
        scored = target_logits(model, batch, temperature=temperature)
        student = torch.log_softmax(scored.logits, dim=-1)
        if "teacher_topk_ids" in batch:
            ids = batch["teacher_topk_ids"].to(student.device)
            teacher = torch.log_softmax(batch["teacher_topk_logprobs"].to(student.device), dim=-1)
            if ids.shape[0] != student.shape[0]:
                raise ObjectiveError(
                    f"the batch's teacher top-k has {ids.shape[0]} rows for "
                    f"{student.shape[0]} agent tokens; recompute it with attach_teacher_topk"
                )
            kl = _topk_kl(teacher, ids, student)
        elif teacher_model is None:
            raise ObjectiveError(
                "opd needs the teacher: pass teacher_model, or attach the teacher's top-k "
                "to the examples first (attach_teacher_topk)"
            )
        else:
            with torch.no_grad():
                teacher_logits = target_logits(teacher_model, batch, temperature=temperature).logits
            teacher_logits = teacher_logits.to(student.device)
            if teacher_logits.shape[-1] != student.shape[-1]:
                raise ObjectiveError(
                    f"teacher vocabulary {teacher_logits.shape[-1]} ≠ student vocabulary "
                    f"{student.shape[-1]}: distillation needs one tokenizer for both"
                )
            if self.top_k is None:
                teacher = torch.log_softmax(teacher_logits, dim=-1)
                kl = (teacher.exp() * (teacher - student)).sum(-1)
            else:
                top = torch.log_softmax(teacher_logits, dim=-1).topk(self.top_k, dim=-1)
                kl = _topk_kl(torch.log_softmax(top.values, dim=-1), top.indices, student)
        count = kl.numel()
        loss = kl.sum() / max(count, 1)
        value = float(loss.detach())
        return loss, {"loss": value, "tokens": float(count), "kl": value}


def _topk_kl(teacher: torch.Tensor, ids: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """KL(p̃_T ‖ π_θ) per row; `teacher` is the renormalized top-k log-probs at `ids`."""
    return (teacher.exp() * (teacher - student.gather(1, ids))).sum(-1)


@torch.no_grad()
def attach_teacher_topk(
    examples: Sequence[TrainExample],
    teacher_model: Any,
    *,
    top_k: int,
    pad_id: int,
    temperature: float | None = None,
    batch_size: int = 8,
) -> list[TrainExample]:
    """The examples with the teacher's k most likely tokens (and their full-vocabulary
    log-probs) at each agent token, so training needs no teacher in memory. The teacher's
    logits are divided by `temperature`, by default each example's own (as the loss divides
    the student's)."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, not {top_k}")
    out: list[TrainExample] = []
    for start in range(0, len(examples), batch_size):
        chunk = list(examples[start : start + batch_size])
        scored = target_logits(teacher_model, collate(chunk, pad_id), temperature=temperature)
        top = torch.log_softmax(scored.logits, dim=-1).topk(top_k, dim=-1)
        offset = 0
        for example in chunk:
            n = example.agent_tokens
            out.append(
                example.with_teacher(
                    top.indices[offset : offset + n].tolist(),
                    top.values[offset : offset + n].float().tolist(),
                )
            )
            offset += n
    return out


__all__ = ["OPDObjective", "attach_teacher_topk"]

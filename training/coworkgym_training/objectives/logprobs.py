"""Logits and log-probabilities at the target positions only.

The backbone runs over the whole padded batch; the LM head projects only the hidden states
that predict a target (the state at t − 1 for a target at t), so the [targets, vocab]
logits are the only vocabulary-sized tensor — never [batch, time, vocab]. Models whose
head does more than a linear projection (logit soft-capping, logit scales) go through
their own forward instead, and the target rows are taken from its logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .batching import Batch

# Config attributes of heads that are more than `lm_head(hidden)`.
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier")


@dataclass(frozen=True)
class TargetLogits:
    logits: torch.Tensor  # [N, V] float32, temperature applied
    targets: torch.Tensor  # [N] token ids
    rows: torch.Tensor  # [N] the batch row of each target


def target_logits(model: Any, batch: Batch, *, temperature: float = 1.0) -> TargetLogits:
    """The next-token logits at every target of `batch`, in row-major order."""
    input_ids = batch["input_ids"].to(_device(model))
    attention = batch["attention_mask"].to(input_ids.device)
    predicts = batch["target_mask"].to(input_ids.device)[:, 1:]  # state t-1 → token t
    targets = input_ids[:, 1:][predicts]
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)[:, None].expand_as(predicts)[
        predicts
    ]
    if _plain_head(model):
        hidden = model.base_model(input_ids=input_ids, attention_mask=attention, use_cache=False)
        states = hidden.last_hidden_state[:, :-1][predicts]
        logits = model.get_output_embeddings()(states)
    else:
        full = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
        logits = full[:, :-1][predicts]
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return TargetLogits(logits=logits, targets=targets, rows=rows)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per row, without materializing the log-softmax."""
    chosen = logits.gather(1, targets[:, None])[:, 0]
    return chosen - torch.logsumexp(logits, dim=-1)


def target_logprobs(
    model: Any, batch: Batch, *, temperature: float = 1.0
) -> tuple[torch.Tensor, TargetLogits]:
    """The log-probability of each target token, with the logits it came from."""
    scored = target_logits(model, batch, temperature=temperature)
    return token_logprobs(scored.logits, scored.targets), scored


def flat_targets(batch: Batch, values: torch.Tensor) -> torch.Tensor:
    """A [batch, time] per-token tensor at the targets, in the same order as the logits."""
    return values[:, 1:][batch["target_mask"][:, 1:]]


def per_row_mean(values: torch.Tensor, rows: torch.Tensor, row_count: int) -> torch.Tensor:
    """The mean of `values` per batch row ([row_count]; 0 for a row without targets)."""
    zeros = torch.zeros(row_count, dtype=values.dtype, device=values.device)
    sums = zeros.index_add(0, rows, values)
    counts = zeros.index_add(0, rows, torch.ones_like(values))
    return sums / counts.clamp(min=1.0)


def _plain_head(model: Any) -> bool:
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "base_model") or model.get_output_embeddings() is None:
        return False
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return all(getattr(text, name, None) in (None, 1.0) for name in _HEAD_EXTRAS)


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device  # type: ignore[no-any-return]


__all__ = [
    "TargetLogits",
    "flat_targets",
    "per_row_mean",
    "target_logits",
    "target_logprobs",
    "token_logprobs",
]

"""Log-probabilities (and, for OPD, logits) at the target positions only.

The backbone runs over the whole padded batch; the LM head sees only the hidden states
that predict a target (the state at t − 1 for a target at t). For the log-probs of the
sampled tokens (SFT, GRPO) the head is TRL's ``ChunkedLogProbFunction``: it projects
those states in vocabulary tiles with an online log-sum-exp and recomputes the tiles in
backward, so not even the [targets, vocab] logits are kept (a Triton kernel on GPUs, torch
ops elsewhere). OPD needs the whole next-token distribution and gets the [targets, vocab]
logits. A model whose head does more than a linear projection, soft-capping and a logit
scale (or a wrapper without a ``config``, such as an FSDP root behind ``FullForward``)
goes through its own forward instead, and the target rows are taken from its logits.

Logits are divided by a temperature: the one the caller gives, else the batch's per-row
``temperature`` (each example's sampling temperature). Rows at different temperatures share
the backbone pass; the head runs once per distinct temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import torch
from trl.kernels import ChunkedLogProbFunction

from .batching import Batch

# Config attributes of heads that scale logits in ways the chunked head is not told about.
_UNSUPPORTED_HEAD_EXTRAS = ("logits_scaling", "output_multiplier", "lm_head_multiplier")
# Vocabulary columns per tile of the chunked head: 4096 rows × 4096 columns of float32 is
# 64 MiB at most, whatever the vocabulary.
VOCAB_TILE: Final = 4096


@dataclass(frozen=True)
class Targets:
    """Where the targets are: ``predicts[b, t]`` is true when the state at t predicts a
    target (token t + 1 of row b); ``tokens`` and ``rows`` list them in row-major order."""

    predicts: torch.Tensor  # [B, T-1] bool
    tokens: torch.Tensor  # [N]
    rows: torch.Tensor  # [N]


@dataclass(frozen=True)
class TargetLogits:
    logits: torch.Tensor  # [N, V] float32, temperature applied
    targets: torch.Tensor  # [N] token ids
    rows: torch.Tensor  # [N] the batch row of each target


@dataclass(frozen=True)
class TargetLogprobs:
    logprobs: torch.Tensor  # [N] float32, log π(target | prefix), temperature applied
    targets: torch.Tensor
    rows: torch.Tensor
    is_top1: torch.Tensor | None = None  # [N] bool, when asked for: the target is the argmax


def _targets(batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, Targets]:
    input_ids = batch["input_ids"].to(device)
    attention = batch["attention_mask"].to(device)
    predicts = batch["target_mask"].to(device)[:, 1:]  # state t-1 → token t
    rows = torch.arange(input_ids.shape[0], device=device)[:, None].expand_as(predicts)
    found = Targets(predicts=predicts, tokens=input_ids[:, 1:][predicts], rows=rows[predicts])
    return input_ids, attention, found


# A temperature for the whole batch, or one per target (in the targets' order).
Temperature = float | torch.Tensor


def batch_temperature(batch: Batch, temperature: float | None = None) -> float | torch.Tensor:
    """What `batch`'s logits are divided by: `temperature` when given, else the batch's
    ``temperature`` row values — one float when they agree (1.0 for a batch without them),
    else the [B] tensor."""
    if temperature is not None:
        return float(temperature)
    rows = batch.get("temperature")
    if rows is None or rows.numel() == 0:
        return 1.0
    distinct = set(rows.tolist())
    return float(distinct.pop()) if len(distinct) == 1 else rows


def _per_target(temperature: float | torch.Tensor, found: Targets) -> Temperature:
    if isinstance(temperature, float):
        return temperature
    return temperature.to(found.rows.device)[found.rows]


def target_logprobs(
    model: Any, batch: Batch, *, temperature: float | None = None, top1: bool = False
) -> TargetLogprobs:
    """log π(y_t | h_t) at every target of `batch`, in row-major order (and, with `top1`,
    whether each target is the model's most likely token); `temperature` None: the
    batch's own (see ``batch_temperature``)."""
    input_ids, attention, found = _targets(batch, _device(model))
    temperatures = _per_target(batch_temperature(batch, temperature), found)
    head = _chunkable_head(model)
    if head is None:
        logits = _full_logits(model, input_ids, attention, found, temperatures)
        best = (logits.argmax(-1) == found.tokens) if top1 else None
        logprobs = token_logprobs(logits, found.tokens)
        return TargetLogprobs(logprobs, found.tokens, found.rows, best)
    softcap, scale = head
    states = _states(model, input_ids, attention, found)
    head_layer = model.get_output_embeddings()
    extras = ("is_top1",) if top1 else ()

    def chunked(
        where: torch.Tensor | None, value: float
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        picked = states if where is None else states[where]
        tokens = found.tokens if where is None else found.tokens[where]
        logprobs, _, _, _, is_top1 = ChunkedLogProbFunction.apply(
            picked, head_layer.weight, head_layer.bias, tokens, value, VOCAB_TILE, softcap,
            scale, extras,
        )  # fmt: skip
        return logprobs.float(), is_top1

    if isinstance(temperatures, float):
        logprobs, is_top1 = chunked(None, temperatures)
        return TargetLogprobs(logprobs, found.tokens, found.rows, is_top1)
    # One head pass per temperature, put back in the targets' order.
    pieces, tops, order = [], [], []
    for value in sorted(set(temperatures.tolist())):
        where = (temperatures == value).nonzero(as_tuple=True)[0]
        piece, top = chunked(where, float(value))
        pieces.append(piece)
        tops.append(top)
        order.append(where)
    inverse = torch.empty_like(found.tokens)
    positions = torch.cat(order)
    inverse[positions] = torch.arange(positions.numel(), device=positions.device)
    logprobs = torch.cat(pieces)[inverse]
    is_top1 = torch.cat([t for t in tops if t is not None])[inverse] if top1 else None
    return TargetLogprobs(logprobs, found.tokens, found.rows, is_top1)


def target_logits(model: Any, batch: Batch, *, temperature: float | None = None) -> TargetLogits:
    """The next-token logits at every target of `batch`, in row-major order, divided by
    `temperature` (None: the batch's own, see ``batch_temperature``)."""
    input_ids, attention, found = _targets(batch, _device(model))
    temperatures = _per_target(batch_temperature(batch, temperature), found)
    head = _chunkable_head(model)
    if head is None or head != (None, 1.0):
        logits = _full_logits(model, input_ids, attention, found, temperatures)
    else:
        states = _states(model, input_ids, attention, found)
        logits = _tempered(model.get_output_embeddings()(states).float(), temperatures)
    return TargetLogits(logits=logits, targets=found.tokens, rows=found.rows)


def _tempered(logits: torch.Tensor, temperature: Temperature) -> torch.Tensor:
    if isinstance(temperature, float):
        return logits / temperature if temperature != 1.0 else logits
    return logits / temperature.to(logits.dtype)[:, None]


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per row, without materializing the log-softmax."""
    chosen = logits.gather(1, targets[:, None])[:, 0]
    return chosen - torch.logsumexp(logits, dim=-1)


def flat_targets(batch: Batch, values: torch.Tensor) -> torch.Tensor:
    """A [batch, time] per-token tensor at the targets, in the same order as the logits."""
    return values[:, 1:][batch["target_mask"][:, 1:]]


def per_row_mean(values: torch.Tensor, rows: torch.Tensor, row_count: int) -> torch.Tensor:
    """The mean of `values` per batch row ([row_count]; 0 for a row without targets)."""
    zeros = torch.zeros(row_count, dtype=values.dtype, device=values.device)
    sums = zeros.index_add(0, rows, values)
    counts = zeros.index_add(0, rows, torch.ones_like(values))
    return sums / counts.clamp(min=1.0)


def _states(
    model: Any, input_ids: torch.Tensor, attention: torch.Tensor, found: Targets
) -> torch.Tensor:
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention, use_cache=False)
    states: torch.Tensor = hidden.last_hidden_state[:, :-1][found.predicts]
    return states


def _full_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention: torch.Tensor,
    found: Targets,
    temperature: Temperature,
) -> torch.Tensor:
    full = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
    logits: torch.Tensor = full[:, :-1][found.predicts].float()
    return _tempered(logits, temperature)


def _chunkable_head(model: Any) -> tuple[float | None, float] | None:
    """(soft-cap, logit scale) when the model's head is a linear layer followed by at most
    those two, which the chunked head applies itself; None otherwise."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "base_model"):
        return None
    if model.get_output_embeddings() is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if any(getattr(text, name, None) not in (None, 1.0) for name in _UNSUPPORTED_HEAD_EXTRAS):
        return None
    softcap = getattr(text, "final_logit_softcapping", None)
    scale = getattr(text, "logit_scale", None)
    return softcap, 1.0 if scale is None else float(scale)


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device  # type: ignore[no-any-return]


__all__ = [
    "VOCAB_TILE",
    "TargetLogits",
    "TargetLogprobs",
    "batch_temperature",
    "flat_targets",
    "per_row_mean",
    "target_logits",
    "target_logprobs",
    "token_logprobs",
]

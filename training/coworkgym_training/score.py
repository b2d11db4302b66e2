"""How surprising a trajectory's agent tokens are to a student model: NLL and RSR.

For the scored positions M of a trajectory (its agent tokens; the first token of the
sequence has no context and is never scored), with y_t the token and h_t what precedes it:

    NLL = -(1/|M|) · Σ_{t∈M} log π_θ(y_t | h_t)
    RSR = Σ_{t∈M} min(r_t, r_max) / (|M| · NLL)

r_t is the rank of y_t under the student's next-token distribution: 1 when y_t is the
student's most likely token, 1 + the number of vocabulary entries with a strictly higher
logit otherwise (ties share the better rank). r_max clips the rank so that a few tokens
the student finds absurd do not dominate the sum (default ``DEFAULT_RANK_CLIP``). A
trajectory the student predicts perfectly (NLL = 0) has RSR = +inf.

Only the logits at agent positions are computed (``logits_to_keep`` with their indices)
where the model supports it, so memory grows with the agent tokens, not the whole context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import torch

from .tokenize import TokenizedTrajectory

# The paper does not state its r_max; 100 keeps ranks within "the student would consider
# it" while one absurd token (rank in the thousands) weighs as much as a few bad ones.
DEFAULT_RANK_CLIP: Final = 100


@dataclass(frozen=True)
class TrajectoryScore:
    nll: float
    rsr: float
    scored_tokens: int  # |M|
    clipped_rank_sum: int
    mean_rank: float  # unclipped, for the report


def scored_positions(tokenized: TokenizedTrajectory) -> list[int]:
    return [t for t, on in enumerate(tokenized.agent_mask) if on and t > 0]


@torch.inference_mode()
def score_trajectory(
    model: Any,
    tokenized: TokenizedTrajectory,
    *,
    rank_clip: int = DEFAULT_RANK_CLIP,
    device: torch.device | str = "cpu",
) -> TrajectoryScore | None:
    """NLL and RSR of `tokenized` under `model` (a causal LM); None when it has no agent
    token to score."""
    if rank_clip < 1:
        raise ValueError(f"rank_clip must be at least 1, not {rank_clip}")
    positions = scored_positions(tokenized)
    if not positions:
        return None
    ids = torch.tensor([tokenized.input_ids], device=device)
    predicting = torch.tensor([t - 1 for t in positions], device=device)
    targets = ids[0, positions]
    logits = _logits_at(model, ids, predicting).float()
    log_probs = torch.log_softmax(logits, dim=-1)
    token_log_probs = log_probs.gather(1, targets[:, None])[:, 0]
    target_logits = logits.gather(1, targets[:, None])
    ranks = 1 + (logits > target_logits).sum(dim=-1)
    count = len(positions)
    nll = float(-token_log_probs.mean())
    clipped = int(ranks.clamp(max=rank_clip).sum())
    rsr = clipped / (count * nll) if nll > 0 else math.inf
    return TrajectoryScore(
        nll=nll,
        rsr=rsr,
        scored_tokens=count,
        clipped_rank_sum=clipped,
        mean_rank=float(ranks.float().mean()),
    )


def _logits_at(model: Any, ids: torch.Tensor, predicting: torch.Tensor) -> torch.Tensor:
    """The logits that predict the next token at each of `predicting`'s positions."""
    try:
        output = model(input_ids=ids, logits_to_keep=predicting)
        logits: torch.Tensor = output.logits[0]
        if logits.shape[0] == predicting.shape[0]:
            return logits
    except TypeError:  # a model without logits_to_keep
        pass
    full: torch.Tensor = model(input_ids=ids).logits[0]
    return full[predicting]


__all__ = ["DEFAULT_RANK_CLIP", "TrajectoryScore", "score_trajectory", "scored_positions"]

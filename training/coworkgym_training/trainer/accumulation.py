"""One optimizer step over several workers and micro-batches, normalised as one batch.

Every objective's loss is a mean over *units* of its batch: target tokens (SFT, OPD, GRPO
with ``loss_aggregation: token``) or rows (GRPO with ``sequence``). A worker's share of the
step is split into micro-batches, and what the step must minimise is the mean over all the
step's units, on every worker together:

    L = (1/N) · Σ_{worker w} Σ_{micro-batch m} n_{w,m} · loss_{w,m}

with n_{w,m} the units of micro-batch m on worker w and N their sum over the whole step
(all-reduced before the first backward: the counts are known from the batches alone).
Gradient averaging (ours for ``replicated``, FSDP's reduce-scatter) divides the workers'
summed gradients by the world size W, so each micro-batch back-propagates

    loss_{w,m} · n_{w,m} · W / N          (``loss_scale``)

and the averaged gradient is ∇L exactly: a worker with more tokens weighs more, as it
would in one batch on one worker. A per-worker mean averaged over workers would instead
give each worker's tokens the weight 1/(W · n_w).

FSDP runs collectives in every forward and backward, so every worker must run the same
number of micro-batches: ``micro_chunks`` pads a smaller share with empty chunks, which
the worker runs on a stand-in example with weight 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..objectives import ObjectiveConfig
from ..objectives.batching import Batch
from ..objectives.config import ObjectiveName


def loss_units(objective: ObjectiveName, options: ObjectiveConfig, batch: Batch) -> int:
    """What the objective's loss on `batch` is a mean over: its rows for GRPO's
    ``sequence`` aggregation, else its target tokens (the targets the objectives score:
    ``target_mask`` beyond the first position)."""
    if objective == "grpo" and options.grpo.loss_aggregation == "sequence":
        return int(batch["input_ids"].shape[0])
    return int(batch["target_mask"][:, 1:].sum().item())


def loss_scale(units: float, total_units: float, world: int) -> float:
    """The factor a micro-batch's mean loss is multiplied by before backward, so that
    averaging gradients over `world` workers gives the mean over `total_units`."""
    return units * world / max(total_units, 1.0)


def micro_chunks[T](share: Sequence[T], size: int | None, largest_share: int) -> list[list[T]]:
    """`share` in consecutive chunks of `size` (one chunk when None), padded with empty
    chunks to as many as the largest share on any worker needs."""
    if size is None or size >= largest_share:
        return [list(share)]
    count = math.ceil(largest_share / size)
    chunks = [list(share[i : i + size]) for i in range(0, len(share), size)]
    return chunks + [[] for _ in range(count - len(chunks))]


__all__ = ["loss_scale", "loss_units", "micro_chunks"]

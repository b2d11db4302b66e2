"""Examples → padded tensors.

Sequences are right-padded with ``pad_id`` (attention 0). Per-token fields are laid out
[batch, time]; ``target_mask[b, t]`` is true where token t of row b is a training target.
The losses score targets through a flat view: position t is predicted from the hidden state
at t − 1, and the targets are taken in row-major order, which is also the order of the
teacher top-k rows (``teacher_topk_ids`` / ``teacher_topk_logprobs``: [targets, k]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .examples import TrainExample

Batch = dict[str, torch.Tensor]


def collate(examples: Sequence[TrainExample], pad_id: int) -> Batch:
    """Tensors for one batch: input_ids, attention_mask, target_mask, behaviour_logprobs
    (NaN where not recorded), advantages (GRPO, 0 where absent), rewards, temperature (per
    row: what its logits are divided by), and the teacher top-k when every example carries
    it."""
    if not examples:
        raise ValueError("collate needs at least one example")
    width = max(len(e) for e in examples)
    rows = len(examples)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    targets = torch.zeros((rows, width), dtype=torch.bool)
    behaviour = torch.full((rows, width), math.nan, dtype=torch.float32)
    for row, example in enumerate(examples):
        length = len(example)
        input_ids[row, :length] = torch.tensor(example.input_ids, dtype=torch.long)
        attention[row, :length] = 1
        targets[row, :length] = torch.tensor(example.agent_mask, dtype=torch.bool)
        behaviour[row, :length] = torch.tensor(
            [math.nan if lp is None else lp for lp in example.behaviour_logprobs],
            dtype=torch.float32,
        )
    targets[:, 0] = False
    batch: Batch = {
        "input_ids": input_ids,
        "attention_mask": attention,
        "target_mask": targets,
        "behaviour_logprobs": behaviour,
        "advantages": torch.tensor([e.advantage or 0.0 for e in examples], dtype=torch.float32),
        "rewards": torch.tensor(
            [math.nan if e.reward is None else e.reward for e in examples], dtype=torch.float32
        ),
        "temperature": torch.tensor([e.temperature for e in examples], dtype=torch.float64),
    }
    if all(e.teacher_topk_ids is not None for e in examples):
        batch["teacher_topk_ids"] = torch.tensor(
            [row for e in examples for row in e.teacher_topk_ids or []], dtype=torch.long
        )
        batch["teacher_topk_logprobs"] = torch.tensor(
            [row for e in examples for row in e.teacher_topk_logprobs or []],
            dtype=torch.float32,
        )
    return batch


def target_count(batch: Batch) -> int:
    return int(batch["target_mask"].sum())


__all__ = ["Batch", "collate", "target_count"]

"""The run's data: trajectories → examples (the objective's own preparation), and which
examples each worker trains on at each step.

The global batch of step s is a pure function of (seed, s): positions ``(s−1)·B … s·B−1``
of a sequence of seeded permutations of the examples, one permutation per pass. Worker r of
W takes every W-th of them, starting at r. So a run resumed at step s sees exactly the
batches it would have seen, whoever restarted it, and no data-loader state needs saving.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from coworkgym.rollout.reading import iter_trajectories

from ..objectives import PrepReport, TrainExample, examples_from_trajectories
from .config import TrainConfig


@dataclass(frozen=True)
class RunData:
    examples: list[TrainExample]
    report: PrepReport
    rewards: dict[str, float]  # trajectory id → its trusted reward (for the reward metric)

    @property
    def groups(self) -> int:
        """Environment groups trained on (for GRPO: those with a learning signal)."""
        if self.report.objective == "grpo":
            return self.report.groups_kept
        return len({e.group_id for e in self.examples})


def load_data(
    config: TrainConfig, data: Sequence[Path], tokenizer: PreTrainedTokenizerBase
) -> RunData:
    trajectories = list(iter_trajectories(data))
    rewards = {t.id: t.reward for t in trajectories if t.reward is not None}
    examples, report = examples_from_trajectories(
        trajectories, tokenizer, config.objective, config.objective_options
    )
    return RunData(examples=examples, report=report, rewards=rewards)


@lru_cache(maxsize=4)
def _permutation(count: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(count))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return tuple(order)


def step_batch(count: int, step: int, batch_size: int, seed: int) -> list[int]:
    """The example indices of step `step` (1-based), over all workers."""
    if count < 1:
        raise ValueError("no examples to draw a batch from")
    indices = []
    for position in range((step - 1) * batch_size, step * batch_size):
        epoch, offset = divmod(position, count)
        indices.append(_permutation(count, seed, epoch)[offset])
    return indices


def worker_share(indices: Sequence[int], rank: int, world: int) -> list[int]:
    return list(indices[rank::world])


__all__ = ["RunData", "load_data", "step_batch", "worker_share"]

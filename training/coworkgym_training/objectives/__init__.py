"""The training objectives: SFT, GRPO and on-policy distillation (OPD), on agent tokens.

The trainer's path::

    examples, report = examples_from_trajectories(trajectories, tokenizer, "grpo", config)
    objective = build_objective("grpo", config)
    objective.prepare(model)                    # before the optimizer: MoE router frozen
    batch = collate(examples[:8], pad_id=tokenizer.pad_token_id)
    loss, metrics = objective.loss(model, batch, reference_model=ref)

When GRPO keeps no example, ``no_usable_group_reason(report)`` says why in words a user can
act on (singleton or zero-variance groups, and how to roll out usable ones).

``docs/training.md`` gives the definitions (reward, advantages, clipping, KL).
"""

from __future__ import annotations

from .base import Metrics, Objective, ObjectiveError
from .batching import Batch, collate, target_count
from .config import (
    DEFAULT_TEMPERATURE,
    OBJECTIVES,
    GRPOSettings,
    ObjectiveConfig,
    ObjectiveName,
    OPDSettings,
    RewardSettings,
)
from .examples import (
    PrepReport,
    TrainExample,
    examples_from_trajectories,
    group_key,
    no_usable_group_reason,
    sampling_temperature,
)
from .grpo import GRPOObjective
from .moe import freeze_router, router_modules
from .opd import OPDObjective, attach_teacher_topk
from .reward import geometric_reward, group_advantages, sft_drop_reason, trajectory_reward
from .sft import SFTObjective


def build_objective(name: ObjectiveName, config: ObjectiveConfig | None = None) -> Objective:
    """The objective called `name` ("sft", "grpo" or "opd") with `config`."""
    config = config or ObjectiveConfig()
    if name == "sft":
        return SFTObjective(config)
    if name == "grpo":
        return GRPOObjective(config)
    if name == "opd":
        return OPDObjective(config)
    raise ObjectiveError(f"unknown objective {name!r}: choose one of {', '.join(OBJECTIVES)}")


__all__ = [
    "DEFAULT_TEMPERATURE",
    "OBJECTIVES",
    "Batch",
    "GRPOObjective",
    "GRPOSettings",
    "Metrics",
    "OPDObjective",
    "OPDSettings",
    "Objective",
    "ObjectiveConfig",
    "ObjectiveError",
    "ObjectiveName",
    "PrepReport",
    "RewardSettings",
    "SFTObjective",
    "TrainExample",
    "attach_teacher_topk",
    "build_objective",
    "collate",
    "examples_from_trajectories",
    "freeze_router",
    "geometric_reward",
    "group_advantages",
    "group_key",
    "no_usable_group_reason",
    "router_modules",
    "sampling_temperature",
    "sft_drop_reason",
    "target_count",
    "trajectory_reward",
]

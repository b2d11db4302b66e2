"""What every objective offers the trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .config import ObjectiveName

if TYPE_CHECKING:  # batching imports examples, which raises ObjectiveError from here
    import torch

    from .batching import Batch

Metrics = dict[str, float]


class Objective(Protocol):
    """One training objective.

    ``prepare(model)`` is called once, before the optimizer is built: it freezes what the
    objective does not train (the MoE router for GRPO) and returns those parameters' names.
    ``loss(model, batch, ...)`` returns a scalar to back-propagate and metrics (plain
    floats: loss, target tokens, and the objective's own). ``needs_reference`` /
    ``needs_teacher`` say which extra model ``loss`` wants; a batch that carries the
    teacher's top-k (``teacher_topk_ids``) needs no teacher model."""

    @property
    def name(self) -> ObjectiveName: ...

    @property
    def needs_reference(self) -> bool: ...

    @property
    def needs_teacher(self) -> bool: ...

    def prepare(self, model: torch.nn.Module) -> list[str]: ...

    def loss(
        self,
        model: Any,
        batch: Batch,
        *,
        reference_model: Any | None = None,
        teacher_model: Any | None = None,
    ) -> tuple[torch.Tensor, Metrics]: ...


class ObjectiveError(ValueError):
    """An objective called without what it needs (a teacher, a reference, a field)."""


__all__ = ["Metrics", "Objective", "ObjectiveError"]

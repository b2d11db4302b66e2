"""What the workers agree on: gradient averaging for the replicated strategy, sums and
flags reduced over the group, and FSDP2 sharding on GPUs.

*Replicated* keeps the model unwrapped on every worker and averages gradients with one
all-reduce per bucket after backward. It is DDP's arithmetic without DDP's wrapper, so the
objectives see the Hugging Face model itself (they project only target positions through
its head) and an MoE layer whose experts got no tokens on one worker needs no special
handling (its missing gradients count as zeros). *FSDP* shards each decoder layer with
``torch.distributed.fsdp.fully_shard`` (bf16 compute on GPUs) and makes the root an
``ObjectiveForward``: a module whose forward *is* the objective's loss on the wrapped
Hugging Face model. FSDP's root hooks then gather the root's parameters (embeddings, final
norm, LM head) around the whole loss, and the objective sees the model itself, so it
projects only the target states through the head in vocabulary tiles, as on the replicated
path, instead of running the model's forward to [batch, time, vocab] logits. FSDP also runs
on CPU with gloo, in float32, which is how the tests check it against the replicated
strategy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

BUCKET_ELEMENTS = 25_000_000  # ~100 MB of float32 per all-reduce


def initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if initialized() else 1


def average_gradients(parameters: Sequence[nn.Parameter]) -> None:
    world = world_size()
    if world == 1:
        return
    for param in parameters:
        if param.grad is None:  # unused here (an idle expert); the others may have one
            param.grad = torch.zeros_like(param)
    bucket: list[torch.Tensor] = []
    size = 0
    for param in parameters:
        grad = param.grad
        assert grad is not None
        bucket.append(grad)
        size += grad.numel()
        if size >= BUCKET_ELEMENTS:
            _all_reduce_mean(bucket, world)
            bucket, size = [], 0
    if bucket:
        _all_reduce_mean(bucket, world)


def _all_reduce_mean(grads: list[torch.Tensor], world: int) -> None:
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for grad in grads:
        grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
        offset += grad.numel()


def reduce_sums(values: Iterable[float], device: torch.device) -> list[float]:
    """Element-wise sums over the workers (the values themselves with one worker)."""
    tensor = torch.tensor(list(values), dtype=torch.float64, device=device)
    if initialized():
        dist.all_reduce(tensor)
    return [float(v) for v in tensor.tolist()]


def all_agree(flag: bool, device: torch.device) -> bool:
    """True only when `flag` is true on every worker."""
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    if initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN)
    return bool(tensor.item())


def barrier() -> None:
    if initialized():
        dist.barrier()


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks FSDP shards one by one (Hugging Face's ``_no_split_modules``)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


class ObjectiveForward(nn.Module):
    """The FSDP root: ``forward(batch, extra)`` returns ``objective.loss(model, batch,
    **extra)``. Parameters the decoder layers do not own (embeddings, final norm, LM head)
    belong to this root, and FSDP gathers them before this forward and reduces their
    gradients after backward, so the objective may use the head's weight directly (the
    chunked log-prob head) rather than only through the model's own forward."""

    def __init__(self, model: nn.Module, objective: Any) -> None:
        super().__init__()
        self.model = model
        self.objective = objective  # not a module: holds no parameters

    def forward(self, batch: Any, extra: dict[str, Any]) -> Any:
        return self.objective.loss(self.model, batch, **extra)


def shard_fsdp(model: nn.Module, objective: Any, bf16: bool) -> ObjectiveForward:
    """Shard `model` in place under an ``ObjectiveForward`` root and return the root (the
    model keeps its own attribute names, so checkpoints and the optimizer use `model`).
    With `bf16`, compute in bfloat16 and reduce gradients in float32 (the weights and
    optimizer stay float32). The root does not cast its inputs: the batch's float fields
    (behaviour log-probs, advantages) stay float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    param_dtype = torch.bfloat16 if bf16 else None
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    root = ObjectiveForward(model, objective)
    root_policy = MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=torch.float32, cast_forward_inputs=False
    )
    fully_shard(root, mp_policy=root_policy)
    return root


__all__ = [
    "ObjectiveForward",
    "all_agree",
    "average_gradients",
    "barrier",
    "decoder_layers",
    "initialized",
    "reduce_sums",
    "shard_fsdp",
    "world_size",
]

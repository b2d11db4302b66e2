"""What the workers agree on: gradient averaging for the replicated strategy, sums and
flags reduced over the group, and FSDP2 sharding on GPUs.

*Replicated* keeps the model unwrapped on every worker and averages gradients with one
all-reduce per bucket after backward. It is DDP's arithmetic without DDP's wrapper, so the
objectives see the Hugging Face model itself (they project only target positions through
its head) and an MoE layer whose experts got no tokens on one worker needs no special
handling (its missing gradients count as zeros). *FSDP* shards each decoder layer and
the root with ``torch.distributed.fsdp.fully_shard`` (bf16 compute on GPUs); the
objectives then run the model's own forward (see ``FullForward``) so FSDP's hooks gather
and free the shards. FSDP also runs on CPU with gloo, in float32, which is how the tests
check it against the replicated strategy.
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


def shard_fsdp(model: nn.Module, bf16: bool) -> nn.Module:
    """Shard in place; with `bf16`, compute in bfloat16 and reduce gradients in float32
    (the weights and optimizer stay float32)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32
    )
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


class FullForward(nn.Module):
    """The model behind a plain ``forward``: an objective given this calls the model's own
    forward (which FSDP's root hooks need) instead of projecting hidden states itself."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)


__all__ = [
    "FullForward",
    "all_agree",
    "average_gradients",
    "barrier",
    "decoder_layers",
    "initialized",
    "reduce_sums",
    "shard_fsdp",
    "world_size",
]

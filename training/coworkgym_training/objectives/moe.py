"""Freezing a mixture-of-experts model's router.

The paper trains MoE students with GRPO with the router weights frozen: the policy
gradient moves the experts, not which experts each token is sent to. Routers are found by
structure, not by one family's parameter names: modules whose class is a router
(``Qwen3MoeTopKRouter``, ``MixtralTopKRouter``, …), the scalar shared-expert gate of
Qwen2-MoE-style blocks, and, for older layouts, a ``gate``/``router`` linear layer with one
output per expert.
"""

from __future__ import annotations

from typing import Any

from torch import nn

_ROUTER_NAMES = ("gate", "router")


def router_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    experts = _expert_count(model)
    found: list[tuple[str, nn.Module]] = []
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        is_router_class = type(module).__name__.endswith("Router")
        is_shared_gate = leaf == "shared_expert_gate"  # Qwen2-MoE: weighs the shared expert
        is_expert_linear = (
            leaf in _ROUTER_NAMES
            and isinstance(module, nn.Linear)
            and experts is not None
            and module.out_features == experts
        )
        if is_router_class or is_shared_gate or is_expert_linear:
            found.append((name, module))
    return found


def freeze_router(model: nn.Module) -> list[str]:
    """Stop gradients into every router parameter; returns their names (empty for a dense
    model). Call before building the optimizer."""
    frozen: list[str] = []
    for name, module in router_modules(model):
        for parameter_name, parameter in module.named_parameters():
            parameter.requires_grad_(False)
            frozen.append(f"{name}.{parameter_name}")
    return frozen


def _expert_count(model: nn.Module) -> int | None:
    config: Any = getattr(model, "config", None)
    for attribute in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(config, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


__all__ = ["freeze_router", "router_modules"]

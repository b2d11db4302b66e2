"""`cowork-gym train`'s flags folded over a config file into TrainConfig's fields: a flag
given wins, a flag left out keeps the file's value (or TrainConfig's default)."""

from __future__ import annotations

from typing import Any


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in values.items() if v is not None}


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if hasattr(value, "__fspath__") else value


def train_fields(
    base: dict[str, Any],
    flags: dict[str, Any],
    *,
    hyperparameters: dict[str, Any],
    selection: dict[str, Any] | None,
    objective_options: dict[str, Any] | None,
) -> dict[str, Any]:
    fields = {**base, **_given(flags)}
    chosen = _given(hyperparameters)
    if chosen:
        fields["hyperparameters"] = {**(base.get("hyperparameters") or {}), **chosen}
    if selection is not None:
        fields["selection"] = {**(base.get("selection") or {}), **_given(selection)}
    if objective_options is not None:
        fields["objective_options"] = objective_options
    return fields


__all__ = ["train_fields"]

"""The conditions every kind writes: one entry per type, merged the Kubernetes way."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from coworkgym_operator.core.api import Condition

Cond = tuple[str, str, str]  # status, reason, message


def merge(
    previous: list[Condition],
    wanted: Mapping[Any, Cond],  # condition type (a str or a StrEnum) → its values
    generation: int | None,
    now: datetime | None = None,
) -> list[Condition]:
    """Keep lastTransitionTime unless the status flips (the Kubernetes convention)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = {c.type: c for c in previous}
    merged = []
    for kind, (status, reason, message) in wanted.items():
        before = old.get(kind)
        changed = before is None or before.status != status
        merged.append(
            Condition(
                type=kind,
                status=status,
                reason=reason,
                message=message[:1024],
                last_transition_time=stamp if changed else before.last_transition_time,  # type: ignore[union-attr]
                observed_generation=generation,
            )
        )
    return merged

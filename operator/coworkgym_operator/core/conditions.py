"""The conditions every kind writes: one entry per type, merged the Kubernetes way; and
the one-word phase derived from them by a chain of checks (the first that holds decides),
each check a (type, status[, reason]) of one condition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


Check = tuple[str, str] | tuple[str, str, str]  # condition type, status[, reason]


def holds(by_type: Mapping[str, Condition], check: Check) -> bool:
    """Whether the condition of the check's type has its status (and reason, if given)."""
    kind, status, *reason = check
    found = by_type.get(kind)
    if found is None or found.status != status:
        return False
    return not reason or found.reason == reason[0]


@dataclass(frozen=True)
class PhaseChain[P]:
    """A kind's one-word phase, derived from its conditions: the phase of the first check
    that holds, ``otherwise`` when none does. The checks are the kind's own (its
    ``reconcile/conditions.py``); reading them is the same for every kind."""

    checks: Sequence[tuple[P, Check]]
    otherwise: P

    def derive(self, conditions: Sequence[Condition]) -> P:
        by_type = {c.type: c for c in conditions}
        found = (phase for phase, check in self.checks if holds(by_type, check))
        return next(found, self.otherwise)

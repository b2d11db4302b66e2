"""What every filter rule shares: the verdicts a check returns and the rule's shape.

A check returns ``None`` (keep), a ``Drop`` (a stable ``reason`` code the funnel counts and
a ``detail`` for a person) or a ``Note``: the trajectory is kept by this rule, but part of
what the rule checks could not be checked here (no package for its digest, no stored final
workspace); the funnel counts notes per rule, so a run shows what it did not verify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from ..trajectory import Trajectory
from .settings import RuleName


@dataclass(frozen=True)
class Drop:
    reason: str
    detail: str


@dataclass(frozen=True)
class Note:
    """A check the rule skipped for this trajectory, by a stable code (``no_package``)."""

    code: str


class Rule(Protocol):
    name: ClassVar[RuleName]
    concern: ClassVar[str]

    def check(self, trajectory: Trajectory) -> Drop | Note | None: ...


__all__ = ["Drop", "Note", "Rule"]

"""What a kind's reconcile decides, in the part every kind shares: the status to write,
the children to create and delete, the events to post after the write, and the phase
change. A kind's plan adds what its handlers record as metrics. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Manifest = dict[str, Any]


@dataclass
class ReconcilePlan:
    status: dict[str, Any]
    create: list[Manifest] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)  # kind, name
    events: list[tuple[str, str, str]] = field(default_factory=list)  # type, reason, message
    transition: tuple[str, str] | None = None  # phase before → after, when it changed
    finished: str | None = None  # the outcome (succeeded, failed, ...), when reached now

"""What a kind's reconcile reads and decides, in the part every kind shares. It reads the
object, its spec, what was observed and the settings (handed to its steps as one); it
decides the status to write, the children to create and delete, the events to post after
the write, and the phase change. A kind's plan adds what its handlers record as metrics.
Pure: no I/O."""

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


@dataclass(frozen=True)
class ReconcileInputs[Spec, Observed, Settings]:
    """What one reconcile reads and never changes, handed to each of its steps as one
    instead of one parameter each: the object as the controller read it, its spec (parsed),
    what the controller observed, the settings."""

    manifest: Manifest
    spec: Spec
    observed: Observed
    settings: Settings

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


__all__ = ["Manifest", "ReconcileInputs", "ReconcilePlan"]

"""The role interface the loop drives. Builder and Verifier Constructor are pluggable
backends (procedural here; LLM agents behind the same interface); the Issue Detector is
``coworkgym.detector`` for every backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..detector.defects import Defect
from ..package.assemble import BuilderOutput, VerifierOutput
from ..spec import EnvironmentSpec


class RoleError(Exception):
    """A role could not produce its output. ``retryable`` decides whether the loop may try
    the stage again within its budget."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass
class RoleRequest:
    name: str
    spec: EnvironmentSpec
    iteration: int
    feedback: Sequence[Defect] = field(default_factory=list)  # defects routed to this role


class Builder(Protocol):
    def build(self, request: RoleRequest, previous: BuilderOutput | None) -> BuilderOutput: ...


class VerifierConstructor(Protocol):
    def construct(
        self, request: RoleRequest, built: BuilderOutput, previous: VerifierOutput | None
    ) -> VerifierOutput: ...

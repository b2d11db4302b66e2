"""Executing a package locally: materialize s0, apply user turns, run the reference solution
and the verifier in sandboxes."""

from __future__ import annotations

from .local import LocalRuntime, VerifyOutcome
from .workspace import WorkspaceLayout, apply_patch, materialize, snapshot

__all__ = [
    "LocalRuntime",
    "VerifyOutcome",
    "WorkspaceLayout",
    "apply_patch",
    "materialize",
    "snapshot",
]

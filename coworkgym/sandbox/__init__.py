"""Sandboxes that run role, oracle and verifier commands with only their declared mounts.

The local backend is bubblewrap (``bwrap``): no network, its own PID/mount/IPC/UTS
namespaces, an unprivileged user, time and memory limits. Kubernetes Jobs are the cluster
backend (the operator builds them from the same mount declarations).
"""

from __future__ import annotations

from .base import Limits, Mount, Sandbox, SandboxResult, SandboxUnavailable
from .bwrap import BubblewrapSandbox, default_sandbox
from .overlay import RootOverlay

__all__ = [
    "BubblewrapSandbox",
    "Limits",
    "Mount",
    "RootOverlay",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "default_sandbox",
]

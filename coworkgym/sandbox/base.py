"""What every sandbox backend accepts and returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SandboxUnavailable(RuntimeError):
    """The sandbox tool is missing or unusable here; the message says how to install it."""


@dataclass(frozen=True)
class Mount:
    """A host directory (or file) visible at ``target``; read-only unless ``writable``."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 120.0
    memory_mb: int = 1024
    max_pids: int = 256
    max_output_bytes: int = 64_000


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    cpu_s: float | None = None  # measured by the backend when it can (cgroup accounting)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    def describe(self) -> str:
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        if self.oom_killed:
            return "killed: memory limit exceeded"
        tail = (self.stderr or self.stdout)[-400:].strip()
        return f"exit {self.exit_code}" + (f": {tail}" if tail else "")


class Sandbox(Protocol):
    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = ...,
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
    ) -> SandboxResult: ...

"""What every sandbox backend accepts and returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

DISK_LIMIT_MESSAGE = (
    "killed: disk limit exceeded (the workspace holds too much or too many files; delete some)"
)


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
    # What the run may leave on the host's disk, in its writable mounts (None: no limit).
    # Each file is capped by RLIMIT_FSIZE (a write past it fails with EFBIG, and a sparse
    # file cannot claim more either); the mounts' total is watched while the run lasts and
    # the run is killed once it passes (a watch, so a fast writer may overshoot briefly).
    max_disk_mb: int | None = None
    max_files: int | None = None  # files in the writable mounts, watched the same way


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    cpu_s: float | None = None  # measured by the backend when it can (cgroup accounting)
    disk_exceeded: bool = False  # killed: the writable mounts passed Limits.max_disk_mb
    networked: bool = False  # the run had the machine's network (else none at all)

    @property
    def ok(self) -> bool:
        return (
            self.exit_code == 0
            and not self.timed_out
            and not self.oom_killed
            and not self.disk_exceeded
        )

    def describe(self) -> str:
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        if self.oom_killed:
            return "killed: memory limit exceeded"
        if self.disk_exceeded:
            return DISK_LIMIT_MESSAGE
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

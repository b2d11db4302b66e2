"""Memory and PID limits through a per-run cgroup (v1 controllers or the v2 unified tree).

bubblewrap has no resource limits of its own; a cgroup also lets us kill every process a
run left behind, and freeze it while its disk use is measured. Where cgroups are not
writable we fall back to RLIMIT_AS (weaker: it counts virtual memory) and say so in the log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


class RunCgroup:
    def __init__(self, memory_mb: int, max_pids: int) -> None:
        self.name = f"coworkgym-{uuid.uuid4().hex[:12]}"
        self.dirs: list[Path] = []
        self.memory_dir: Path | None = None
        self.memory_bytes = memory_mb * 1024 * 1024
        self.cpu_file: Path | None = None
        self.freeze_file: Path | None = None  # v1 freezer.state or v2 cgroup.freeze
        try:
            self._create(max_pids)
        except OSError as exc:
            self.close()
            log.warning("cgroup limits unavailable, falling back to RLIMIT_AS", error=str(exc))

    @property
    def active(self) -> bool:
        return bool(self.dirs)

    def _create(self, max_pids: int) -> None:
        v1_memory = CGROUP_ROOT / "memory"
        if (v1_memory / "memory.limit_in_bytes").exists():
            memory = v1_memory / self.name
            memory.mkdir()
            self.dirs.append(memory)
            (memory / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
            with contextlib.suppress(OSError):  # swap accounting may be off
                (memory / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))
            self.memory_dir = memory
            pids = CGROUP_ROOT / "pids" / self.name
            pids.mkdir()
            self.dirs.append(pids)
            (pids / "pids.max").write_text(str(max_pids))
            cpuacct = CGROUP_ROOT / "cpuacct" / self.name
            if cpuacct.parent.is_dir():  # CPU time of the whole run, grandchildren included
                cpuacct.mkdir()
                self.dirs.append(cpuacct)
                self.cpu_file = cpuacct / "cpuacct.usage"
            freezer = CGROUP_ROOT / "freezer" / self.name
            if freezer.parent.is_dir():
                freezer.mkdir()
                self.dirs.append(freezer)
                self.freeze_file = freezer / "freezer.state"
        elif (CGROUP_ROOT / "cgroup.controllers").exists():
            unified = CGROUP_ROOT / self.name
            unified.mkdir()
            self.dirs.append(unified)
            (unified / "memory.max").write_text(str(self.memory_bytes))
            (unified / "pids.max").write_text(str(max_pids))
            self.memory_dir = unified
            self.cpu_file = unified / "cpu.stat"
            if (unified / "cgroup.freeze").exists():
                self.freeze_file = unified / "cgroup.freeze"
        else:
            raise OSError("no writable cgroup hierarchy")

    def enter(self) -> None:
        """Called in the child between fork and exec: join every controller."""
        pid = str(os.getpid())
        for d in self.dirs:
            (d / "cgroup.procs").write_text(pid)

    def oom_killed(self) -> bool:
        """Whether the kernel OOM-killed something in this run (v1 oom_control, v2 events)."""
        if self.memory_dir is None:
            return False
        for name in ("memory.oom_control", "memory.events"):
            path = self.memory_dir / name
            if path.exists():
                for line in path.read_text().splitlines():
                    key, _, count = line.partition(" ")
                    if key == "oom_kill" and int(count or 0) > 0:
                        return True
        return False

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process of the run (rusage misses the sandboxed tree)."""
        if self.cpu_file is None or not self.cpu_file.exists():
            return None
        text = self.cpu_file.read_text()
        if self.cpu_file.name == "cpuacct.usage":
            return int(text.strip() or 0) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the run stopped for the block (best effort: without a freezer
        it runs on). A frozen task takes a SIGKILL once thawed, which the block's end does."""
        if self.freeze_file is None or not self._set_frozen(True):
            yield
            return
        try:
            yield
        finally:
            self._set_frozen(False)

    def _set_frozen(self, frozen: bool) -> bool:
        assert self.freeze_file is not None
        v1 = self.freeze_file.name == "freezer.state"
        try:
            if v1:
                self.freeze_file.write_text("FROZEN" if frozen else "THAWED")
            else:
                self.freeze_file.write_text("1" if frozen else "0")
            if not frozen:
                return True
            # freezing is asynchronous: wait (briefly) until every task has stopped
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                if v1 and self.freeze_file.read_text().strip() == "FROZEN":
                    return True
                events = self.freeze_file.with_name("cgroup.events")
                if not v1 and "frozen 1" in events.read_text():
                    return True
                time.sleep(0.001)
            return True  # still freezing: what is left is what it writes meanwhile
        except OSError:
            return False

    def kill_all(self) -> None:
        for d in self.dirs:
            procs = d / "cgroup.procs"
            if not procs.exists():
                continue
            for line in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)

    def close(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    self.kill_all()
                    time.sleep(0.02)
        self.dirs = []

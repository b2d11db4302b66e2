"""Start long-running processes detached from the caller, and stop them again by the PID
recorded at start - never by name.

A PID alone can be reused by an unrelated process after ours has exited, so each record
also keeps the process's start time from /proc/<pid>/stat; a PID whose start time differs
is not ours and is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int  # field 22 of /proc/<pid>/stat: start time in clock ticks since boot
    argv: list[str]
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(**data)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) of a live PID, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def spawn(
    name: str, argv: list[str], log: Path, env: dict[str, str] | None = None
) -> ProcessRecord:
    """Start `argv` in its own session (so a Ctrl-C in the shell that ran `up` does not reach
    it), with stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    st = _stat(p.pid)
    # The Popen object is dropped on purpose: `down` may run in another process, so every
    # stop goes through the PID record. Python would warn about an unreaped child; mark
    # this one as handled (stop() reaps it when it is ours).
    p.returncode = 0
    return ProcessRecord(name, p.pid, st[1] if st else -1, argv, str(log))


def is_running(rec: ProcessRecord) -> bool:
    st = _stat(rec.pid)
    return st is not None and st[1] == rec.start_ticks and st[0] not in ("Z", "X")


def _reap(pid: int) -> None:
    # Only possible when we are the parent (the pytest fixture); harmless otherwise.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(rec: ProcessRecord, timeout: float = 20.0) -> bool:
    """SIGTERM, then SIGKILL after `timeout`s. Returns False if the process was already gone."""
    if not is_running(rec):
        _reap(rec.pid)
        return False
    os.kill(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(rec.pid)
        if not is_running(rec):
            return True
        time.sleep(0.1)
    if is_running(rec):
        os.kill(rec.pid, signal.SIGKILL)
        while is_running(rec):
            _reap(rec.pid)
            time.sleep(0.05)
    return True


def last_lines(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def tail(path: Path | str, lines: int = 40) -> str:
    """The last `lines` lines of a log file ('' if it does not exist)."""
    try:
        data = Path(path).read_bytes()[-64 * 1024 :]
    except FileNotFoundError:
        return ""
    return last_lines(data.decode(errors="replace"), lines)

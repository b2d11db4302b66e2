"""The in-pod backend: on Kubernetes every role already runs in its own sandbox pod (non-root,
read-only root filesystem, no service-account token, egress denied by NetworkPolicy), so
commands run as plain subprocesses. Mount targets cannot be bind-mounted without privileges;
instead every path that starts with a target is rewritten to the mount's source."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from .base import Limits, Mount, SandboxResult
from .bwrap import BASE_ENV


class DirectSandbox:
    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = Limits(),  # noqa: B008 - immutable
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
    ) -> SandboxResult:
        # longest target first, so /logs/verifier wins over /logs
        table = sorted(((m.target, str(m.source)) for m in mounts), key=lambda t: -len(t[0]))

        def translate(value: str) -> str:
            for target, source in table:
                if value == target or value.startswith(target + "/"):
                    return source + value[len(target) :]
            return value

        def limit_memory() -> None:
            size = limits.memory_mb * 1024 * 1024 * 4  # virtual memory ≫ resident
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

        started = time.monotonic()
        proc = subprocess.Popen(
            [translate(a) for a in argv],
            cwd=translate(cwd),
            env={**BASE_ENV, **{k: translate(v) for k, v in (env or {}).items()}},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limit_memory,  # rlimits must be set in the child
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=limits.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
        return SandboxResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=out.decode("utf-8", "replace")[-limits.max_output_bytes :],
            stderr=err.decode("utf-8", "replace")[-limits.max_output_bytes :],
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
        )

"""The bubblewrap sandbox: declared mounts only, no network, non-root, limits."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from coworkgym.sandbox import Limits, Mount, default_sandbox
from coworkgym.sandbox.cgroups import RunCgroup

PY = "/usr/bin/python3"


def test_runs_non_root_with_only_declared_mounts(tmp_path: Path) -> None:
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    ro.mkdir()
    (ro / "secret.txt").write_text("visible but read-only")
    code = (
        "import os; print(os.getuid()); open('/app/out.txt','w').write('ok');"
        "print(sorted(os.listdir('/')));"
        "print(os.path.exists('/root'), os.path.exists('/work'))"
    )
    result = default_sandbox().run(
        [PY, "-c", code], [Mount(ws, "/app", writable=True), Mount(ro, "/ro")], cwd="/app"
    )
    assert result.ok, result.describe()
    uid, listing, hidden = result.stdout.splitlines()
    assert uid != "0"
    assert "ro" in listing and "app" in listing and "home" not in listing
    assert hidden == "False False"
    assert (ws / "out.txt").read_text() == "ok"
    denied = default_sandbox().run([PY, "-c", "open('/ro/x','w')"], [Mount(ro, "/ro")])
    assert not denied.ok and "Read-only file system" in denied.stderr


def test_no_network_even_to_the_hosts_loopback() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    # A listening socket completes handshakes by itself (the backlog): no accept() thread,
    # which would raise in the background once the socket is closed.
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
    result = default_sandbox().run([PY, "-c", code], [])
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the host itself gets through: the port is really open
    server.close()
    assert not result.ok and "Connection refused" in result.stderr


def test_time_and_memory_limits() -> None:
    slow = default_sandbox().run(["sleep", "30"], [], limits=Limits(timeout_s=1))
    assert slow.timed_out and slow.duration_s < 10
    hungry = default_sandbox().run(
        [PY, "-c", "x = bytearray(600 * 1024 * 1024); print(len(x))"],
        [],
        limits=Limits(memory_mb=128),
    )
    assert not hungry.ok


def test_cannot_read_host_secrets() -> None:
    result = default_sandbox().run([PY, "-c", "print(open('/etc/shadow').read())"], [])
    assert not result.ok and "Permission denied" in result.stderr


def test_missing_tool_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkgym.sandbox import BubblewrapSandbox, SandboxUnavailable

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        BubblewrapSandbox()


def test_a_fast_file_writer_is_stopped_near_the_file_limit(tmp_path: Path) -> None:
    # the run is frozen while the watch counts, so the writer cannot outrun the walk; what
    # it writes in one pause (0.1 s, or the walk's time) is all it may overshoot by
    ws = tmp_path / "ws"
    ws.mkdir()
    code = "for i in range(200_000): open(f'/app/f{i}', 'w').close()"
    result = default_sandbox().run(
        [PY, "-c", code],
        [Mount(ws, "/app", writable=True)],
        limits=Limits(timeout_s=60, max_files=2_000),
    )
    made = sum(1 for _ in ws.iterdir())
    assert result.disk_exceeded, result.describe()
    print(f"{made} files at a limit of 2000")
    assert 2_000 < made < 2_000 + 6_000, made


def test_a_frozen_run_makes_no_progress_and_resumes() -> None:
    cgroup = RunCgroup(memory_mb=64, max_pids=8)
    if cgroup.freeze_file is None:
        cgroup.close()
        pytest.skip("no cgroup freezer on this machine")
    counter = subprocess.Popen(
        [PY, "-c", "import time\nn = 0\nwhile True:\n    n += 1\n    print(n, flush=True)"],
        stdout=subprocess.PIPE,
        preexec_fn=cgroup.enter,
    )
    try:
        assert counter.stdout is not None
        counter.stdout.readline()
        with cgroup.frozen():
            time.sleep(0.05)  # what was in flight lands
            cpu_before = cgroup.cpu_seconds() or 0.0
            time.sleep(0.3)
            cpu_frozen = (cgroup.cpu_seconds() or 0.0) - cpu_before
        assert cpu_frozen < 0.02, cpu_frozen
        counter.stdout.readline()  # thawed: it goes on
    finally:
        cgroup.kill_all()
        counter.wait()
        if counter.stdout is not None:
            counter.stdout.close()
        cgroup.close()

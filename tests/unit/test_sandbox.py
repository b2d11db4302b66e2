"""The bubblewrap sandbox: declared mounts only, no network, non-root, limits."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from coworkgym.sandbox import Limits, Mount, default_sandbox

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

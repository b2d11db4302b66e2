"""A network namespace of its own, shared by a task's compose services and its phases.

Harbor runs a task's services beside its ``main`` container on one compose network, where
each is reached by its service name. Here the services and the phases' sandboxes join one
network namespace (``nsenter``) instead of each getting a fresh one, and the service names
resolve to 127.0.0.1 through a hosts file the sandboxes see as ``/etc/hosts``.

Why a namespace and not the host's network: a service listening on a port must not be
reachable from the host or the machine's network, nor collide with the host's own ports.
``online`` gives the namespace outbound connections (what a phase allowed the network has
today, the machine's reach: the Debian and PyPI registries) through ``pasta`` (Debian
package ``passt``), a user-space NAT that forwards no port into the namespace and none out
to the host's loopback (``-t none -u none -T none -U none --no-map-gw``). Nothing of the
host's own network is changed: no interface, route or rule is added outside the namespace.

Why the namespace's holder runs with no capabilities: ``pasta`` drops its own before it
opens the namespace, and the kernel lets a process open another's namespace only if it holds
every capability the other does.

Mounting and entering a namespace need root, as the writable image root does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .base import SandboxUnavailable

PASTA_HINT = "install passt (Debian/Ubuntu: apt-get install passt), which gives pasta"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class NetworkNamespace:
    """``path``: the namespace (``nsenter --net=``); ``hosts``: the ``/etc/hosts`` its
    sandboxes see; ``online``: outbound connections go through pasta."""

    path: Path
    hosts: Path
    online: bool

    def enter(self) -> list[str]:
        """The argv prefix that runs a command in the namespace."""
        return [_tool("nsenter", "util-linux"), f"--net={self.path}", "--"]


def unavailable(online: bool) -> str | None:
    """Why no namespace can be made here (not root, a tool missing), or None."""
    if os.geteuid() != 0:
        return "a network namespace for compose services needs root"
    needed = ["unshare", "nsenter", "setpriv", "ip", *(["pasta"] if online else [])]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        hint = PASTA_HINT if "pasta" in missing else "install util-linux and iproute2"
        return f"{', '.join(missing)} not found; {hint}"
    return None


@contextlib.contextmanager
def network_namespace(names: Sequence[str], *, online: bool) -> Iterator[NetworkNamespace]:
    """A fresh namespace for the block, its loopback up, where ``names`` resolve to the
    loopback and an unprivileged process may listen on any port (services do not run as
    root here); removed, with pasta, when the block ends."""
    why = unavailable(online)
    if why is not None:
        raise SandboxUnavailable(why)
    no_capabilities = [_tool("setpriv", "util-linux"), "--bounding-set=-all", "--inh-caps=-all"]
    holder = subprocess.Popen(
        [_tool("unshare", "util-linux"), "--net", "--", *no_capabilities, "--", "sleep", "inf"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    pasta_pid: int | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="cwg-netns-") as tmp:
            namespace = NetworkNamespace(
                Path(f"/proc/{holder.pid}/ns/net"), Path(tmp) / "hosts", online
            )
            _wait_unshared(holder)
            inside = namespace.enter()
            _checked([*inside, "ip", "link", "set", "lo", "up"])
            any_port = "echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start"
            _checked([*inside, "sh", "-c", any_port])
            if online:
                pasta_pid = _start_pasta(namespace.path, Path(tmp) / "pasta.pid")
            namespace.hosts.write_text(_hosts(names))
            namespace.hosts.chmod(0o644)
            yield namespace
    finally:
        if pasta_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pasta_pid, signal.SIGTERM)
        holder.kill()
        holder.wait()


def _wait_unshared(holder: subprocess.Popen[bytes]) -> None:
    """Until the holder's namespace is no longer ours (unshare has run)."""
    own = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if holder.poll() is not None:
            raise SandboxUnavailable(f"unshare --net exited with {holder.returncode}")
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{holder.pid}/ns/net") != own:
                return
        time.sleep(0.01)
    raise SandboxUnavailable("unshare --net did not make a network namespace within 10 s")


def _start_pasta(namespace: Path, pid_file: Path) -> int:
    """pasta attached to the namespace (it goes to the background once the namespace's
    interface, address and route are set); its process id."""
    ports_closed = ["-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw"]
    argv = [_tool("pasta", "passt"), "--config-net", "--quiet", "--runas", "0", *ports_closed]
    _checked([*argv, "--pid", str(pid_file), "--netns", str(namespace)])
    return int(pid_file.read_text().strip())


def _hosts(names: Sequence[str]) -> str:
    """localhost, then the services' names, on the loopback."""
    return f"{LOOPBACK} localhost\n::1 localhost\n" + "".join(f"{LOOPBACK} {n}\n" for n in names)


def _checked(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-300:]
        raise SandboxUnavailable(f"{argv[0]} failed setting up the network namespace: {output}")


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SandboxUnavailable(f"{name} not found; install {package}")
    return found

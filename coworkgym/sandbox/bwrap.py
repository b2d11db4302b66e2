"""The bubblewrap backend.

Why these choices:
- When we are root, bwrap sets up the mounts as root and then ``setpriv`` drops the command
  to an unprivileged host uid with no capabilities and no-new-privs, so the sandbox user is
  not root outside either (``/etc/shadow`` stays unreadable). A user namespace would map
  the sandbox user back to root on the host, which is why we do not use one as root.
- Fresh PID, mount, IPC, UTS, cgroup and *network* namespaces; the network namespace has
  only its own loopback, so there is no egress at all. ``network=True`` (a task image's phase
  whose task allows the network, as Harbor's environment gives it) shares the machine's
  network instead, with the host's ``/etc/resolv.conf`` and ``/etc/hosts``. A task with
  compose services runs in the ``NetworkNamespace`` it shares with them (``netns``), online
  or not as its phases are allowed, with that namespace's ``/etc/hosts`` naming them.
- Only ``/usr`` (plus the merged-usr symlinks) and ``/etc`` of the host are visible,
  read-only; everything else is an explicit Mount.
- A task image's root (``rootfs``) is read-only too, unless a run brings a ``RootOverlay``
  (``overlay``): then it is writable, as in Harbor's container, and what the run writes
  there lands in the overlay's own directory, never in the image.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from .base import Limits, Mount, SandboxResult, SandboxUnavailable
from .cgroups import RunCgroup
from .netns import NetworkNamespace
from .overlay import RootOverlay, mounted_root

log = structlog.get_logger(__name__)

SANDBOX_HOST_UID = 65534  # nobody: owns nothing on the host
SANDBOX_UID = 1000
INSTALL_HINT = "install bubblewrap and util-linux (Debian/Ubuntu: apt-get install bubblewrap)"
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class BubblewrapSandbox:
    """``rootfs``: run in that root file system (a task image's, mounted) instead of the
    host's ``/usr`` and ``/etc``; it is read-only inside, like the host's (writable over an
    overlay: ``run(root=...)``), and ``env`` (the image's ENV) is the base environment
    there. ``network``: share the machine's network; ``netns``: join that namespace instead
    (its ``online`` says whether it reaches beyond). ``mounts``: added to every run's (a
    compose volume the task's ``main`` mounts, which its services write); after a run over a
    writable root, what they hold is copied into the run's root changes at their targets,
    so the state the run leaves holds what the services wrote there for it (a verifier of
    that state reads the copy, not the live volume other runs write to)."""

    def __init__(
        self,
        bwrap: str | None = None,
        rootfs: Path | None = None,
        env: Mapping[str, str] | None = None,
        network: bool = False,
        netns: NetworkNamespace | None = None,
        mounts: Sequence[Mount] = (),
    ) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")
        self.setpriv = shutil.which("setpriv")
        self.rootfs = rootfs
        self.env = dict(env or {})
        self.netns = netns
        self.network = netns.online if netns is not None else network
        self.mounts = tuple(mounts)
        if self.bwrap is None:
            raise SandboxUnavailable(f"bubblewrap (bwrap) not found on PATH; {INSTALL_HINT}")
        if os.geteuid() == 0 and self.setpriv is None:
            raise SandboxUnavailable(f"setpriv not found; {INSTALL_HINT}")
        if rootfs is not None and os.geteuid() == 0:
            self.setpriv = "/usr/bin/setpriv"  # the image's own, run inside it
            if not (rootfs / "usr/bin/setpriv").is_file():
                raise SandboxUnavailable(
                    f"the image at {rootfs} has no /usr/bin/setpriv (util-linux), which the "
                    "sandbox needs to drop root inside it"
                )

    def _rootfs_args(self, writable_root: Path | None) -> list[str]:
        if writable_root is not None or self.rootfs is not None:
            # Bound writable so bwrap can make mount points in it (the caller's own working
            # container or the run's overlay, never the image); the container is remounted
            # read-only once they exist.
            args = ["--bind", str(writable_root or self.rootfs), "/"]
            return [*args, "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for top in ("bin", "sbin", "lib", "lib64", "lib32"):
            host = Path("/") / top
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{top}"]
        return [*args, "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]

    def command(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        env: Mapping[str, str],
        cwd: str,
        writable_root: Path | None = None,
    ) -> list[str]:
        """The full command line (exposed for tests and for debugging a failed run);
        ``writable_root``: the run's overlay of ``rootfs``, mounted, left writable."""
        mounts = [*mounts, *self.mounts]
        cmd = [*self.netns.enter()] if self.netns is not None else []
        cmd += [str(self.bwrap), "--unshare-ipc", "--unshare-pid"]
        cmd += [] if self.network or self.netns is not None else ["--unshare-net"]
        cmd += ["--unshare-uts", "--unshare-cgroup-try"]
        if os.geteuid() != 0:  # an unprivileged caller needs a user namespace to mount
            cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        cmd += ["--die-with-parent", "--new-session", "--clearenv"]
        cmd += self._rootfs_args(writable_root)
        made = {"/", "/usr", "/etc", "/tmp", "/proc", "/dev"}
        for mount in sorted(mounts, key=lambda m: m.target.count("/")):
            # bwrap would create missing parents as root-only (0700) directories
            for parent in reversed(Path(mount.target).parents):
                if str(parent) not in made:
                    cmd += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
            made.add(mount.target)
            flag = "--bind" if mount.writable else "--ro-bind"
            cmd += [flag, str(mount.source), mount.target]
        if self.network and self.rootfs is not None:  # the image's own may name nothing
            for name in ("resolv.conf", "hosts"):
                if Path("/etc", name).is_file():
                    cmd += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        if self.netns is not None:  # after the host's: the services' names are here
            cmd += ["--ro-bind", str(self.netns.hosts), "/etc/hosts"]
        if self.rootfs is not None and writable_root is None:
            cmd += ["--remount-ro", "/"]
        for key, value in {**BASE_ENV, **self.env, "HOME": BASE_ENV["HOME"], **env}.items():
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", cwd, "--"]
        if os.geteuid() == 0:  # drop to a uid that owns nothing on the host, for good
            uid = str(SANDBOX_HOST_UID)
            cmd += [str(self.setpriv), f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            cmd += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return [*cmd, *argv]

    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = Limits(),  # noqa: B008 - immutable
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
        root: RootOverlay | None = None,
    ) -> SandboxResult:
        """``root``: make the image's root writable for this run, its writes kept in
        ``root.changes`` (needs ``rootfs`` and root; see ``overlay``)."""
        if root is None:
            return self._run(argv, mounts, limits, env or {}, cwd)
        if self.rootfs is None:
            raise ValueError("a writable root is an overlay of an image's root (rootfs)")
        with mounted_root(self.rootfs, root) as (mount_first, merged):
            result = self._run(argv, mounts, limits, env or {}, cwd, mount_first, merged, root)
        for mount in self.mounts:
            _keep_in_root(mount, root)
        return result

    def _run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        limits: Limits,
        env: Mapping[str, str],
        cwd: str,
        mount_first: Sequence[str] = (),
        merged: Path | None = None,
        root: RootOverlay | None = None,
    ) -> SandboxResult:
        for mount in [*mounts, *self.mounts]:
            if not mount.source.exists():
                raise FileNotFoundError(f"mount source {mount.source} does not exist")
            if mount.writable and os.geteuid() == 0:
                _hand_over(mount.source)
        cgroup = RunCgroup(limits.memory_mb, limits.max_pids)
        started = time.monotonic()
        timed_out = False

        disk_limit = limits.max_disk_mb * 1024 * 1024 if limits.max_disk_mb else None
        writable = [m.source for m in [*mounts, *self.mounts] if m.writable]
        if root is not None:
            writable.append(root.changes)

        def in_child() -> None:
            if cgroup.active:
                cgroup.enter()
            else:
                size = limits.memory_mb * 1024 * 1024 * 4  # virtual memory ≫ resident
                resource.setrlimit(resource.RLIMIT_AS, (size, size))
            if disk_limit is not None:  # inherited through bwrap and setpriv
                resource.setrlimit(resource.RLIMIT_FSIZE, (disk_limit, disk_limit))

        proc = subprocess.Popen(
            [*mount_first, *self.command(argv, mounts, env, cwd, merged)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=in_child,
            start_new_session=True,
        )
        watch = None
        if writable and (disk_limit or limits.max_files):
            watch = _DiskWatch(writable, disk_limit, limits.max_files, proc, cgroup)
        try:
            out, err = proc.communicate(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            cgroup.kill_all()
            out, err = proc.communicate()
        finally:
            if watch is not None:
                watch.stop()
            oom = cgroup.oom_killed()
            cpu = cgroup.cpu_seconds()
            cgroup.close()
        result = SandboxResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=_clip(out, limits.max_output_bytes),
            stderr=_clip(err, limits.max_output_bytes),
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
            oom_killed=oom and not timed_out,
            cpu_s=cpu,
            disk_exceeded=watch is not None and watch.exceeded and not timed_out,
            networked=self.network,
        )
        log.debug("sandbox run", argv=list(argv)[:3], exit=result.exit_code, s=result.duration_s)
        return result


class _DiskWatch:
    """Kills the run once its writable mounts hold more than ``max_bytes`` (allocated
    blocks, so a sparse file counts what it really takes) or ``max_files`` files. A run
    that starts above a limit (an earlier one overshot) may shrink, never grow. Polls in a
    thread with the run frozen while it measures, so a writer cannot race the walk (under
    CPU starvation the walk is slow and a running writer outran it); at most half the
    time is spent measuring. A fast writer overshoots by what it writes in one pause."""

    POLL_S = 0.1

    def __init__(
        self,
        roots: list[Path],
        max_bytes: int | None,
        max_files: int | None,
        proc: subprocess.Popen[bytes],
        cgroup: RunCgroup,
    ) -> None:
        self.roots, self.proc, self.cgroup = roots, proc, cgroup
        used, files = self._usage(None, None)  # before the run: what it may keep
        self.max_bytes = max(max_bytes, used) if max_bytes is not None else None
        self.max_files = max(max_files, files) if max_files is not None else None
        self.exceeded = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sandbox-disk", daemon=True)
        self._thread.start()

    def _usage(self, max_bytes: int | None, max_files: int | None) -> tuple[int, int]:
        """(bytes, files) in the mounts; stops counting once past either limit."""
        used = files = 0
        for root in self.roots:
            for dirpath, _, filenames in os.walk(root):
                for name in filenames:
                    with contextlib.suppress(OSError):  # deleted while we looked
                        used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                    files += 1
                over_bytes = max_bytes is not None and used > max_bytes
                if over_bytes or (max_files is not None and files > max_files):
                    return used, files
        return used, files

    def _watch(self) -> None:
        pause = self.POLL_S
        while not self._done.wait(pause):
            started = time.monotonic()
            with self.cgroup.frozen():
                used, files = self._usage(self.max_bytes, self.max_files)
                over_bytes = self.max_bytes is not None and used > self.max_bytes
                if over_bytes or (self.max_files is not None and files > self.max_files):
                    self.exceeded = True
                    _kill(self.proc)
                    self.cgroup.kill_all()
                    return
            pause = max(self.POLL_S, time.monotonic() - started)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _keep_in_root(mount: Mount, root: RootOverlay) -> None:
    kept = root.changes / Path(mount.target).relative_to("/")
    if mount.source.is_dir():
        shutil.copytree(mount.source, kept, symlinks=True, dirs_exist_ok=True)
    else:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(mount.source, kept, follow_symlinks=False)


def _hand_over(path: Path) -> None:
    """Writable mounts belong to the sandbox's host uid, or it could not write them."""
    uid = SANDBOX_HOST_UID
    os.chown(path, uid, uid, follow_symlinks=False)
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)


def _clip(data: bytes, limit: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


_default: BubblewrapSandbox | None = None


def default_sandbox() -> BubblewrapSandbox:
    """The process-wide local sandbox (raises SandboxUnavailable with an install hint)."""
    global _default
    if _default is None:
        _default = BubblewrapSandbox()
    return _default

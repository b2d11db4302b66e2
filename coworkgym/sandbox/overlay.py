"""A writable root file system over a task image's, one overlay per sandbox run.

Harbor runs a task's phases in one container whose whole root file system is writable: what
the solution writes to ``/output/`` is still there when the verifier runs. The bubblewrap
sandbox runs each phase on its own, on the image's root file system; with a ``RootOverlay``
that root is an overlay whose upper directory (``changes``) keeps what the run writes
outside its mounts, over earlier runs' changes (``below``, read-only) and the image. The
caller decides which changes a later run sees (``runtime.local``: the agent phase's are
kept with the workspace, a verifier's are thrown away).

Why it is mounted here and not by bubblewrap: Debian 12's bubblewrap (0.8) has no overlay
options. The run's command line starts in a mount namespace of its own (``unshare``), mounts
the overlay there and execs bwrap with the merged tree as its root; the mount goes away with
the namespace when the run ends, so a crash leaves no mount behind. Mounting needs root.

Why the image's directories are handed to the sandbox user (``hand_over_directories``): the
sandbox never runs as root, and Harbor's phases do; owning every directory lets it create,
rename and remove files anywhere, as root can. The files stay root's (handing them over
would copy each one up), so writing into an existing root-owned file in place is still
refused; ``sed -i`` and ``pip install``, which write new files, work.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MOUNT_FAILED_EXIT = 125  # what the wrapper exits with when the overlay would not mount
_WRAPPER = 'mount -t overlay overlay -o "$1" "$2" || exit 125; shift 2; exec "$@"'
_UNSAFE_IN_OPTIONS = (",", ":", "\\")  # overlayfs' option and layer separators


@dataclass(frozen=True)
class RootOverlay:
    """The root file system of one run made writable: its writes land in ``changes`` (an
    empty directory, or one an earlier run left), over ``below`` (earlier runs' changes,
    read-only, the uppermost first) and the image. ``changes`` and the scratch the overlay
    needs are on the same file system (the scratch is made beside ``changes``)."""

    changes: Path
    below: tuple[Path, ...] = ()


@contextlib.contextmanager
def mounted_root(rootfs: Path, overlay: RootOverlay) -> Iterator[tuple[list[str], Path]]:
    """(the argv prefix that mounts the overlay and execs the rest, the merged root) for
    one run. ``changes`` is made if missing, its top taking the image root's owner and
    mode (the merged root's come from it)."""
    layers = [*overlay.below, rootfs]
    for path in (*layers, overlay.changes):
        if any(c in str(path) for c in _UNSAFE_IN_OPTIONS):
            raise ValueError(f"overlay layer path {path} holds one of {_UNSAFE_IN_OPTIONS}")
    if not overlay.changes.is_dir():
        overlay.changes.mkdir(parents=True)
        top = rootfs.stat()
        os.chown(overlay.changes, top.st_uid, top.st_gid)
        overlay.changes.chmod(top.st_mode & 0o7777)
    scratch = Path(tempfile.mkdtemp(prefix=".overlay-", dir=overlay.changes.parent))
    try:
        work, merged = scratch / "work", scratch / "root"
        work.mkdir()
        merged.mkdir()
        lower = ":".join(str(layer) for layer in layers)
        options = f"lowerdir={lower},upperdir={overlay.changes},workdir={work}"
        unshare = shutil.which("unshare") or "unshare"
        prefix = [unshare, "--mount", "--", "/bin/sh", "-c", _WRAPPER, "overlay-root"]
        yield [*prefix, options, str(merged)], merged
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@functools.cache
def overlay_unavailable() -> str | None:
    """Why a run's root cannot be an overlay here (not root, no ``unshare``, a kernel
    that refuses the mount), or None when it can; probed once per process."""
    if os.geteuid() != 0:
        return "a writable image root needs root (an overlay mount)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="cwg-overlay-probe-") as tmp:
        image = Path(tmp) / "image"
        image.mkdir()
        with mounted_root(image, RootOverlay(Path(tmp) / "changes")) as (prefix, merged):
            probe = subprocess.run(
                [*prefix, "/bin/sh", "-c", f"touch {merged}/written"],
                capture_output=True,
                text=True,
                check=False,
            )
        if probe.returncode != 0 or not (Path(tmp) / "changes" / "written").is_file():
            return f"an overlay root cannot be mounted here: {probe.stderr.strip()[-200:]}"
    return None


def hand_over_directories(rootfs: Path, uid: int) -> int:
    """Give every directory of ``rootfs`` (a working container's, never an image's own
    files) to ``uid``, owner-writable; returns how many. Symbolic links are not followed."""

    def own(path: str) -> None:
        mode = os.lstat(path).st_mode & 0o7777
        os.chown(path, uid, uid, follow_symlinks=False)
        os.chmod(path, mode | 0o700)

    own(str(rootfs))
    count = 1
    for dirpath, dirnames, _ in os.walk(rootfs):  # links to directories are listed, not walked
        for path in (os.path.join(dirpath, name) for name in dirnames):
            if not os.path.islink(path):
                own(path)
                count += 1
    return count

"""buildah with a private storage under the image cache: no Docker daemon, and the machine's
``/var/lib/containers`` is never touched.

Needs root (buildah's chroot isolation and overlay mounts); ``Buildah.usable()`` says why
not where it cannot run. Every command that changes the storage runs under one file lock,
so two checks at once (pytest workers, two shells) cannot interleave a build and a prune.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE_ENV = "COWORKGYM_IMAGE_CACHE"


def cache_dir() -> Path:
    """Where images, their storage and the build logs live (read from the environment now)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cowork-gym" / "images"


class BuildahError(RuntimeError):
    """A buildah command failed; ``log`` holds its output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


# Commands after which an image reference may name another image, or none.
CHANGES_IMAGES = {"bud", "build", "commit", "rmi", "tag", "pull"}


@dataclass
class Buildah:
    root: Path
    _inspected: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @classmethod
    def here(cls) -> Buildah:
        return cls(cache_dir())

    @staticmethod
    def usable() -> str | None:
        """Why buildah cannot build here, or None when it can."""
        if shutil.which("buildah") is None:
            return "buildah is not installed (Debian/Ubuntu: apt-get install buildah)"
        if os.geteuid() != 0:
            return "building images needs root (buildah's chroot isolation and overlay mounts)"
        return None

    @property
    def driver(self) -> str:
        """overlay where the kernel lets us mount one (probed once, remembered), else vfs."""
        remembered = self.root / "storage-driver"
        if remembered.is_file():
            return remembered.read_text().strip()
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".probe-") as probe:
            for part in ("l", "u", "w", "m"):
                Path(probe, part).mkdir()
            options = f"lowerdir={probe}/l,upperdir={probe}/u,workdir={probe}/w"
            mounted = subprocess.run(
                ["mount", "-t", "overlay", "overlay", "-o", options, f"{probe}/m"],
                capture_output=True,
                check=False,
            )
            if mounted.returncode == 0:
                subprocess.run(["umount", f"{probe}/m"], check=False)
        driver = "overlay" if mounted.returncode == 0 else "vfs"
        remembered.write_text(driver + "\n")
        return driver

    def argv(self, *args: str) -> list[str]:
        storage = ["--root", str(self.root / "storage"), "--runroot", str(self.root / "run")]
        return ["buildah", *storage, "--storage-driver", self.driver, *args]

    def run(
        self,
        *args: str,
        timeout: float | None = None,
        log: Path | None = None,
        offline: bool = False,
    ) -> str:
        """Run one buildah command; its output (stdout, or everything when logging to a file).

        ``offline``: in a network namespace of its own with nothing but a loopback, so the
        build's RUN steps cannot reach anything (buildah's chroot isolation, the one that
        works without a container runtime, cannot take ``--network none`` itself)."""
        if args[0] in CHANGES_IMAGES:
            self._inspected.clear()
        argv = self.argv(*args)
        if offline:
            argv = ["unshare", "--net", "--", *argv]
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as sink:
                returncode = subprocess.run(
                    argv,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                    check=False,
                ).returncode
            output = log.read_text(errors="replace")
        else:
            finished = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
            returncode, output = finished.returncode, finished.stdout
            if returncode != 0:
                output = finished.stdout + finished.stderr
        if returncode != 0:
            raise BuildahError(f"buildah {args[0]} exited {returncode}", output)
        return output

    def image_id(self, ref: str) -> str | None:
        """The id of ``ref`` in our storage, or None when it is not there."""
        found = self.inspect(ref)
        return str(found.get("FromImageID") or "") or None if found else None

    def inspect(self, ref: str) -> dict[str, Any] | None:
        """``buildah inspect`` of an image, or None when it is not in our storage (answered
        from memory until a command changes the storage)."""
        if ref not in self._inspected:
            try:
                raw = json.loads(self.run("inspect", "--type", "image", ref))
            except (BuildahError, ValueError):
                return None
            self._inspected[ref] = raw if isinstance(raw, dict) else {}
        return self._inspected[ref] or None

    def image_config(self, ref: str) -> dict[str, object]:
        """The OCI config of an image (``config`` of ``buildah inspect``: Env, WorkingDir...)."""
        oci = (self.inspect(ref) or {}).get("OCIv1", {})
        config = oci.get("config", {}) if isinstance(oci, dict) else {}
        return config if isinstance(config, dict) else {}

    def diff_ids(self, ref: str) -> list[str]:
        """The image's layers, bottom first (uncompressed digests)."""
        oci = (self.inspect(ref) or {}).get("OCIv1", {})
        rootfs = oci.get("rootfs", {}) if isinstance(oci, dict) else {}
        ids = rootfs.get("diff_ids", []) if isinstance(rootfs, dict) else []
        return [str(i) for i in ids] if isinstance(ids, list) else []

    def layer_dirs(self, diff_ids: list[str]) -> list[Path] | None:
        """The overlay driver's directory of each layer's own files (what it added or
        changed), or None where the storage does not keep layers that way (vfs)."""
        index = self.root / "storage" / "overlay-layers" / "layers.json"
        if self.driver != "overlay" or not index.is_file():
            return None
        try:
            layers = json.loads(index.read_text())
        except ValueError:
            return None
        by_digest = {layer.get("diff-digest"): layer.get("id") for layer in layers}
        overlay = self.root / "storage" / "overlay"
        dirs = [overlay / str(by_digest.get(d)) / "diff" for d in diff_ids]
        return dirs if all(d.is_dir() for d in dirs) else None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def rootfs(self, ref: str) -> Iterator[Path]:
        """A working container of ``ref``, mounted; its root file system for as long as the
        block runs. Each use gets its own container, so what one check writes there (mount
        points, say) never reaches another, and the image stays as built."""
        with self.locked():
            container = self.run("from", "--pull=never", ref).strip()
            mounted = Path(self.run("mount", container).strip())
        try:
            yield mounted
        finally:
            with self.locked(), contextlib.suppress(BuildahError):
                self.run("umount", container)
                self.run("rm", container)


def log_tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def remove_images(buildah: Buildah, refs: Sequence[str]) -> None:
    """Forget images (tests use it to measure a cold build)."""
    with buildah.locked():
        for ref in refs:
            with contextlib.suppress(BuildahError):
                buildah.run("rmi", "--force", ref)

"""Build a Harbor task's ``environment/Dockerfile`` with buildah, on local bases, cached.

The image is keyed by the build context (files and exec bits), the Dockerfile as rewritten
onto local bases, those bases' ids and the build network; an unchanged task is not rebuilt.
``RUN`` steps get no network unless the caller allows the task's own (``network="task"``):
a task under audit does not reach the outside by default. A build that fails is this
machine's limit, not the task's defect (a base mapped to a stand-in, no network for a
``pip install``): ``ImageBuildFailed`` carries the reason and the log's tail, and the
Issue Detector reports the task as "could not run".
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..package.package import EnvironmentPackage
from .bases import BaseMap, BaseUnavailable
from .buildah import Buildah, BuildahError, log_tail
from .dockerfile import UnresolvedBase, bases, rewrite

BuildNetwork = Literal["none", "task"]
TASK_PREFIX = "localhost/cowork-gym/check-task"
RECIPE = 1  # bump when the build command changes in a way the key does not see
NEEDS_NETWORK = "needs the network, and images are built without one here"
STEP_LINE = re.compile(r"^STEP \d+/\d+: (.*)$", re.MULTILINE)


class ImageBuildFailed(RuntimeError):
    """The task's image cannot be built here; the message is the reason, for the report."""


@dataclass
class TaskImage:
    ref: str
    base: str | None  # the local base of the final stage (None: FROM scratch)
    workdir: str | None  # WORKDIR of the image (None: not set)
    env: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # to build (or to find in the cache)
    cached: bool = False
    added_layers: list[str] = field(default_factory=list)  # diff ids on top of the base


@dataclass
class TaskImageBuilder:
    bases: BaseMap = field(default_factory=BaseMap)
    network: BuildNetwork = "none"
    buildah: Buildah = field(default_factory=Buildah.here)

    def build(self, pkg: EnvironmentPackage) -> TaskImage:
        started = time.perf_counter()
        context = pkg.under("environment")
        dockerfile = context.get("Dockerfile", b"").decode("utf-8", errors="replace")
        logs = self.buildah.root / "logs"
        try:
            froms = bases(dockerfile)
            local = {ref.image: self.bases.resolve(self.buildah, ref.image, logs) for ref in froms}
        except (BaseUnavailable, UnresolvedBase) as exc:
            raise ImageBuildFailed(str(exc)) from exc
        rewritten = rewrite(dockerfile, lambda image: local[image])
        network = self._network(pkg)
        key = self._key(pkg, context, rewritten, sorted(set(local.values())), network)
        ref = f"{TASK_PREFIX}/{_slug(pkg.name)}:{key[:16]}"
        cached = self.buildah.image_id(ref) is not None
        failed = self.buildah.root / "failed" / key
        if not cached and failed.is_file():  # the same build, offline: it fails the same way
            raise ImageBuildFailed(failed.read_text())
        if not cached:
            try:
                self._build(pkg, context, rewritten, ref, network, logs / f"{_slug(pkg.name)}.log")
            except ImageBuildFailed as exc:
                if network == "none" and NEEDS_NETWORK in str(exc):
                    failed.parent.mkdir(parents=True, exist_ok=True)
                    failed.write_text(str(exc))
                raise
        config = self.buildah.image_config(ref)
        env = dict(str(e).partition("=")[::2] for e in _strings(config.get("Env")))
        workdir = str(config.get("WorkingDir") or "") or None
        from_scratch = not froms or froms[-1].line != _last_from(dockerfile)
        final = None if from_scratch else local[froms[-1].image]
        layers = self.buildah.diff_ids(ref)
        below = self.buildah.diff_ids(final) if final else []
        added = layers[len(below) :] if layers[: len(below)] == below else layers
        seconds = time.perf_counter() - started
        return TaskImage(ref, final, workdir, env, seconds, cached, added)

    def _network(self, pkg: EnvironmentPackage) -> str:
        if self.network == "task" and pkg.config.environment.network_mode != "no-network":
            return "host"
        return "none"

    def _key(
        self,
        pkg: EnvironmentPackage,
        context: dict[str, bytes],
        dockerfile: str,
        base_refs: list[str],
        network: str,
    ) -> str:
        digest = hashlib.sha256(f"recipe={RECIPE} network={network}\n".encode())
        digest.update(dockerfile.encode())
        for ref in base_refs:
            digest.update(f"{ref}={self.buildah.image_id(ref)}\n".encode())
        for rel in sorted(context):
            executable = "x" if f"environment/{rel}" in pkg.executables else "-"
            digest.update(f"{rel}\0{executable}\0".encode())
            digest.update(hashlib.sha256(context[rel]).digest())
        return digest.hexdigest()

    def _build(
        self,
        pkg: EnvironmentPackage,
        context: dict[str, bytes],
        dockerfile: str,
        ref: str,
        network: str,
        log: Path,
    ) -> None:
        with tempfile.TemporaryDirectory(dir=self.buildah.root, prefix=".context-") as tmp:
            root = Path(tmp)
            for rel, content in context.items():
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
                if f"environment/{rel}" in pkg.executables:
                    path.chmod(0o755)
            (root / "Dockerfile").write_text(dockerfile)
            args = ["bud", "--isolation", "chroot", "--pull=never", "--layers=false"]
            args += ["-f", str(root / "Dockerfile"), "-t", ref, str(root)]
            try:
                with self.buildah.locked():
                    self.buildah.run(
                        *args,
                        timeout=pkg.config.environment.build_timeout_sec,
                        log=log,
                        offline=network == "none",
                    )
                    self._forget_older(ref)
            except subprocess.TimeoutExpired as exc:
                raise ImageBuildFailed(
                    f"environment/Dockerfile did not build within build_timeout_sec "
                    f"({pkg.config.environment.build_timeout_sec:g}s; log: {log})"
                ) from exc
            except BuildahError as exc:
                raise ImageBuildFailed(_why(exc.log, network, log)) from exc

    def _forget_older(self, ref: str) -> None:
        """Earlier builds of the same task (other keys): the storage holds one per task."""
        repository = ref.rsplit(":", 1)[0]
        listed = self.buildah.run("images", "--format", "{{.Name}}:{{.Tag}}", "--noheading")
        for line in listed.split():
            if line.rsplit(":", 1)[0] == repository and line != ref:
                try:
                    self.buildah.run("rmi", line)
                except BuildahError:
                    continue


def _why(output: str, network: str, log: Path) -> str:
    from ..detector.environment_limits import NETWORK_COMMAND, NETWORK_FAILURE

    steps = STEP_LINE.findall(output)
    failed = steps[-1].strip() if steps else "the build"
    tail = log_tail(output, 6)
    if network == "none" and (NETWORK_FAILURE.search(output) or NETWORK_COMMAND.search(failed)):
        return (
            f"environment/Dockerfile step {failed[:120]!r} {NEEDS_NETWORK} "
            f"(check --build-network task allows the task's own); "
            f"build log {log}: {tail}"
        )
    return f"environment/Dockerfile did not build here at {failed[:120]!r} (log {log}): {tail}"


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _last_from(dockerfile: str) -> int:
    lines = dockerfile.splitlines()
    froms = [n for n, line in enumerate(lines) if re.match(r"\s*FROM\s", line, re.I)]
    return froms[-1] if froms else -1


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "task"

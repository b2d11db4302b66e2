"""Build a Harbor task's ``environment/Dockerfile`` with buildah, on local bases, cached.

The image is keyed by the build context (files and exec bits), the Dockerfile as rewritten
onto local bases, those bases' ids and the build network; an unchanged task is not rebuilt.
``RUN`` steps get the network by default, as ``docker build`` gives them (build time is not
the task's run time: a ``no-network`` task's image is still built with ``apt-get install``);
``network="task"`` builds with the task's own runtime policy, ``"none"`` offline. Where only
some hosts answer (a machine that reaches the Debian and PyPI registries and nothing else),
a step that fails on another host is reported with that host's name.

A build that fails is this machine's limit, not the task's defect (a base or a ``COPY
--from`` image nobody stored here, a host that does not answer): ``ImageBuildFailed``
carries the reason and the log's tail, and the Issue Detector reports the task as "could not
run". Images and logs are named after the task and a digest of where it lives, so two tasks
(two without ``[task] name``, say) never overwrite each other's.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from ..package.package import IGNORED_PARTS, EnvironmentPackage
from .bases import BaseMap, BaseUnavailable
from .buildah import Buildah, BuildahError, log_tail
from .dockerfile import UnresolvedBase, bases, copied_images, rewrite

BuildNetwork = Literal["on", "task", "none"]
TASK_PREFIX = "localhost/cowork-gym/check-task"
RECIPE = 2  # bump when the build command changes in a way the key does not see
NEEDS_NETWORK = "needs the network, and this build had none"
UNREACHABLE = "reaches a host that does not answer from this machine"
STEP_LINE = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: (.*)$", re.MULTILINE)
# What a build step prints when a host does not resolve or answer; group "host" names it.
UNREACHABLE_HOST = (
    re.compile(r"Could not resolve host:? '?(?P<host>[\w.-]+)"),  # curl, git
    re.compile(r"Temporary failure resolving '(?P<host>[\w.-]+)'"),  # apt
    re.compile(r"Could not resolve '(?P<host>[\w.-]+)'"),  # apt
    re.compile(r"unable to resolve host address '(?P<host>[\w.-]+)'"),  # wget
    re.compile(r"Resolving (?P<host>[\w.-]+) \([\w.-]+\)\.\.\. failed"),  # wget
    re.compile(r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (?P<host>[\w.-]+)"),  # npm, node
    re.compile(r"ConnectionPool\(host='(?P<host>[\w.-]+)'"),  # pip, requests
    re.compile(r"dns error.*?(?:https?://)?(?P<host>[\w-]+(?:\.[\w-]+)+)"),  # uv, cargo
    re.compile(
        r"(?:Failed to fetch|Could not fetch URL|fetch failed) `?https?://(?P<host>[\w.-]+)"
    ),
    re.compile(r"Failed to connect to (?P<host>[\w.-]+) port"),  # curl
)
# The only registries that answer on a machine like this one (for the message).
REACHABLE = "the Debian and PyPI registries"
# Their hosts: a failure to reach one is a hiccup to retry, never remembered as the task's.
REGISTRY_HOSTS = frozenset(
    {"deb.debian.org", "security.debian.org", "pypi.org", "files.pythonhosted.org"}
)
REGISTRY_HICCUP = "a package registry did not answer this time"


class ImageBuildFailed(RuntimeError):
    """The task's image cannot be built here; the message is the reason, for the report."""


class DockerfileBroken(ImageBuildFailed):
    """The task's image cannot be built anywhere: a ``COPY``/``ADD`` names a file its build
    context (``environment/``) does not hold, which ``docker build`` refuses as well. The
    task's defect, not this machine's limit."""


# buildah's words for a COPY/ADD source missing from the build context
MISSING_SOURCE = re.compile(
    r'checking on sources under .*?: copier: stat: "(?P<path>[^"]+)": no such'
)


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
    network: BuildNetwork = "on"
    buildah: Buildah = field(default_factory=Buildah.here)

    def build(self, pkg: EnvironmentPackage, source: Path | None = None) -> TaskImage:
        """``source``: where the task lives (its image and log are named after it)."""
        started = time.perf_counter()
        context = pkg.under("environment")
        dockerfile = context.get("Dockerfile", b"").decode("utf-8", errors="replace")
        logs = self.buildah.root / "logs"
        try:
            froms = bases(dockerfile)
            local = {ref.image: self.bases.resolve(self.buildah, ref.image, logs) for ref in froms}
            for image in copied_images(dockerfile):
                local[image] = self.bases.resolve_copied(self.buildah, image)
        except (BaseUnavailable, UnresolvedBase) as exc:
            raise ImageBuildFailed(str(exc)) from exc
        rewritten = rewrite(dockerfile, lambda image: local[image])
        network = self._network(pkg)
        key = self._key(pkg, context, rewritten, sorted(set(local.values())), network)
        name = task_slug(pkg, source)
        ref = f"{TASK_PREFIX}/{name}:{key[:16]}"
        cached = self.buildah.image_id(ref) is not None
        failed = self.buildah.root / "failed" / key
        if not cached and failed.is_file():  # the same build failed for want of a host
            raise ImageBuildFailed(failed.read_text())
        if not cached:
            try:
                self._build(pkg, context, rewritten, ref, network, logs / f"{name}.log")
            except ImageBuildFailed as exc:
                if NEEDS_NETWORK in str(exc) or UNREACHABLE in str(exc):
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
        if self.network == "on":
            return "host"
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
                broken = _missing_source(exc.log)
                if broken is not None:
                    raise DockerfileBroken(broken) from exc
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
    # only what the failing step printed: an earlier step's retried download is not the cause
    matches = list(STEP_LINE.finditer(output))  # numbering restarts in each stage
    last_step = output[matches[-1].start() :] if matches else output
    host = unreachable_host(last_step)
    if network == "none" and (NETWORK_FAILURE.search(last_step) or NETWORK_COMMAND.search(failed)):
        return (
            f"environment/Dockerfile step {failed[:120]!r} {NEEDS_NETWORK} "
            f"(check --build-network on gives RUN steps the network, as docker build does); "
            f"build log {log}: {tail}"
        )
    if host in REGISTRY_HOSTS:
        return (
            f"environment/Dockerfile step {failed[:120]!r}: {REGISTRY_HICCUP} ({host}); "
            f"check again (build log {log}): {tail}"
        )
    if host is not None:
        return (
            f"environment/Dockerfile step {failed[:120]!r} {UNREACHABLE}: {host} (only "
            f"{REACHABLE} answer here); build log {log}: {tail}"
        )
    return f"environment/Dockerfile did not build here at {failed[:120]!r} (log {log}): {tail}"


def _missing_source(output: str) -> str | None:
    """Why the build failed, when its failing step copies from the context a path that is
    not there (a ``COPY solution/ ...``: only ``environment/`` is the context). A path under
    a folder the package loader leaves out (``__pycache__``) is not reported: that may be
    ours."""
    steps = list(STEP_LINE.finditer(output))
    if not steps:
        return None
    step = steps[-1].group(1).strip()
    found = MISSING_SOURCE.search(output[steps[-1].start() :])
    if found is None or "--from" in step or not re.match(r"(COPY|ADD)\s", step, re.I):
        return None
    path = found.group("path").lstrip("/") or "."
    if any(part in IGNORED_PARTS for part in PurePosixPath(path).parts):
        return None
    return (
        f"environment/Dockerfile cannot be built: {step[:120]!r} copies {path}, which its "
        "build context (environment/) does not hold; docker build refuses it the same way"
    )


def unreachable_host(output: str) -> str | None:
    """The first host a build or phase failed to reach, as its output names it."""
    for pattern in UNREACHABLE_HOST:
        found = pattern.search(output)
        if found:
            return found.group("host").rstrip(".")
    return None


def task_slug(pkg: EnvironmentPackage, source: Path | None) -> str:
    """The task's name and a digest of where it lives (of its files, when it lives nowhere):
    unique per task, stable across runs, readable in ``buildah images`` and the log folder."""
    if source is not None:
        where = str(source.resolve()).encode()
        named = pkg.config.task.name if pkg.config.task else source.resolve().name
    else:
        digest = hashlib.sha256()
        for rel in sorted(pkg.files):
            digest.update(rel.encode() + b"\0" + hashlib.sha256(pkg.files[rel]).digest())
        where = digest.digest()
        named = pkg.name
    return f"{_slug(named)[:60]}-{hashlib.sha256(where).hexdigest()[:10]}"


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _last_from(dockerfile: str) -> int:
    lines = dockerfile.splitlines()
    froms = [n for n, line in enumerate(lines) if re.match(r"\s*FROM\s", line, re.I)]
    return froms[-1] if froms else -1


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "task"

"""A task's compose services, built and running beside its phases for as long as ``check``
runs them.

Each service's image is built the way the task's own is (``TaskImageBuilder``: its build
context is a directory of ``environment/``; an ``image:`` alone is a one-line Dockerfile
``FROM`` it, resolved as any base is), and runs in a bubblewrap sandbox over a working
container of it: a writable root (an overlay thrown away with the run), its compose
environment, command and volumes, never root, in the network namespace the phases join.
Services start in dependency order, each waited on until its healthcheck passes, and are
killed when the block ends. A named volume is a directory of the run, filled from the
service image's files at its path the first time it is mounted, as Docker does.

A service that cannot be built or does not become healthy is a ``ServiceUnavailable``
naming it and why: this machine's limit (a registry it cannot reach), so the task "could
not run"; a build context missing a file the Dockerfile copies stays the task's defect
(``DockerfileBroken``), as for its own image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import structlog

from ..package.package import TASK_TOML, EnvironmentPackage
from ..sandbox.base import Limits, Mount, SandboxUnavailable
from ..sandbox.bwrap import SANDBOX_HOST_UID, BubblewrapSandbox
from ..sandbox.netns import NetworkNamespace, network_namespace
from ..sandbox.overlay import RootOverlay, hand_over_directories, mounted_root
from .build import DockerfileBroken, ImageBuildFailed, TaskImage, TaskImageBuilder
from .buildah import BuildahError
from .compose import MAIN, Compose, Service, Volume

log = structlog.get_logger(__name__)

LOG_TAIL_CHARS = 600


class ServiceUnavailable(RuntimeError):
    """A compose service cannot be built or run here; the message names it and says why."""


@dataclass
class ServicesBeside:
    """What the phases need of the running services: the namespace to join (None: the
    compose file adds no service), and ``main``'s compose environment and volumes."""

    netns: NetworkNamespace | None
    main_env: dict[str, str] = field(default_factory=dict)
    main_mounts: list[Mount] = field(default_factory=list)


@contextlib.contextmanager
def running_services(
    compose: Compose,
    builder: TaskImageBuilder,
    pkg: EnvironmentPackage,
    source: Path | None,
    *,
    online: bool,
) -> Iterator[ServicesBeside]:
    """Build every service, start them in ``compose``'s order (each healthy before the
    next), yield, then stop them. ``online``: the namespace reaches beyond itself."""
    images = {s.name: _build(builder, pkg, source, s) for s in compose.services}
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cwg-services-")))
        volumes = _Volumes(pkg, scratch / "volumes")
        if not compose.services:
            yield ServicesBeside(None, dict(compose.main.environment), volumes.mounts(compose.main))
            return
        names = [*(s.name for s in compose.services), MAIN]
        netns = stack.enter_context(network_namespace(names, online=online))
        for service in compose.services:
            image = images[service.name]
            rootfs = stack.enter_context(builder.buildah.rootfs(image.ref))
            hand_over_directories(rootfs, SANDBOX_HOST_UID)  # Harbor's services run as root
            volumes.fill_from(service, rootfs)
            started = _Started(service, image, rootfs, netns, volumes.mounts(service), scratch)
            stack.enter_context(started.running(builder))
        yield ServicesBeside(netns, dict(compose.main.environment), volumes.mounts(compose.main))


def _build(
    builder: TaskImageBuilder, pkg: EnvironmentPackage, source: Path | None, service: Service
) -> TaskImage:
    view = service_package(pkg, service)
    where = None if source is None else source / "environment" / (service.context or service.name)
    try:
        return builder.build(view, where)
    except DockerfileBroken as exc:
        raise DockerfileBroken(f"service {service.name}: {exc}") from exc
    except ImageBuildFailed as exc:
        raise ServiceUnavailable(
            f"service {service.name}'s image cannot be built here: {exc}"
        ) from exc
    except BuildahError as exc:
        raise ServiceUnavailable(
            f"service {service.name}'s image cannot be built here: buildah failed: {exc} "
            f"({exc.log.strip()[-300:]})"
        ) from exc


def service_package(pkg: EnvironmentPackage, service: Service) -> EnvironmentPackage:
    """The task as the image builder sees it, with the service's build context as its
    ``environment/`` (and the service's Dockerfile as its Dockerfile)."""
    files: dict[str, bytes] = {TASK_TOML: pkg.files[TASK_TOML]}
    executables: set[str] = set()
    if service.context is None:
        files["environment/Dockerfile"] = f"FROM {service.image}\n".encode()
    else:
        context = PurePosixPath("environment", service.context)  # "." is environment/ itself
        for rel, data in pkg.under(str(context)).items():
            files[f"environment/{rel}"] = data
            if f"{context}/{rel}" in pkg.executables:
                executables.add(f"environment/{rel}")
        dockerfile = files.pop(f"environment/{service.dockerfile}", None)
        if dockerfile is None:
            raise DockerfileBroken(
                f"service {service.name}: {context}/{service.dockerfile} is missing"
            )
        files["environment/Dockerfile"] = dockerfile
    return dataclasses.replace(pkg, files=files, executables=executables)


class _Volumes:
    """The run's volumes: a directory per named volume (shared by every service that names
    it), a copy of a build-context directory per bind mount."""

    def __init__(self, pkg: EnvironmentPackage, root: Path) -> None:
        self.pkg, self.root = pkg, root
        self.filled: set[str] = set()

    def _source(self, volume: Volume) -> Path:
        if volume.name is not None:
            path = self.root / "named" / volume.name
            if not path.is_dir():
                path.mkdir(parents=True)
                os.chown(path, SANDBOX_HOST_UID, SANDBOX_HOST_UID)
            return path
        assert volume.context_dir is not None
        path = self.root / "bound" / volume.context_dir.replace("/", "_")
        if not path.exists():
            for rel, data in self.pkg.under(f"environment/{volume.context_dir}").items():
                (path / rel).parent.mkdir(parents=True, exist_ok=True)
                (path / rel).write_bytes(data)
            path.mkdir(parents=True, exist_ok=True)
        return path

    def mounts(self, service: Service) -> list[Mount]:
        return [Mount(self._source(v), v.target, not v.read_only) for v in service.volumes]

    def fill_from(self, service: Service, rootfs: Path) -> None:
        """A named volume first mounted where the image has files starts with them."""
        for volume in service.volumes:
            if volume.name is None or volume.name in self.filled:
                continue
            self.filled.add(volume.name)
            inside = rootfs / PurePosixPath(volume.target).relative_to("/")
            if inside.is_dir():
                shutil.copytree(inside, self._source(volume), symlinks=True, dirs_exist_ok=True)
                hand_over_directories(self._source(volume), SANDBOX_HOST_UID)


@dataclass
class _Started:
    service: Service
    image: TaskImage
    rootfs: Path
    netns: NetworkNamespace
    mounts: list[Mount]
    scratch: Path

    @contextlib.contextmanager
    def running(self, builder: TaskImageBuilder) -> Iterator[None]:
        config = builder.buildah.image_config(self.image.ref)
        argv = service_argv(self.service, config)
        if not argv:
            raise ServiceUnavailable(f"service {self.service.name} has no command to run")
        env = {**self.image.env, **self.service.environment}
        cwd = self.service.working_dir or self.image.workdir or "/"
        try:
            sandbox = BubblewrapSandbox(
                rootfs=self.rootfs, env=env, netns=self.netns, mounts=self.mounts
            )
        except SandboxUnavailable as exc:  # an image without setpriv, say
            raise ServiceUnavailable(f"service {self.service.name}: {exc}") from exc
        changes = RootOverlay(self.scratch / self.service.name / "changes")
        output = self.scratch / f"{self.service.name}.log"
        with mounted_root(self.rootfs, changes) as (mount_first, merged), output.open("wb") as out:
            proc = subprocess.Popen(
                [*mount_first, *sandbox.command(argv, [], {}, cwd, merged)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                log.info("compose service started", service=self.service.name, pid=proc.pid)
                self._wait_healthy(proc, output, env, cwd)
                yield
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _wait_healthy(
        self, proc: subprocess.Popen[bytes], output: Path, env: dict[str, str], cwd: str
    ) -> None:
        """Docker's rule: checks every interval; failures within the start period do not
        count, ``retries`` after it make the service unhealthy. A service that exits is
        unhealthy at once."""
        check = self.service.healthcheck
        if check is None:
            return
        read_only = [dataclasses.replace(m, writable=False) for m in self.mounts]
        probe = BubblewrapSandbox(rootfs=self.rootfs, env=env, netns=self.netns, mounts=read_only)
        started, failures, last = time.monotonic(), 0, ""
        while True:
            time.sleep(check.interval_s)
            if proc.poll() is not None:
                raise ServiceUnavailable(
                    f"service {self.service.name} exited with {proc.returncode} before it was "
                    f"healthy: {_tail(output)}"
                )
            result = probe.run(
                list(check.argv), [], limits=Limits(timeout_s=check.timeout_s), cwd=cwd
            )
            if result.exit_code == 0:
                log.info("compose service healthy", service=self.service.name)
                return
            last = (result.stderr or result.stdout).strip()[-200:]
            if time.monotonic() - started > check.start_period_s:
                failures += 1
            if failures >= check.retries:
                raise ServiceUnavailable(
                    f"service {self.service.name} did not become healthy ({failures} failed "
                    f"healthchecks, the last said: {last or 'nothing'}); "
                    f"it printed: {_tail(output)}"
                )


def service_argv(service: Service, config: dict[str, object]) -> list[str]:
    """Compose's rule: its entrypoint replaces the image's and drops the image's CMD; its
    command replaces the CMD."""
    image_entrypoint = _strings(config.get("Entrypoint"))
    image_cmd = _strings(config.get("Cmd"))
    if service.entrypoint is not None:
        return [*service.entrypoint, *(service.command or ())]
    return [*image_entrypoint, *(service.command if service.command is not None else image_cmd)]


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _tail(path: Path) -> str:
    text = path.read_text(errors="replace").strip() if path.is_file() else ""
    return text[-LOG_TAIL_CHARS:] or "(no output)"

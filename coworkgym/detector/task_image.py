"""Where a plain Harbor task runs under ``check``: in its own image, or emulated.

``auto`` (the default) builds ``environment/Dockerfile`` with buildah where this machine can
(root, buildah installed, a bubblewrap sandbox) and runs every phase in that image's root
file system; elsewhere it emulates the Dockerfile's WORKDIR and COPY lines on the host's
``/usr`` (RUN lines are not executed, and a failure they may explain is "could not run").
``build`` insists on the image (a machine that cannot build makes the task "could not
run"); ``emulate`` never builds. In the image, each phase (the oracle as the agent, the
verifier) has the network its task declares for it (``network_mode``, the phase's own
override first), as Harbor's environment gives it; emulated phases have none. The image's
root is writable where an overlay can be mounted (``sandbox.overlay``), as Harbor's container
is: what the solution writes to ``/output/`` is there for the verifier; elsewhere it is
read-only and a phase that writes there "could not run". Our own Cowork packages always run
as before: their image is the project's role sandbox, which the host's sandbox already
mirrors.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal, cast, get_args

from ..image import compose
from ..image.bases import BaseMap
from ..image.build import BuildNetwork, DockerfileBroken, ImageBuildFailed, TaskImageBuilder
from ..image.buildah import Buildah, BuildahError
from ..image.compose import COMPOSE_FILES, Compose, ComposeUnsupported
from ..image.leaks import ImageFiles, meaning, nearest
from ..image.mounted import MountedImage, mounted
from ..image.services import ServiceUnavailable, running_services
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..sandbox import BubblewrapSandbox, SandboxUnavailable, netns
from ..sandbox.bwrap import SANDBOX_HOST_UID
from ..sandbox.overlay import hand_over_directories, overlay_unavailable
from .audit import is_private
from .defects import Defect, DefectCode
from .environment_limits import PHASES, network_allowed

ImageMode = Literal["auto", "build", "emulate"]


class ImageUnavailable(RuntimeError):
    """The task needs its image and this machine cannot provide it; the message says why."""


class ImageInvalid(RuntimeError):
    """The task's image cannot be built anywhere (the task's defect); the message says why."""


MODE_ENV = "COWORKGYM_CHECK_IMAGE"  # auto | build | emulate: the default mode


def default_mode() -> ImageMode:
    value = os.environ.get(MODE_ENV, "auto")
    for mode in get_args(ImageMode):
        if value == mode:
            return cast(ImageMode, mode)
    raise ValueError(f"{MODE_ENV}={value!r} is not one of {', '.join(get_args(ImageMode))}")


@dataclass(frozen=True)
class ImageSettings:
    mode: ImageMode = field(default_factory=default_mode)
    base_images: tuple[str, ...] = ()  # PATTERN=LOCAL overrides of the base mapping
    build_network: BuildNetwork = "on"

    def builder(self) -> TaskImageBuilder:
        return TaskImageBuilder(BaseMap.from_settings(self.base_images), self.build_network)


@dataclass
class Placement:
    runtime: LocalRuntime
    image: MountedImage | None = None
    note: str | None = None  # why the task runs emulated although it has a Dockerfile


def builds_an_image(pkg: EnvironmentPackage) -> bool:
    """A plain task with a Dockerfile: Harbor builds it, or (``docker_image``) pulls the image
    built from it, which no registry here serves; the Dockerfile stands in for it, as
    ``harbor run --force-build`` builds it."""
    return not pkg.is_cowork and "environment/Dockerfile" in pkg.files


@contextlib.contextmanager
def placement(
    pkg: EnvironmentPackage,
    settings: ImageSettings,
    runtime: LocalRuntime,
    source: Path | None = None,
) -> Iterator[Placement]:
    """The runtime (and mounted image) the task's phases run in, for the block; ``source``:
    where the task lives (its image is named after it)."""
    if settings.mode == "emulate" or not builds_an_image(pkg):
        yield Placement(runtime)
        return
    try:
        compose = compose_of(pkg)
    except ComposeUnsupported as exc:
        raise ImageUnavailable(f"environment/docker-compose.yaml: {exc}") from exc
    online = _services_network(pkg, compose)
    cannot = Buildah.usable()
    if cannot is None and not isinstance(runtime.sandbox, BubblewrapSandbox):
        cannot = "the sandbox is not bubblewrap, which can run an image's root file system"
    if cannot is not None:
        if settings.mode == "build":
            raise ImageUnavailable(f"environment/Dockerfile cannot be built here: {cannot}")
        yield Placement(runtime, note=f"environment/Dockerfile is emulated, not built: {cannot}")
        return
    builder = settings.builder()
    try:
        with (
            mounted(builder, pkg, source) as image,
            running_services(compose, builder, pkg, source, online=online) as beside,
        ):
            try:
                sandboxes = {
                    phase: BubblewrapSandbox(
                        rootfs=image.rootfs,
                        env={**_with_user_bin(image.image.env), **beside.main_env},
                        network=network_allowed(pkg, phase),
                        netns=beside.netns,
                        # a verifier reads the volumes' copy its state holds (see mounts)
                        mounts=beside.main_mounts if phase == "agent" else (),
                    )
                    for phase in PHASES
                }
            except SandboxUnavailable as exc:
                raise ImageUnavailable(str(exc)) from exc
            inside = LocalRuntime(
                sandboxes["agent"], runtime.solution_limits, runtime.verifier_limits
            )
            inside.phase_sandboxes = {str(k): v for k, v in sandboxes.items()}
            inside.parallel = runtime.parallel
            if beside.main_mounts and overlay_unavailable() is not None:
                raise ImageUnavailable(
                    "main mounts a compose volume, which a state keeps in its image root's "
                    f"changes, and {overlay_unavailable()}"
                )
            if overlay_unavailable() is None:
                # the sandbox user stands in for Harbor's root (the working container's
                # directories, never the image's)
                hand_over_directories(image.rootfs, SANDBOX_HOST_UID)
                inside.writable_root = True
            yield Placement(inside, image)
    except DockerfileBroken as exc:
        raise ImageInvalid(str(exc)) from exc
    except (ImageBuildFailed, ServiceUnavailable, SandboxUnavailable) as exc:
        raise ImageUnavailable(str(exc)) from exc
    except BuildahError as exc:
        raise ImageUnavailable(f"buildah failed: {exc} ({exc.log.strip()[-300:]})") from exc


def _with_user_bin(env: dict[str, str]) -> dict[str, str]:
    """The image's ENV, with the sandbox user's ``~/.local/bin`` last on PATH: where the
    image's root is read-only (no overlay), its user is not root, so ``pip install`` in a
    phase falls back to a user install (HOME is /tmp), and its scripts must still be found."""
    path = env.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return {**env, "PATH": f"{path}:/tmp/.local/bin"}


def compose_of(pkg: EnvironmentPackage) -> Compose:
    """What the task's ``environment/docker-compose.yaml`` adds to Harbor's ``main`` (no
    file: nothing). Its ``${VAR}`` values read the task's ``[environment.env]``, never this
    machine's environment."""
    for name in COMPOSE_FILES:
        raw = pkg.files.get(f"environment/{name}")
        if raw is not None:
            text = raw.decode("utf-8", errors="replace")
            return compose.parse(text, pkg.config.environment.env)
    return compose.parse("", {})


def _services_network(pkg: EnvironmentPackage, parsed: Compose) -> bool:
    """Whether the namespace the phases share with the services reaches beyond it: as the
    phases are allowed. One namespace cannot give one phase the network and deny another."""
    allowed = {network_allowed(pkg, phase) for phase in PHASES}
    if parsed.services and len(allowed) > 1:
        raise ImageUnavailable(
            "environment/docker-compose.yaml runs services the phases share one network "
            "namespace with, and the task allows the network to one phase and not the other"
        )
    if parsed.services:
        why = netns.unavailable(online=True in allowed)
        if why is not None:
            raise ImageUnavailable(f"compose services cannot run beside the task here: {why}")
    return True in allowed


def verifier_content_in_image(pkg: EnvironmentPackage, written: ImageFiles) -> Iterable[Defect]:
    """A verifier or solution file (code, an answer file) the build put in the image, as is
    or nearly (``leaks.similarity``). One the build copied verbatim from ``environment/`` is
    already reported by the audit (and its near copies by ``near_copies_in_context``)."""
    in_context = {meaning(data) for data in pkg.under("environment").values()}
    context_bytes = set(pkg.under("environment").values())
    candidates: dict[str, bytes] | None = None
    for rel, content in private_files(pkg).items():
        where = written.saying(content)
        if where is not None:
            if meaning(content) not in in_context:
                yield Defect.of(
                    DefectCode.LEAK_VERIFIER_CONTENT,
                    f"the image's {where}, written by environment/Dockerfile, says what {rel} "
                    "says; the agent can read it",
                    file=rel,
                    image_path=where,
                )
            continue
        if candidates is None:
            candidates = {w: c for w, c in written.contents().items() if c not in context_bytes}
        near = nearest(content, candidates)
        if near is not None:
            yield Defect.of(
                DefectCode.LEAK_VERIFIER_CONTENT,
                f"the image's {near.where}, written by environment/Dockerfile, is a near copy "
                f"of {rel} (similarity {near.similarity:.2f}); the agent can read it",
                file=rel,
                image_path=near.where,
                similarity=near.similarity,
            )


def private_files(pkg: EnvironmentPackage) -> dict[str, bytes]:
    """The verifier's and the solution's code and answer files (steps' too)."""
    found = {}
    for rel, content in sorted(pkg.files.items()):
        parts = PurePosixPath(rel).parts
        private_dir = parts[0] in ("tests", "solution") or (
            len(parts) > 3 and parts[0] == "steps" and parts[2] in ("tests", "solution")
        )
        if private_dir and is_private(rel) and len(content) >= 32:
            found[rel] = content
    return found


def near_copies_in_context(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """An ``environment/`` file (what the image is built from, agent-visible) that is a near
    copy of verifier or solution content: a grader copied with a path changed, an answer
    file with a row edited. Byte-identical copies are the audit's finding already."""
    if pkg.is_cowork:
        return  # the audit's exact checks and the Cowork layout cover our own packages
    context = {
        f"environment/{rel}": data
        for rel, data in pkg.under("environment").items()
        if not rel.endswith("Dockerfile")
    }
    reported: set[str] = set()
    for rel, content in private_files(pkg).items():
        if content in context.values():
            continue  # an exact copy: audit.private_files_in_workspace
        near = nearest(content, {w: c for w, c in context.items() if w not in reported})
        if near is not None:
            reported.add(near.where)
            yield Defect.of(
                DefectCode.LEAK_VERIFIER_CONTENT,
                f"{near.where} is a near copy of {rel} (similarity {near.similarity:.2f}); "
                "the agent can read it",
                file=near.where,
                source=rel,
                similarity=near.similarity,
            )

"""Where a plain Harbor task runs under ``check``: in its own image, or emulated.

``auto`` (the default) builds ``environment/Dockerfile`` with buildah where this machine can
(root, buildah installed, a bubblewrap sandbox) and runs every phase in that image's root
file system; elsewhere it emulates the Dockerfile's WORKDIR and COPY lines on the host's
``/usr`` (RUN lines are not executed, and a failure they may explain is "could not run").
``build`` insists on the image (a machine that cannot build makes the task "could not
run"); ``emulate`` never builds. Our own Cowork packages always run as before: their image
is the project's role sandbox, which the host's sandbox already mirrors.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal, cast, get_args

from ..image.bases import BaseMap
from ..image.build import BuildNetwork, ImageBuildFailed, TaskImageBuilder
from ..image.buildah import Buildah, BuildahError
from ..image.leaks import ImageFiles, meaning
from ..image.mounted import MountedImage, mounted
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..sandbox import BubblewrapSandbox, SandboxUnavailable
from .audit import is_private
from .defects import Defect, DefectCode

ImageMode = Literal["auto", "build", "emulate"]


class ImageUnavailable(RuntimeError):
    """The task needs its image and this machine cannot provide it; the message says why."""


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
    build_network: BuildNetwork = "none"

    def builder(self) -> TaskImageBuilder:
        return TaskImageBuilder(BaseMap.from_settings(self.base_images), self.build_network)


@dataclass
class Placement:
    runtime: LocalRuntime
    image: MountedImage | None = None
    note: str | None = None  # why the task runs emulated although it has a Dockerfile


def builds_an_image(pkg: EnvironmentPackage) -> bool:
    """Harbor builds the task's Dockerfile (no prebuilt docker_image) for plain tasks."""
    return (
        not pkg.is_cowork
        and "environment/Dockerfile" in pkg.files
        and not pkg.config.environment.docker_image
    )


@contextlib.contextmanager
def placement(
    pkg: EnvironmentPackage, settings: ImageSettings, runtime: LocalRuntime
) -> Iterator[Placement]:
    """The runtime (and mounted image) the task's phases run in, for the block."""
    if settings.mode == "emulate" or not builds_an_image(pkg):
        yield Placement(runtime)
        return
    cannot = Buildah.usable()
    if cannot is None and not isinstance(runtime.sandbox, BubblewrapSandbox):
        cannot = "the sandbox is not bubblewrap, which can run an image's root file system"
    if cannot is not None:
        if settings.mode == "build":
            raise ImageUnavailable(f"environment/Dockerfile cannot be built here: {cannot}")
        yield Placement(runtime, note=f"environment/Dockerfile is emulated, not built: {cannot}")
        return
    try:
        with mounted(settings.builder(), pkg) as image:
            try:
                sandbox = BubblewrapSandbox(rootfs=image.rootfs, env=image.image.env)
            except SandboxUnavailable as exc:
                raise ImageUnavailable(str(exc)) from exc
            inside = LocalRuntime(sandbox, runtime.solution_limits, runtime.verifier_limits)
            inside.parallel = runtime.parallel
            yield Placement(inside, image)
    except ImageBuildFailed as exc:
        raise ImageUnavailable(str(exc)) from exc
    except BuildahError as exc:
        raise ImageUnavailable(f"buildah failed: {exc} ({exc.log.strip()[-300:]})") from exc


def verifier_content_in_image(pkg: EnvironmentPackage, written: ImageFiles) -> Iterable[Defect]:
    """A verifier or solution file (code, an answer file) the build put in the image. One the
    build copied verbatim from ``environment/`` is already reported by the audit."""
    in_context = {meaning(data) for data in pkg.under("environment").values()}
    for rel, content in sorted(pkg.files.items()):
        parts = PurePosixPath(rel).parts
        private_dir = parts[0] in ("tests", "solution") or (
            len(parts) > 3 and parts[0] == "steps" and parts[2] in ("tests", "solution")
        )
        if not private_dir or not is_private(rel) or len(content) < 32:
            continue
        where = written.saying(content)
        if where is not None and meaning(content) not in in_context:
            yield Defect.of(
                DefectCode.LEAK_VERIFIER_CONTENT,
                f"the image's {where}, written by environment/Dockerfile, says what {rel} "
                "says; the agent can read it",
                file=rel,
                image_path=where,
            )

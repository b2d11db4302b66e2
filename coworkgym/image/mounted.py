"""A built task image, mounted: the root file system the sandbox runs each phase in, the
workspace it starts from, and the files its build wrote (for the leak scan)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..package.package import EnvironmentPackage
from ..runtime.workspace import WorkspaceLayout, snapshot
from .build import TaskImage, TaskImageBuilder
from .leaks import ImageFiles, changed_files, files_in_layers


@dataclass
class MountedImage:
    image: TaskImage
    rootfs: Path
    written: ImageFiles  # what the build added or changed on top of its base

    def workdir(self, pkg: EnvironmentPackage) -> str:
        """Harbor's rule: the task's ``[environment] workdir``, else the image's WORKDIR."""
        return pkg.config.environment.workdir or self.image.workdir or "/"

    def materialize(self, pkg: EnvironmentPackage, dest: Path) -> WorkspaceLayout:
        """s0: the image's working directory as the build left it (COPY and RUN alike)."""
        workdir = self.workdir(pkg)
        source = self.rootfs / PurePosixPath(workdir).relative_to("/")
        if PurePosixPath(workdir) != PurePosixPath("/") and source.is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        else:
            dest.mkdir(parents=True, exist_ok=True)
        return WorkspaceLayout(workdir, snapshot(dest))


@contextlib.contextmanager
def mounted(
    builder: TaskImageBuilder, pkg: EnvironmentPackage, source: Path | None = None
) -> Iterator[MountedImage]:
    """Build (or find) the task's image and mount a working container of it for the block."""
    image = builder.build(pkg, source)
    with builder.buildah.rootfs(image.ref) as rootfs:
        layers = builder.buildah.layer_dirs(image.added_layers)
        if layers is not None:  # the build's own layers: read them, not the whole image
            written = files_in_layers(layers, rootfs)
        elif image.base is not None:
            with builder.buildah.rootfs(image.base) as base:
                written = changed_files(rootfs, base)
        else:
            written = changed_files(rootfs, None)
        yield MountedImage(image, rootfs, ImageFiles(written))

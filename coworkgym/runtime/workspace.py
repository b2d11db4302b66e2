"""Workspaces on disk: s0 from a package, user patches applied to it, snapshots of it.

A Cowork package keeps s0 under ``environment/workspace/``. A plain Harbor task keeps it in
its Dockerfile's build context; we emulate the Dockerfile's WORKDIR and COPY lines (RUN
lines cannot run without a container engine and are reported as skipped).

A workspace in a task image whose root is writable (``LocalRuntime.writable_root``) has a
second part: what its runs wrote outside the working directory (``/output/``, say), kept in
``root_changes(workspace)`` beside it; ``copy_tree`` copies both.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..package.package import EnvironmentPackage


@dataclass
class WorkspaceLayout:
    workdir: str
    files: dict[str, bytes]  # relative to workdir
    skipped: list[str] = field(default_factory=list)  # Dockerfile lines we could not emulate


def layout(pkg: EnvironmentPackage) -> WorkspaceLayout:
    if pkg.is_cowork:
        return WorkspaceLayout(pkg.config.environment.workdir or "/app", pkg.workspace())
    return emulate_dockerfile(pkg)


def emulate_dockerfile(pkg: EnvironmentPackage) -> WorkspaceLayout:
    context = pkg.under("environment")
    dockerfile = context.get("Dockerfile", b"").decode("utf-8", errors="replace")
    workdir = "/"
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    for line in _logical_lines(dockerfile):
        word, _, rest = line.partition(" ")
        match word.upper():
            case "WORKDIR":
                workdir = str(PurePosixPath(workdir) / rest.strip())
            case "COPY" | "ADD" if "--from=" in rest:
                skipped.append(line)  # files of another image or stage: not here
            case "COPY" | "ADD":
                args = [a for a in shlex.split(rest) if not a.startswith("--")]
                for src in args[:-1]:
                    for target, content in _copy(context, src, workdir, args[-1]):
                        files[target] = content
            case "RUN":
                skipped.append(line)
    workdir = pkg.config.environment.workdir or workdir
    inside: dict[str, bytes] = {}
    for target, content in files.items():
        try:
            rel = PurePosixPath(target).relative_to(workdir).as_posix()
            if rel == ".":
                raise ValueError(target)  # a file where the workdir is: no workspace file
            inside[rel] = content
        except ValueError:
            skipped.append(f"COPY to {target} (outside the workdir {workdir})")
    return WorkspaceLayout(workdir, inside, skipped)


def _copy(context: dict[str, bytes], src: str, workdir: str, dest: str) -> list[tuple[str, bytes]]:
    """Docker's COPY semantics for one source: a directory's contents land in dest."""
    base = PurePosixPath(workdir) / dest
    src = src.rstrip("/").removeprefix("./")
    copied = []
    for rel, content in context.items():
        if src in ("", "."):
            copied.append((str(base / rel), content))
        elif rel == src:  # into a directory: "dir/", or one known to exist (the workdir)
            into_dir = dest.endswith("/") or base == PurePosixPath(workdir)
            copied.append((str(base / PurePosixPath(rel).name) if into_dir else str(base), content))
        elif rel.startswith(src + "/"):
            copied.append((str(base / rel[len(src) + 1 :]), content))
    return copied


def _logical_lines(text: str) -> list[str]:
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    return lines


def write_files(root: Path, files: dict[str, bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def materialize(pkg: EnvironmentPackage, dest: Path) -> WorkspaceLayout:
    """Write s0 into an empty directory ``dest``."""
    found = layout(pkg)
    dest.mkdir(parents=True, exist_ok=True)
    write_files(dest, found.files)
    return found


def apply_patch(pkg: EnvironmentPackage, turn: int, workspace: Path) -> list[str]:
    """Apply user turn ``turn``'s authorized updates; returns the paths touched."""
    patch = next((p for p in pkg.patches if p.turn == turn), None)
    if patch is None:
        raise KeyError(f"package {pkg.name} has no user turn {turn}")
    sources = pkg.patch_files(turn)
    touched = []
    for update in patch.updates:
        target = workspace / update.path
        if update.op == "delete":
            target.unlink(missing_ok=True)
        else:
            assert update.source is not None  # validated by the model
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(sources[update.source])
        touched.append(update.path)
    return touched


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    }


def root_changes(workspace: Path) -> Path:
    """Where what the workspace's runs wrote outside the working directory is kept: an
    overlay's upper directory (``sandbox.overlay``), beside the workspace, hidden."""
    return workspace.with_name(f".{workspace.name}.root-changes")


def copy_tree(src: Path, dest: Path) -> Path:
    """A copy of the workspace ``src`` (and of its root changes, when it has any)."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    changes = root_changes(src)
    if changes.is_dir():
        # cp -a keeps what overlayfs marks deletions with (0/0 devices, xattrs) and owners
        subprocess.run(["cp", "-a", f"{changes}/.", str(root_changes(dest))], check=True)
    return dest

"""An environment package on disk: Harbor's task layout plus the Cowork extensions.

The files are the single representation (relative path → bytes); the parsed models are views
of them. Loading validates every file we understand and reports problems by file and field.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ValidationError

from ..verifier.spec import VerifierSpec
from .config import TaskConfig
from .cowork import ArtifactGraph, Interfaces, TurnPatch, UserState
from .errors import PackageError, location
from .limits import (
    MAX_LOAD_ENTRIES,
    MAX_LOAD_FILE_BYTES,
    MAX_LOAD_TOTAL_BYTES,
    TooDeep,
    loads_bounded,
    name_problem,
    symlink_problem,
    zip_problem,
)

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
WORKSPACE_DIR = "environment/workspace"
SOLVE_SH = "solution/solve.sh"
TEST_SH = "tests/test.sh"
VERIFIER_SPEC = "tests/verifier.json"
VERIFIER_INPUTS = "tests/inputs"
USER_STATE = ".user/user.json"
PATCH_DIR = ".patch"
INTERFACES = ".cowork/interfaces.json"
ARTIFACT_GRAPH = ".cowork/artifacts.json"

# What Harbor packages and hashes (its Packager); our digest adds the Cowork extensions.
HARBOR_TOP_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
HARBOR_DIRS = ("environment/", "tests/", "solution/", "steps/")
COWORK_DIRS = (".user/", ".patch/", ".cowork/")
IGNORED_PARTS = ("__pycache__", ".DS_Store")


@dataclass
class EnvironmentPackage:
    files: dict[str, bytes]
    executables: set[str] = field(default_factory=set)
    symlinks: dict[str, str] = field(default_factory=dict)
    config: TaskConfig = field(default_factory=TaskConfig)
    verifier: VerifierSpec | None = None
    user: UserState | None = None
    patches: list[TurnPatch] = field(default_factory=list)
    interfaces: Interfaces | None = None
    artifacts: ArtifactGraph | None = None
    # What loading accepted the way Harbor does but a user may want to know: legacy fields
    # migrated, unknown task.toml keys Harbor ignores.
    notes: list[str] = field(default_factory=list)

    # ---- construction ---------------------------------------------------------------
    @classmethod
    def load(cls, root: Path) -> EnvironmentPackage:
        if not (root / TASK_TOML).is_file():
            raise PackageError.single(f"{root}/{TASK_TOML}", "missing; every package needs one")
        files, executables, symlinks = read_tree(root)
        return cls.from_files(files, executables, symlinks)

    @classmethod
    def from_files(
        cls,
        files: dict[str, bytes],
        executables: Iterable[str] = (),
        symlinks: dict[str, str] | None = None,
    ) -> EnvironmentPackage:
        problems = content_problems(files, symlinks or {})
        if problems:  # nothing below may see a hostile name or a zip bomb
            raise PackageError(problems)
        pkg = cls(files=dict(files), executables=set(executables), symlinks=symlinks or {})
        try:
            raw = tomllib.loads(files[TASK_TOML].decode("utf-8"))
            pkg.config = load_task_config(raw, pkg.notes)
            pkg.config.cowork  # noqa: B018 - validates [metadata.cowork] if present
        except KeyError:
            problems.append(f"{TASK_TOML}: missing; every package needs one")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"{TASK_TOML}: malformed TOML ({exc}); fix the syntax")
        except ValidationError as exc:
            prefix = "metadata.cowork." if "CoworkMetadata" in exc.title else ""
            problems += [p.replace(": ", f": {prefix}", 1) for p in _problems(TASK_TOML, exc)]
        pkg.verifier = _parse_json(files, VERIFIER_SPEC, VerifierSpec, problems)
        pkg.user = _parse_json(files, USER_STATE, UserState, problems)
        pkg.interfaces = _parse_json(files, INTERFACES, Interfaces, problems)
        pkg.artifacts = _parse_json(files, ARTIFACT_GRAPH, ArtifactGraph, problems)
        for name in sorted(p for p in files if _is_patch_manifest(p)):
            patch = _parse_json(files, name, TurnPatch, problems)
            if patch is not None:
                pkg.patches.append(patch)
        if problems:
            raise PackageError(problems)
        return pkg

    # ---- views ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.task.name if self.config.task else "unnamed"

    @property
    def is_cowork(self) -> bool:
        return self.config.cowork is not None

    @property
    def is_multi_step(self) -> bool:
        """Harbor's multi-step layout (``[[steps]]``, ``steps/<name>/``), run step by step.
        A Cowork package also declares steps, but its turns run from ``.patch/``."""
        return bool(self.config.steps) and not self.is_cowork

    @property
    def step_names(self) -> list[str]:
        return [step.name for step in self.config.steps or []]

    @property
    def instruction(self) -> str:
        """What the agent is asked (every step's instruction for a multi-step task)."""
        if self.is_multi_step:
            return "\n".join(self.text(f"steps/{name}/{INSTRUCTION}") for name in self.step_names)
        return self.text(INSTRUCTION)

    def text(self, rel: str) -> str:
        return self.files.get(rel, b"").decode("utf-8", errors="replace")

    def under(self, prefix: str) -> dict[str, bytes]:
        """Files below a directory, keyed relative to it."""
        base = prefix.rstrip("/") + "/"
        return {k[len(base) :]: v for k, v in self.files.items() if k.startswith(base)}

    def workspace(self) -> dict[str, bytes]:
        """s0 of a Cowork package: the files the agent starts with."""
        return self.under(WORKSPACE_DIR)

    def patch_files(self, turn: int) -> dict[str, bytes]:
        return self.under(f"{PATCH_DIR}/turn-{turn:02d}/files")

    # ---- persistence ----------------------------------------------------------------
    def write(self, root: Path) -> Path:
        """Write every file (and only those), replacing what a previous write left there."""
        return write_tree(root, self.files, self.executables, self.symlinks)

    def digest(self) -> str:
        """sha256 over 'path\\0sha256(content)\\n' lines, like Harbor's, over the whole package."""
        return content_digest(self.files)

    def harbor_digest(self) -> str:
        """The digest Harbor itself computes (its packaged file set only)."""
        return content_digest({k: v for k, v in self.files.items() if in_harbor_package(k)})


def content_problems(files: dict[str, bytes], symlinks: dict[str, str]) -> list[str]:
    """Why these files and symlinks cannot be a package (limits.py): hostile names,
    symlinks out of the package, zip bombs. [] when they can."""
    problems = [p for rel in [*files, *symlinks] if (p := name_problem(rel))]
    problems += [p for rel, target in symlinks.items() if (p := symlink_problem(rel, target))]
    problems += [p for rel, data in files.items() if (p := zip_problem(rel, data))]
    return problems


def write_tree(
    root: Path,
    files: dict[str, bytes],
    executables: set[str] | frozenset[str] = frozenset(),
    symlinks: dict[str, str] | None = None,
) -> Path:
    """Write exactly these files and symlinks under ``root``. Refuses (PackageError, before
    writing anything) a name or symlink that could land outside ``root``; never writes
    through a symlink a previous write (or anyone) left there."""
    problems = content_problems(dict.fromkeys(files, b""), symlinks or {})
    if problems:
        raise PackageError(problems)
    root.mkdir(parents=True, exist_ok=True)
    # symlinks first: a directory link left in place would carry later writes outside
    for existing in sorted(root.rglob("*"), key=lambda p: len(p.parts)):
        if existing.is_symlink():
            existing.unlink()
    for existing in [p for p in root.rglob("*") if p.is_file()]:
        if existing.relative_to(root).as_posix() not in files:
            existing.unlink()
    for rel, content in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o755 if rel in executables else 0o644)
    for rel, target in (symlinks or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)
    return root


def content_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{hashlib.sha256(files[rel]).hexdigest()}\n".encode())
    return f"sha256:{h.hexdigest()}"


def load_task_config(raw: dict[str, Any], notes: list[str]) -> TaskConfig:
    """Validate task.toml. A Cowork package is strict; a plain Harbor task loads as Harbor
    loads it: unknown keys are dropped (each named in ``notes``), legacy fields migrated."""
    cowork = isinstance(raw.get("metadata"), dict) and "cowork" in raw["metadata"]
    ignored: list[str] = []
    while True:
        migrated: list[str] = []
        try:
            config = TaskConfig.model_validate(raw, context={"notes": migrated})
        except ValidationError as exc:
            unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if cowork or not unknown or not all(_drop(raw, loc) for loc in unknown):
                raise
            for loc in unknown:
                ignored.append(f"{TASK_TOML}: {location(loc)}: unknown field; Harbor ignores it")
            continue
        notes += [f"{TASK_TOML}: {line}" for line in migrated] + ignored
        return config


def _drop(node: Any, loc: tuple[int | str, ...]) -> bool:
    """Delete the key at a validation error's location; False if it is not there. Union
    members add their class name to the location, which the data does not have."""
    for part in loc[:-1]:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            node = node[part]
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


def in_harbor_package(rel: str) -> bool:
    return rel in HARBOR_TOP_FILES or rel.startswith(HARBOR_DIRS)


def read_tree(root: Path) -> tuple[dict[str, bytes], set[str], dict[str, str]]:
    """The package's files, read only after every entry passed limits.py's checks: a
    FIFO, a device, a 10 GB file or a million entries is refused, never opened."""
    found: list[tuple[str, Path, os.stat_result]] = []
    problems: list[str] = []
    total = entries = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_PARTS)
        entries += len(dirnames) + len(filenames)  # counted before any is looked at
        if entries > MAX_LOAD_ENTRIES:
            raise PackageError.single(
                str(root), f"more than {MAX_LOAD_ENTRIES} entries; not a package"
            )
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if any(part in IGNORED_PARTS for part in PurePosixPath(rel).parts) or rel.endswith(
                ".pyc"
            ):
                continue
            info = path.lstat()
            if problem := name_problem(rel):
                problems.append(problem)
            elif not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                kind = _special_kind(info.st_mode)
                problems.append(f"{rel}: is a {kind}; a package holds regular files only")
            elif stat.S_ISREG(info.st_mode) and info.st_size > MAX_LOAD_FILE_BYTES:
                problems.append(
                    f"{rel}: {info.st_size} bytes; a package file may have at most "
                    f"{MAX_LOAD_FILE_BYTES}"
                )
            else:
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
                found.append((rel, path, info))
    if total > MAX_LOAD_TOTAL_BYTES:
        problems.append(f"{root}: {total} bytes in all; at most {MAX_LOAD_TOTAL_BYTES}")
    if problems:
        raise PackageError(problems)
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    symlinks: dict[str, str] = {}
    for rel, path, info in found:
        if stat.S_ISLNK(info.st_mode):
            symlinks[rel] = os.readlink(path)
            continue
        # O_NOFOLLOW|O_NONBLOCK: swapped for a symlink or a FIFO since the lstat, the open
        # fails (or cannot block) instead of reading something else
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PackageError.single(rel, "changed into a special file while loading")
            files[rel] = handle.read(MAX_LOAD_FILE_BYTES + 1)[:MAX_LOAD_FILE_BYTES]
        if info.st_mode & stat.S_IXUSR:
            executables.add(rel)
    return files, executables, symlinks


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device node"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def _is_patch_manifest(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) == 3 and parts[0] == PATCH_DIR and parts[2] == "patch.json"


def _parse_json[M: BaseModel](
    files: dict[str, bytes], rel: str, model: type[M], problems: list[str]
) -> M | None:
    if rel not in files:
        return None
    try:
        data: Any = loads_bounded(files[rel])
        return model.model_validate(data)
    except TooDeep as exc:
        problems.append(f"{rel}: JSON {exc}; flatten it")
        return None
    except ValueError as exc:  # includes UnicodeDecodeError
        if isinstance(exc, ValidationError):
            problems.extend(_problems(rel, exc))
        else:
            problems.append(f"{rel}: not valid JSON ({exc})")
        return None


def _problems(rel: str, exc: ValidationError) -> list[str]:
    return PackageError.from_validation(rel, exc).problems


def dumps_json(model: BaseModel | dict[str, Any]) -> bytes:
    """Deterministic JSON for package files (sorted keys, 2-space indent, trailing newline)."""
    data = (
        model.model_dump(mode="json", exclude_none=True, by_alias=True)
        if isinstance(model, BaseModel)
        else model
    )
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()

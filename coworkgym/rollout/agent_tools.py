"""The acting agent's sandbox and tools: the package's interfaces, confined to the workspace.

The agent's sandbox mounts *only* the workspace (at the package's workdir). The private
parts of a package — ``solution/``, ``tests/``, ``.user/``, ``.patch/`` — are never copied
into it, so no path the agent names can reach them; the file tools resolve every path the
way the sandbox would (``RoleMounts``), symlinks included. ``.cowork/interfaces.json``
decides which tools exist and which workspace sub-paths are readable and writable; a plain
Harbor task without that file gets the shell and the file tools on the whole workspace.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..llm.tools import RoleMounts, Tool, ToolBox, standard_tools
from ..package.cowork import Interfaces
from ..package.package import EnvironmentPackage
from ..runtime.verifier_copy import shown
from ..sandbox import BubblewrapSandbox, Mount, Sandbox
from .harness import ASK_USER_TOOL, FINISH_TOOL
from .trajectory import FileDigest

DEFAULT_TOOLS = ("shell", "read_file", "write_file", "edit_file", "list_files")


def interfaces_of(pkg: EnvironmentPackage, workdir: str) -> Interfaces:
    """The package's declared interfaces, or the default for a plain Harbor task."""
    if pkg.interfaces is not None:
        return pkg.interfaces
    return Interfaces(tools=list(DEFAULT_TOOLS), workdir=workdir)


def agent_mounts(workspace: Path, workdir: str, interfaces: Interfaces) -> RoleMounts:
    """The workspace at ``workdir``: read-write where ``writable`` says, read-only where
    only ``readable`` does, absent elsewhere. Nothing outside the workspace is mounted."""
    writable = [_norm(p) for p in interfaces.writable]
    readable = [_norm(p) for p in interfaces.readable]
    mounts: list[Mount] = []
    if "." in writable:
        mounts.append(Mount(workspace, workdir, writable=True))
    else:
        if "." in readable:
            mounts.append(Mount(workspace, workdir))
        else:
            mounts += [_sub(workspace, workdir, p, writable=False) for p in readable]
        mounts += [_sub(workspace, workdir, p, writable=True) for p in writable]
    return RoleMounts(tuple(mounts), workdir)


def _norm(path: str) -> str:
    return posixpath.normpath(path.strip("/")) or "."


def _sub(workspace: Path, workdir: str, rel: str, *, writable: bool) -> Mount:
    if rel.startswith("..") or posixpath.isabs(rel):
        raise ValueError(f"interfaces path {rel!r} must stay inside the workspace")
    host = workspace / rel
    host.mkdir(parents=True, exist_ok=True)  # a declared path the agent may fill
    return Mount(host, posixpath.join(workdir, rel), writable=writable)


def agent_toolbox(
    mounts: RoleMounts,
    sandbox: Sandbox,
    interfaces: Interfaces,
    *,
    memory_mb: int = 2048,
    disk_mb: int | None = None,
    max_files: int | None = None,
    task_env: dict[str, str] | None = None,
) -> ToolBox:
    """The tools; shell commands see the task's ``[environment.env]`` (as in Harbor's
    container), except values that name a host variable (``${…}``): those would be the
    host's secrets, and the sandbox gets none."""
    env = {k: v for k, v in (task_env or {}).items() if "${" not in v}
    env["COWORK_WORKSPACE"] = mounts.cwd
    tools: list[Tool[Any]] = standard_tools(
        mounts,
        sandbox,
        env=env,
        memory_mb=memory_mb,
        disk_mb=disk_mb,
        max_files=max_files,
        names=list(interfaces.tools),
    )
    note = persistence_note(sandbox, mounts.cwd)
    return ToolBox.of(
        replace(t, description=f"{t.description} {note}") if t.name == "shell" else t for t in tools
    )


def persistence_note(sandbox: Sandbox, workdir: str) -> str:
    """What survives from one shell call to the next, as it is on this backend (bubblewrap
    mounts a fresh tmpfs at /tmp for every run; the in-pod backend runs plain subprocesses
    in the pod, whose /tmp is the pod's): a script written to /tmp and gone at the next call
    must not surprise the agent."""
    fresh = "Each call is a new bash process: the current directory, shell variables and "
    fresh += "background processes do not carry over."
    if isinstance(sandbox, BubblewrapSandbox):
        return (
            f"{fresh} Only {workdir} persists between calls; /tmp (also $HOME) is empty again "
            f"at every call, so keep any file you need later under {workdir}."
        )
    return f"{fresh} {workdir} persists between calls; keep any file you need later there."


def episode_tool_specs(toolbox: ToolBox) -> list[dict[str, Any]]:
    """OpenAI ``tools``: the package's interfaces, then ``ask_user`` and ``finish``."""
    extra = [
        _function(
            ASK_USER_TOOL,
            "Ask the user a clarifying question. They answer what they know; they do not "
            "know everything.",
            {"question": {"type": "string", "description": "one clear question"}},
            ["question"],
        ),
        _function(
            FINISH_TOOL,
            "End your turn: say what you did and list the workspace files you produced or "
            "changed. The user may answer with a follow-up request.",
            {
                "summary": {"type": "string", "description": "what you did, briefly"},
                "deliverables": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "workspace paths (relative to the working directory)",
                },
            },
            ["summary"],
        ),
    ]
    return [*toolbox.specs(), *extra]


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


# ---- workspace digests --------------------------------------------------------------
def digests(root: Path) -> dict[str, FileDigest]:
    """sha256 of every regular file under ``root``. Symlinks are recorded by neither side
    and never followed: the agent may plant one pointing anywhere on the host. A name that
    is not UTF-8 is recorded with its bytes escaped (``weather\\xff.csv``), or the
    trajectory could not be written as JSON."""
    found: dict[str, FileDigest] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            rel = shown(path.relative_to(root).as_posix())
            found[rel] = FileDigest(path=rel, sha256=_sha256(path), size=info.st_size)
    return found


def remove_special_files(root: Path) -> list[str]:
    """Delete what is neither a regular file, a directory nor a symlink (FIFOs, sockets,
    device nodes the agent made): opening a FIFO blocks, so copying the workspace for the
    verifier or writing a user patch through one would hang this process."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*filenames, *dirnames]:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                path.unlink()
                removed.append(path.relative_to(root).as_posix())
    return sorted(removed)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Diff:
    created: list[str]
    modified: list[str]
    deleted: list[str]


def diff(before: dict[str, FileDigest], after: dict[str, FileDigest]) -> Diff:
    return Diff(
        created=sorted(set(after) - set(before)),
        modified=sorted(p for p in after if p in before and after[p].sha256 != before[p].sha256),
        deleted=sorted(set(before) - set(after)),
    )


__all__ = [
    "Diff",
    "agent_mounts",
    "agent_toolbox",
    "diff",
    "digests",
    "episode_tool_specs",
    "interfaces_of",
    "persistence_note",
    "remove_special_files",
]

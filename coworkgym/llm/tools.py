"""The tools a role's agent may call, confined to that role's mounts.

``shell`` runs in the role's sandbox (bubblewrap locally: no network, only the role's
mounts, an unprivileged uid). The file tools run in this process for speed, but every path
goes through ``RoleMounts.resolve``, which resolves it — symlinks included — exactly as the
sandbox would see it: it must end under one of the role's mount targets, and writes need a
writable mount. A symlink planted by a shell command (``ln -s /etc x``) therefore leads a
file tool nowhere the sandbox itself could not go.

A tool's arguments are a pydantic model: its JSON schema is what the model sees, and a call
whose arguments do not validate is answered with the validation error (the model fixes its
call), never an exception.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..sandbox import Limits, Mount, Sandbox
from ..sandbox.base import DISK_LIMIT_MESSAGE

MAX_TOOL_OUTPUT = 12_000  # characters of one tool result sent back to the model
# said in the descriptions of the tools whose results are clipped: a blind player missed
# whole threads of a long file before it noticed the cut
CUT_NOTE = f"a result over {MAX_TOOL_OUTPUT:,} characters is cut in the middle (the cut is marked)"
MAX_READ_BYTES = 2_000_000
MAX_LISTED = 400


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class ToolResult:
    text: str
    ok: bool = True
    done: bool = False  # the role's output was accepted: the agent loop ends


# ---- where a role may read and write ------------------------------------------------------
MAX_SYMLINKS = 40  # like the kernel's limit on links followed in one lookup


@dataclass(frozen=True)
class RoleMounts:
    mounts: tuple[Mount, ...]
    cwd: str  # where shell commands start and relative paths resolve

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The host path behind a sandbox path. Symlinks are followed the way the sandbox
        sees them (an absolute target is a *sandbox* path), so a link made by a shell
        command means the same to the file tools, and none can lead outside the mounts."""
        if not path or "\0" in path:
            raise ToolError("give a non-empty path")
        start = posixpath.join(self.cwd, path)
        resolved, followed = self._follow(start)
        found = self._mount_of(resolved)
        if found is None:
            roots = ", ".join(m.target for m in self.mounts)
            if followed:
                raise ToolError(
                    f"{posixpath.normpath(start)} leads outside this role's directories "
                    f"(through a symlink; {roots})"
                )
            raise ToolError(f"{resolved} is outside this role's directories ({roots})")
        mount, host = found
        if write and not mount.writable:
            raise ToolError(f"{resolved} is read-only for this role")
        return host

    def _follow(self, start: str) -> tuple[str, bool]:
        """Resolve ``start`` component by component in sandbox-path space."""
        pending = [p for p in start.split("/") if p]
        resolved, hops = "/", 0
        while pending:
            part = pending.pop(0)
            if part == ".":
                continue
            if part == "..":
                resolved = posixpath.dirname(resolved)
                continue
            candidate = posixpath.join(resolved, part)
            found = self._mount_of(candidate)
            if found is not None and found[1].is_symlink():
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise ToolError(f"{start}: too many levels of symbolic links")
                target = os.readlink(found[1])
                pending = [p for p in target.split("/") if p] + pending
                if target.startswith("/"):
                    resolved = "/"
                continue
            resolved = candidate
        return resolved, hops > 0

    def _mount_of(self, sandbox_path: str) -> tuple[Mount, Path] | None:
        for mount in sorted(self.mounts, key=lambda m: -len(m.target)):
            target = mount.target.rstrip("/")
            if sandbox_path == target or sandbox_path.startswith(target + "/"):
                return mount, mount.source / sandbox_path[len(target) :].lstrip("/")
        return None

    def shown(self, host: Path) -> str:
        """The sandbox path of a host path under one of the mounts."""
        for mount in sorted(self.mounts, key=lambda m: -len(str(m.source))):
            root = mount.source
            if host == root or root in host.parents:
                rel = host.relative_to(root).as_posix()
                return mount.target if rel == "." else f"{mount.target.rstrip('/')}/{rel}"
        return str(host)


# ---- the tool registry ------------------------------------------------------------------
class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool[A: Args]:
    name: str
    description: str
    args: type[A]
    run: Callable[[A], ToolResult | str]

    def spec(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def call(self, raw: Mapping[str, Any]) -> ToolResult:
        args = self.args.model_validate(raw)
        result = self.run(args)
        return result if isinstance(result, ToolResult) else ToolResult(result)


@dataclass
class ToolBox:
    tools: dict[str, Tool[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Iterable[Tool[Any]]) -> ToolBox:
        return cls({t.name: t for t in tools})

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    def dispatch(self, name: str, arguments: str | None) -> ToolResult:
        """Run one tool call as the model wrote it; every mistake becomes an error result."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools)
            return ToolResult(f"error: unknown tool {name!r}; the tools are: {known}", ok=False)
        try:
            raw = json.loads(arguments or "{}")
        except ValueError as exc:
            return ToolResult(
                f"error: the arguments of {name} are not valid JSON ({exc}); "
                "send one JSON object with the fields of its schema",
                ok=False,
            )
        if not isinstance(raw, dict):
            return ToolResult(f"error: the arguments of {name} must be a JSON object", ok=False)
        try:
            return tool.call(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            return ToolResult(f"error: bad arguments for {name}: {problems}", ok=False)
        except ToolError as exc:
            return ToolResult(f"error: {exc}", ok=False)
        except OSError as exc:
            return ToolResult(f"error: {type(exc).__name__}: {exc}", ok=False)


def clip(text: str, limit: int = MAX_TOOL_OUTPUT) -> str:
    """Keep the head and the tail (errors tend to be at the end)."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n… [{len(text) - limit} characters cut] …\n{text[-tail:]}"


# ---- the standard tools -----------------------------------------------------------------
class ShellArgs(Args):
    command: str = Field(description="a bash command line, run in the role's sandbox")
    timeout_s: float = Field(120.0, gt=0, le=600, description="seconds before it is killed")


class ReadArgs(Args):
    path: str = Field(description="file to read (absolute, or relative to the working dir)")
    offset: int = Field(0, ge=0, description="first line to return (0-based)")
    limit: int = Field(400, ge=1, le=4000, description="number of lines to return")


class WriteArgs(Args):
    path: str = Field(description="file to create or overwrite; parent dirs are created")
    content: str = Field(description="the complete new content")


class EditArgs(Args):
    path: str
    old: str = Field(min_length=1, description="exact text to replace; must occur exactly once")
    new: str = Field(description="replacement text")
    replace_all: bool = Field(False, description="replace every occurrence instead of one")


class ListArgs(Args):
    path: str = Field(".", description="directory to list")
    max_depth: int = Field(4, ge=1, le=12)


def standard_tools(
    mounts: RoleMounts,
    sandbox: Sandbox,
    *,
    env: Mapping[str, str] | None = None,
    memory_mb: int = 2048,
    disk_mb: int | None = None,
    max_files: int | None = None,
    names: Sequence[str] = ("shell", "read_file", "write_file", "edit_file", "list_files"),
) -> list[Tool[Any]]:
    def shell(a: ShellArgs) -> ToolResult:
        result = sandbox.run(
            ["bash", "-c", a.command],
            list(mounts.mounts),
            limits=Limits(
                timeout_s=a.timeout_s,
                memory_mb=memory_mb,
                max_disk_mb=disk_mb,
                max_files=max_files,
            ),
            env=dict(env or {}),
            cwd=mounts.cwd,
        )
        if result.timed_out:
            status = f"timed out after {a.timeout_s:g}s"
        elif result.oom_killed:
            status = "killed: memory limit exceeded"
        elif result.disk_exceeded:
            status = f"{DISK_LIMIT_MESSAGE}; the limits: {disk_mb} MB, {max_files} files"
        else:
            status = f"exit {result.exit_code}"
        parts = [status]
        if result.stdout:
            parts.append(f"--- stdout ---\n{result.stdout}")
        if result.stderr:
            parts.append(f"--- stderr ---\n{result.stderr}")
        return ToolResult(clip("\n".join(parts)), ok=result.ok)

    def read_file(a: ReadArgs) -> str:
        path = mounts.resolve(a.path)
        if not path.is_file():
            raise ToolError(f"{a.path} is not a file")
        size = path.stat().st_size
        if size > MAX_READ_BYTES:
            raise ToolError(f"{a.path} has {size} bytes; inspect it with shell (head, python3)")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            return f"{a.path} is binary ({size} bytes); inspect it with shell (e.g. python3)"
        lines = data.decode("utf-8", errors="replace").splitlines()
        chunk = lines[a.offset : a.offset + a.limit]
        end = a.offset + len(chunk)
        header = f"{mounts.shown(path)}: lines {a.offset}-{end} of {len(lines)}"
        return clip(header + "\n" + "\n".join(chunk))

    def write_file(a: WriteArgs) -> str:
        path = mounts.resolve(a.path, write=True)
        if path.is_dir():
            raise ToolError(f"{a.path} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(a.content, encoding="utf-8")
        return f"wrote {len(a.content.encode())} bytes to {mounts.shown(path)}"

    def edit_file(a: EditArgs) -> str:
        path = mounts.resolve(a.path, write=True)
        if not path.is_file():
            raise ToolError(f"{a.path} is not a file; create it with write_file")
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count(a.old)
        if count == 0:
            raise ToolError(f"the text to replace does not occur in {a.path}; read it first")
        if count > 1 and not a.replace_all:
            raise ToolError(
                f"the text to replace occurs {count} times in {a.path}; give more context "
                "or set replace_all"
            )
        path.write_text(text.replace(a.old, a.new), encoding="utf-8")
        return f"replaced {count if a.replace_all else 1} occurrence(s) in {mounts.shown(path)}"

    def list_files(a: ListArgs) -> str:
        root = mounts.resolve(a.path)
        if not root.is_dir():
            raise ToolError(f"{a.path} is not a directory")
        lines: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            if depth + 1 >= a.max_depth:
                dirnames[:] = []
            for name in sorted(filenames):
                item = Path(dirpath) / name
                size = item.lstat().st_size
                link = " (symlink)" if item.is_symlink() else ""
                lines.append(f"{mounts.shown(item)}  {size} bytes{link}")
                if len(lines) >= MAX_LISTED:
                    lines.append(f"… more files not listed (limit {MAX_LISTED})")
                    return "\n".join(lines)
        return "\n".join(lines) or f"{mounts.shown(root)} is empty"

    every: dict[str, Tool[Any]] = {
        "shell": Tool(
            "shell",
            "Run a bash command in your sandbox (no network; python3 with openpyxl and "
            "python-docx is installed). Returns the exit status, stdout and stderr; "
            f"{CUT_NOTE}: print less at a time.",
            ShellArgs,
            shell,
        ),
        "read_file": Tool(
            "read_file",
            f"Read a text file, by lines; {CUT_NOTE}: read a long file in parts (offset, limit).",
            ReadArgs,
            read_file,
        ),
        "write_file": Tool("write_file", "Create or overwrite a text file.", WriteArgs, write_file),
        "edit_file": Tool(
            "edit_file", "Replace an exact piece of text in a file.", EditArgs, edit_file
        ),
        "list_files": Tool(
            "list_files", "List the files under a directory, with sizes.", ListArgs, list_files
        ),
    }
    return [every[n] for n in names]

"""The V4A patch envelope ("*** Begin Patch"): parse a patch, and apply it to a folder.

This is the edit format Codex-style models write to their ``apply_patch`` tool. The
``shell-patch`` harness parses a patch here first (a patch that does not parse, or names a
path outside the workspace, is refused before anything runs) and then applies it *inside
the agent's sandbox*: this file is stdlib-only and runs as a script there
(``python3 -c SOURCE WORKDIR PATCH_BASE64``), so a patch reaches only what the sandbox
mounts, and writes only where the sandbox lets the shell write.

The grammar (``path`` relative to the workdir, or absolute under it)::

    patch   := "*** Begin Patch" NL section+ "*** End Patch"
    section := "*** Add File: " path NL ("+" line NL)*
             | "*** Delete File: " path NL
             | "*** Update File: " path NL ["*** Move to: " path NL] hunk*
    hunk    := ("@@" [" " anchor] NL)* body ["*** End of File" NL]
    body    := ((" " | "-" | "+") line NL)+          (an empty line is empty context)

A hunk's context and ``-`` lines must follow one another in the file; ``@@ anchor`` lines
first move past a line equal to the anchor (nested anchors narrow it further); ``*** End of
File`` pins the hunk to the end of the file. Lines are matched exactly, then ignoring
trailing whitespace, then ignoring surrounding whitespace. Hunks apply in file order.

A patch applies whole or not at all: every change is computed in memory, every target is
checked (inside the workdir once symlinks are followed, writable), and only then are files
written. An Add File of an existing file, a Delete or Update of a missing one, a hunk whose
lines are not in the file: each is an error that says which and where, and nothing changes.
"""

from __future__ import annotations

import base64
import os
import posixpath
import sys
from dataclasses import dataclass, field

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
MOVE, END_OF_FILE = "*** Move to: ", "*** End of File"
HEADERS = (ADD, DELETE, UPDATE)
SHOWN_LINES = 8  # lines of a hunk quoted back in an error


class PatchError(ValueError):
    """The patch cannot be parsed or applied; the message is for the model."""


class PartlyApplied(PatchError):
    """Writing failed after some files were written (the checks before writing passed)."""


@dataclass(frozen=True)
class Hunk:
    anchors: tuple[str, ...]  # the @@ lines' text, outermost first
    body: tuple[tuple[str, str], ...]  # (" " | "-" | "+", text), in file order
    at_end: bool = False  # "*** End of File": the hunk ends the file

    @property
    def old(self) -> tuple[str, ...]:
        """Context and removed lines: what the file must have."""
        return tuple(text for kind, text in self.body if kind != "+")

    def new(self, matched: list[str]) -> list[str]:
        """What replaces ``matched`` (the file's lines that matched ``old``): its context
        lines as the file has them, the added lines."""
        out: list[str] = []
        kept = iter(matched)
        for kind, text in self.body:
            if kind == "+":
                out.append(text)
            else:
                line = next(kept)
                if kind == " ":
                    out.append(line)
        return out


@dataclass(frozen=True)
class FileOp:
    kind: str  # "add" | "delete" | "update"
    path: str
    lines: tuple[str, ...] = ()  # an added file's lines
    hunks: tuple[Hunk, ...] = ()
    move_to: str | None = None


@dataclass
class _Lines:
    items: list[str]
    at: int = 0

    def peek(self) -> str | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def take(self) -> str:
        self.at += 1
        return self.items[self.at - 1]

    def number(self) -> int:
        return self.at + 1  # 1-based, counting "*** Begin Patch" as line 1


# ---- parsing ------------------------------------------------------------------------------
def parse(text: str) -> list[FileOp]:
    """The file operations of a patch, in order; ``PatchError`` says what is malformed."""
    lines = text.strip().replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"a patch starts with the line {BEGIN!r}")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchError(f"a patch ends with the line {END!r}")
    body = _Lines(lines[1:-1], 0)
    ops: list[FileOp] = []
    while body.peek() is not None:
        line = body.take()
        if line.startswith(ADD):
            ops.append(_add(_path(line, ADD), body))
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", _path(line, DELETE)))
        elif line.startswith(UPDATE):
            ops.append(_update(_path(line, UPDATE), body))
        elif line.strip():
            raise PatchError(
                f"line {body.number()}: expected '*** Add File: ', '*** Delete File: ' or "
                f"'*** Update File: ', got {line[:80]!r}"
            )
    if not ops:
        raise PatchError("the patch changes no file")
    return ops


def _path(line: str, header: str) -> str:
    path = line[len(header) :].strip()
    if not path:
        raise PatchError(f"{header.strip()} needs a path")
    return path


def _is_header(line: str) -> bool:
    return line.startswith(HEADERS)


def _add(path: str, body: _Lines) -> FileOp:
    lines: list[str] = []
    while (line := body.peek()) is not None and not _is_header(line):
        body.take()
        if not line.startswith("+"):
            raise PatchError(
                f"line {body.number() - 1}: every line of an added file ({path}) starts "
                f"with '+', got {line[:80]!r}"
            )
        lines.append(line[1:])
    return FileOp("add", path, lines=tuple(lines))


def _update(path: str, body: _Lines) -> FileOp:
    move_to = None
    if (line := body.peek()) is not None and line.startswith(MOVE):
        move_to = _path(body.take(), MOVE)
    hunks: list[Hunk] = []
    anchors: list[str] = []
    lines: list[tuple[str, str]] = []

    def close(at_end: bool = False) -> None:
        nonlocal anchors, lines
        if lines or anchors:
            if not lines:
                raise PatchError(f"{path}: a hunk after '@@' has no lines")
            hunks.append(Hunk(tuple(anchors), tuple(lines), at_end))
        anchors, lines = [], []

    while (line := body.peek()) is not None and not _is_header(line):
        body.take()
        if line.startswith("@@"):
            if lines:
                close()
            anchor = line[2:].strip()
            if anchor:
                anchors.append(anchor)
        elif line.strip() == END_OF_FILE:
            close(at_end=True)
        elif line.startswith((" ", "-", "+")) or line == "":
            lines.append((line[:1] or " ", line[1:]))
        else:
            raise PatchError(
                f"line {body.number() - 1}: in an Update File section ({path}) each hunk line "
                f"starts with ' ' (context), '-' (remove) or '+' (add), got {line[:80]!r}"
            )
    close()
    if not hunks and move_to is None:
        raise PatchError(f"Update File {path} has no hunk")
    return FileOp("update", path, hunks=tuple(hunks), move_to=move_to)


# ---- paths --------------------------------------------------------------------------------
def workspace_path(path: str, workdir: str) -> str:
    """``path`` relative to the workdir (posix), or ``PatchError`` when it leaves it."""
    if "\0" in path or "\n" in path:
        raise PatchError(f"{path!r} is not a usable path")
    root = posixpath.normpath(workdir)
    full = posixpath.normpath(posixpath.join(root, path))
    if full == root or not full.startswith(root.rstrip("/") + "/"):
        raise PatchError(f"{path} is outside the workspace {root}; give a path inside it")
    return full[len(root.rstrip("/")) + 1 :]


def check_paths(ops: list[FileOp], workdir: str) -> None:
    """Every path the patch names stays inside the workdir (lexically)."""
    for op in ops:
        workspace_path(op.path, workdir)
        if op.move_to is not None:
            workspace_path(op.move_to, workdir)


# ---- applying -----------------------------------------------------------------------------
@dataclass
class _Tree:
    """The folder as the patch leaves it, in memory until ``commit``."""

    root: str  # on disk, where the workdir is
    workdir: str  # as the model names it
    pending: dict[str, str | None] = field(default_factory=dict)  # rel → text, None = gone

    def disk(self, rel: str) -> str:
        full = os.path.join(self.root, *rel.split("/"))
        real, top = os.path.realpath(full), os.path.realpath(self.root)
        if real != top and not real.startswith(top + os.sep):
            raise PatchError(f"{rel} leads outside the workspace (through a symlink)")
        return full

    def exists(self, rel: str) -> bool:
        if rel in self.pending:
            return self.pending[rel] is not None
        return os.path.lexists(self.disk(rel))

    def read(self, rel: str) -> str:
        if rel in self.pending:
            text = self.pending[rel]
            if text is None:
                raise PatchError(f"{rel} was deleted earlier in this patch")
            return text
        full = self.disk(rel)
        if not os.path.exists(full):
            raise PatchError(f"{rel} does not exist")
        if not os.path.isfile(full):
            raise PatchError(f"{rel} is not a regular file")
        with open(full, "rb") as handle:
            data = handle.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchError(f"{rel} is not UTF-8 text; edit binary files with the shell") from None

    def commit(self) -> None:
        targets = [(rel, self.disk(rel), text) for rel, text in self.pending.items()]
        for rel, full, _text in targets:  # check all before writing any
            if os.path.isdir(full):
                raise PatchError(f"{rel} is a directory")
            if not os.access(_existing_parent(full), os.W_OK):
                raise PatchError(f"{rel} is not writable here (a read-only part of the workspace)")
        written: list[str] = []
        for rel, full, text in targets:
            try:
                if text is None:
                    os.remove(full)
                else:
                    os.makedirs(os.path.dirname(full), exist_ok=True)
                    with open(full, "w", encoding="utf-8", newline="") as handle:
                        handle.write(text)
            except OSError as exc:
                so_far = ", ".join(written) or "none"
                raise PartlyApplied(
                    f"changing {rel} failed ({type(exc).__name__}: {exc}); already changed: "
                    f"{so_far}"
                ) from None
            written.append(rel)


def _existing_parent(path: str) -> str:
    parent = os.path.dirname(path)
    while parent and not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    return parent or "."


def apply(ops: list[FileOp], root: str, workdir: str | None = None) -> list[str]:
    """Apply the operations to the folder ``root`` (the workdir, as this process sees it;
    ``workdir`` is how the model names it, default ``root``); returns one line per file
    changed. Raises ``PatchError`` and leaves every file as it was if any step fails."""
    tree = _Tree(root, workdir or root)
    done: list[str] = []
    for op in ops:
        rel = workspace_path(op.path, tree.workdir)
        if op.kind == "add":
            if tree.exists(rel):
                raise PatchError(
                    f"Add File {rel}: it already exists; change it with Update File, or "
                    "delete it first"
                )
            tree.pending[rel] = "".join(line + "\n" for line in op.lines)
            done.append(f"A {rel}")
        elif op.kind == "delete":
            if not tree.exists(rel):
                raise PatchError(f"Delete File {rel}: it does not exist")
            tree.read(rel)  # a regular file, inside the workspace
            tree.pending[rel] = None
            done.append(f"D {rel}")
        else:
            text = updated(tree.read(rel), op.hunks, rel)
            if op.move_to is None:
                tree.pending[rel] = text
                done.append(f"M {rel}")
                continue
            dest = workspace_path(op.move_to, tree.workdir)
            if dest != rel and tree.exists(dest):
                raise PatchError(f"Move to {dest}: it already exists")
            tree.pending[rel] = None
            tree.pending[dest] = text
            done.append(f"R {rel} -> {dest}")
    tree.commit()
    return done


def updated(text: str, hunks: tuple[Hunk, ...], rel: str = "the file") -> str:
    """``text`` with the hunks applied (its line endings kept; it ends with a newline)."""
    crlf = "\r\n" in text
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        for anchor in hunk.anchors:
            found = _find(lines, (anchor,), cursor)
            if found is None:
                raise PatchError(
                    f"{rel}, hunk {number}: no line {anchor!r} (after '@@') at or after "
                    f"line {cursor + 1}"
                )
            cursor = found + 1
        if not hunk.old:  # only additions: after the anchor, else at the end of the file
            edits.append((cursor if hunk.anchors else len(lines), 0, hunk.new([])))
            continue
        at = _seek(lines, hunk.old, cursor, hunk.at_end)
        if at is None and hunk.body[-1] == (" ", "") and len(hunk.old) > 1:
            hunk = Hunk(hunk.anchors, hunk.body[:-1], hunk.at_end)  # a blank line models add
            at = _seek(lines, hunk.old, cursor, hunk.at_end)
        if at is None:
            shown = "\n".join(hunk.old[:SHOWN_LINES])
            more = (
                f"\n… ({len(hunk.old) - SHOWN_LINES} more)" if len(hunk.old) > SHOWN_LINES else ""
            )
            raise PatchError(
                f"{rel}, hunk {number}: these lines (context and '-') are not in the file at "
                f"or after line {cursor + 1}; read the file and copy them exactly:\n"
                f"{shown}{more}"
            )
        count = len(hunk.old)
        edits.append((at, count, hunk.new(lines[at : at + count])))
        cursor = at + count
    for at, count, new in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[at : at + count] = list(new)
    out = "".join(line + "\n" for line in lines)
    return out.replace("\n", "\r\n") if crlf else out


def _seek(lines: list[str], old: tuple[str, ...], start: int, at_end: bool) -> int | None:
    if at_end:
        end = len(lines) - len(old)
        if end >= start and _find(lines[end:], old, 0) == 0:
            return end
    return _find(lines, old, start)


def _find(lines: list[str], want: tuple[str, ...], start: int) -> int | None:
    """Where ``want`` first occurs at or after ``start``: exactly, then ignoring trailing
    whitespace, then ignoring surrounding whitespace."""
    for norm in (lambda s: s, str.rstrip, str.strip):
        target = [norm(w) for w in want]
        for at in range(start, len(lines) - len(want) + 1):
            if all(norm(lines[at + i]) == target[i] for i in range(len(want))):
                return at
    return None


# ---- as a script, in the sandbox ------------------------------------------------------------
APPLIED = "Patch applied. Files changed:"
NOT_APPLIED = "error: the patch was not applied (no file was changed):"


def main(argv: list[str]) -> int:
    """``WORKDIR PATCH_BASE64``: apply the patch to the workdir; one message on stdout."""
    workdir, encoded = argv[1], argv[2]
    try:
        ops = parse(base64.b64decode(encoded).decode("utf-8"))
        done = apply(ops, workdir)
    except PartlyApplied as exc:
        print(f"error: the patch was applied only in part: {exc}")
        return 1
    except PatchError as exc:
        print(f"{NOT_APPLIED} {exc}")
        return 1
    except OSError as exc:
        print(f"{NOT_APPLIED} {type(exc).__name__}: {exc}")
        return 1
    print("\n".join([APPLIED, *done]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

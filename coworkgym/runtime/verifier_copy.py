"""The verifier's copy of a collected workspace: what the agent left, made safe to grade.

The agent owned its workspace and may have left anything in it. Whatever it did is its own
failure to score, never a reason for the verification to be *invalid* (training masks an
invalid rollout out, so an agent able to cause one could erase any 0). The copy the
verifier (and the rubric judge) reads is therefore normalised:

- modes: every file readable (0644, or 0755 when it had an execute bit), every directory
  traversable (0755); set-id and sticky bits dropped;
- symlinks: kept only when they resolve to something inside the workspace (an absolute
  link into the workdir is rewritten relative, so it resolves the same in the copy);
  links out of the workspace, dangling links and loops are dropped;
- FIFOs, sockets and device nodes are dropped (opening a FIFO blocks, a device reads
  forever or reaches hardware);
- names that are not UTF-8 are dropped (no spec can name them; JSON and the judge's
  prompt cannot carry them);
- sizes: at most ``MAX_FILE_BYTES`` a file (the size the filesystem reports, so a sparse
  100 GB file is refused before a byte is read), ``MAX_TOTAL_BYTES`` in all,
  ``MAX_ENTRIES`` entries, ``MAX_PATH_CHARS`` characters of relative path; holes stay holes.

Every entry dropped is recorded with the reason (``CopyReport``). Entries the host cannot
read because the agent's uid mapped to ours (an unprivileged host) are opened by adding
the owner's permission for the copy, and the original modes are put back afterwards.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["CopyReport", "copy_for_verifier"]

MAX_FILE_BYTES = 256 * 1024 * 1024  # above any package input (64 MiB at most on load)
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024  # the rollout's default workspace disk limit
MAX_ENTRIES = 50_000  # files, directories and links (the rollout allows 20 000 files)
MAX_PATH_CHARS = 1024  # keeps every host path well under PATH_MAX
CHUNK = 1024 * 1024
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


@dataclass
class CopyReport:
    """What the copy holds and what it left out (``path: why``), for the record."""

    files: int = 0
    bytes: int = 0
    links: int = 0
    dropped: list[str] = field(default_factory=list)
    modes_fixed: int = 0  # entries whose mode would have kept the verifier out

    def drop(self, rel: str, why: str) -> None:
        self.dropped.append(f"{shown(rel)}: {why}")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def shown(rel: str) -> str:
    """A path as text that JSON and a terminal can carry (undecodable bytes escaped)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return repr(rel.encode("utf-8", "surrogateescape"))[2:-1]
    return rel


def copy_for_verifier(src: Path, dest: Path, workdir: str = "/app") -> CopyReport:
    """Copy the workspace ``src`` (mounted at ``workdir`` while the agent ran) into the new
    or empty directory ``dest``, normalised as the module says. Never raises for what the
    workspace holds; ``src`` is left as it was."""
    return _Copier(src, dest, workdir).run()


class _Copier:
    def __init__(self, src: Path, dest: Path, workdir: str) -> None:
        self.src, self.dest = src, dest
        self.workdir = posixpath.normpath("/" + workdir.strip("/"))
        self.report = CopyReport()
        self.entries = 0
        self.links: list[str] = []
        self.relaxed: list[tuple[str, int]] = []  # (host path, original mode), to put back

    def run(self) -> CopyReport:
        self.dest.mkdir(parents=True, exist_ok=True)
        self.dest.chmod(0o755)
        with contextlib.suppress(OSError):
            self._fix_mode(os.lstat(self.src).st_mode, 0o755)
        try:
            self._walk()
        finally:
            for path, mode in reversed(self.relaxed):
                with contextlib.suppress(OSError):
                    os.chmod(path, mode)
        self._prune_links()
        self.report.dropped.sort()
        return self.report

    # ---- the walk ---------------------------------------------------------------------
    def _walk(self) -> None:
        pending = [""]
        while pending:
            rel_dir = pending.pop()
            names = self._list(rel_dir)
            if names is None:
                continue
            for name in sorted(names):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if self.entries >= MAX_ENTRIES:
                    self.report.drop(rel, f"past the copy's {MAX_ENTRIES} entries")
                    continue
                self.entries += 1
                if self._copy_entry(rel):
                    pending.append(rel)

    def _list(self, rel_dir: str) -> list[str] | None:
        path = self._src(rel_dir)
        try:
            return os.listdir(path)
        except PermissionError:
            if self._relax(path, stat.S_IRUSR | stat.S_IXUSR):
                with contextlib.suppress(OSError):
                    return os.listdir(path)
        except OSError:
            pass
        self.report.drop(rel_dir or ".", "directory could not be listed")
        return None

    def _copy_entry(self, rel: str) -> bool:
        """Copy one entry; True when it is a directory to descend into."""
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            self.report.drop(rel, "the name is not UTF-8")
            return False
        if len(rel) > MAX_PATH_CHARS:
            self.report.drop(rel, f"path longer than {MAX_PATH_CHARS} characters")
            return False
        try:
            info = os.lstat(self._src(rel))
        except OSError as exc:
            self.report.drop(rel, f"cannot stat: {exc.strerror}")
            return False
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            self._fix_mode(mode, 0o755)
            (self.dest / rel).mkdir(mode=0o755)
            os.chmod(self.dest / rel, 0o755)  # mkdir's mode passes through the umask
            return True
        if stat.S_ISLNK(mode):
            self._copy_link(rel)
        elif stat.S_ISREG(mode):
            self._copy_file(rel, info)
        else:
            self.report.drop(rel, f"{_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}")
        return False

    def _copy_file(self, rel: str, info: os.stat_result) -> None:
        size = info.st_size
        if size > MAX_FILE_BYTES:
            self.report.drop(rel, f"{size} bytes, over the copy's {MAX_FILE_BYTES} a file")
            return
        if self.report.bytes + size > MAX_TOTAL_BYTES:
            self.report.drop(rel, f"the copy holds {MAX_TOTAL_BYTES} bytes at most")
            return
        wanted = 0o755 if info.st_mode & 0o111 else 0o644
        self._fix_mode(info.st_mode, wanted)
        fd = self._open(rel)
        if fd is None:
            return
        target = self.dest / rel
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):  # swapped since the lstat
                self.report.drop(rel, "not a regular file when opened")
                return
            copied = _copy_sparse(fd, target, MAX_FILE_BYTES)
        except OSError as exc:
            target.unlink(missing_ok=True)
            self.report.drop(rel, f"unreadable: {exc.strerror}")
            return
        finally:
            os.close(fd)
        if copied is None:
            target.unlink(missing_ok=True)
            self.report.drop(rel, f"grew past the copy's {MAX_FILE_BYTES} bytes while read")
            return
        os.chmod(target, wanted)
        self.report.files += 1
        self.report.bytes += copied

    def _open(self, rel: str) -> int | None:
        """O_NOFOLLOW|O_NONBLOCK: a link or a FIFO swapped in since the lstat cannot make
        the copy follow it or block."""
        path = self._src(rel)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            return os.open(path, flags)
        except PermissionError:
            if self._relax(path, stat.S_IRUSR):
                with contextlib.suppress(OSError):
                    return os.open(path, flags)
        except OSError:
            pass
        self.report.drop(rel, "unreadable")
        return None

    def _copy_link(self, rel: str) -> None:
        try:
            target = os.readlink(self._src(rel))
        except OSError as exc:
            self.report.drop(rel, f"symlink could not be read: {exc.strerror}")
            return
        if posixpath.isabs(target):
            inside = posixpath.normpath(target)
            prefix = self.workdir.rstrip("/") + "/"
            if inside != self.workdir and not inside.startswith(prefix):
                self.report.drop(rel, f"symlink to {shown(target)} leads out of the workspace")
                return
            in_ws = inside[len(self.workdir) :].lstrip("/") or "."
            target = posixpath.relpath(in_ws, posixpath.dirname(rel) or ".")
        try:
            target.encode("utf-8")
        except UnicodeEncodeError:
            self.report.drop(rel, "the symlink's target is not UTF-8")
            return
        os.symlink(target, self.dest / rel)
        self.links.append(rel)

    def _prune_links(self) -> None:
        """Drop every copied link that does not resolve, in the copy, to something inside
        it: out of the workspace (relatively, or through another link), dangling, a loop.
        Dropping one may break another that went through it, so repeat until none does."""
        root = os.path.realpath(self.dest)
        remaining = list(self.links)
        changed = True
        while changed:
            changed = False
            for rel in list(remaining):
                link = self.dest / rel
                real = os.path.realpath(link)
                why = None
                if real != root and not real.startswith(root + os.sep):
                    why = f"symlink to {shown(os.readlink(link))} leads out of the workspace"
                elif not os.path.exists(link):
                    why = f"symlink to {shown(os.readlink(link))} is dangling or a loop"
                if why is not None:
                    link.unlink()
                    remaining.remove(rel)
                    self.report.drop(rel, why)
                    changed = True
        self.report.links = len(remaining)

    # ---- helpers ----------------------------------------------------------------------
    def _src(self, rel: str) -> str:
        return os.path.join(self.src, rel) if rel else str(self.src)

    def _fix_mode(self, mode: int, wanted: int) -> None:
        if stat.S_IMODE(mode) != wanted:
            self.report.modes_fixed += 1

    def _relax(self, path: str, bits: int) -> bool:
        """Add the owner's ``bits`` to a source entry the host could not read (it owns
        it: the agent's uid was ours); the original mode is put back after the copy."""
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            os.chmod(path, mode | bits)
        except OSError:
            return False
        self.relaxed.append((path, mode))
        return True


def _copy_sparse(fd: int, target: Path, limit: int) -> int | None:
    """Copy ``fd`` into a new file ``target``, skipping all-zero blocks (holes stay holes);
    the bytes copied, or None once past ``limit``."""
    total = 0
    with open(target, "wb") as out:
        while chunk := os.read(fd, CHUNK):
            total += len(chunk)
            if total > limit:
                return None
            if chunk.count(0) == len(chunk):
                out.seek(len(chunk), os.SEEK_CUR)
            else:
                out.write(chunk)
        out.truncate(total)
    return total

"""What a package on disk or in a store may be before this process reads it.

A package comes from anyone (a campaign's Builder, a downloaded Harbor task, an S3 prefix)
and is read by the CLI, the operator's stages and the rollout engine *outside* any
sandbox. So the loader refuses, before reading, what could hang it, exhaust its memory or
make it write outside its target:

- names: relative, '/'-separated, UTF-8, no '..', no empty or '.' parts, no NUL or other
  control characters (a file name with a newline breaks every line-based listing);
- entries: regular files, directories and symlinks only; a FIFO blocks whoever opens it,
  a device node reads forever (/dev/zero) or reaches hardware;
- symlinks: relative, and resolving inside the package (never above its root);
- sizes: ``MAX_LOAD_FILE_BYTES`` per file and ``MAX_LOAD_TOTAL_BYTES`` in all, checked on
  the size the filesystem (or the store's listing) reports, before a byte is read, and at
  most ``MAX_LOAD_ENTRIES`` entries;
- zip containers (XLSX, DOCX, PPTX, ZIP): the sizes their directory declares, in all, at
  most ``MAX_UNZIPPED_BYTES`` and ``MAX_ZIP_RATIO`` times the archive (Python's zipfile
  never inflates a member past its declared size, so the declaration bounds the memory);
- JSON: parsed with a depth limit (``loads_bounded``), not Python's recursion limit.

These bounds sit well above the Issue Detector's own rules (5 MiB a file, 50 MiB a
package: FILE_TOO_LARGE), so a large but honest package still loads and is reported as a
defect, while a hostile one is refused with the reason.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import zipfile
from typing import Any

MAX_LOAD_FILE_BYTES = 64 * 1024 * 1024
MAX_LOAD_TOTAL_BYTES = 256 * 1024 * 1024
MAX_LOAD_ENTRIES = 10_000
MAX_UNZIPPED_BYTES = 128 * 1024 * 1024
MAX_ZIP_RATIO = 200
MAX_ZIP_MEMBERS = 10_000
MAX_JSON_DEPTH = 64
ZIP_SUFFIXES = (".xlsx", ".xlsm", ".docx", ".pptx", ".zip")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(rel: str) -> str | None:
    """Why ``rel`` cannot name a file of a package, or None."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # os.walk hands undecodable bytes over as surrogates
        return f"{rel.encode('utf-8', 'surrogateescape')!r}: the file name is not UTF-8"
    if _CONTROL.search(rel):
        return f"{rel!r}: the file name holds a control character"
    if not rel or rel.startswith("/") or "\\" in rel:
        return f"{rel!r}: must be a relative path with '/' separators"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return f"{rel!r}: must not contain '..', '.' or empty parts"
    return None


def symlink_problem(rel: str, target: str) -> str | None:
    """Why the symlink ``rel`` → ``target`` cannot be part of a package, or None."""
    if not target or target.startswith("/"):
        return f"{rel} -> {target}: an absolute symlink points outside the package"
    if _CONTROL.search(target) or "\\" in target:
        return f"{rel} -> {target!r}: the target holds a control character or a backslash"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    if resolved == ".." or resolved.startswith("../"):
        return f"{rel} -> {target}: the symlink points outside the package"
    return None


def workspace_symlink_problems(symlinks: dict[str, str]) -> list[str]:
    """Symlinks on the agent's side (``environment/``): even one that stays inside the
    package leads from the workspace to ``tests/`` or ``solution/``. `check` reports them
    (PATH_ESCAPE); `verify` and the rollout engine refuse to run such a package."""
    return [
        f"{rel} -> {target}: a symlink in the agent's environment (it could lead to tests/ "
        "or solution/); ship the file itself"
        for rel, target in sorted(symlinks.items())
        if rel.startswith("environment/")
    ]


def zip_problem(rel: str, data: bytes) -> str | None:
    """Why the zip container ``data`` (an XLSX, DOCX, ...) must not be opened, or None.
    Only files named like one are looked at; a file that is not a zip at all is left to
    whoever reads it (it fails there as a malformed file, not as a bomb)."""
    if not rel.lower().endswith(ZIP_SUFFIXES):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        return None
    if len(members) > MAX_ZIP_MEMBERS:
        return f"{rel}: a zip of {len(members)} members (at most {MAX_ZIP_MEMBERS})"
    unzipped = sum(m.file_size for m in members)
    if unzipped > MAX_UNZIPPED_BYTES or unzipped > MAX_ZIP_RATIO * max(len(data), 1024):
        return (
            f"{rel}: a zip that expands {len(data)} bytes to {unzipped} (a zip bomb?); "
            f"at most {MAX_UNZIPPED_BYTES} bytes and {MAX_ZIP_RATIO} times its size"
        )
    return None


class TooDeep(ValueError):
    """JSON nested deeper than ``MAX_JSON_DEPTH``."""


def loads_bounded(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads``, refusing documents nested deeper than ``max_depth`` before parsing
    (Python's parser recurses: a deep enough document raises RecursionError, or overflows
    the C stack of a thread with a small one)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if text.count("[") + text.count("{") <= max_depth:  # cannot be that deep: no scan
        return json.loads(text)
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    raise TooDeep(f"nested deeper than {max_depth} levels")
        elif char in "]}":
            depth -= 1
    return json.loads(text)

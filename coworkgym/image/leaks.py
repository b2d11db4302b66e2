"""Leaks the image build creates: what a ``RUN`` or ``COPY`` line put in the image, read
against what the agent must not see.

The scan covers the files the build added or changed on top of its base (an unchanged base
file keeps its size and mtime through the layers), anywhere in the image, since the agent
runs as root there and can read them all. A file that *says* the same as a verifier file
(its test code, an expected-answer file) or as a reference output is a leak; a pristine copy
of an input is not (the verifier's copy of what the agent already has is fine). "Says the
same": the same bytes, or the same JSON value (a RUN line rarely writes the indentation the
solution does), or the same text up to trailing whitespace.

Near copies count too: a grader copied with one path changed, an answer file with one row
edited. ``similarity`` compares two texts token by token (words, numbers and punctuation;
whitespace, case and quoting style do not count) with difflib's matching-blocks ratio, so
one changed line in a forty-line file still scores about 0.95; ``NEAR_COPY`` is the bar. A
finding carries the similarity.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_SCANNED_BYTES = 2 * 1024 * 1024  # answers are small; site-packages wheels are not read
SKIPPED_TOP = {"proc", "sys", "dev", "run"}
MIN_LEAK_BYTES = 16
NEAR_COPY = 0.85  # token similarity at which a text is a near copy of another
MIN_NEAR_TOKENS = 40  # shorter texts are too alike by chance (a shebang and an echo)
MAX_NEAR_TOKENS = 20_000  # the ratio is quadratic at worst; larger files are compared exactly
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_'\"]")


def changed_files(image: Path, base: Path | None) -> dict[str, Path]:
    """Regular files the build added or changed: in-image path -> host path."""
    found: dict[str, Path] = {}
    for folder, dirs, names in os.walk(image):
        inside = Path(folder).relative_to(image)
        if inside == Path("."):
            dirs[:] = [d for d in dirs if d not in SKIPPED_TOP]
        for name in names:
            host = Path(folder) / name
            info = host.lstat()
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCANNED_BYTES:
                continue
            if base is not None and _unchanged(info, base / inside / name):
                continue
            found["/" + (inside / name).as_posix().removeprefix("./")] = host
    return found


def files_in_layers(layers: list[Path], rootfs: Path) -> dict[str, Path]:
    """The regular files the given layers hold, as the mounted image shows them (a later
    layer may have changed or removed one)."""
    found: dict[str, Path] = {}
    for layer in layers:
        for folder, _dirs, names in os.walk(layer):
            inside = Path(folder).relative_to(layer)
            for name in names:
                host = rootfs / inside / name
                try:
                    info = host.lstat()
                except OSError:
                    continue  # removed by a later layer (a whiteout)
                if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_SCANNED_BYTES:
                    found["/" + (inside / name).as_posix().removeprefix("./")] = host
    return found


def _unchanged(info: os.stat_result, in_base: Path) -> bool:
    try:
        before = in_base.lstat()
    except OSError:
        return False
    return before.st_size == info.st_size and before.st_mtime_ns == info.st_mtime_ns


def meaning(data: bytes) -> str | None:
    """What a small text file says, for comparing a leak with its source loosely."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return "json:" + json.dumps(json.loads(stripped), sort_keys=True)
        except ValueError:
            pass
    return "text:" + "\n".join(line.rstrip() for line in stripped.splitlines())


@dataclass
class ImageFiles:
    """The files a build wrote, indexed by what they say (read lazily, once)."""

    files: dict[str, Path]
    _index: dict[str, str] | None = field(default=None, repr=False)
    _contents: dict[str, bytes] | None = field(default=None, repr=False)

    def index(self) -> dict[str, str]:
        if self._index is None:
            self._index = {}
            for where, host in sorted(self.files.items()):
                try:
                    data = host.read_bytes()
                except OSError:
                    continue
                said = meaning(data) if len(data) >= MIN_LEAK_BYTES else None
                if said is not None:
                    self._index.setdefault(said, where)
        return self._index

    def saying(self, data: bytes) -> str | None:
        """The in-image path of a written file that says what ``data`` says, if any."""
        said = meaning(data) if len(data) >= MIN_LEAK_BYTES else None
        return self.index().get(said) if said is not None else None

    def near(self, data: bytes, bar: float = NEAR_COPY) -> NearCopy | None:
        """The written file most like ``data`` (a near copy), when one reaches ``bar``."""
        return nearest(data, self.contents(), bar)

    def contents(self) -> dict[str, bytes]:
        """The written text files small enough to compare (read once)."""
        if self._contents is None:
            self._contents = {}
            for where, host in sorted(self.files.items()):
                try:
                    self._contents[where] = host.read_bytes()
                except OSError:
                    continue
        return self._contents


def tokens(data: bytes) -> list[str] | None:
    """What a text says, as tokens (None for a binary file or one too long to compare)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    found = TOKEN.findall(text.lower())
    return found if len(found) <= MAX_NEAR_TOKENS else None


def similarity(a: list[str], b: list[str]) -> float:
    """How much of two token sequences matches, in order (difflib's ratio, 0..1)."""
    if not a or not b:
        return 0.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < NEAR_COPY or matcher.quick_ratio() < NEAR_COPY:
        return matcher.quick_ratio() if matcher.real_quick_ratio() >= NEAR_COPY else 0.0
    return matcher.ratio()


@dataclass(frozen=True)
class NearCopy:
    where: str  # the copy's path (in the image, or in the package)
    similarity: float


def nearest(data: bytes, candidates: dict[str, bytes], bar: float = NEAR_COPY) -> NearCopy | None:
    """The candidate most like ``data`` at ``bar`` or above (None for short texts)."""
    wanted = tokens(data)
    if wanted is None or len(wanted) < MIN_NEAR_TOKENS:
        return None
    best: NearCopy | None = None
    for where, content in sorted(candidates.items()):
        if min(len(content), len(data)) < 0.6 * max(len(content), len(data)):
            continue  # too different in size to reach the bar (and cheap to tell)
        theirs = tokens(content)
        if theirs is None or len(theirs) < MIN_NEAR_TOKENS:
            continue
        score = similarity(wanted, theirs)
        if score >= bar and (best is None or score > best.similarity):
            best = NearCopy(where, round(score, 3))
    return best


NEAR_OUTPUT = 0.9  # a reference output's near copy: stricter, answers are often alike


def near_output(
    data: bytes, written: ImageFiles, own: str, inputs: dict[str, bytes], before: bytes | None
) -> NearCopy | None:
    """A file the build wrote that is nearly the reference output ``data`` (an answer with a
    row edited), other than the output's own path and the workspace's inputs. Where the
    output rewrites an input (``before``), the copy must be clearly closer to the answer
    than that input is, or it is only another copy of the input."""
    seen = set(inputs.values())
    candidates = {w: c for w, c in written.contents().items() if w != own and c not in seen}
    found = nearest(data, candidates, NEAR_OUTPUT)
    if found is None or before is None:
        return found
    ours, theirs = tokens(data), tokens(before)
    baseline = similarity(ours, theirs) if ours and theirs else 0.0
    return found if found.similarity > baseline + 0.05 else None

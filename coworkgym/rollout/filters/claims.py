"""Claim vs evidence: which deliverables an agent says it produced, and whether the final
workspace backs that up.

Claims come from the trajectory's ``claimed_deliverables`` when the harness recorded them;
otherwise from the agent's final message, read conservatively: a sentence counts only when
it uses a producing verb ("saved", "wrote", "created", …), is not negated ("could not
save …"), and names a file with a deliverable extension. A path matches a workspace file
when one ends with the other component-wise, so ``/app/out/report.xlsx``, ``out/report.xlsx``
and ``report.xlsx`` all find the workspace's ``out/report.xlsx``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..trajectory import Trajectory

# Extensions of files a cowork task delivers. Program-name look-alikes ("Node.js") are
# left out on purpose: a false claim drops a good trajectory.
DELIVERABLE_EXTENSIONS = (
    *("xlsx", "xlsm", "xls", "csv", "tsv", "docx", "doc", "pdf", "pptx", "ppt"),
    *("md", "txt", "json", "jsonl", "yaml", "yml", "html", "htm", "xml"),
    *("png", "jpg", "jpeg", "svg", "py", "ipynb", "sql", "zip"),
)

_EXT = "|".join(DELIVERABLE_EXTENSIONS)
_QUOTED = re.compile(rf"[`\"']([^`\"'\n]+?\.(?:{_EXT}))[`\"']", re.IGNORECASE)
# A bare path: not preceded by a path or URL character, so "https://x/y.html" yields nothing.
_BARE = re.compile(
    rf"(?<![\w/.:\-])((?:\.{{1,2}}/|/)?(?:[\w.\-]+/)*[\w\-][\w.\-]*\.(?:{_EXT}))\b",
    re.IGNORECASE,
)
_PRODUCED = re.compile(
    r"\b(?:saved|saving|wrote|written|writing|created|creating|exported|generated|produced|"
    r"stored|updated|output|added|drafted|prepared|built|put|placed)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(
    r"\b(?:not|never|no|cannot|can't|couldn't|didn't|wasn't|won't|unable|failed|fail)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def claims_in_text(text: str) -> list[str]:
    """File paths the text says were produced, in order of first mention."""
    found: list[str] = []
    for sentence in _SENTENCE.split(text):
        if not _PRODUCED.search(sentence) or _NEGATED.search(sentence):
            continue
        quoted = [m.group(1) for m in _QUOTED.finditer(sentence)]
        rest = _QUOTED.sub(" ", sentence)
        for path in (*quoted, *(m.group(1) for m in _BARE.finditer(rest))):
            if path not in found:
                found.append(path)
    return found


def claimed_deliverables(trajectory: Trajectory, parse_message: bool) -> list[str]:
    if trajectory.claimed_deliverables or not parse_message:
        return list(trajectory.claimed_deliverables)
    for message in reversed(trajectory.messages):
        if message.trainable and message.content.strip():
            return claims_in_text(message.content)
    return []


def _parts(path: str) -> tuple[str, ...]:
    # str.split, not PurePosixPath: this runs for every claim of every trajectory.
    clean = path.strip().strip("`\"'").rstrip(".,;:!?)")
    return tuple(p for p in clean.split("/") if p not in ("", "."))


def matching_paths(claim: str, workspace: Iterable[str]) -> list[str]:
    """Workspace paths the claim names: exact, or one a component-wise suffix of the other."""
    want = _parts(claim)
    if not want:
        return []
    matches = []
    for path in workspace:
        have = _parts(path)
        if have == want:
            return [path]
        shorter = min(len(have), len(want))
        if shorter and have[-shorter:] == want[-shorter:]:
            matches.append(path)
    return matches


def baseline_digests(trajectory: Trajectory) -> dict[str, str]:
    """What each path held before the agent's work: the initial workspace, updated by the
    user's patches (a file the user dropped in is not the agent's deliverable either)."""
    digests = {f.path: f.sha256 for f in trajectory.initial_workspace}
    for event in trajectory.workspace_events:
        if event.kind != "patch_applied":
            continue
        for change in event.files:
            if change.change == "deleted" or change.sha256_after is None:
                digests.pop(change.path, None)
            else:
                digests[change.path] = change.sha256_after
    return digests

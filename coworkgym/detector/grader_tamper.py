"""An agent-writable grader: the verifier runs or imports a file that the agent can rewrite.

Harbor uploads ``tests/`` after the agent has finished, so the agent cannot touch it. A
test script that calls a grader kept in the agent's working directory (``/app/grade.py``,
an ``/app/tests/`` suite) is different: in shared mode — and in separate mode when that
file is a declared artifact — the verifier runs whatever the agent left there. The probe
replaces such a file in the untouched workspace by a forgery that claims success; a
verifier that then passes is a defect proven by execution, not guessed from names.

The forgery claims success in every way a test script reads it: it exits 0, writes a reward
of 1, and prints the usual success words plus every word the verifier greps its output for
(``grep -q SUCCESS``), so a script that judges the grader by what it prints is fooled too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath

from ..package.package import EnvironmentPackage

# Which workspace files can be a grader: what a test script can run or import.
SCRIPT_SUFFIXES = {".py", ".sh", ".bash", ".js", ".mjs", ".ts", ".rb", ".pl"}
# What graders print when they pass; the verifier's own grep words are added to these.
SUCCESS_WORDS = ("SUCCESS", "PASS", "PASSED", "OK", "ALL TESTS PASSED", "CORRECT", "VALID")
GREP_WORD = re.compile(r"""\bgrep\s+(?:-[A-Za-z]+\s+)*["']?([^"'\s|;&)]+)""")

FORGED_PYTHON = """\
# Forged by `cowork-gym check`: an agent can rewrite this file before the verifier runs.
import os
import sys

os.makedirs("/logs/verifier", exist_ok=True)
with open("/logs/verifier/reward.txt", "w") as reward:
    reward.write("1")


def test_forged():
    assert True


if __name__ == "__main__":
    print("\\n".join({words!r}))
    sys.exit(0)
"""

FORGED_SHELL = """\
#!/usr/bin/env bash
# Forged by `cowork-gym check`: an agent can rewrite this file before the verifier runs.
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
printf '%s\\n' {shell_words}
exit 0
"""

FORGED_JS = """\
// Forged by `cowork-gym check`: an agent can rewrite this file before the verifier runs.
require("fs").mkdirSync("/logs/verifier", {{ recursive: true }});
require("fs").writeFileSync("/logs/verifier/reward.txt", "1");
console.log({words!r}.join("\\n"));
process.exit(0);
"""


def forgery_for(path: str, words: tuple[str, ...] = ()) -> str:
    said = list(dict.fromkeys([*words, *SUCCESS_WORDS]))  # one a line: ``grep -x`` too
    suffix = PurePosixPath(path).suffix
    if suffix == ".py":
        return FORGED_PYTHON.format(words=said)
    if suffix in (".js", ".mjs", ".ts"):
        return FORGED_JS.format(words=said)
    return FORGED_SHELL.format(shell_words=" ".join(shlex.quote(w) for w in said))


def success_words(pkg: EnvironmentPackage) -> tuple[str, ...]:
    """The words the verifier's scripts grep for (``grep -q SUCCESS /tmp/grade.txt``)."""
    words = [m.group(1).strip("^$") for m in GREP_WORD.finditer(_verifier_text(pkg))]
    return tuple(dict.fromkeys(w for w in words if w and not w.startswith(("/", "$", "-"))))


def _verifier_text(pkg: EnvironmentPackage) -> str:
    return "\n".join(
        content.decode("utf-8", errors="replace")
        for rel, content in pkg.files.items()
        if rel.startswith("tests/") or (rel.startswith("steps/") and "/tests/" in rel)
    )


def grader_candidates(
    pkg: EnvironmentPackage, workspace_files: list[str], workdir: str
) -> list[str]:
    """Scripts in the agent's workspace that the verifier names (by path or file name),
    and that reach the verifier: every file in shared mode, declared artifacts otherwise."""
    verifier_text = _verifier_text(pkg)
    shared = pkg.config.verifier.mode == "shared"
    carried = [s.rstrip("/") for s in pkg.config.artifact_sources()]
    found = []
    for rel in workspace_files:
        if PurePosixPath(rel).suffix not in SCRIPT_SUFFIXES:
            continue
        absolute = str(PurePosixPath(workdir) / rel)
        named = absolute in verifier_text or _names_file(verifier_text, rel)
        reaches = shared or any(absolute == a or absolute.startswith(a + "/") for a in carried)
        if named and reaches:
            found.append(rel)
    return found


def _names_file(text: str, rel: str) -> bool:
    """The relative path, or a unique enough file name (a grader's own name, not 'main.py')."""
    name = PurePosixPath(rel).name
    return rel in text if "/" in rel else (len(name) > 6 and name in text)


def forge(workspace: Path, rel: str, words: tuple[str, ...] = ()) -> None:
    target = workspace / rel
    target.write_text(forgery_for(rel, words))
    target.chmod(0o755)

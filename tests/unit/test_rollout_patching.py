"""The V4A patch envelope of the shell-patch harness: parsing, applying (whole or not at
all), paths that leave the workdir, and the applier as the script the sandbox runs."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coworkgym.rollout import patching, shell_patch
from coworkgym.rollout.harness import ToolOutput
from coworkgym.rollout.patching import PatchError, apply, parse
from coworkgym.rollout.trajectory import ToolCall

pytestmark = pytest.mark.timeout(30)

REPORT = """\
import csv

def total(rows):
    values = [r["amount"] for r in rows]
    return sum(values)

def main():
    print(total([]))
"""


def envelope(*sections: str) -> str:
    return "\n".join(["*** Begin Patch", *sections, "*** End Patch"])


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "report.py").write_text(REPORT)
    (tmp_path / "old.txt").write_text("obsolete\n")
    return tmp_path


def files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---- add / update / delete ------------------------------------------------------------------
def test_a_patch_adds_updates_and_deletes_files(work: Path) -> None:
    patch = envelope(
        "*** Add File: notes/todo.txt",
        "+first",
        "+",
        "+third",
        "*** Update File: src/report.py",
        "@@ def total(rows):",
        '     values = [r["amount"] for r in rows]',
        "-    return sum(values)",
        "+    return round(sum(values), 2)",
        "*** Delete File: old.txt",
    )
    done = apply(parse(patch), str(work))
    assert done == ["A notes/todo.txt", "M src/report.py", "D old.txt"]
    assert (work / "notes" / "todo.txt").read_text() == "first\n\nthird\n"
    assert "    return round(sum(values), 2)\n" in (work / "src" / "report.py").read_text()
    assert "return sum(values)" not in (work / "src" / "report.py").read_text()
    assert not (work / "old.txt").exists()


def test_hunks_apply_in_order_with_anchors_end_of_file_and_pure_additions() -> None:
    text = "a\nb\nc\nx\nb\nc\nend\n"
    hunks = parse(
        envelope(
            "*** Update File: f.txt",
            "@@ x",  # the second "b" (after the anchor), not the first
            "-b",
            "+B",
            "@@",
            " end",
            "+after end",
            "*** End of File",
        )
    )[0].hunks
    assert patching.updated(text, hunks) == "a\nb\nc\nx\nB\nc\nend\nafter end\n"
    added = parse(envelope("*** Update File: f.txt", "@@", "+appended"))[0].hunks
    assert patching.updated("one\n", added) == "one\nappended\n"
    nested = parse(envelope("*** Update File: f.txt", "@@ x", "@@ c", "+inserted"))[0].hunks
    assert patching.updated(text, nested) == "a\nb\nc\nx\nb\nc\ninserted\nend\n"


def test_context_is_matched_leniently_and_line_endings_are_kept() -> None:
    # trailing spaces in the file; a blank context line written without its leading space
    text = "def f():  \r\n    return 1\r\n\r\nprint(f())\r\n"
    hunks = parse(
        envelope(
            "*** Update File: f.py",
            " def f():",
            "-    return 1",
            "+    return 2",
            "",
            " print(f())",
        )
    )[0].hunks
    assert patching.updated(text, hunks) == "def f():  \r\n    return 2\r\n\r\nprint(f())\r\n"


def test_a_file_is_renamed_with_move_to(work: Path) -> None:
    patch = envelope(
        "*** Update File: old.txt", "*** Move to: kept/new.txt", "-obsolete", "+current"
    )
    assert apply(parse(patch), str(work)) == ["R old.txt -> kept/new.txt"]
    assert (work / "kept" / "new.txt").read_text() == "current\n"
    assert not (work / "old.txt").exists()


# ---- what does not apply ----------------------------------------------------------------------
def test_a_context_mismatch_says_where_and_changes_nothing(work: Path) -> None:
    before = files(work)
    patch = envelope(
        "*** Add File: new.txt",
        "+fresh",
        "*** Update File: src/report.py",
        "@@",
        "     values = [r.amount for r in rows]",  # the file has r["amount"]
        "-    return sum(values)",
        "+    return 0",
    )
    with pytest.raises(PatchError, match=r"src/report.py, hunk 1: these lines") as error:
        apply(parse(patch), str(work))
    assert "values = [r.amount for r in rows]" in str(error.value)
    assert files(work) == before  # the Add File before it was not written either


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (["*** Add File: old.txt", "+x"], "already exists"),
        (["*** Delete File: missing.txt"], "does not exist"),
        (["*** Update File: missing.txt", "-a", "+b"], "does not exist"),
        (["*** Update File: src/report.py", "@@ def nowhere():", "+x"], "no line 'def nowhere"),
        (["*** Update File: src", "-a", "+b"], "not a regular file"),
        (["*** Update File: old.txt", "*** Move to: src/report.py", "-obsolete"], "exists"),
    ],
)
def test_operations_that_cannot_apply_are_errors(
    work: Path, section: list[str], message: str
) -> None:
    before = files(work)
    with pytest.raises(PatchError, match=message):
        apply(parse(envelope(*section)), str(work))
    assert files(work) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*** Add File: a\n+x\n*** End Patch", "starts with the line '\\*\\*\\* Begin Patch'"),
        ("*** Begin Patch\n*** Add File: a\n+x", "ends with the line"),
        (envelope(), "changes no file"),
        (envelope("*** Add File: a", "no plus"), r"every line of an added file \(a\)"),
        (envelope("*** Update File: a", "@@", "*stray"), r"each hunk line starts with"),
        (envelope("*** Update File: a"), "has no hunk"),
        (envelope("*** Replace File: a"), "expected '\\*\\*\\* Add File"),
        (envelope("*** Add File: "), "needs a path"),
    ],
)
def test_malformed_patches_are_refused_when_parsed(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse(text)


# ---- paths ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "/app", "/apple/x", "."]
)
def test_paths_that_leave_the_workdir_are_refused(path: str) -> None:
    ops = parse(envelope(f"*** Add File: {path}", "+x"))
    with pytest.raises(PatchError, match="outside the workspace"):
        patching.check_paths(ops, "/app")


def test_absolute_paths_under_the_workdir_are_the_workspace_s() -> None:
    assert patching.workspace_path("/app/data/x.csv", "/app") == "data/x.csv"
    assert patching.workspace_path("./data/../x.csv", "/app") == "x.csv"


def test_a_symlink_out_of_the_workdir_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "app", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(PatchError, match="leads outside the workspace"):
        apply(parse(envelope("*** Add File: link/planted.txt", "+x")), str(root))
    assert list(outside.iterdir()) == []


def test_a_read_only_folder_is_refused_before_anything_is_written(work: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through permission bits")
    (work / "locked").mkdir()
    (work / "locked").chmod(0o555)
    patch = envelope("*** Add File: a.txt", "+x", "*** Add File: locked/b.txt", "+y")
    try:
        with pytest.raises(PatchError, match="not writable"):
            apply(parse(patch), str(work))
    finally:
        (work / "locked").chmod(0o755)
    assert not (work / "a.txt").exists()


# ---- the applier as the sandbox runs it -------------------------------------------------------
def run_applier(root: Path, patch: str) -> subprocess.CompletedProcess[str]:
    encoded = base64.b64encode(patch.encode()).decode()
    return subprocess.run(
        [sys.executable, "-c", shell_patch.APPLIER, str(root), encoded],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_applier_script_applies_and_reports(work: Path) -> None:
    done = run_applier(work, envelope("*** Delete File: old.txt"))
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"{patching.APPLIED}\nD old.txt\n",
        "",
    )
    failed = run_applier(work, envelope("*** Delete File: old.txt"))
    assert failed.returncode == 1
    assert failed.stdout.startswith(patching.NOT_APPLIED)
    assert "Delete File old.txt: it does not exist" in failed.stdout


# ---- the harness's dispatch, on a fake episode -----------------------------------------------
class FakeEpisode:
    workdir = "/app"

    def __init__(self) -> None:
        self.executed: list[ToolCall] = []
        self.rejected: list[tuple[ToolCall, str]] = []

    def execute(self, call: ToolCall) -> ToolOutput:
        self.executed.append(call)
        return ToolOutput(f"exit 0\n--- stdout ---\n{patching.APPLIED}\nA a.txt\n")

    def reject(self, call: ToolCall, error: str) -> ToolOutput:
        self.rejected.append((call, error))
        return ToolOutput(error, True)


def send(name: str, arguments: Any) -> tuple[FakeEpisode, str]:
    episode = FakeEpisode()
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    answer = shell_patch.dispatch(episode, ToolCall(id="c1", name=name, arguments=raw))  # type: ignore[arg-type]
    return episode, answer


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {"path": "a"}, "unknown tool 'read_file'; the tools are: shell"),
        ("shell", "{not json", "not valid JSON"),
        ("shell", {"command": "ls -la"}, "argument vector"),
        ("shell", {"command": []}, "command"),
        ("apply_patch", {"patch": "x"}, "input"),
        ("apply_patch", {"input": "*** Add File: a\n+x"}, "Begin Patch"),
        ("apply_patch", {"input": envelope("*** Add File: ../a", "+x")}, "outside the workspace"),
    ],
)
def test_calls_the_interface_refuses_never_reach_the_sandbox(
    name: str, arguments: Any, message: str
) -> None:
    episode, answer = send(name, arguments)
    assert episode.executed == []
    assert len(episode.rejected) == 1 and message in answer


def test_a_patch_runs_as_the_applier_in_the_episode_s_shell() -> None:
    episode, answer = send("apply_patch", {"input": envelope("*** Add File: a.txt", "+x")})
    assert answer == f"{patching.APPLIED}\nA a.txt"
    (call,) = episode.executed
    assert (call.id, call.name) == ("c1", "shell")
    command = json.loads(call.arguments)["command"]
    assert command.startswith("python3 -c ") and " /app " in command


@pytest.mark.parametrize(
    "argv",
    [
        ["apply_patch", envelope("*** Add File: a.txt", "+x")],
        ["bash", "-lc", "apply_patch <<'EOF'\n" + envelope("*** Add File: a.txt", "+x") + "\nEOF"],
    ],
)
def test_apply_patch_through_the_shell_is_a_patch(argv: list[str]) -> None:
    assert shell_patch.patch_in(argv) == envelope("*** Add File: a.txt", "+x")
    episode, _ = send("shell", {"command": argv})
    assert json.loads(episode.executed[0].arguments)["command"].startswith("python3 -c ")


def test_an_argument_vector_becomes_the_episode_s_bash_command() -> None:
    def command(**arguments: Any) -> str:
        return shell_patch.shell_command(shell_patch.ShellArgs(**arguments), "/app")

    assert command(command=["ls", "-la", "my dir"]) == "ls -la 'my dir'"
    assert command(command=["bash", "-lc", "ls | head"]) == "ls | head"
    assert command(command=["ls"], workdir="data") == "cd -- data || exit 1\nls"
    episode, _ = send("shell", {"command": ["sleep", "1"], "timeout_ms": 5000})
    assert json.loads(episode.executed[0].arguments) == {"command": "sleep 1", "timeout_s": 5.0}

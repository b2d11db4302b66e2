"""The agent's tools and context management: paths confined to a role's mounts, every
malformed call answered with an error, shell through the Sandbox protocol (a fake here;
the real bubblewrap sandbox runs in tests/integration/test_llm_agent.py), and compaction
that keeps a long session under its character budget."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coworkgym.llm import context
from coworkgym.llm.tools import RoleMounts, ToolBox, ToolError, clip, standard_tools
from coworkgym.sandbox import Limits, Mount, SandboxResult


@dataclass
class FakeSandbox:
    result: SandboxResult = field(default_factory=lambda: SandboxResult(0, "out\n", "err\n", 0.1))
    calls: list[dict[str, Any]] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = Limits(),  # noqa: B008 - immutable
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
    ) -> SandboxResult:
        self.calls.append(
            {"argv": list(argv), "mounts": list(mounts), "limits": limits, "env": env, "cwd": cwd}
        )
        return self.result


@pytest.fixture
def roots(tmp_path: Path) -> RoleMounts:
    work, ro, outside = tmp_path / "work", tmp_path / "ro", tmp_path / "outside"
    for d in (work, ro, outside, work / "sub"):
        d.mkdir()
    (ro / "input.csv").write_text("a,b\n1,2\n")
    (outside / "secret.txt").write_text("top secret")
    (work / "escape").symlink_to(outside)  # a host path: means nothing in the sandbox
    (work / "up").symlink_to("../../outside")  # relative: /outside in the sandbox
    (work / "etc").symlink_to("/etc")  # what `ln -s /etc etc` in the sandbox leaves
    (work / "inside").symlink_to("/ro/input.csv")  # a link the sandbox can follow
    (work / "sub" / "loop").symlink_to("/work/sub/loop")
    return RoleMounts((Mount(work, "/work", writable=True), Mount(ro, "/ro")), cwd="/work")


def toolbox(roots: RoleMounts, sandbox: FakeSandbox | None = None) -> ToolBox:
    return ToolBox.of(standard_tools(roots, sandbox or FakeSandbox(), env={"X": "1"}))


def call(box: ToolBox, name: str, **args: Any) -> str:
    return box.dispatch(name, json.dumps(args)).text


# ---- paths ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "write", "host"),
    [
        ("notes.md", True, "work/notes.md"),
        ("/work/sub/../notes.md", True, "work/notes.md"),
        ("/ro/input.csv", False, "ro/input.csv"),
        ("inside", False, "ro/input.csv"),  # a symlink that stays inside the mounts
        ("/work/sub/../inside", False, "ro/input.csv"),
    ],
)
def test_paths_resolve_inside_the_roles_mounts(
    roots: RoleMounts, tmp_path: Path, path: str, write: bool, host: str
) -> None:
    assert roots.resolve(path, write=write) == (tmp_path / host).resolve()


@pytest.mark.parametrize(
    ("path", "write", "problem"),
    [
        ("/etc/passwd", False, "outside this role's directories"),
        ("../outside/secret.txt", False, "outside this role's directories"),
        ("/ro/input.csv", True, "read-only"),
        ("escape/secret.txt", False, "leads outside this role's directories \\(through a"),
        ("up/secret.txt", False, "leads outside this role's directories"),
        ("etc/passwd", False, "/work/etc/passwd leads outside this role's directories"),
        ("inside", True, "/ro/input.csv is read-only"),  # a write through it lands in /ro
        ("sub/loop", False, "too many levels of symbolic links"),
        ("", False, "non-empty"),
    ],
)
def test_paths_that_escape_are_refused(
    roots: RoleMounts, path: str, write: bool, problem: str
) -> None:
    with pytest.raises(ToolError, match=problem):
        roots.resolve(path, write=write)


# ---- malformed calls ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "arguments", "answer"),
    [
        ("nope", "{}", "unknown tool 'nope'; the tools are: shell, read_file, write_file"),
        ("read_file", "{bad", "arguments of read_file are not valid JSON"),
        ("read_file", "[1]", "must be a JSON object"),
        ("read_file", "{}", "path: Field required"),
        ("read_file", '{"path": "x", "colour": 1}', "colour: Extra inputs are not permitted"),
        ("shell", '{"command": "ls", "timeout_s": 9999}', "timeout_s: Input should be less"),
        ("read_file", None, "path: Field required"),  # no arguments at all
    ],
)
def test_malformed_calls_are_answered_with_an_error(
    roots: RoleMounts, name: str, arguments: str | None, answer: str
) -> None:
    result = toolbox(roots).dispatch(name, arguments)
    assert not result.ok and result.text.startswith("error: ") and answer in result.text


def test_os_errors_become_answers(roots: RoleMounts) -> None:
    box = toolbox(roots)
    call(box, "write_file", path="file.txt", content="x")
    answer = call(box, "write_file", path="file.txt/child.txt", content="x")
    assert answer.startswith("error: ") and "Error" in answer


# ---- the file tools ---------------------------------------------------------------------
def test_write_read_edit_and_list(roots: RoleMounts, tmp_path: Path) -> None:
    box = toolbox(roots)
    assert call(box, "write_file", path="a/b.txt", content="one\ntwo\ntwo\n") == (
        "wrote 12 bytes to /work/a/b.txt"
    )
    assert call(box, "read_file", path="a/b.txt", offset=1, limit=1) == (
        "/work/a/b.txt: lines 1-2 of 3\ntwo"
    )
    assert "occurs 2 times" in call(box, "edit_file", path="a/b.txt", old="two", new="2")
    assert "does not occur" in call(box, "edit_file", path="a/b.txt", old="three", new="3")
    assert call(box, "edit_file", path="a/b.txt", old="two", new="2", replace_all=True) == (
        "replaced 2 occurrence(s) in /work/a/b.txt"
    )
    assert (tmp_path / "work/a/b.txt").read_text() == "one\n2\n2\n"
    (tmp_path / "work/blob.bin").write_bytes(b"\0\1\2")
    assert "is binary (3 bytes)" in call(box, "read_file", path="blob.bin")
    listing = call(box, "list_files", path="/work")
    assert "/work/a/b.txt  8 bytes" in listing
    assert "/work/inside" in listing and "(symlink)" in listing
    (tmp_path / "work/empty").mkdir()
    assert call(box, "list_files", path="/work/empty") == "/work/empty is empty"


def test_shell_runs_in_the_sandbox_with_only_the_roles_mounts(roots: RoleMounts) -> None:
    sandbox = FakeSandbox()
    answer = call(toolbox(roots, sandbox), "shell", command="ls -l", timeout_s=5)
    assert answer == "exit 0\n--- stdout ---\nout\n\n--- stderr ---\nerr\n"
    (run,) = sandbox.calls
    assert run["argv"] == ["bash", "-c", "ls -l"]
    assert run["mounts"] == list(roots.mounts) and run["cwd"] == "/work"
    assert run["env"] == {"X": "1"} and run["limits"].timeout_s == 5
    sandbox.result = SandboxResult(None, "", "", 5.0, timed_out=True)
    timed_out = toolbox(roots, sandbox).dispatch("shell", '{"command": "sleep 99"}')
    assert timed_out.text == "timed out after 120s" and not timed_out.ok


def test_tool_schemas_are_clean_json_schema(roots: RoleMounts) -> None:
    specs = {s["function"]["name"]: s["function"] for s in toolbox(roots).specs()}
    assert list(specs) == ["shell", "read_file", "write_file", "edit_file", "list_files"]
    write = specs["write_file"]["parameters"]
    assert write["required"] == ["path", "content"] and write["additionalProperties"] is False
    assert "title" not in write and "title" not in write["properties"]["path"]


def test_clip_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 1000 + "TAIL"
    clipped = clip(text, 100)
    assert clipped.startswith("HEAD") and clipped.endswith("TAIL") and "characters cut" in clipped
    assert clip("short", 100) == "short"


# ---- context management -----------------------------------------------------------------
def session(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "S" * 500},
        {"role": "user", "content": "U" * 500},
    ]
    for i in range(turns):
        args = json.dumps({"path": f"f{i}.txt", "content": "c" * 5000})
        messages.append(
            {
                "role": "assistant",
                "content": f"turn {i}",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": args},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "o" * 5000})
    return messages


def test_compaction_drops_old_tool_output_first_and_keeps_recent_turns() -> None:
    messages = session(10)
    before = context.size(messages)
    removed = context.compact(messages, budget_chars=65_000, keep_recent=4)
    assert removed > 0 and context.size(messages) <= 65_000
    assert context.size(messages) == before - removed
    assert messages[0]["content"] == "S" * 500 and messages[1]["content"] == "U" * 500
    assert messages[-1]["content"] == "o" * 5000 and messages[-3]["content"] == "o" * 5000
    assert messages[3]["content"].startswith("[elided to save context: 5000 characters")
    # tool output went first: old arguments are still whole at this budget
    assert (
        json.loads(messages[2]["tool_calls"][0]["function"]["arguments"])["content"] == "c" * 5000
    )


def test_compaction_then_shortens_old_arguments_as_valid_json() -> None:
    messages = session(10)
    context.compact(messages, budget_chars=25_000, keep_recent=4)
    assert context.size(messages) <= 25_000
    args = json.loads(messages[2]["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "f0.txt" and args["content"].startswith("[elided")
    assert all(m.get("content") for m in messages if m["role"] == "assistant")  # reasoning kept


def test_compaction_is_a_no_op_under_budget() -> None:
    messages = session(2)
    snapshot = json.dumps(messages)
    assert context.compact(messages, budget_chars=10**6, keep_recent=4) == 0
    assert json.dumps(messages) == snapshot

"""The shell tool's description says what persists between calls, and two real calls in
each backend show that it is so (issue 25: a script written to /tmp was gone at the next
call, and the description did not say)."""

from __future__ import annotations

import json
from pathlib import Path

from coworkgym.llm.tools import ToolBox
from coworkgym.package.cowork import Interfaces
from coworkgym.rollout import agent_tools
from coworkgym.sandbox import Sandbox, default_sandbox
from coworkgym.sandbox.direct import DirectSandbox

WORKDIR = "/app"
FIRST = (
    "echo kept > /app/kept.txt && echo scratch > /tmp/scratch.txt && echo home > ~/home.txt "
    "&& mkdir -p /app/sub && cd /app/sub && export LEFT_BEHIND=1"
)
SECOND = (
    "cat /app/kept.txt; test -e /tmp/scratch.txt && echo tmp-kept || echo tmp-gone; "
    "test -e ~/home.txt && echo home-kept || echo home-gone; pwd; echo var=${LEFT_BEHIND:-unset}"
)


def _shell(sandbox: Sandbox, workspace: Path) -> ToolBox:
    interfaces = Interfaces(tools=["shell"], workdir=WORKDIR)
    mounts = agent_tools.agent_mounts(workspace, WORKDIR, interfaces)
    return agent_tools.agent_toolbox(mounts, sandbox, interfaces)


def _two_calls(box: ToolBox, first_call: str = FIRST, then: str = SECOND) -> str:
    first = box.dispatch("shell", json.dumps({"command": first_call}))
    assert first.ok, first.text
    second = box.dispatch("shell", json.dumps({"command": then}))
    assert second.ok, second.text
    return second.text


def _description(box: ToolBox) -> str:
    [spec] = [s for s in box.specs() if s["function"]["name"] == "shell"]
    return str(spec["function"]["description"])


def test_bubblewrap_keeps_only_the_workdir_and_the_description_says_so(tmp_path: Path) -> None:
    box = _shell(default_sandbox(), tmp_path)
    said = _description(box)
    assert "Only /app persists between calls" in said
    assert "/tmp (also $HOME) is empty again at every call" in said
    assert "current directory, shell variables and background processes do not carry" in said
    seen = _two_calls(box)
    assert "kept" in seen and "tmp-gone" in seen and "home-gone" in seen
    assert "\n/app\n" in seen and "var=unset" in seen  # cwd and variables reset


def test_the_in_pod_backend_claims_only_what_holds_there(tmp_path: Path) -> None:
    """In a pod /tmp is the pod's own and outlives a call: the description does not claim
    it is emptied. (Relative paths: off a pod, only the working directory is translated.)"""
    (tmp_path / "ws").mkdir()
    box = _shell(DirectSandbox(), tmp_path / "ws")
    said = _description(box)
    assert "/app persists between calls" in said and "/tmp" not in said
    seen = _two_calls(
        box,
        "echo kept > kept.txt && mkdir -p sub && cd sub && export LEFT_BEHIND=1",
        "cat kept.txt; pwd; echo var=${LEFT_BEHIND:-unset}",
    )
    assert "kept" in seen and "var=unset" in seen
    assert f"\n{tmp_path / 'ws'}\n" in seen  # back in the workdir (the pod's path for /app)

"""Each harness's first request differs as its library's does, and docs/harnesses.md shows
them as they are: every harness is rolled once against the scripted server on the same
package, its first request is rendered, and the doc's request section must match
(``COWORK_REGENERATE_DOCS=1`` rewrites it)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import pytest

from coworkgym.rollout import adapters
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import PolicyConfig
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = pytest.mark.timeout(240)
DOC = Path(__file__).resolve().parents[2] / "docs" / "harnesses.md"
BEGIN, END = "<!-- first-requests:begin -->", "<!-- first-requests:end -->"
HARNESSES = ("tool-calling", "shell-patch", "mini-swe-agent", "openai-agents")
MINI_SUBMIT = "```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
FINISH = {"tool_calls": [{"name": "finish", "arguments": {"summary": "Done.", "deliverables": []}}]}
# shell-patch has no finish tool: a reply without calls ends its turn
DONE = {"content": "Done."}


def first_request(engine: RolloutEngine, harness: str) -> dict[str, Any]:
    pkg = good_package("weather_report", turns=1, seed=7)
    # mini's own system prompt falls in the server's default lane, the episode's in "agent"
    lanes: dict[str, list[dict[str, Any]]] = {
        "default": [{"content": MINI_SUBMIT}],
        "agent": [DONE if harness == "shell-patch" else FINISH],
    }
    with ScriptedServer.from_lanes(lanes) as server:
        config = PolicyConfig(model="scripted-policy", base_url=server.url, max_steps=3)
        trajectory = engine.run(pkg, harness, config)
    assert trajectory.termination.reason == "agent_done", (harness, trajectory.termination)
    body = dict(server.requests[0].body)
    return {key: body[key] for key in ("messages", "tools", "tool_choice") if key in body}


def render(requests: dict[str, dict[str, Any]]) -> str:
    # mini's instance template shows the host's uname: the doc keeps placeholders
    uname = platform.uname()
    host = f"{uname.system} {uname.release} {uname.version} {uname.machine}"
    parts = [BEGIN]
    for harness, body in requests.items():
        parts.append(f"\n### `{harness}`\n")
        for message in body["messages"]:
            content = str(message["content"]).replace(
                host, "<system> <release> <version> <machine>"
            )
            parts.append(f"**{message['role']}**:\n\n````text\n{content}\n````\n")
        if "tools" in body:
            tools = json.dumps(body["tools"], indent=1)
            parts.append(f"**tools** (`tool_choice`: {body.get('tool_choice')!r}):\n")
            parts.append(f"````json\n{tools}\n````\n")
        else:
            parts.append("**tools**: none — the request has no `tools` field.\n")
    parts.append(END)
    return "\n".join(parts)


@pytest.mark.skipif(
    any(adapters.missing_library(n) is not None for n in HARNESSES if n != "tool-calling"),
    reason="the harnesses extra is not installed",
)
def test_each_harness_first_request_is_its_own_and_the_doc_shows_it() -> None:
    with RolloutEngine() as engine:
        requests = {name: first_request(engine, name) for name in HARNESSES}
    systems = {name: body["messages"][0]["content"] for name, body in requests.items()}
    assert len(set(systems.values())) == len(HARNESSES)  # a system prompt each
    # and no two first requests alike (messages, tools, tool_choice)
    assert len({json.dumps(body, sort_keys=True) for body in requests.values()}) == len(HARNESSES)
    assert "tools" not in requests["mini-swe-agent"]
    assert systems["mini-swe-agent"].startswith("You are a helpful assistant")
    assert "mswea_bash_command" in systems["mini-swe-agent"]
    assert requests["tool-calling"].get("tool_choice") == "auto"
    assert all(t["function"].get("strict") for t in requests["openai-agents"]["tools"])
    assert not any(t["function"].get("strict") for t in requests["tool-calling"]["tools"])
    shell_patch = requests["shell-patch"]
    assert [t["function"]["name"] for t in shell_patch["tools"]] == [
        "shell",
        "apply_patch",
        "ask_user",
    ]
    assert "*** Begin Patch" in systems["shell-patch"]
    section = render(requests)
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if os.environ.get("COWORK_REGENERATE_DOCS") == "1":
        DOC.write_text(text[:start] + section + text[end:])
        return
    assert text[start:end] == section, (
        "docs/harnesses.md is stale: rerun with COWORK_REGENERATE_DOCS=1"
    )

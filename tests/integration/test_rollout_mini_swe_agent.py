"""mini-swe-agent's own interface against the scripted OpenAI-compatible server: its
default config's templates, plain-text replies with one ```mswea_bash_command``` block,
observations with <returncode>/<output>, its submit command, and the episode's user
reachable from bash — in real bubblewrap sandboxes, through the LLM gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout import adapters
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import PolicyConfig
from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        adapters.missing_library("mini-swe-agent") is not None, reason="mini-swe-agent missing"
    ),
]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@pytest.fixture(scope="module")
def engine() -> Iterator[RolloutEngine]:
    with RolloutEngine() as engine:
        yield engine


def package() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


def bash(command: str, thought: str = "THOUGHT: next step.") -> dict[str, Any]:
    return {"content": f"{thought}\n\n```mswea_bash_command\n{command}\n```"}


def roll(
    engine: RolloutEngine, pkg: EnvironmentPackage, steps: list[dict[str, Any]]
) -> tuple[Trajectory, ScriptedServer]:
    # mini's system prompt is its own, not the episode's: the server's default lane
    with ScriptedServer.from_lanes({"default": steps}) as server:
        config = PolicyConfig(model="scripted-policy", base_url=server.url, max_steps=20)
        return engine.run(pkg, "mini-swe-agent", config), server


def test_a_text_model_solves_in_mini_s_own_interface(engine: RolloutEngine) -> None:
    from minisweagent.config import builtin_config_dir

    pkg = package()
    solve = "export COWORK_TURN=0\n" + pkg.files["solution/solve.sh"].decode()
    steps = [
        bash("ls -la"),
        {"content": "I will look first, then act."},  # no action: mini's format error
        bash(solve),
        bash(SUBMIT, "THOUGHT: report.xlsx and summary.json are written."),
    ]
    trajectory, server = roll(engine, pkg, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert trajectory.reward == 1.0
    first = server.requests[0]
    assert "tools" not in first.body and "tool_choice" not in first.body
    system, instance = first.messages[0]["content"], first.messages[1]["content"]
    default = (builtin_config_dir / "default.yaml").read_text()
    assert "You are a helpful assistant that can interact with a computer." in default
    assert system.startswith("You are a helpful assistant that can interact with a computer.")
    assert instance.startswith("Please solve this issue: ")
    assert "cowork-ask-user" in instance and SUBMIT in instance
    # the observation is mini's template; the format error is mini's message
    observation = server.requests[1].messages[-1]
    assert observation["role"] == "user" and "<returncode>0</returncode>" in observation["content"]
    assert "EXACTLY ONE action" in server.requests[2].messages[-1]["content"]
    agent = trajectory.agent_messages()
    assert [[c.name for c in m.tool_calls] for m in agent] == [
        ["shell"],
        [],
        ["shell"],
        ["finish"],
    ]
    assert all(m.role != "tool" or m.content for m in trajectory.messages)


def test_the_user_is_reachable_from_bash(engine: RolloutEngine) -> None:
    steps = [
        bash('cowork-ask-user "Which units do you want?"'),
        bash(SUBMIT),
    ]
    trajectory, server = roll(engine, package(), steps)
    agent = trajectory.agent_messages()
    assert agent[0].tool_calls[0].name == "ask_user"
    assert "Which units do you want?" in agent[0].tool_calls[0].arguments
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert "<returncode>0</returncode>" in server.requests[1].messages[-1]["content"]

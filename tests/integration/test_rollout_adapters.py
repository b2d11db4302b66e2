"""The third-party harnesses (mini-swe-agent, openai-agents) against the scripted
OpenAI-compatible server, through the LLM gateway, in real bubblewrap sandboxes: each
library's own loop drives the scripted model, and every tool call it makes runs in the
agent's sandbox through the episode — a solving agent scores 1, a failing one stays valid
below 1, the user's later turns continue the same conversation, malformed calls are
answered and counted, a dead endpoint makes the trajectory invalid."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.logs import configure_logging
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout import adapters
from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
from coworkgym.rollout.harness import HarnessError, PolicyConfig, get_harness
from coworkgym.rollout.trajectory import Trajectory, read_jsonl
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = pytest.mark.timeout(180)
MODEL = "scripted-policy"
HARNESSES = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            adapters.missing_library(name) is not None, reason=f"{name} is not installed"
        ),
    )
    for name in ("openai-agents",)  # mini-swe-agent speaks text: test_rollout_mini_swe_agent
]


class _Outbound:
    """Every socket connection and name lookup this process makes, unless it is loopback
    (a Python audit hook: it sees litellm's and the SDK's traffic, whichever client they
    use). Audit hooks cannot be removed, so it records only while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.seen: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "socket.connect":
            address = args[1]
            host = address[0] if isinstance(address, tuple) else str(address)
        elif event == "socket.getaddrinfo":
            host = str(args[0])
        else:
            return
        if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("/"):
            self.seen.append(f"{event} {host}")


_OUTBOUND = _Outbound()


@pytest.fixture(autouse=True)
def nothing_phones_home() -> Iterator[None]:
    """No adapter talks to anything but the loopback gateway (no cost map download, no
    trace upload, no telemetry)."""
    _OUTBOUND.seen.clear()
    _OUTBOUND.active = True
    try:
        yield
    finally:
        _OUTBOUND.active = False
    assert _OUTBOUND.seen == []


@pytest.fixture(scope="module")
def package() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


@pytest.fixture(scope="module")
def engine() -> Iterator[RolloutEngine]:
    with RolloutEngine() as engine:
        yield engine


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def finish(*deliverables: str) -> dict[str, Any]:
    return call("finish", summary="Done.", deliverables=list(deliverables))


def solve_command(pkg: EnvironmentPackage, turn: int = 0) -> str:
    script = pkg.files["solution/solve.sh"].decode()
    return f"export COWORK_TURN={turn}\n{script}"


def roll(
    engine: RolloutEngine,
    pkg: EnvironmentPackage,
    harness: str,
    steps: list[dict[str, Any]],
    *,
    max_steps: int = 20,
) -> tuple[Trajectory, ScriptedServer]:
    with ScriptedServer.from_lanes({"agent": steps}) as server:
        config = PolicyConfig(model=MODEL, base_url=server.url, max_steps=max_steps)
        return engine.run(pkg, harness, config), server


def flat(text: str) -> str:
    """Rich wraps error panels: compare words, not lines."""
    return " ".join(text.replace("│", " ").split())


def tool_outputs(trajectory: Trajectory) -> str:
    return "\n".join(m.content for m in trajectory.messages if m.role == "tool")


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_scripted_model_solves_through_the_library_in_the_sandbox(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    marker = Path("/tmp") / f"cwg-adapter-{uuid.uuid4().hex}"
    probe = (
        f"echo sandbox-uid=$(id -u); touch {marker}; "
        "cat /solution/solve.sh 2>&1; ls -d /work /tests 2>&1; echo probe-done"
    )
    steps = [
        {**call("list_files", path="."), "token_ids": [11, 12], "logprobs": [-0.5, -0.25]},
        call("shell", command=probe),
        call("shell", command=solve_command(package)),
        finish("report.xlsx", "summary.json"),
    ]
    trajectory, server = roll(engine, package, harness, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert trajectory.policy.harness == harness
    assert trajectory.verification is not None and trajectory.verification.valid
    assert trajectory.reward == 1.0 and trajectory.verification.passed
    assert trajectory.claimed_deliverables == ["report.xlsx", "summary.json"]
    # every completion the library received is an agent message, with its tool calls
    agent = trajectory.agent_messages()
    assert [[c.name for c in m.tool_calls] for m in agent] == [
        ["list_files"],
        ["shell"],
        ["shell"],
        ["finish"],
    ]
    assert agent[0].tokens is not None and agent[0].tokens.completion_ids == [11, 12]
    assert agent[0].tokens.logprobs == [-0.5, -0.25]
    # each call has its result, and the model saw exactly the recorded result
    results = [m for m in trajectory.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [c.id for m in agent for c in m.tool_calls]
    sent = server.requests[2].tool_results()
    assert sent[-1] == results[1].content
    # the SDK's own shape: its agent instructions (no tool list), its strict function tools
    opening = [(m["role"], m["content"]) for m in server.requests[0].messages]
    assert opening[1] == ("user", trajectory.messages[1].content)
    assert opening[0][0] == "system" and opening[0][1] != trajectory.messages[0].content
    assert "list_files" not in opening[0][1] and "list_files" in trajectory.messages[0].content
    offered = server.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered][-2:] == ["ask_user", "finish"]
    assert all(t["function"]["strict"] is True for t in offered)
    finish_schema = offered[-1]["function"]["parameters"]
    assert finish_schema["required"] == ["summary", "deliverables"]
    # the shell ran in the agent's sandbox: no private files, no host tree, a private /tmp
    outputs = tool_outputs(trajectory)
    assert "probe-done" in outputs
    assert "sandbox-uid=" in outputs and f"sandbox-uid={os.getuid()}\n" not in outputs
    assert "/solution/solve.sh: No such file or directory" in outputs
    assert "cannot access '/work'" in outputs and "cannot access '/tests'" in outputs
    assert not marker.exists()
    # the model talked to the gateway with a per-rollout token, never an upstream key
    assert all(r.headers["authorization"] == "Bearer EMPTY" for r in server.requests)
    assert trajectory.usage.requests == 4


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_scripted_model_that_fails_is_valid_below_1(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    steps = [
        call("write_file", path="summary.json", content='{"wettest_month": "1999-01"}'),
        finish("summary.json"),
    ]
    trajectory, _ = roll(engine, package, harness, steps)
    assert trajectory.termination.reason == "agent_done"
    verification = trajectory.verification
    assert verification is not None and verification.valid
    assert verification.reward is not None and verification.reward < 0.5
    assert verification.passed is False


@pytest.mark.parametrize("harness", HARNESSES)
def test_later_user_turns_continue_the_same_conversation(
    engine: RolloutEngine, harness: str
) -> None:
    pkg = good_package("weather_report", turns=3, seed=7)
    plan = sorted(pkg.patches, key=lambda p: p.turn)
    steps: list[dict[str, Any]] = []
    for turn in range(len(plan) + 1):
        steps.append(call("shell", command=solve_command(pkg, turn)))
        # one call is fewer than a deliverable trigger waits for: the finish ends the turn
        steps.append(finish("report.xlsx"))
    trajectory, server = roll(engine, pkg, harness, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert [i.turn for i in trajectory.interventions if i.kind == "turn"] == [1, 2]
    assert trajectory.reward == 1.0
    # one conversation: the last request carries the first request and both later turns
    last = [m["content"] for m in server.requests[-1].messages if m["role"] == "user"]
    assert last[0] == pkg.instruction
    assert plan[0].message in last and plan[1].message in last


@pytest.mark.parametrize("harness", HARNESSES)
def test_malformed_calls_are_answered_and_a_plain_reply_ends_the_turn(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "shell", "raw": "{not json"}]},
        {"tool_calls": [{"name": "delete_everything", "arguments": {}}]},
        {"content": "I give up for now."},
    ]
    trajectory, server = roll(engine, package, harness, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert trajectory.usage.malformed_tool_calls == 2
    assert "not valid JSON" in server.requests[1].tool_results()[-1]
    assert "unknown tool" in server.requests[2].tool_results()[-1]
    assert trajectory.verification is not None and trajectory.verification.valid


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_user_answers_a_question_and_a_model_that_never_stops_meets_max_steps(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    asks = [call("ask_user", question="Which months should the report cover?")]
    steps = asks + [call("list_files", path=".")] * 5
    trajectory, server = roll(engine, package, harness, steps, max_steps=4)
    assert trajectory.termination.reason == "max_steps", trajectory.termination
    assert len(trajectory.agent_messages()) == 4 and server.remaining("agent") == 2
    answers = [i for i in trajectory.interventions if i.kind == "answer"]
    assert len(answers) == 1
    answered = next(m for m in trajectory.messages if m.role == "tool")
    assert answered.source == "user" and answered.content == answers[0].message
    assert server.requests[1].tool_results() == [answers[0].message]
    assert trajectory.verification is not None and trajectory.verification.valid


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_long_episode_is_kept_under_the_context_budget_on_the_wire_only(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    loud = call("shell", command="python3 -c \"print('x' * 11000)\"")
    trajectory, server = roll(engine, package, harness, [loud] * 17 + [finish()], max_steps=25)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    last = server.requests[-1].tool_results()
    assert len(last) == 17 and "elided to save context" in last[0]
    assert "elided" not in last[-1]  # the newest results go out whole
    assert sum(len(text) for text in last) < 160_000
    recorded = [m.content for m in trajectory.messages if m.role == "tool"]
    assert all("elided" not in text and text.count("x") >= 11000 for text in recorded[:17])


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_dead_endpoint_makes_the_trajectory_invalid(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    down = {"status": 503, "headers": {"x-should-retry": "false"}}
    trajectory, _ = roll(engine, package, harness, [call("list_files", path="."), down])
    assert trajectory.termination.reason == "model_error", trajectory.termination
    assert trajectory.verification is not None and not trajectory.verification.valid
    assert trajectory.reward is None


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_endpoint_that_refuses_token_ids_is_asked_again_without_them(
    engine: RolloutEngine, package: EnvironmentPackage, harness: str
) -> None:
    refuse = {
        "status": 400,
        "headers": {"x-should-retry": "false"},
        "body": {"error": {"message": "unknown field return_token_ids", "type": "invalid"}},
    }
    trajectory, server = roll(engine, package, harness, [refuse, finish()])
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    first, second = (r.body for r in server.requests)
    assert first.get("return_token_ids") is True and first.get("logprobs") is True
    assert "return_token_ids" not in second and "logprobs" not in second


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_spent_token_budget_ends_the_rollout_as_such(
    package: EnvironmentPackage, harness: str
) -> None:
    big = {"prompt_tokens": 900, "completion_tokens": 200}
    steps = [{**call("list_files", path="."), "usage": big}] * 3
    with RolloutEngine(limits=RolloutLimits(token_budget=1000)) as engine:
        trajectory, server = roll(engine, package, harness, steps)
    assert trajectory.termination.reason == "budget_exhausted", trajectory.termination
    assert len(server.requests) == 1  # the gateway refused the second call; no retries
    assert trajectory.reward is not None  # the policy ran out: its work is still verified


def test_a_missing_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(adapters.LIBRARIES, "openai-agents", "no_such_module_for_cowork_gym")
    with pytest.raises(HarnessError) as caught:
        get_harness("openai-agents")
    assert caught.value.reason == "harness_crash"
    assert "cowork-gym[harnesses]" in caught.value.detail


def test_the_command_refuses_an_adapter_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    call = ["rollout", str(tmp_path), "--model", "m", "--out", str(tmp_path / "o")]
    unserved = runner.invoke(app, [*call, "--harness", "mini-swe-agent"])
    assert unserved.exit_code == 2
    assert "mini-swe-agent harness needs --base-url" in flat(unserved.output)
    monkeypatch.setitem(adapters.LIBRARIES, "mini-swe-agent", "no_such_module_for_cowork_gym")
    url = ["--base-url", "http://127.0.0.1:9/v1"]
    missing = runner.invoke(app, [*call, *url, "--harness", "mini-swe-agent"])
    assert missing.exit_code == 2
    assert "cowork-gym[harnesses]" in flat(missing.output)


def test_the_command_rolls_both_adapters_out_and_stores_what_reloads(
    package: EnvironmentPackage, tmp_path: Path
) -> None:
    served = [name for name in ("mini-swe-agent", "openai-agents") if not missing(name)]
    if not served:
        pytest.skip("no adapter library installed")
    configure_logging()  # as `main()` does: logs on stderr, stdout keeps the JSON
    where = package.write(tmp_path / "envs" / package.name)
    solve = {
        "openai-agents": [call("shell", command=solve_command(package)), finish("report.xlsx")],
        "mini-swe-agent": [mini_bash(solve_command(package)), mini_bash(MINI_SUBMIT)],
    }
    out = tmp_path / "rollouts"
    with ScriptedServer.from_lanes(lanes_for({name: solve[name] for name in served})) as server:
        harnesses = [arg for name in served for arg in ("--harness", name)]
        args = [str(where), *harnesses, "--model", MODEL, "--base-url", server.url]
        result = CliRunner().invoke(
            app, ["rollout", *args, "--workers", "1", "--out", str(out), "--json"]
        )
    assert result.exit_code == 0, result.output
    rows = {row["harness"]: row for row in json.loads(result.stdout)["harnesses"]}
    assert set(rows) == set(served)
    assert all(row["valid"] == 1 and row["pass_rate"] == 1.0 for row in rows.values())
    stored = list(read_jsonl(out / "trajectories.jsonl"))
    assert sorted(t.policy.harness for t in stored) == sorted(served)
    assert all(t.reward == 1.0 for t in stored)


def test_parallel_workers_run_adapter_rollouts_side_by_side(
    package: EnvironmentPackage, tmp_path: Path
) -> None:
    served = [name for name in ("mini-swe-agent", "openai-agents") if not missing(name)]
    if not served:
        pytest.skip("no adapter library installed")
    configure_logging()
    where = package.write(tmp_path / "envs" / package.name)
    samples = 2
    rollouts = samples * len(served)
    out = tmp_path / "rollouts"
    # every reply is the same, so the lane serves the interleaved rollouts in any order
    done = {"openai-agents": [finish()], "mini-swe-agent": [mini_bash(MINI_SUBMIT)]}
    lanes = lanes_for({name: done[name] * samples for name in served})
    with ScriptedServer.from_lanes(lanes) as server:
        harnesses = [arg for name in served for arg in ("--harness", name)]
        args = [str(where), *harnesses, "--model", MODEL, "--base-url", server.url]
        result = CliRunner().invoke(
            app,
            ["rollout", *args, "--samples", str(samples), "--workers", "3", "--out", str(out)],
        )
        assert result.exit_code == 0, result.output
        assert all(server.remaining(lane) == 0 for lane in lanes)
    stored = list(read_jsonl(out / "trajectories.jsonl"))
    assert len(stored) == rollouts and len({t.id for t in stored}) == rollouts
    assert all(t.termination.reason == "agent_done" for t in stored)
    # each rollout's record holds its own completion only
    assert all(len(t.agent_messages()) == 1 for t in stored)


MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def mini_bash(command: str) -> dict[str, Any]:
    """A reply in mini-swe-agent's text format: one bash block."""
    return {"content": f"THOUGHT: go.\n\n```mswea_bash_command\n{command}\n```"}


def lanes_for(scripts: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The server's lanes: mini-swe-agent's own system prompt is served by the default lane,
    the episode's (openai-agents') by the agent lane."""
    lane = {"mini-swe-agent": "default", "openai-agents": "agent"}
    return {lane[name]: steps for name, steps in scripts.items()}


def missing(name: str) -> bool:
    return adapters.missing_library(name) is not None


@pytest.mark.skipif(missing("openai-agents"), reason="openai-agents is not installed")
def test_an_sdk_exception_ends_the_rollout_as_a_harness_crash(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    # the SDK refuses a completion cut off before any token (finish_reason "length")
    steps = [call("list_files", path="."), {"content": "", "finish_reason": "length"}]
    trajectory, _ = roll(engine, package, "openai-agents", steps)
    assert trajectory.termination.reason == "harness_crash", trajectory.termination
    assert "openai-agents: ModelBehaviorError" in trajectory.termination.detail
    assert trajectory.verification is not None and not trajectory.verification.valid

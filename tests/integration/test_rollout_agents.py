"""Rollouts of scripted agents over real HTTP (the scripted OpenAI-compatible server,
through the LLM gateway) in real bubblewrap sandboxes: an agent that solves, one that
fails, one that falsely claims success, one that hunts for the private files, one that
forges the reward; token ids and logprobs recorded; malformed calls answered and counted;
a failing endpoint or a spent budget ends the rollout, invalid, without raising."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
from coworkgym.rollout.harness import PolicyConfig
from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = pytest.mark.timeout(120)
MODEL = "scripted-policy"


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
    """What a capable agent would run (the test knows the answer; the agent is scripted)."""
    script = pkg.files["solution/solve.sh"].decode()
    return f"export COWORK_TURN={turn}\n{script}"


def roll(
    engine: RolloutEngine,
    pkg: EnvironmentPackage,
    steps: list[dict[str, Any]],
    *,
    max_steps: int = 20,
    **policy: Any,
) -> tuple[Trajectory, ScriptedServer]:
    with ScriptedServer.from_lanes({"agent": steps}) as server:
        config = PolicyConfig(model=MODEL, base_url=server.url, max_steps=max_steps, **policy)
        return engine.run(pkg, "tool-calling", config), server


def tool_outputs(trajectory: Trajectory) -> str:
    return "\n".join(m.content for m in trajectory.messages if m.role == "tool")


def test_an_agent_that_solves_scores_1_with_its_tokens_recorded(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    steps = [
        {**call("list_files", path="."), "token_ids": [11, 12, 13], "logprobs": [-0.1, -0.2, -0.3]},
        {
            **call("shell", command=solve_command(package)),
            "token_ids": [14],
            "prompt_token_ids": [1, 2],
        },
        {**finish("report.xlsx", "summary.json"), "token_ids": [15, 16]},
    ]
    trajectory, server = roll(engine, package, steps)
    assert trajectory.termination.reason == "agent_done"
    assert trajectory.verification is not None and trajectory.verification.valid
    assert trajectory.reward == 1.0 and trajectory.verification.passed
    agent = trajectory.agent_messages()
    assert [m.tokens.completion_ids for m in agent if m.tokens] == [[11, 12, 13], [14], [15, 16]]
    assert agent[0].tokens is not None and agent[0].tokens.logprobs == [-0.1, -0.2, -0.3]
    assert agent[1].tokens is not None and agent[1].tokens.prompt_ids == [1, 2]
    assert trajectory.claimed_deliverables == ["report.xlsx", "summary.json"]
    # provenance: only the policy's messages are training targets
    assert {m.source for m in trajectory.messages} == {"system", "user", "agent", "tool"}
    assert all(m.role == "assistant" for m in agent)
    # the request asked for token ids; the gateway counted the usage of this rollout
    assert server.requests[0].body.get("return_token_ids") is True
    assert server.requests[0].body.get("logprobs") is True
    assert trajectory.usage.requests == 3 and trajectory.usage.prompt_tokens == 300
    created = {f.path for e in trajectory.workspace_events for f in e.files}
    assert {"report.xlsx", "summary.json"} <= created
    final = {d.path for d in trajectory.final_workspace}
    assert final - {d.path for d in trajectory.initial_workspace} == {"report.xlsx", "summary.json"}
    # the upstream never saw the gateway token or vice versa: the harness held a token only
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_an_agent_that_fails_scores_below_1_and_stays_valid(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    steps = [
        call("write_file", path="summary.json", content='{"wettest_month": "1999-01"}'),
        finish("summary.json"),
    ]
    trajectory, _ = roll(engine, package, steps)
    verification = trajectory.verification
    assert verification is not None and verification.valid
    assert verification.reward is not None and verification.reward < 0.5
    assert verification.passed is False


def test_a_false_claim_of_success_is_recorded_against_the_evidence(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    steps = [{"content": "I saved report.xlsx and summary.json.", **finish("report.xlsx")}]
    trajectory, _ = roll(engine, package, steps)
    assert trajectory.claimed_deliverables == ["report.xlsx"]
    assert "report.xlsx" not in {d.path for d in trajectory.final_workspace}
    assert trajectory.reward == 0.0


def test_the_agent_sandbox_cannot_see_the_private_files(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    probe = (
        "ls / ; ls -la /solution /tests /app/.user /app/.patch /logs 2>&1; "
        "cat /solution/solve.sh /tests/verifier.json 2>&1; "
        "find / -name 'solve.sh' -o -name 'user.json' -o -name 'verifier.json' 2>/dev/null; "
        "echo probe-done"
    )
    steps = [
        call("shell", command=probe),
        call("read_file", path="/solution/solve.sh"),
        call("read_file", path="../tests/verifier.json"),
        call("list_files", path="/"),
        call("read_file", path=".user/user.json"),
        call("read_file", path=".patch/turn-01/patch.json"),
        finish(),
    ]
    trajectory, _ = roll(engine, package, steps)
    outputs = tool_outputs(trajectory)
    assert "probe-done" in outputs
    root = outputs.split("--- stdout ---\n", 1)[1].split("\n")
    assert "solution" not in root and "tests" not in root  # / holds no private directory
    assert "No such file or directory" in outputs
    assert package.user is not None
    for secret in [*package.user.latent_goals, "cowork_verifier", "Reference solution"]:
        assert secret not in outputs
    errors = [m for m in trajectory.messages if m.role == "tool" and m.is_error]
    assert len(errors) == 5  # the five file-tool probes were refused
    assert "outside" in errors[0].content or "not a file" in errors[0].content


def test_a_forged_reward_is_ignored_by_the_verifier(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    forge = (
        "mkdir -p /logs/verifier 2>&1; echo '{\"reward\": 1.0}' > /logs/verifier/reward.json 2>&1;"
        " mkdir -p logs/verifier && echo '{\"reward\": 1.0}' > logs/verifier/reward.json;"
        " echo 1.0 > reward.txt; echo forged"
    )
    steps = [
        call("shell", command=forge),
        call("write_file", path="/logs/verifier/reward.json", content='{"reward": 1.0}'),
        finish("logs/verifier/reward.json"),
    ]
    trajectory, _ = roll(engine, package, steps)
    assert "forged" in tool_outputs(trajectory)
    assert "logs/verifier/reward.json" in {d.path for d in trajectory.final_workspace}
    assert trajectory.verification is not None and trajectory.verification.valid
    assert trajectory.reward == 0.0


def test_malformed_tool_calls_are_answered_and_counted(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "shell", "raw": "{not json"}]},
        {"tool_calls": [{"name": "delete_everything", "arguments": {}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"no_such_field": 1}}]},
        {"content": "I give up for now."},  # a reply without a tool call ends the turn
    ]
    trajectory, server = roll(engine, package, steps)
    assert trajectory.usage.malformed_tool_calls == 3
    assert trajectory.termination.reason == "agent_done"
    answered = server.requests[1].tool_results()
    assert answered and "not valid JSON" in answered[0]
    assert "unknown tool" in server.requests[2].tool_results()[-1]


def test_a_failing_endpoint_ends_the_rollout_invalid_without_raising(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    down = {"status": 503, "headers": {"x-should-retry": "false"}}
    trajectory, _ = roll(engine, package, [call("list_files", path="."), down])
    assert trajectory.termination.reason == "model_error"
    assert trajectory.verification is not None and not trajectory.verification.valid
    assert trajectory.reward is None
    assert "model_error" in (trajectory.verification.invalid_reason or "")


def test_a_spent_token_budget_ends_the_rollout(package: EnvironmentPackage) -> None:
    steps = [
        {**call("list_files", path="."), "usage": {"prompt_tokens": 900, "completion_tokens": 200}}
    ]
    with RolloutEngine(limits=RolloutLimits(token_budget=1000)) as engine:
        trajectory, server = roll(engine, package, steps * 3)
    assert trajectory.termination.reason == "budget_exhausted"
    assert len(server.requests) == 1  # the gateway refused the second call itself
    assert trajectory.reward is not None  # the policy ran out: its work is still verified


def test_max_steps_ends_a_rollout_that_never_finishes(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    trajectory, _ = roll(engine, package, [call("list_files", path=".")] * 5, max_steps=3)
    assert trajectory.termination.reason == "max_steps"
    assert len(trajectory.agent_messages()) == 3
    results = [m for m in trajectory.messages if m.role == "tool"]
    assert len(results) == 3 and not any(m.is_error for m in results)  # the last step ran
    assert trajectory.verification is not None and trajectory.verification.valid


def test_a_multi_turn_agent_sees_the_patch_and_the_record_says_so(engine: RolloutEngine) -> None:
    pkg = good_package("weather_report", turns=3, seed=7)
    plan = sorted(pkg.patches, key=lambda p: p.turn)
    steps: list[dict[str, Any]] = []
    for turn in range(len(plan) + 1):
        steps.append(call("shell", command=solve_command(pkg, turn)))
        # one call is fewer than a deliverable trigger waits for: the finish ends the turn
        steps.append(finish("report.xlsx"))
    trajectory, server = roll(engine, pkg, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert [i.turn for i in trajectory.interventions if i.kind == "turn"] == [1, 2]
    assert trajectory.reward == 1.0
    # each turn's message reached the model right after the tool result that triggered it
    said = [m["content"] for r in server.requests for m in r.messages if m["role"] == "user"]
    assert plan[0].message in said and plan[1].message in said
    patched = [e for e in trajectory.workspace_events if e.kind == "patch_applied"]
    for event in patched:
        assert all(f.sha256_after for f in event.files if f.change != "deleted")
        assert event.invalidates
    record = json.loads(trajectory.model_dump_json())
    assert Trajectory.model_validate(record) == trajectory


def test_the_upstream_key_reaches_the_upstream_only(
    engine: RolloutEngine, package: EnvironmentPackage
) -> None:
    secret = "sk-upstream-" + "7f3a9c"
    probe = "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo probed"
    steps = [call("shell", command=probe), finish()]
    with ScriptedServer.from_lanes({"agent": steps}, expected_key=secret) as server:
        config = PolicyConfig(model=MODEL, base_url=server.url)
        trajectory = engine.run(package, "tool-calling", config, api_key=secret)
    assert trajectory.termination.reason == "agent_done"  # the upstream accepted the key
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {secret}"}
    assert "probed" in tool_outputs(trajectory)
    assert secret not in trajectory.model_dump_json()  # not in the sandbox, not in the record

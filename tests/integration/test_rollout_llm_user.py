"""The LLM-played user and the rubric judge in a rollout, over real HTTP through the
gateway: the user's words reach the agent and are checked (a leak and a contradiction are
recorded as faults), its traffic is accounted apart from the policy's; the judge's score
enters the reward, and a judge that gives no valid verdict makes the trajectory invalid."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coworkgym.rollout.engine import Endpoint, RolloutEngine
from coworkgym.rollout.harness import PolicyConfig
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = pytest.mark.timeout(120)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def verdict(item: str, score: float) -> dict[str, Any]:
    body = {"items": [{"id": item, "score": score, "rationale": "ok", "evidence": ["Summary"]}]}
    return {"content": json.dumps(body)}


def test_an_llm_user_speaks_its_turn_and_its_faults_are_recorded() -> None:
    pkg = good_package("weather_report", turns=2, seed=7)  # turn 1: data/weather.csv replaced
    assert pkg.user is not None
    goal = pkg.user.latent_goals[0]
    solve = pkg.files["solution/solve.sh"].decode()
    lanes = {
        "agent": [
            call("ask_user", question="Which units is the precipitation in?"),
            call("ask_user", question="Is there anything else you care about?"),
            call("shell", command=f"export COWORK_TURN=0\n{solve}"),  # report.xlsx appears
            call("list_files", path="."),
            call("read_file", path="summary.json"),  # the turn's third call: the user speaks
            call("shell", command=f"export COWORK_TURN=1\n{solve}"),
            call("finish", summary="Redone.", deliverables=["report.xlsx", "summary.json"]),
        ],
        "user": [
            {"content": "It's in millimetres: precipitation is in mm."},
            {"content": f"Well, between us: {goal}"},  # a leak of a latent goal
            {"content": "Thanks! Also, I haven't changed anything, just redo it."},  # contradicts
        ],
    }
    with ScriptedServer.from_lanes(lanes) as server:
        user = Endpoint(server.url, "user-model")
        with RolloutEngine(user_endpoint=user) as engine:
            policy = PolicyConfig(model="agent-model", base_url=server.url)
            t = engine.run(pkg, "tool-calling", policy)
        said = [r for r in server.requests if r.lane == "user"]
    assert t.termination.reason == "agent_done" and t.reward == 1.0
    assert [i.speaker for i in t.interventions] == ["llm", "llm", "llm"]
    assert t.interventions[0].revealed == ["precipitation is in mm"]
    assert [f.kind for f in t.simulator_faults] == ["private_state_leaked", "contradicts_patch"]
    # the user model was told the request and the patched file; the agent saw the user's words
    assert "data/weather.csv" in said[2].messages[-1]["content"]
    assert any("haven't changed anything" in m.content for m in t.messages if m.source == "user")
    # the policy's usage counts the policy's requests only
    assert t.usage.requests == len(lanes["agent"]) and len(said) == 3


def test_the_judge_score_enters_the_reward_and_a_failed_judge_is_invalid() -> None:
    pkg = good_package("weather_report", turns=1, seed=7)
    assert pkg.verifier is not None
    item = pkg.verifier.rubric[0].id
    with (
        ScriptedServer.from_lanes({"judge": [verdict(item, 0.5)]}) as server,
        RolloutEngine(judge_endpoint=Endpoint(server.url, "judge-model")) as engine,
    ):
        judged = engine.run(pkg, "oracle", PolicyConfig(model="none"))
        failed = engine.run(pkg, "oracle", PolicyConfig(model="none"), sample=1)
    v = judged.verification
    assert v is not None and v.valid and v.judge_ran and v.rubric_score == 0.5
    assert v.code_score == 1.0 and v.reward is not None and 0.5 < v.reward < 1.0
    w = failed.verification  # the script is exhausted: every judge attempt fails
    assert w is not None and not w.valid and w.reward is None and failed.reward is None
    assert w.invalid_reason and "rubric judge failed" in w.invalid_reason

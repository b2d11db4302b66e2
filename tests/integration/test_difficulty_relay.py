"""benchmarks/difficulty.py's relay: `cowork-gym rollout --harness tool-calling` against it,
with a tiny scripted policy answering the queued requests from a thread (each turn: list
the files, then finish), records one whole two-turn trajectory; every request sits in the
queue with its trajectory and what is new in it; the table reads the trajectory back."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

from coworkgym.rollout.trajectory import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkgym"]


def load_benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "difficulty_benchmark", ROOT / "benchmarks" / "difficulty.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def scripted_player(bench: ModuleType, queue: Path, stop: threading.Event) -> None:
    """Each turn: list_files, then finish — decided from the request alone."""
    while not stop.is_set():
        for seq in bench.unanswered(queue):
            record = json.loads((queue / f"{seq:06d}.request.json").read_text())
            new = record["body"]["messages"][record["new_from"] :]
            if any(m["role"] == "user" for m in new):
                bench.write_answer(queue, seq, tools=[("list_files", '{"path": "."}')])
            else:
                args = json.dumps({"summary": "looked around", "deliverables": []})
                bench.write_answer(queue, seq, text="done here", tools=[("finish", args)])
        time.sleep(0.1)


def test_a_scripted_player_answers_through_the_relay_and_a_trajectory_is_recorded(
    tmp_path: Path,
) -> None:
    bench = load_benchmark()
    subprocess.run(
        [*CLI, "synth", ROOT / "examples" / "specs" / "weather-report.yaml", "--out",
         tmp_path / "envs", "--no-harbor-lint"],
        check=True, capture_output=True,
    )  # fmt: skip
    package = next(p for p in (tmp_path / "envs").iterdir() if (p / "task.toml").exists())
    queue, out = tmp_path / "queue", tmp_path / "rollouts"
    stop = threading.Event()
    player = threading.Thread(target=scripted_player, args=(bench, queue, stop), daemon=True)
    with bench.RelayServer(queue) as relay:
        player.start()
        try:
            subprocess.run(
                [*CLI, "rollout", package, "--harness", "tool-calling", "--model", "relay",
                 "--base-url", relay.url, "--request-timeout", "120", "--no-logprobs",
                 "--out", out],
                check=True, capture_output=True, timeout=400,
                env={**os.environ, "COWORKGYM_LLM_API_KEY": "relay"},
            )  # fmt: skip
        finally:
            stop.set()
            player.join(timeout=5)

    [trajectory] = list(read_jsonl(out / "trajectories.jsonl"))
    assert trajectory.termination.reason == "agent_done"
    calls = [c for m in trajectory.messages if m.source == "agent" for c in m.tool_calls]
    assert [c.name for c in calls] == ["list_files", "finish", "list_files", "finish"]
    assert all(c.id.startswith("call_") for c in calls)
    assert [i.kind for i in trajectory.interventions] == ["turn"]
    assert trajectory.verification is not None and trajectory.verification.valid

    requests = sorted(queue.glob("*.request.json"))
    records = [json.loads(p.read_text()) for p in requests]
    assert [r["seq"] for r in records] == [1, 2, 3, 4]
    assert {r["trajectory"] for r in records} == {"t001"}
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert records[0]["new_from"] == 0 and records[1]["previous_seq"] == 1
    # the player's view is the request alone: nothing of the package is in the queue
    assert bench.unanswered(queue) == []
    for path in queue.iterdir():
        assert str(package) not in path.read_text()
    shown = bench.render_request(records[2])
    assert "[5 tool call_2_0]" in shown and "-- tools: " in shown
    assert "list_files" in bench.render_request(records[0])  # the tools, described

    [row] = bench.table_rows([trajectory])
    assert (row.family, row.level, row.harness) == ("weather_report", "medium:2", "tool-calling")
    assert (row.rollouts, row.valid) == (1, 1)
    assert row.median_tool_calls == 4 and row.over_20 == 0.0 and row.pass_rate == 0.0


def test_a_later_rollout_opening_alike_is_a_new_trajectory(tmp_path: Path) -> None:
    """Two seeds of a family open with the same messages: the second is not a retry of the
    first (which went on), so it is queued anew, in a trajectory of its own; a retry of
    the latest request is answered from the queue."""
    bench = load_benchmark()
    relay = bench.Relay(tmp_path / "queue")
    opening = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}
    first = relay.submit(opening)
    assert relay.submit(opening) == first  # the client retried
    bench.write_answer(relay.queue, first, tools=[("list_files", '{"path": "."}')])
    answer = relay.wait(first)
    call_id = answer["tool_calls"][0]["id"]
    tool = {"role": "tool", "tool_call_id": call_id, "content": "a.csv"}
    second = relay.submit({"messages": [*opening["messages"], answer, tool]})
    again = relay.submit(opening)  # the next seed's rollout begins
    assert len({first, second, again}) == 3
    records = {
        s: json.loads(bench._request_path(relay.queue, s).read_text())
        for s in (first, second, again)
    }
    assert records[first]["trajectory"] == records[second]["trajectory"]
    assert records[again]["trajectory"] != records[first]["trajectory"]
    assert records[again]["new_from"] == 0

"""The rollout engine's record and rules, driven by small scripted harnesses in real
sandboxes: provenance and ordering, ask_user through the user, a finish that the user
interrupts, the limits, crashes and infrastructure faults (invalid, never 0), a plain
Harbor task's default tools, interfaces that narrow the tools, and the oracle's secret."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from coworkgym.package.cowork import Interfaces, Trigger
from coworkgym.package.package import EnvironmentPackage, dumps_json
from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
from coworkgym.rollout.harness import Episode, PolicyConfig, register
from coworkgym.rollout.replay import oracle_command
from coworkgym.rollout.trajectory import ToolCall, Trajectory
from coworkgym.rollout.user import Due, Fired, UserSimulator
from tests.corpus.build import plain_harbor_task
from tests.support.builders import good_package

Script = Callable[[Episode], None]
SCRIPTS: dict[str, Script] = {}


class Scripted:
    """A harness whose behaviour is a test function (registered per test by name)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        SCRIPTS[self.name](episode)


def harness(name: str) -> Callable[[Script], Script]:
    def add(script: Script) -> Script:
        SCRIPTS[name] = script
        register(name)(lambda: Scripted(name))
        return script

    return add


def tool(name: str, index: int = 0, **arguments: object) -> ToolCall:
    return ToolCall(id=f"t{index}-{name}", name=name, arguments=json.dumps(arguments))


def act(episode: Episode, *calls: ToolCall, content: str = "") -> list[str]:
    episode.record_agent(content, list(calls))
    return [episode.execute(c).text for c in calls]


@pytest.fixture(scope="module")
def engine() -> Iterator[RolloutEngine]:
    with RolloutEngine() as engine:
        yield engine


@pytest.fixture(scope="module")
def single() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


def run(engine: RolloutEngine, pkg: EnvironmentPackage, name: str, **policy: object) -> Trajectory:
    return engine.run(pkg, name, PolicyConfig(model="scripted", **policy))  # type: ignore[arg-type]


# ---- the record -------------------------------------------------------------------------
@harness("t-ask-and-finish")
def _ask_and_finish(episode: Episode) -> None:
    act(episode, tool("ask_user", 0, question="Which units is precipitation in?"))
    act(episode, tool("list_files", 1, path="."), tool("finish", 2, summary="ok"))


def test_messages_carry_provenance_in_order(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    t = run(engine, single, "t-ask-and-finish")
    assert [(m.role, m.source) for m in t.messages] == [
        ("system", "system"),
        ("user", "user"),
        ("assistant", "agent"),
        ("tool", "user"),  # the answer to ask_user comes from the user simulator
        ("assistant", "agent"),
        ("tool", "tool"),
        ("tool", "tool"),
    ]
    answers = [i for i in t.interventions if i.kind == "answer"]
    assert len(answers) == 1 and answers[0].at_message == 3
    assert answers[0].revealed and answers[0].message == t.messages[3].content
    assert t.messages[3].tool_call_id == "t0-ask_user"
    assert t.usage.tool_calls == 3 and t.termination.reason == "agent_done"
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(t.messages, t.messages[1:], strict=False))
    assert {d.path for d in t.initial_workspace} == set(single.workspace())
    assert t.environment.digest == single.digest() == t.key.package_digest
    assert t.environment.family == "weather_report" and t.environment.turns == 1


@harness("t-write-then-finish")
def _write_then_finish(episode: Episode) -> None:
    outputs = act(
        episode,
        tool("write_file", 0, path="report.xlsx", content="draft"),
        tool("finish", 1, summary="done", deliverables=["report.xlsx"]),
    )
    assert outputs[1].startswith("Not finished yet")  # the user spoke up first
    message = episode.pending_user_message()
    assert message is not None and not episode.done
    act(episode, tool("finish", 2, summary="redone"))
    assert episode.pending_user_message() is None and episode.done


def test_a_deliverable_interrupts_the_turn_and_events_mark_the_patch(engine: RolloutEngine) -> None:
    pkg = good_package("weather_report", turns=2, seed=7)
    turn = pkg.patches[0].model_copy(
        update={"trigger": Trigger(kind="artifact_appeared", artifact="report.xlsx")}
    )
    pkg = replace(pkg, patches=[turn])
    t = run(engine, pkg, "t-write-then-finish")
    assert t.termination.reason == "agent_done"
    [said] = [i for i in t.interventions if i.kind == "turn"]
    assert said.trigger == "artifact_appeared" and said.patch_kind == turn.kind
    assert t.messages[said.at_message].role == "user" and t.messages[said.at_message].turn == 1
    kinds = [(e.kind, e.turn) for e in t.workspace_events]
    assert kinds[0] == ("files_changed", 0)  # the agent's draft, before the user's patch
    assert [f.path for f in t.workspace_events[0].files] == ["report.xlsx"]
    if turn.updates:
        assert kinds[1] == ("patch_applied", 1)
        assert t.workspace_events[1].at_message == said.at_message
    assert t.claimed_deliverables == ["report.xlsx"]


class QuitsEarly(UserSimulator):
    """A user who stops after the first request although more turns were planned."""

    def after_agent_turn(self, *, claimed_done: bool) -> Due | None:
        self.agent_turns += 1
        return None


def test_a_user_that_stops_early_is_a_recorded_fault(single: EnvironmentPackage) -> None:
    pkg = good_package("weather_report", turns=2, seed=7)
    with RolloutEngine(simulator=QuitsEarly) as engine:
        t = run(engine, pkg, "nop")
    assert t.termination.reason == "agent_done"
    assert [f.kind for f in t.simulator_faults] == ["stopped_early"]
    assert "1 of 1 planned turns" in t.simulator_faults[0].detail


# ---- limits and failures ----------------------------------------------------------------
@harness("t-slow")
def _slow(episode: Episode) -> None:
    while not episode.done:
        act(episode, tool("shell", 0, command="sleep 0.3"))
        time.sleep(0.2)


def test_the_wall_clock_limit_ends_the_rollout(single: EnvironmentPackage) -> None:
    with RolloutEngine(limits=RolloutLimits(timeout_s=1.0)) as engine:
        t = run(engine, single, "t-slow")
    assert t.termination.reason == "timeout"
    assert t.verification is not None and t.verification.valid  # the policy ran out: verified


@harness("t-crash")
def _crash(episode: Episode) -> None:
    act(episode, tool("list_files", 0))
    raise RuntimeError("the harness tripped")


@harness("t-walks-away")
def _walks_away(episode: Episode) -> None:
    act(episode, tool("list_files", 0))


def test_a_crashed_or_quitting_harness_is_invalid_not_zero(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    for name, detail in (("t-crash", "tripped"), ("t-walks-away", "before the episode was done")):
        t = run(engine, single, name)
        assert t.termination.reason == "harness_crash" and detail in t.termination.detail
        assert t.verification is not None and not t.verification.valid and t.reward is None


def test_a_verifier_crash_makes_the_trajectory_invalid(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    files = {**single.files, "tests/test.sh": b"#!/usr/bin/env bash\necho boom >&2\nexit 3\n"}
    broken = replace(single, files=files)
    t = run(engine, broken, "oracle")
    v = t.verification
    assert v is not None and not v.valid and v.reward is None and v.passed is None
    assert v.invalid_reason and "verifier" in v.invalid_reason and "boom" in v.invalid_reason


def test_a_broken_package_becomes_an_infrastructure_trajectory(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    broken = replace(single, interfaces=Interfaces(tools=["shell"], writable=["../outside"]))
    t = run(engine, broken, "nop")
    assert t.termination.reason == "infrastructure_error"
    assert t.verification is not None and not t.verification.valid


# ---- tools and interfaces ---------------------------------------------------------------
@harness("t-list-tools")
def _list_tools(episode: Episode) -> None:
    names = [s["function"]["name"] for s in episode.tool_schemas()]
    act(episode, tool("finish", 0, summary=",".join(names)))


def test_a_plain_harbor_task_gets_the_shell_and_file_tools(engine: RolloutEngine) -> None:
    raw = plain_harbor_task()
    pkg = EnvironmentPackage.from_files(raw.files, raw.executables)
    t = run(engine, pkg, "t-list-tools")
    summary = json.loads(t.messages[2].tool_calls[0].arguments)["summary"]
    assert summary.split(",") == [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "ask_user",
        "finish",
    ]
    oracle = run(engine, pkg, "oracle")
    assert oracle.reward == 1.0 and run(engine, pkg, "nop").reward == 0.0


@harness("t-narrow")
def _narrow(episode: Episode) -> None:
    outputs = act(
        episode,
        tool("shell", 0, command="echo hi > out.txt"),
        tool("write_file", 1, path="data/new.csv", content="x"),
        tool("write_file", 2, path="out/answer.txt", content="42"),
        tool("read_file", 3, path="data/weather.csv", limit=1),
    )
    act(episode, tool("finish", 4, summary=" | ".join(outputs)))


def test_interfaces_narrow_the_tools_and_the_writable_paths(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    narrowed = Interfaces(tools=["read_file", "write_file"], readable=["."], writable=["out"])
    pkg = replace(
        single,
        interfaces=narrowed,
        files={**single.files, ".cowork/interfaces.json": dumps_json(narrowed)},
    )
    t = run(engine, pkg, "t-narrow")
    results = [m for m in t.messages if m.role == "tool"]
    assert results[0].is_error and "unknown tool 'shell'" in results[0].content
    assert results[1].is_error and "read-only" in results[1].content
    assert not results[2].is_error and not results[3].is_error
    assert t.usage.malformed_tool_calls == 1 and t.usage.tool_errors == 2
    assert "out/answer.txt" in {d.path for d in t.final_workspace}


def test_the_oracle_command_is_the_solution_and_never_lands_in_the_workspace(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    t = run(engine, single, "oracle")
    script = single.files["solution/solve.sh"].decode()
    command = json.loads(t.messages[2].tool_calls[0].arguments)["command"]
    assert script in command and "COWORK_TURN=0" in command
    assert not any(
        d.path.startswith("solution") or d.path.endswith("solve.sh") for d in t.final_workspace
    )
    extra = oracle_command({"solve.sh": b"bash helper.sh\n", "helper.sh": b"echo hi\n"}, 1, "/app")
    assert "base64 -d" in extra and "COWORK_TURN=1" in extra


def test_trajectories_round_trip_through_json(
    tmp_path: Path, engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    from coworkgym.rollout.trajectory import read_jsonl, write_jsonl

    t = run(engine, single, "oracle")
    write_jsonl(tmp_path / "t.jsonl", [t])
    assert list(read_jsonl(tmp_path / "t.jsonl")) == [t]


@harness("t-fifos")
def _fifos(episode: Episode) -> None:
    make = "rm -f data/weather.csv && mkfifo data/weather.csv report.xlsx && ls -l data"
    outputs = act(episode, tool("shell", 0, command=make))
    assert "prw" in outputs[0], outputs
    while not episode.done:
        act(episode, tool("finish", 1, summary="done"))
        episode.pending_user_message()


@pytest.mark.timeout(60)
def test_fifos_the_agent_leaves_hang_neither_the_patch_nor_the_verifier(
    engine: RolloutEngine,
) -> None:
    pkg = good_package("weather_report", turns=2, seed=7)  # turn 1 replaces data/weather.csv
    assert pkg.patches[0].updates
    t = run(engine, pkg, "t-fifos")
    assert t.termination.reason == "agent_done"
    assert t.verification is not None and t.verification.valid, t.verification
    assert "data/weather.csv" in {d.path for d in t.final_workspace}  # the user's file again
    assert "report.xlsx" not in {d.path for d in t.final_workspace}


class BreaksOnTurn(UserSimulator):
    """A user simulator that fails when it should speak its next turn."""

    def fire(self, due: Due) -> Fired:
        raise OSError("disk full")


def test_a_failing_simulator_ends_the_rollout_as_its_fault(engine: RolloutEngine) -> None:
    pkg = good_package("weather_report", turns=2, seed=7)
    with RolloutEngine(simulator=BreaksOnTurn) as engine:
        t = run(engine, pkg, "nop")
    assert t.termination.reason == "simulator_fault" and "disk full" in t.termination.detail
    assert [f.kind for f in t.simulator_faults] == ["simulator_error"]
    assert t.verification is not None and not t.verification.valid and t.reward is None


@harness("t-last-word")
def _last_word(episode: Episode) -> None:
    act(episode, tool("list_files", 0))
    episode.record_agent("All done.", [])  # the last permitted model call, text only
    episode.end_turn("All done.")


def test_a_reply_in_the_last_permitted_step_still_ends_the_turn(
    engine: RolloutEngine, single: EnvironmentPackage
) -> None:
    t = run(engine, single, "t-last-word", max_steps=2)
    assert t.termination.reason == "agent_done"


def test_the_oracle_runs_with_the_tasks_solution_env(engine: RolloutEngine) -> None:
    raw = plain_harbor_task()
    files = dict(raw.files)
    files["task.toml"] += b'\n[solution.env]\nSHOUT = "yes please"\n'
    files["solution/solve.sh"] = (
        b'#!/usr/bin/env bash\n[ "$SHOUT" = "yes please" ] || exit 1\n'
        b"tr a-z A-Z < /app/greeting.txt | tr -d '\\n' > /app/hello.txt\n"
    )
    pkg = EnvironmentPackage.from_files(files, raw.executables)
    assert run(engine, pkg, "oracle").reward == 1.0


def test_a_harbor_multi_step_task_is_refused_with_the_reason(engine: RolloutEngine) -> None:
    from coworkgym.rollout.batch import find_packages

    folder = Path(__file__).parents[1] / "fixtures" / "harbor_tasks" / "multi-step"
    pkg = EnvironmentPackage.load(folder)
    assert pkg.is_multi_step
    with pytest.raises(ValueError, match="multi-step task"):
        run(engine, pkg, "oracle")
    with pytest.raises(ValueError, match="roll its steps out as separate tasks"):
        find_packages([str(folder)])


@harness("t-env")
def _env(episode: Episode) -> None:
    act(episode, tool("shell", 0, command="echo region=$REGION token=${TOKEN:-unset}"))
    act(episode, tool("finish", 1, summary="done"))


def test_shell_sees_the_tasks_environment_but_no_host_variable(engine: RolloutEngine) -> None:
    raw = plain_harbor_task()
    files = dict(raw.files)
    toml = files["task.toml"].decode()
    toml += '\n[environment.env]\nREGION = "eu-west"\nTOKEN = "${HOST_TOKEN}"\n'
    files["task.toml"] = toml.encode()
    pkg = EnvironmentPackage.from_files(files, raw.executables)
    t = run(engine, pkg, "t-env")
    assert "region=eu-west token=unset" in t.messages[3].content

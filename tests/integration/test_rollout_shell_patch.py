"""The shell-patch harness against the scripted OpenAI-compatible server, through the LLM
gateway, in real bubblewrap sandboxes: its own system prompt and tools (shell with an
argument vector, apply_patch, ask_user), patches applied inside the agent's sandbox (a
context mismatch and a symlink out of the workspace answered there, nothing changed), a
path out of the workdir refused before anything runs, and a solving agent that writes its
script by patch, fixes it by patch and passes the verifier."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout import patching
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import AGENT_LANE_MARKER, PolicyConfig
from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package

pytestmark = pytest.mark.timeout(180)
HARNESS = "shell-patch"


@pytest.fixture(scope="module")
def engine() -> Iterator[RolloutEngine]:
    with RolloutEngine() as engine:
        yield engine


def package() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def shell(*argv: str) -> dict[str, Any]:
    return call("shell", command=list(argv))


def patch(*sections: str) -> dict[str, Any]:
    return call("apply_patch", input="\n".join(["*** Begin Patch", *sections, "*** End Patch"]))


def roll(
    engine: RolloutEngine, pkg: EnvironmentPackage, steps: list[dict[str, Any]]
) -> tuple[Trajectory, ScriptedServer]:
    with ScriptedServer.from_lanes({"agent": steps}) as server:
        config = PolicyConfig(model="scripted-policy", base_url=server.url, max_steps=20)
        return engine.run(pkg, HARNESS, config), server


def solution_script(pkg: EnvironmentPackage) -> list[str]:
    """The reference solution's Python, as a standalone script with one bug in it (it saves
    the workbook as report.xls)."""
    solve = pkg.files["solution/solve.sh"].decode()
    found = re.search(r"<<'PY'\n(.*?)\nPY\n", solve, re.S)
    assert found is not None
    source = found.group(1).replace('os.environ["WIND_FROM_TURN"]', '"99"')
    return source.replace('wb.save("report.xlsx")', 'wb.save("report.xls")').split("\n")


def test_a_script_written_and_fixed_by_patch_passes_the_verifier(engine: RolloutEngine) -> None:
    pkg = package()
    script = solution_script(pkg)
    steps = [
        shell("bash", "-lc", "ls -R && head -3 data/weather.csv"),
        patch("*** Add File: build_report.py", *("+" + line for line in script)),
        patch(  # the context is not in the file: answered in the sandbox, nothing changed
            "*** Update File: build_report.py",
            "@@",
            ' ws.append(["TOTAL", total])',
            '-wb.save("report.xls")',
            '+wb.save("report.xlsx")',
        ),
        patch("*** Add File: ../outside.txt", "+x"),  # out of the workdir: refused here
        shell("ln", "-s", "/tmp", "link"),
        patch("*** Add File: link/planted.txt", "+x"),  # through a symlink: refused there
        patch(
            "*** Update File: build_report.py",
            '@@ ws.append(["TOTAL", grand])',
            '-wb.save("report.xls")',
            '+wb.save("report.xlsx")',
        ),
        shell("python3", "build_report.py"),
        patch("*** Delete File: build_report.py"),
        shell("rm", "link"),
        {"content": "report.xlsx and summary.json are written."},
    ]
    trajectory, server = roll(engine, pkg, steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    assert trajectory.reward == 1.0

    first = server.requests[0].body
    assert first["messages"][0]["content"].startswith(AGENT_LANE_MARKER)
    assert "*** Begin Patch" in first["messages"][0]["content"]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["shell", "apply_patch", "ask_user"]
    assert first["tools"][0]["function"]["parameters"]["properties"]["command"]["type"] == "array"

    answers = server.requests[-1].tool_results()
    assert answers[0].startswith("exit 0") and "weather.csv" in answers[0]
    assert answers[1] == f"{patching.APPLIED}\nA build_report.py"
    assert answers[2].startswith(patching.NOT_APPLIED) and "hunk 1" in answers[2]
    assert 'ws.append(["TOTAL", total])' in answers[2]
    assert answers[3].startswith(patching.NOT_APPLIED) and "outside the workspace" in answers[3]
    assert "leads outside the workspace" in answers[5]
    assert answers[6] == f"{patching.APPLIED}\nM build_report.py"
    assert answers[8] == f"{patching.APPLIED}\nD build_report.py"

    # the record keeps the model's own calls; only the refused path is malformed
    agent = trajectory.agent_messages()
    assert [c.name for m in agent for c in m.tool_calls] == [
        "shell",
        "apply_patch",
        "apply_patch",
        "apply_patch",
        "shell",
        "apply_patch",
        "apply_patch",
        "shell",
        "apply_patch",
        "shell",
    ]
    assert trajectory.usage.tool_calls == 10
    assert trajectory.usage.malformed_tool_calls == 1
    assert trajectory.usage.tool_errors == 3
    final = {f.path for f in trajectory.final_workspace}
    assert "build_report.py" not in final and "outside.txt" not in final
    assert {"report.xlsx", "summary.json"} <= final


def test_the_user_is_asked_with_ask_user_and_a_reply_without_calls_ends_the_turn(
    engine: RolloutEngine,
) -> None:
    steps = [
        call("ask_user", question="Which units do you want?"),
        call("finish", summary="Done."),  # not this interface's: an unknown tool
        {"content": "I could not finish; here is where I stopped."},
    ]
    trajectory, server = roll(engine, package(), steps)
    assert trajectory.termination.reason == "agent_done", trajectory.termination
    answers = server.requests[-1].tool_results()
    assert not answers[0].startswith("error")
    assert answers[1].startswith("error: unknown tool 'finish'")
    assert [i.kind for i in trajectory.interventions] == ["answer"]
    assert trajectory.usage.malformed_tool_calls == 1
    assert trajectory.reward is not None and trajectory.reward < 1.0


def test_the_command_knows_the_harness_and_wants_an_endpoint_for_it(tmp_path: Path) -> None:
    call = ["rollout", str(tmp_path), "--model", "m", "--out", str(tmp_path / "o")]
    unserved = CliRunner().invoke(app, [*call, "--harness", HARNESS])
    assert unserved.exit_code == 2
    assert "shell-patch harness needs --base-url" in " ".join(
        unserved.output.replace("│", " ").split()
    )

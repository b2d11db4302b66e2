"""What a rollout costs: oracle rollouts per CPU-minute against the bare solve + verify
of the same packages (goal: at most 1.3× the bare cost), and the user simulator's cost
per turn (scripted, and an LLM voice against an instant local server).

    python benchmarks/rollout_cost.py [--seeds 2] [--turns 1 3] [--repeat 200]

Packages: one per procedural family and turn count. CPU time is this process's own plus
every sandboxed process's, read from the sandboxes' cgroups (the processes' rusage when
cgroups are unavailable); bare and oracle are measured the same way. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkgym.families import FAMILIES
from coworkgym.logs import configure_logging
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import PolicyConfig
from coworkgym.rollout.user import LLMVoice, UserSimulator, Voice
from coworkgym.runtime import LocalRuntime
from coworkgym.runtime.workspace import materialize
from coworkgym.sandbox import Limits, Mount, SandboxResult, default_sandbox
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package


class CountingSandbox:
    """The real sandbox, summing the CPU its runs used (cgroup accounting)."""

    def __init__(self) -> None:
        self.inner = default_sandbox()
        self.cpu = 0.0
        self.unmeasured = 0  # runs whose cgroup CPU was not available

    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = Limits(),  # noqa: B008 - immutable
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
    ) -> SandboxResult:
        result = self.inner.run(argv, mounts, limits=limits, env=env, cwd=cwd)
        if result.cpu_s is None:
            self.unmeasured += 1
        self.cpu += result.cpu_s or 0.0
        return result


class Meter:
    def __init__(self, sandbox: CountingSandbox) -> None:
        self.sandbox = sandbox

    def __enter__(self) -> Meter:
        self.wall0 = time.perf_counter()
        self.self0 = _self_cpu()
        self.children0 = _children_cpu()
        self.sandbox0 = self.sandbox.cpu
        self.unmeasured0 = self.sandbox.unmeasured
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        sandboxed = self.sandbox.cpu - self.sandbox0
        if self.sandbox.unmeasured > self.unmeasured0:  # no cgroups: rusage of the children
            sandboxed = _children_cpu() - self.children0
        self.cpu = _self_cpu() - self.self0 + sandboxed


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def bare(pkg: EnvironmentPackage, runtime: LocalRuntime) -> float | None:
    """One solve (every turn, patches between) + one verify: running the task once."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workdir = materialize(pkg, workspace).workdir
        runtime.run_reference(pkg, workspace, workdir)
        return runtime.run_verifier(pkg, workspace, workdir).reward


def user_cost(pkg: EnvironmentPackage, repeat: int, voice: Voice | None) -> float:
    """Seconds per user turn: fire every planned turn (patch + message) and answer one
    question, ``repeat`` times on a fresh workspace."""
    turns = 0
    spent = 0.0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp) / "ws"
            materialize(pkg, workspace)
            user = UserSimulator(pkg, workspace, voice)
            user.answer("Which units is the precipitation in?")
            while (due := user.after_agent_turn(claimed_done=True)) is not None:
                user.fire(due)
                turns += 1
            spent += user.seconds
    return spent / max(1, turns)


def main() -> None:
    configure_logging()
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1, help="packages per family and turns")
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--repeat", type=int, default=200, help="user-simulator repetitions")
    args = parser.parse_args()
    packages = [
        (f"{name} ×{turns}", good_package(name, turns, seed=2 + seed))
        for name in sorted(FAMILIES)
        for turns in args.turns
        for seed in range(args.seeds)
    ]
    sandbox = CountingSandbox()
    runtime = LocalRuntime(sandbox)
    engine = RolloutEngine(sandbox=sandbox, runtime=runtime)
    table = Table(title="oracle rollout vs bare solve + verify (per package)")
    for column in ("package", "bare CPU s", "rollout CPU s", "CPU ratio", "wall ratio", "reward"):
        table.add_column(column, justify="right")
    totals = {"bare_cpu": 0.0, "bare_wall": 0.0, "cpu": 0.0, "wall": 0.0}
    ratios = []
    for name, pkg in packages:
        with Meter(sandbox) as plain:
            bare(pkg, runtime)
        with Meter(sandbox) as rolled:
            trajectory = engine.run(pkg, "oracle", PolicyConfig(model="none"))
        totals["bare_cpu"] += plain.cpu
        totals["bare_wall"] += plain.wall
        totals["cpu"] += rolled.cpu
        totals["wall"] += rolled.wall
        ratios.append(rolled.cpu / plain.cpu)
        table.add_row(
            name,
            f"{plain.cpu:.2f}",
            f"{rolled.cpu:.2f}",
            f"{rolled.cpu / plain.cpu:.2f}×",
            f"{rolled.wall / plain.wall:.2f}×",
            str(trajectory.reward),
        )
    engine.close()
    console = Console(width=110)
    console.print(table)
    n = len(packages)
    console.print(
        f"oracle: {n / (totals['cpu'] / 60):.1f} rollouts per CPU-minute "
        f"({n / (totals['wall'] / 60):.1f} per wall-minute, one worker); bare solve + verify: "
        f"{n / (totals['bare_cpu'] / 60):.1f} per CPU-minute. Total CPU ratio "
        f"{totals['cpu'] / totals['bare_cpu']:.2f}× (median {statistics.median(ratios):.2f}×, "
        f"max {max(ratios):.2f}×; goal ≤ 1.3×)"
    )
    multi = good_package("weather_report", 3, seed=2)
    scripted = user_cost(multi, args.repeat, None)
    with ScriptedServer.from_lanes(
        {"user": [{"content": "Noted: data/weather.csv."}] * (args.repeat * 4)}
    ) as server:
        import openai

        with openai.OpenAI(base_url=server.url, api_key="EMPTY") as client:
            llm = user_cost(multi, max(1, args.repeat // 10), LLMVoice(client, "user-model"))
    console.print(
        f"user simulator per turn (patch applied + message, one answer per episode; "
        f"{multi.name}): scripted {scripted * 1000:.2f} ms; LLM voice against an instant local "
        f"server {llm * 1000:.2f} ms (model time excluded)"
    )


if __name__ == "__main__":
    main()

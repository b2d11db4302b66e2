"""A synthesis campaign on one machine: many specs, parallel workers, one summary.

Each worker process runs the whole loop for one environment (Builder → Verifier
Constructor → Issue Detector → revise …) and publishes it when released. Re-running the
same campaign skips environments already released from the same spec digest.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .spec import EnvironmentSpec, NamedSpec


@dataclass
class Outcome:
    name: str
    phase: str
    iterations: int
    rounds: list[list[dict[str, str]]]  # per round: [{code, owner, severity}]
    stage_seconds: dict[str, float]
    sandbox_seconds: float
    injected: list[str]
    location: str | None = None
    message: str = ""
    skipped: bool = False
    sandbox_cpu_seconds: float = 0.0

    @property
    def found_codes(self) -> set[str]:
        return {d["code"] for r in self.rounds for d in r}


def run_one(name: str, spec_wire: dict[str, Any], target: str, harbor_lint: bool) -> Outcome:
    """Worker entry point (a separate process): run one environment through the loop."""
    from .logs import configure_logging
    from .loop.local import LocalLoop
    from .release import publisher_for
    from .roles.llm import role_backends
    from .runtime.local import LocalRuntime

    configure_logging()
    spec = EnvironmentSpec.model_validate(spec_wire)
    runtime = LocalRuntime()
    # procedural or LLM roles, as spec.backends asks (LLM roles share one gateway per run)
    with role_backends(name, spec, runtime, harbor_lint=harbor_lint) as roles:
        loop = LocalLoop(roles.builder, roles.constructor, roles.detector, publisher_for(target))
        run = loop.run(name, spec)
    rounds = [
        [
            {"code": str(d.code), "owner": str(d.owner), "severity": str(d.severity)}
            for d in r.defects
        ]
        for r in run.status.rounds
    ]
    return Outcome(
        name=name,
        phase=str(run.status.phase),
        iterations=run.status.iteration,
        rounds=rounds,
        stage_seconds=dict(run.stage_seconds),
        sandbox_seconds=runtime.sandbox_seconds,
        sandbox_cpu_seconds=runtime.sandbox_cpu_seconds,
        injected=roles.injected(name),
        location=run.location,
        message=run.status.message,
    )


@dataclass
class Campaign:
    target: str
    workers: int = 2
    harbor_lint: bool = True
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def run(self, specs: Iterable[NamedSpec], console: Console | None = None) -> list[Outcome]:
        from .release import publisher_for

        console = console or Console(stderr=True)
        publisher = publisher_for(self.target)
        todo: list[NamedSpec] = []
        for named in specs:
            record = publisher.released(named.name)
            if record and record.get("spec_digest") == named.spec.digest():
                self.outcomes.append(
                    Outcome(
                        named.name,
                        "Released",
                        int(record.get("iterations", 0)),
                        [],
                        {},
                        0.0,
                        [],
                        record.get("location"),
                        "already released",
                        skipped=True,
                    )
                )
            else:
                todo.append(named)
        started, cpu_before = time.perf_counter(), _cpu_seconds()
        columns = (
            TextColumn("[bold]synth"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=False) as progress:
            bar = progress.add_task("synth", total=len(todo), tally="")
            with ProcessPoolExecutor(max_workers=max(1, self.workers)) as pool:
                pending: set[Future[Outcome]] = {
                    pool.submit(run_one, n.name, n.spec.to_wire(), self.target, self.harbor_lint)
                    for n in todo
                }
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        self.outcomes.append(future.result())
                        progress.update(bar, advance=1, tally=self._tally())
        self.seconds = time.perf_counter() - started
        # rusage does not see into the sandboxes; their cgroups measured them
        sandboxed = sum(o.sandbox_cpu_seconds for o in self.outcomes if not o.skipped)
        self.cpu_seconds = _cpu_seconds() - cpu_before + sandboxed
        publisher.write_manifest()
        return self.outcomes

    def _tally(self) -> str:
        counts = Counter(o.phase for o in self.outcomes if not o.skipped)
        return " ".join(f"{k.lower()}={v}" for k, v in sorted(counts.items()))

    def summary(self) -> list[Table]:
        fresh = [o for o in self.outcomes if not o.skipped]
        phases = Counter(o.phase for o in self.outcomes)
        overview = Table(title="Environments")
        overview.add_column("phase")
        overview.add_column("count", justify="right")
        for phase, count in sorted(phases.items()):
            overview.add_row(phase, str(count))
        overview.add_row("(skipped, already released)", str(sum(o.skipped for o in self.outcomes)))

        iterations = Table(title="Iterations to a verdict")
        iterations.add_column("iterations")
        iterations.add_column("environments", justify="right")
        for n, count in sorted(Counter(o.iterations for o in fresh).items()):
            iterations.add_row(str(n), f"{count} {'█' * count}")

        defects = Table(title="Defects found (all rounds)")
        for column in ("code", "owner", "count"):
            defects.add_column(column)
        found = Counter((d["code"], d["owner"]) for o in fresh for r in o.rounds for d in r)
        for (code, owner), count in found.most_common():
            defects.add_row(code, owner, str(count))

        stages = Table(title="Time per stage")
        for column in ("stage", "total s", "mean s/env"):
            stages.add_column(column, justify="right")
        totals: Counter[str] = Counter()
        for o in fresh:
            totals.update(o.stage_seconds)
        for stage, total in sorted(totals.items()):
            stages.add_row(stage, f"{total:.1f}", f"{total / max(1, len(fresh)):.2f}")
        return [overview, iterations, defects, stages]


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (workers and sandboxes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def sampled_specs(count: int, *, seed: int = 0, max_turns: int = 3) -> list[NamedSpec]:
    """Specs drawn from the taxonomy with quotas per scenario × capability."""
    from .taxonomy import sample_specs

    named = []
    for index, sample in enumerate(sample_specs(count, seed, turns=tuple(range(1, max_turns + 1)))):
        task = {
            "labels": sample.labels.model_dump(by_alias=True),
            "turns": sample.turns,
            "seed": sample.seed,
            "family": sample.family,
        }
        spec = EnvironmentSpec.model_validate({"task": task})
        named.append(NamedSpec(name=f"cwg-s{seed}-{index:04d}", spec=spec))
    return named

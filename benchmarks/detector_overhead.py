"""Issue Detector wall time per package, as a ratio to one plain solve + verify run.

    python benchmarks/detector_overhead.py [--with-harbor-lint]

Packages: the good packages of the corpus plus one per procedural family (single- and
multi-turn). Prints figures; asserts nothing. "states" counts the workspace states the
detector judged, "scored" the distinct ones the verifier ran on (identical states are
scored once); "sandbox/wall" exceeds 100% where sandboxes ran in parallel. The machine's
load average is printed too: on a shared machine both timings stretch with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkgym.detector import IssueDetector
from coworkgym.families import FAMILIES
from coworkgym.logs import configure_logging
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime import LocalRuntime
from coworkgym.runtime.workspace import materialize
from tests.corpus.build import CASES
from tests.support.builders import good_package


def plain_run(pkg: EnvironmentPackage, runtime: LocalRuntime, root: Path) -> float:
    """One solve (all turns) + one verify: what running the task once costs."""
    started = time.perf_counter()
    layout = materialize(pkg, root / "plain")
    runtime.run_reference(pkg, root / "plain", layout.workdir)
    runtime.run_verifier(pkg, root / "plain", layout.workdir)
    return time.perf_counter() - started


def main() -> None:
    configure_logging()
    parser = argparse.ArgumentParser()
    parser.add_argument("--with-harbor-lint", action="store_true")
    args = parser.parse_args()
    packages: list[tuple[str, EnvironmentPackage]] = []
    for case in CASES:
        if case.code is None:
            with tempfile.TemporaryDirectory() as tmp:
                packages.append(
                    (case.name, EnvironmentPackage.load(case.make().write(Path(tmp) / "p")))
                )
    for name in sorted(FAMILIES):
        for turns in (1, 3):
            packages.append(
                (f"{name} ({turns} turn{'s' * (turns > 1)})", good_package(name, turns, seed=2))
            )
    runtime = LocalRuntime()
    detector = IssueDetector(runtime, run_harbor_lint=args.with_harbor_lint)
    table = Table(title="Issue Detector overhead")
    columns = ("package", "plain s", "detector s", "ratio", "states", "scored", "sandbox/wall")
    for column in columns:
        table.add_column(column, justify="right")
    ratios = []
    for name, pkg in packages:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            plain = plain_run(pkg, runtime, root)
            before = runtime.sandbox_seconds
            started = time.perf_counter()
            report = detector.check(pkg, pkg.write(root / "pkg"))
            took = time.perf_counter() - started
            share = (runtime.sandbox_seconds - before) / took
        ratios.append(took / plain)
        table.add_row(
            name,
            f"{plain:.2f}",
            f"{took:.2f}",
            f"{took / plain:.1f}×",
            str(report.stats.states_probed),
            str(report.stats.verifier_runs),
            f"{share:.0%}",
        )
    console = Console()
    console.print(table)
    console.print(
        f"median ratio {statistics.median(ratios):.1f}× "
        f"(min {min(ratios):.1f}×, max {max(ratios):.1f}×) over {len(ratios)} packages; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

"""Released environments per CPU-minute, and the share of time spent in sandboxed execution
versus orchestration, at 1, 2 and 4 workers.

    python benchmarks/synth_throughput.py [--count 8] [--workers 1 2 4] [--harbor-lint]

CPU time counts this process and every child (workers, sandboxes). Prints figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkgym.logs import configure_logging
from coworkgym.synth import Campaign, sampled_specs


def main() -> None:
    configure_logging()
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--harbor-lint", action="store_true")
    args = parser.parse_args()
    console = Console()
    table = Table(title=f"synth throughput ({args.count} environments per run)")
    for column in (
        "workers",
        "wall s",
        "CPU s",
        "released",
        "env / CPU-min",
        "env / wall-min",
        "sandbox share",
        "orchestration share",
    ):
        table.add_column(column, justify="right")
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as out:
            campaign = Campaign(out, workers=workers, harbor_lint=args.harbor_lint)
            outcomes = campaign.run(
                sampled_specs(args.count, seed=7), Console(stderr=True, quiet=True)
            )
        released = sum(o.phase == "Released" for o in outcomes)
        busy = sum(sum(o.stage_seconds.values()) for o in outcomes)
        sandbox = sum(o.sandbox_seconds for o in outcomes)
        table.add_row(
            str(workers),
            f"{campaign.seconds:.1f}",
            f"{campaign.cpu_seconds:.1f}",
            str(released),
            f"{released / (campaign.cpu_seconds / 60):.2f}",
            f"{released / (campaign.seconds / 60):.2f}",
            f"{sandbox / busy:.0%}",
            f"{1 - sandbox / busy:.0%}",
        )
    console.print(table)
    console.print(
        "sandbox share: time inside bubblewrap (solve.sh, test.sh) over the time the "
        "workers spent on environments; the rest is orchestration (generation, "
        "assembly, audits, process start-up)."
    )


if __name__ == "__main__":
    main()

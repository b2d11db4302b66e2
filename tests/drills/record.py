"""Where the drills of issues 17 and 24 leave their figures, and how docs/reliability.md is made.

Each drill test ends with ``record(drill, result)``: one JSON file per drill (what was done,
how often, what was lost, how long recovery took, plus the drill's own counts) under
``$COWORKGYM_DRILL_RESULTS`` or ``out/drills/``. Nothing is written into the repository by
a test run. ``make reliability-doc`` copies the latest results into
``docs/reliability/results/`` (committed) and renders ``docs/reliability.md`` from them;
tests/unit/test_reliability_doc.py fails when the committed page is not the rendering of
the committed results, or when a drill's recorded case count no longer matches its
generator (so a changed drill cannot keep an old figure in the doc).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "docs" / "reliability" / "results"
DOC = REPO / "docs" / "reliability.md"


def results_dir() -> Path:
    return Path(os.environ.get("COWORKGYM_DRILL_RESULTS") or REPO / "out" / "drills")


@dataclass
class Row:
    """One line of a drill's table: one kind of attack or fault."""

    what: str  # what was done, in a phrase
    runs: int  # how often
    held: int  # how many ended as they must (refused, contained, recovered)
    lost: str = "nothing"  # what was lost (work, data, a node), in words
    recovery_s: float | None = None  # time to recover (None: nothing to recover from)
    note: str = ""


@dataclass
class DrillResult:
    drill: str  # file name stem, e.g. hostile-specs
    title: str
    summary: str  # how the drill was run, in a sentence or two
    rows: list[Row]
    figures: dict[str, Any] = field(default_factory=dict)  # counts, peak memory, ...
    seconds: float = 0.0
    machine: str = field(default_factory=lambda: f"{platform.machine()}, {os.cpu_count()} CPUs")
    recorded_at: str = field(
        default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    )

    @property
    def passed(self) -> bool:
        return all(r.held == r.runs for r in self.rows)


def record(result: DrillResult) -> Path:
    target = results_dir() / f"{result.drill}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(asdict(result), indent=2, sort_keys=True) + "\n")
    return target


def load(path: Path) -> DrillResult:
    raw = json.loads(path.read_text())
    raw["rows"] = [Row(**r) for r in raw["rows"]]
    return DrillResult(**raw)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

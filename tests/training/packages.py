"""A released package for the end-to-end tests of the training package: the example spec
synthesized with ``cowork-gym synth``, as a user would make it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkgym"]


def example_package(into: Path) -> Path:
    """examples/specs/weather-report.yaml, synthesized under ``into``; the package folder."""
    subprocess.run(
        [*CLI, "synth", ROOT / "examples" / "specs" / "weather-report.yaml", "--out", into,
         "--no-harbor-lint"],
        check=True, capture_output=True,
    )  # fmt: skip
    return next(p for p in into.iterdir() if (p / "task.toml").exists())

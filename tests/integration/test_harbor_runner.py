"""Harbor's own runner runs here (podman), and reproduces what its records say.

benchmarks/harbor_runner.py ran Harbor 0.25's runner on the whole real corpus and kept what
it concluded in tests/fixtures/harbor-real/harbor-runner.json, which
tests/unit/test_harbor_runner_records.py holds check's labels to. This test reruns two tasks
from scratch so that the records stay reproducible: a sound one on a bridged network (its
oracle scores 1, doing nothing 0) and a defective one with no network (both score 1).

Slow: podman builds each task's image; about 2 min on two cores with the bases built.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harbor_runner import CORPUS, RECORDS, preflight

ROOT = Path(__file__).parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.image_builds,
    pytest.mark.skipif(preflight() is not None, reason=f"Harbor's runner: {preflight()}"),
]
TASKS = ("cookbook-multi-step", "qc-fail-unconditional-reward")


def rewards(entry: dict[str, object]) -> dict[str, float | None]:
    trials = entry["trials"]
    assert isinstance(trials, dict)
    return {
        agent: (trial["rewards"] or {}).get("reward") if not trial["error"] else None
        for agent, trial in trials.items()
    }


@pytest.mark.timeout(1200)
def test_harbor_runner_reproduces_its_records(tmp_path: Path) -> None:
    out = tmp_path / "records.json"
    script = ROOT / "benchmarks" / "harbor_runner.py"
    subprocess.run(
        [sys.executable, str(script), "--tasks", *TASKS, "--out", str(out)],
        check=True,
        timeout=1100,
    )
    fresh, recorded = json.loads(out.read_text()), json.loads((CORPUS / RECORDS).read_text())
    assert rewards(fresh["tasks"]["cookbook-multi-step"]) == {"oracle": 1.0, "nop": 0.0}
    assert rewards(fresh["tasks"]["qc-fail-unconditional-reward"]) == {"oracle": 1.0, "nop": 1.0}
    for task in TASKS:
        assert rewards(fresh["tasks"][task]) == rewards(recorded["tasks"][task]), task

"""The stage entry point that sandbox Jobs run, driven by the loop state machine in separate
processes with separate directories (as pods with separate volumes would be)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from coworkgym.detector.defects import Defect
from coworkgym.loop.machine import (
    Budget,
    Executed,
    LoopStatus,
    Phase,
    StageFailed,
    StageSucceeded,
    Start,
    step,
)
from tests.support.builders import environment_spec


def run_job(
    stage: str, payload: dict[str, Any], dirs: dict[str, Path], tmp: Path
) -> dict[str, Any]:
    log = tmp / f"termination-{stage}.log"
    env = {
        **os.environ,
        "COWORKGYM_STAGE_INPUT": json.dumps(payload),
        "COWORKGYM_BUILDER_DIR": str(dirs["builder"]),
        "COWORKGYM_VERIFIER_DIR": str(dirs["verifier"]),
        "COWORKGYM_SCRATCH_DIR": str(dirs["scratch"]),
        "COWORKGYM_TERMINATION_LOG": str(log),
    }
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym.roles.job", stage],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result: dict[str, Any] = json.loads(log.read_text())
    assert (done.returncode == 0) == result["ok"], done.stderr[-2000:]
    assert len(log.read_bytes()) <= 4096
    return result


def test_the_loop_runs_as_stage_processes_and_repairs_injected_faults(tmp_path: Path) -> None:
    spec = environment_spec(turns=2, seed=3, faultInjection={"probability": 1.0})
    spec.release.uri = None
    dirs = {name: tmp_path / name for name in ("builder", "verifier", "scratch")}
    for d in dirs.values():
        d.mkdir()
    budget = Budget(max_iterations=3)
    decision = step(LoopStatus(), Start(), budget)
    seen_faults: set[str] = set()
    while decision.actions and decision.actions[0].stage != "release":
        action = decision.actions[0]
        payload = {
            "name": "env-a",
            "spec": spec.to_wire(),
            "iteration": decision.status.iteration,
            "feedback": [d.model_dump(mode="json") for d in action.feedback],
        }
        result = run_job(action.stage, payload, dirs, tmp_path)
        seen_faults |= set(result.get("faults", []))
        if not result["ok"]:
            event: Any = StageFailed(action.stage, result["error"], result["retryable"])
        elif action.stage == "detector":
            event = Executed(
                [Defect.model_validate({**d, "evidence": {}}) for d in result["defects"]]
            )
        else:
            event = StageSucceeded(action.stage)
        decision = step(decision.status, event, budget)
    assert decision.status.phase is Phase.RELEASING, decision.status.message
    assert seen_faults  # faults were injected, found, routed and repaired across processes
    assert decision.status.iteration >= 2
    # the Builder never touched the verifier's volume, nor the other way round
    assert sorted(p.name for p in dirs["builder"].iterdir()) == ["output.json"]
    assert sorted(p.name for p in dirs["verifier"].iterdir()) == ["output.json"]
    assert (dirs["scratch"] / "package" / "task.toml").is_file()

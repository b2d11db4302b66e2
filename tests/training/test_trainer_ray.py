"""`cowork-gym train` on Ray Train with two workers (gloo, CPU): a worker process killed
in the middle of the run makes Ray restart the group (FailureConfig max_failures), which
resumes from the last checkpoint and ends at the same step count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from coworkgym_training.trainer.metrics import read_log
from coworkgym_training.trainer.status import read_status
from coworkgym_training.trainer.store import LocalCheckpointStore
from tests.training.trainer_runs import workspace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
MAX_STEPS = 16
EVERY = 4


def wait_for(condition: object, timeout: float, what: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc {proc.returncode}) before {what}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"timed out waiting for {what}")


def test_a_killed_worker_resumes_from_the_last_checkpoint(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    out = root / "run"
    command = [
        str(Path(sys.executable).with_name("cowork-gym")), "train",
        "--objective", "sft", "--model", str(root / "model"), "--data", str(root / "data.jsonl"),
        "--out", str(out), "--workers", "2", "--batch-size", "2",
        "--max-steps", str(MAX_STEPS), "--checkpoint-every", str(EVERY), "--max-failures", "2",
        "--json",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    log_file = (tmp_path / "train.log").open("w")  # a file, not a pipe: Ray says a lot
    proc = subprocess.Popen(command, env=env, text=True, stdout=log_file, stderr=subprocess.STDOUT)

    def checkpointed() -> bool:
        return any(r.get("last_checkpoint_step", 0) >= EVERY for r in read_log(out))

    wait_for(checkpointed, 900, "the first checkpoint", proc)
    victim = int((out / "workers" / "rank-1.pid").read_text())
    os.kill(victim, signal.SIGKILL)
    killed_after = max(r["step"] for r in read_log(out))
    proc.wait(timeout=900)
    log_file.close()
    output = (tmp_path / "train.log").read_text()
    assert proc.returncode == 0, output[-4000:]

    status = read_status(out)
    assert status is not None and status.state == "succeeded"
    assert (status.step, status.attempt) == (MAX_STEPS, 2)
    assert LocalCheckpointStore(out / "checkpoints").latest() == MAX_STEPS
    log = read_log(out)
    first = [r for r in log if r["attempt"] == 1]
    second = [r for r in log if r["attempt"] == 2]
    saved = max(r.get("last_checkpoint_step", 0) for r in first)
    assert saved >= EVERY and killed_after < MAX_STEPS
    # the restarted group starts right after the last checkpoint and runs to the end
    assert [r["step"] for r in second] == list(range(saved + 1, MAX_STEPS + 1))
    assert [r["step"] for r in first] == list(range(1, len(first) + 1))
    assert int((out / "workers" / "rank-1.pid").read_text()) != victim
    assert '"state": "succeeded"' in output  # --json: the final status

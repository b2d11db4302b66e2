"""The training pod's reporter around the real trainer, on this machine: the plan the
operator builds for a TrainingRun (training_builders.train_plan, local model and data so
nothing is staged), run by `python -m coworkgym_operator.training.pod train`, which runs
`cowork-gym train --config` (Ray Train, one gloo worker); its log carries the status lines
the controller reads, and its result the checkpoint. What the node e2e does in a pod, here
in a process, so a change of the trainer's CLI or files shows up without a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.run import train_plan
from coworkgym_operator.training.reconcile.plan import last_report
from coworkgym_operator.training.settings import TrainingSettings
from tests.training.trainer_runs import workspace

pytestmark = pytest.mark.timeout(600)


def local_plan(tmp_path: Path, root: Path, spec: TrainingRunSpec) -> dict[str, Any]:
    """The operator's plan, with local copies instead of S3: the folders the pod would
    have staged, checkpoints in a folder, and no upload."""
    plan = train_plan(spec, "s3://unused/t.jsonl", TrainingSettings())
    plan["stage"] = {}
    plan["output"] = ""
    plan["configFile"] = str(tmp_path / "config.json")
    plan["config"]["data"] = [str(root / "data.jsonl")]
    plan["config"]["out"] = str(tmp_path / "out")
    plan["config"]["checkpoint"] = str(tmp_path / "checkpoints")
    plan["argv"] = [str(Path(sys.executable).with_name("cowork-gym")), "train", "--config",
                    plan["configFile"]]  # fmt: skip
    return plan


def run_pod(plan: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"COWORKGYM_POD_INPUT": json.dumps(plan)}
    return subprocess.run(
        [sys.executable, "-m", "coworkgym_operator.training.pod", "train"],
        env=env, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip


def test_the_pod_runs_cowork_gym_train_and_reports_its_checkpoint(tmp_path: Path) -> None:
    root = workspace(tmp_path / "inputs")
    spec = TrainingRunSpec.model_validate(
        {
            "objective": "sft",
            "model": str(root / "model"),
            "data": {"uri": "s3://unused/t.jsonl"},
            "hyperparameters": {"batchSize": 2, "learningRate": 1e-3, "checkpointEvery": 1,
                                "epochs": 1},
            "output": {"uri": "s3://unused/run"},
        }
    )  # fmt: skip
    done = run_pod(local_plan(tmp_path, root, spec))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report, result = last_report(done.stdout)
    assert result is not None and result["ok"] is True, done.stdout[-2000:]
    # the epochs' worth: the graded groups' trajectories / batch 2
    trajectories = len((root / "data.jsonl").read_text().splitlines())
    steps = -(-trajectories // 2)
    assert result["step"] == result["totalSteps"] == steps
    assert result["checkpoint"] == str(tmp_path / "checkpoints" / f"step-{steps:06d}")
    assert "loss" in result["metrics"]
    assert report is not None and report["step"] == steps


def test_a_nan_loss_ends_the_pod_without_retry_and_names_the_last_good_checkpoint(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path / "inputs")
    spec = TrainingRunSpec.model_validate(
        {
            "objective": "sft",
            "model": str(root / "model"),
            "data": {"uri": "s3://unused/t.jsonl"},
            "hyperparameters": {"batchSize": 2, "maxSteps": 3, "checkpointEvery": 1},
            "output": {"uri": "s3://unused/run"},
        }
    )
    plan = local_plan(tmp_path, root, spec)
    # the API caps learningRate at 1; the trainer's own test overflows the weights this way
    plan["config"]["hyperparameters"]["learning_rate"] = 1e30
    done = run_pod(plan)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]  # podFailurePolicy
    _, result = last_report(done.stdout)
    assert result is not None and result["reason"] == "NaNLoss"
    assert result["checkpoint"] == str(tmp_path / "checkpoints" / "step-000001")
    assert "step 2" in result["error"]

"""Runs of the trainer for the tests: a tiny random student (and teacher) saved as model
folders, GRPO-style groups of two-turn rollouts as the data, and the worker loop run in
this process (rank 0 of 1, no Ray) — the loop Ray Train runs on every worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from coworkgym.rollout.trajectory import write_jsonl
from coworkgym_training.trainer.config import TrainConfig
from coworkgym_training.trainer.loop import Worker
from coworkgym_training.trainer.status import RunStatus, read_status
from tests.training import builders, objective_data

# three groups: two with a reward spread (kept by GRPO), one without (dropped)
GROUPS: dict[str, list[float | None]] = {"a": [1.0, 0.0, 0.5], "b": [0.2, 0.9], "c": [0.5, 0.5]}


def workspace(root: Path, groups: dict[str, list[float | None]] | None = None) -> Path:
    """root/model, root/teacher and root/data.jsonl (made once per root)."""
    if not (root / "model").is_dir():
        builders.saved_student(root / "model")
        builders.saved_student(root / "teacher", seed=1)
        write_jsonl(root / "data.jsonl", objective_data.graded(groups or GROUPS))
    return root


def config(root: Path, **changes: Any) -> TrainConfig:
    hyperparameters = {"batch_size": 2, "learning_rate": 1e-3, **changes.pop("hp", {})}
    fields: dict[str, Any] = {
        "objective": "sft",
        "model": root / "model",
        "data": [root / "data.jsonl"],
        "out": root / "run",
        "max_steps": 4,
        "checkpoint_every": 2,
        "hyperparameters": hyperparameters,
        # The data are graded GRPO groups, most of them failures: SFT trains on all of them
        # here (by default it keeps the verifier's passes only).
        "objective_options": {"sft_min_reward": None},
        **changes,
    }
    if fields["objective"] == "opd":
        fields.setdefault("teacher_model", root / "teacher")
    return TrainConfig.model_validate(fields)


def run_in_process(config: TrainConfig) -> RunStatus:
    """The worker loop as Ray runs it, as the only worker; the status it ends with."""
    config.out.mkdir(parents=True, exist_ok=True)
    previous = read_status(config.out)
    RunStatus(  # what the driver writes before it starts the workers
        state="running",
        max_steps=config.max_steps,
        attempt=0,
        step=previous.step if previous else 0,
    ).write(config.out)
    reports: list[dict[str, Any]] = []
    Worker(config, list(config.data), 0, 1, torch.device("cpu"), report=reports.append).run()
    status = read_status(config.out)
    assert status is not None
    return status


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))

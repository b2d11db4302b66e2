"""Starting the local Ray: a raylet that misses Ray's fixed 30 s to register (seen in a
training pod on the busy CI node) is started again, up to LOCAL_RAY_STARTS times; any other
failure is raised at once. Ray's own start is stubbed here (a slow raylet cannot be made on
demand); test_trainer_ray.py starts the real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="needs the training extra: make install-training")

import ray

from coworkgym_training.trainer import run
from coworkgym_training.trainer.config import TrainConfig

TIMED_OUT = Exception(
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)


def config(tmp_path: Path) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "objective": "sft",
            "model": str(tmp_path / "model"),
            "out": str(tmp_path / "out"),
            "max_steps": 1,
        }
    )


def starts(monkeypatch: pytest.MonkeyPatch, failures: list[Exception]) -> list[str]:
    """Make ray.init fail with each of ``failures`` in turn, then succeed; returns the
    calls, in order ("init", "shutdown")."""
    calls: list[str] = []

    def init(**_: Any) -> None:
        calls.append("init")
        if failures:
            raise failures.pop(0)

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls


def test_a_raylet_late_to_register_is_started_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = starts(monkeypatch, [TIMED_OUT])
    assert run.start_ray(config(tmp_path), gpus=0) is True
    assert calls == ["init", "shutdown", "init"]


def test_it_gives_up_after_the_last_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = starts(monkeypatch, [TIMED_OUT] * run.LOCAL_RAY_STARTS)
    with pytest.raises(Exception, match="timed out during startup"):
        run.start_ray(config(tmp_path), gpus=0)
    assert calls.count("init") == run.LOCAL_RAY_STARTS


def test_another_failure_is_not_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = starts(monkeypatch, [ValueError("object_store_memory is too small")])
    with pytest.raises(ValueError, match="too small"):
        run.start_ray(config(tmp_path), gpus=0)
    assert calls == ["init"]

"""The on-policy loop on CPU, two rounds with a tiny random student (the learning signal
does not matter here; every hand-off does): the checkpoint is served, the rollouts record
the served model's own tokens and log-probs, the round trains on exactly those rollouts,
and the next round serves the checkpoint it saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

import torch
from transformers import AutoModelForCausalLM

from coworkgym.rollout.trajectory import Trajectory, read_jsonl
from coworkgym_training.trainer.config import TrainConfig
from coworkgym_training.trainer.metrics import read_log
from coworkgym_training.trainer.rounds import RoundsConfig, run_rounds
from coworkgym_training.trainer.status import read_status
from tests.support.builders import good_package
from tests.training.trainer_runs import weights, workspace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
STEPS = 2
SAMPLES = 2


def recomputed(folder: Path, trajectory: Trajectory) -> list[tuple[list[float], list[float]]]:
    """(recorded, recomputed under `folder`'s model) log-probs of each agent message."""
    model: Any = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    pairs = []
    for message in trajectory.agent_messages():
        tokens = message.tokens
        assert tokens is not None and tokens.prompt_ids and tokens.logprobs is not None
        ids = tokens.prompt_ids + tokens.completion_ids
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
        logprobs = torch.log_softmax(logits, -1)
        start = len(tokens.prompt_ids) - 1
        pairs.append(
            (
                tokens.logprobs,
                [float(logprobs[start + i, t]) for i, t in enumerate(tokens.completion_ids)],
            )
        )
    return pairs


def test_two_on_policy_rounds_hand_off_checkpoints_rollouts_and_data(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    package = good_package("weather_report", turns=1, seed=7).write(tmp_path / "package")
    train = TrainConfig(
        objective="opd",
        model=root / "model",
        teacher_model=root / "teacher",
        out=tmp_path / "loop",
        max_steps=STEPS,
        checkpoint_every=STEPS,
        hyperparameters={"batch_size": 2, "learning_rate": 1e-2},
    )
    config = RoundsConfig(
        train=train,
        rounds=2,
        packages=[str(package)],
        rollout={"samples": SAMPLES, "max_steps": 2, "max_tokens": 12, "timeout_s": 300},
    )
    outcome = run_rounds(config)
    assert outcome.status.state == "succeeded", outcome.status.message
    first, second = outcome.rounds
    assert [r.state for r in outcome.rounds] == ["trained", "trained"]

    # round 0 served the base model; round 1 served what round 0 saved
    assert Path(first.served) == root / "model"
    assert first.checkpoint is not None and Path(second.served) == Path(first.checkpoint)
    assert second.checkpoint is not None and second.checkpoint != first.checkpoint
    trained_once, trained_twice = weights(Path(first.checkpoint)), weights(Path(second.checkpoint))
    base = weights(root / "model")
    assert any(not torch.equal(trained_once[k], base[k]) for k in base)
    assert any(not torch.equal(trained_twice[k], trained_once[k]) for k in base)

    for record in outcome.rounds:
        trajectories = list(read_jsonl(Path(record.rollouts)))
        assert len(trajectories) == SAMPLES == record.trajectories
        # the rollouts name the served model, and carry its token ids and log-probs
        assert {t.policy.model for t in trajectories} == {record.served_as}
        assert {t.key.model for t in trajectories} == {record.served_as}
        assert record.with_token_ids == sum(len(t.agent_messages()) for t in trajectories) > 0
        for trajectory in trajectories:
            for got, want in recomputed(Path(record.served), trajectory):
                assert got == pytest.approx(want, abs=1e-3)
        # the round trained on exactly those rollouts, from the model it served
        round_out = tmp_path / "loop" / f"round-{record.round:03d}" / "train"
        used = json.loads((round_out / "config.json").read_text())
        assert used["data"] == [str(Path(record.rollouts).parent)]
        assert Path(used["model"]) == Path(record.served)
        report = json.loads((round_out / "data_report.json").read_text())
        assert report["trajectories"] == SAMPLES and report["examples"] == SAMPLES
        assert [r["step"] for r in read_log(round_out)] == list(range(1, STEPS + 1))

    # round 1's log-probs are not the base model's: it really served the new checkpoint
    late = next(iter(read_jsonl(Path(second.rollouts))))
    base_pairs = recomputed(root / "model", late)
    assert any(got != pytest.approx(want, abs=1e-3) for got, want in base_pairs)

    # the loop reads as one run to whoever follows OUT/status.json and metrics.jsonl
    status = read_status(tmp_path / "loop")
    assert status is not None and status.state == "succeeded"
    assert (status.step, status.max_steps) == (2 * STEPS, 2 * STEPS)
    steps = read_log(tmp_path / "loop")
    assert [(r["round"], r["step"]) for r in steps] == [(0, 1), (0, 2), (1, 3), (1, 4)]
    summary = json.loads((tmp_path / "loop" / "rounds.json").read_text())
    assert [r["served_as"] for r in summary["rounds"]] == ["model@round-0", "model@round-1"]

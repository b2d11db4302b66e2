"""The trainer's worker loop without Ray (rank 0 of 1): every objective runs and logs its
metrics; a stopped run resumes from its checkpoint to the same weights as one that never
stopped; a non-finite loss ends the run failed with the last good checkpoint kept; data
without examples fails with a reason; the checkpoint store, the per-step batches, the
Prometheus output and the config's refusals. Ray runs are in test_trainer_ray.py."""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

import torch
from pydantic import ValidationError
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym_training.trainer.config import TrainConfig
from coworkgym_training.trainer.data import step_batch, worker_share
from coworkgym_training.trainer.metrics import MetricsSink, read_log
from coworkgym_training.trainer.store import LATEST, LocalCheckpointStore
from tests.training.trainer_runs import config, run_in_process, weights, workspace


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace(tmp_path_factory.mktemp("trainer"))


# ---- every objective --------------------------------------------------------------------
@pytest.mark.parametrize("objective", ["sft", "grpo", "opd"])
def test_each_objective_trains_logs_and_checkpoints(root: Path, objective: str) -> None:
    cfg = config(root, objective=objective, out=root / f"run-{objective}")
    status = run_in_process(cfg)
    assert status.state == "succeeded", status.message
    assert (status.step, status.checkpoint_step) == (4, 4)
    log = read_log(cfg.out)
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    for record in log:
        assert math.isfinite(record["loss"]) and record["grad_norm"] > 0
        assert record["tokens"] > 0 and record["tokens_per_second"] > 0
        assert 0.0 <= record["reward_mean"] <= 1.0
    # GRPO keeps the two groups with a reward spread; the others train on all three
    assert {r["groups_kept"] for r in log} == {2 if objective == "grpo" else 3}
    assert [r.get("last_checkpoint_step") for r in log] == [None, 2, None, 4]
    # the checkpoint is a model folder that loads as any other, and keeps the last two
    from transformers import AutoModelForCausalLM

    final = Path(status.checkpoint or "")
    assert AutoModelForCausalLM.from_pretrained(final, local_files_only=True) is not None
    assert sorted(p.name for p in final.parent.iterdir()) == [
        LATEST,
        "step-000002",
        "step-000004",
    ]
    assert json.loads((final / "checkpoint.json").read_text())["objective"] == objective
    trained, base = weights(final), weights(root / "model")
    assert any(not torch.equal(trained[k], base[k]) for k in base)
    prom = (cfg.out / "metrics.prom").read_text()
    assert 'coworkgym_training_step{run="run-' + objective + '"} 4.0' in prom
    assert "coworkgym_training_groups_kept" in prom and "coworkgym_training_failed" in prom


def test_a_resumed_run_ends_with_the_weights_of_one_that_never_stopped(root: Path) -> None:
    straight = run_in_process(config(root, out=root / "straight", max_steps=4))
    first = run_in_process(config(root, out=root / "stopped", max_steps=2))
    assert first.state == "succeeded" and first.step == 2
    resumed = run_in_process(config(root, out=root / "stopped", max_steps=4))
    assert resumed.state == "succeeded" and resumed.step == 4
    assert [r["step"] for r in read_log(root / "stopped")] == [1, 2, 3, 4]
    # same batches, same optimizer state: the same weights to the bit
    a = weights(Path(straight.checkpoint or ""))
    b = weights(Path(resumed.checkpoint or ""))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_non_finite_loss_fails_the_run_and_keeps_the_last_good_checkpoint(root: Path) -> None:
    # a learning rate of 1e30 makes step 1's update overflow the weights: step 2's loss is NaN
    cfg = config(root, out=root / "nan", checkpoint_every=1, hp={"learning_rate": 1e30})
    status = run_in_process(cfg)
    assert (status.state, status.reason) == ("failed", "non_finite_loss")
    assert "step 2" in status.message and "step-000001" in status.message
    assert (status.step, status.checkpoint_step) == (1, 1)
    checkpoints = cfg.out / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [LATEST, "step-000001"]
    assert LocalCheckpointStore(checkpoints).latest() == 1
    last = read_log(cfg.out)[-1]
    assert (last["step"], last["loss"], last["failed"]) == (2, None, 1)
    prom = (cfg.out / "metrics.prom").read_text()
    assert 'coworkgym_training_loss{run="nan"} NaN' in prom
    assert 'coworkgym_training_failed{run="nan"} 1.0' in prom


def test_grpo_without_any_reward_spread_fails_with_no_examples(tmp_path: Path) -> None:
    root = workspace(tmp_path, groups={"flat": [0.5, 0.5], "lone": [1.0], "bad": [None, 0.3]})
    status = run_in_process(config(root, objective="grpo"))
    assert (status.state, status.reason) == ("failed", "no_examples")
    assert "zero_variance_group 2" in status.message
    assert not (root / "run" / "checkpoints").exists()


# ---- the pieces ---------------------------------------------------------------------------
def test_each_step_batch_is_a_pure_function_of_seed_and_step() -> None:
    first = [step_batch(5, step, 4, seed=3) for step in range(1, 6)]
    assert first == [step_batch(5, step, 4, seed=3) for step in range(1, 6)]
    flat = [i for batch in first for i in batch]
    for epoch in range(4):  # every pass over the data draws each example once
        assert sorted(flat[epoch * 5 : epoch * 5 + 5]) == [0, 1, 2, 3, 4]
    assert step_batch(5, 1, 4, seed=4) != first[0] or step_batch(5, 2, 4, seed=4) != first[1]
    batch = first[0]
    shares = [worker_share(batch, rank, 2) for rank in range(2)]
    assert sorted(shares[0] + shares[1]) == sorted(batch) and len(shares[0]) == 2


def test_a_half_written_checkpoint_never_becomes_the_latest(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path / "ckpt")
    source = tmp_path / "src"
    source.mkdir()
    (source / "model.safetensors").write_bytes(b"weights")
    for step in (1, 2, 3):
        store.save(step, source, keep=2)
    assert store.latest() == 3
    assert sorted(p.name for p in store.root.glob("step-*")) == ["step-000002", "step-000003"]
    # a save killed after copying but before the pointer: a staging folder, latest unchanged
    (store.root / ".step-000004.partial").mkdir()
    assert store.latest() == 3
    (store.root / LATEST).write_text(json.dumps({"step": 9}))  # names a missing folder
    assert store.latest() is None


def test_metrics_are_served_on_127_0_0_1(tmp_path: Path) -> None:
    sink = MetricsSink(tmp_path, "served", port=0)
    try:
        sink.step({"step": 3, "loss": 1.5, "grad_norm": 0.25})
        host, port = sink.server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            body = reply.read()
    finally:
        sink.close()
    text = body.decode()
    assert 'coworkgym_training_loss{run="served"} 1.5' in text
    assert 'coworkgym_training_step{run="served"} 3.0' in text


def test_the_config_refuses_what_cannot_run(tmp_path: Path) -> None:
    base = {"model": tmp_path, "data": [tmp_path], "out": tmp_path, "max_steps": 1}
    with pytest.raises(ValidationError, match="teacher_model"):
        TrainConfig.model_validate({**base, "objective": "opd"})
    with pytest.raises(ValidationError, match="objective"):
        TrainConfig.model_validate({**base, "objective": "ppo"})
    with pytest.raises(ValidationError, match="batch_size 2 is below workers 3"):
        TrainConfig.model_validate(
            {**base, "objective": "sft", "workers": 3, "hyperparameters": {"batch_size": 2}}
        )
    with pytest.raises(ValidationError, match="needs a bucket"):
        TrainConfig.model_validate({**base, "objective": "sft", "checkpoint": "s3:///x"})
    relative = TrainConfig.model_validate({**base, "objective": "sft", "model": "m"})
    assert relative.model.is_absolute()  # Ray workers do not share the working directory


def test_cowork_gym_train_refuses_bad_input_with_the_field_named(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["train", "--objective", "opd", "--model", str(tmp_path), "--out", str(tmp_path),
              "--data", str(tmp_path), "--max-steps", "2"]
    )
    assert result.exit_code == 2
    assert "teacher_model" in result.output
    missing = runner.invoke(
        app, ["train", "--objective", "sft", "--model", str(tmp_path), "--out", str(tmp_path),
              "--data", str(tmp_path / "nope.jsonl"), "--max-steps", "2"]
    )
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output
    # a config file, with a flag over it: the flag wins, and the file's error is named
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps({"objective": "sft", "model": str(tmp_path), "out": str(tmp_path),
                                 "data": [str(tmp_path)], "max_steps": 0}))  # fmt: skip
    from_file = runner.invoke(app, ["train", "--config", str(saved)])
    assert from_file.exit_code == 2 and "max_steps" in from_file.output
    rounds = runner.invoke(
        app, ["train", "--config", str(saved), "--max-steps", "1", "--rounds", "2"]
    )
    assert rounds.exit_code == 2 and "packages" in rounds.output

"""The training pod's reporter, with a real child process standing in for `cowork-gym
train` (a script that writes the JSONL metrics log as a trainer does): a status line per
step, the result in the termination message, a NaN loss stopping the trainer with the last
good checkpoint, a failing trainer reported as such. And how the dataset check reads S3's
answers (a stub client; the test-bed test runs it against a real S3 server), and what an
on-policy round's training stages (the weights it served, without their optimizer state)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from coworkgym_operator.training import pod as training_pod
from coworkgym_operator.training.reconcile.plan import last_report


def fake_trainer(
    tmp_path: Path, steps: list[dict[str, Any]], end: dict[str, Any], exit_code: int = 0
) -> list[str]:
    """A stand-in for `cowork-gym train --config`: it reads the config the reporter wrote,
    then writes metrics.jsonl and status.json in the run folder as the trainer does."""
    script = tmp_path / "trainer.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, sys, time
            from pathlib import Path
            config = json.loads(Path(sys.argv[sys.argv.index("--config") + 1]).read_text())
            out = Path(config["out"]); out.mkdir(parents=True, exist_ok=True)
            status = {{"state": "running", "max_steps": config["max_steps"], "step": 0}}
            for record in {steps!r}:
                with (out / "metrics.jsonl").open("a") as log:
                    log.write(json.dumps(record) + "\\n")
                status.update(step=record["step"], **record.get("status", {{}}))
                (out / "status.json").write_text(json.dumps(status))
                time.sleep(0.1)
            status.update({end!r})
            (out / "status.json").write_text(json.dumps(status))
            sys.exit({exit_code})
            """
        )
    )
    return [sys.executable, str(script), "--config", str(tmp_path / "config.json")]


def run_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], **config: Any
) -> tuple[int, dict[str, Any]]:
    termination = tmp_path / "termination-log"
    monkeypatch.setattr(training_pod, "TERMINATION_LOG", termination)
    monkeypatch.setattr(training_pod, "POLL_SECONDS", 0.05)
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.jsonl").write_text('{"id": 1}\n{"id": 2}\n{"id": 3}\n')
    plan = {
        "argv": argv,
        "config": {"out": str(tmp_path / "out"), "data": [str(data)], "max_steps": None,
                   "hyperparameters": {"batch_size": 2}, **config},
        "configFile": str(tmp_path / "config.json"),
        "epochs": 2,
        "keep": 1.0,
    }  # fmt: skip
    monkeypatch.setenv("COWORKGYM_POD_INPUT", json.dumps(plan))
    code = training_pod.main(["train"])
    return code, json.loads(termination.read_text())


CKPT = "s3://r/checkpoints/step-000002"


def test_a_training_reports_each_step_and_ends_with_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    steps = [
        {"step": 1, "max_steps": 3, "loss": 2.5, "tokens_per_second": 100.0},
        {"step": 2, "max_steps": 3, "loss": 2.0, "status": {"checkpoint": CKPT}},
        {"step": 3, "max_steps": 3, "loss": 1.5, "grad_norm": 0.5, "time": 1.0},
    ]
    argv = fake_trainer(tmp_path, steps, {"state": "succeeded"})
    code, result = run_pod(tmp_path, monkeypatch, argv)
    assert code == 0
    assert result["ok"] is True and result["step"] == 3 and result["totalSteps"] == 3
    assert result["checkpoint"] == CKPT
    assert result["metrics"] == {"loss": 1.5, "tokens_per_second": 100.0, "grad_norm": 0.5}
    # 3 trajectories × 2 epochs / batch 2: the epochs' worth of steps
    assert json.loads((tmp_path / "config.json").read_text())["max_steps"] == 3
    log = capfd.readouterr().out
    report, logged = last_report(log)  # what the controller reads from the pod's log
    assert report is not None and report["step"] == 3 and report["checkpoint"] == CKPT
    assert logged == result


def test_a_non_finite_loss_fails_without_retry_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        {"step": 1, "loss": 2.5, "status": {"checkpoint": CKPT}},
        {"step": 2, "loss": None},  # the trainer writes NaN as null
    ]
    end = {"state": "failed", "reason": "non_finite_loss", "message": "loss nan at step 2"}
    code, result = run_pod(tmp_path, monkeypatch, fake_trainer(tmp_path, steps, end, 1))
    assert code == training_pod.EXIT_NO_RETRY
    assert result["reason"] == "NaNLoss" and result["error"] == "loss nan at step 2"
    assert result["checkpoint"] == CKPT
    assert result["metrics"] == {"loss": 2.5}


def test_a_failing_trainer_is_reported_as_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = fake_trainer(tmp_path, [{"step": 1, "loss": 3.0}], {}, exit_code=7)
    code, result = run_pod(tmp_path, monkeypatch, argv, max_steps=5)
    assert code == 1  # retryable: backoffLimit resumes from the checkpoint
    assert result["reason"] == "TrainerFailed" and "exited with status 7" in result["error"]
    assert result["step"] == 1 and result["totalSteps"] == 5


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    follower = training_pod.MetricsFollower(path)
    assert follower.new_records() == []
    path.write_text('{"step": 1}\n{"step"')
    assert follower.new_records() == [{"step": 1}]
    with path.open("a") as handle:
        handle.write(": 2}\nnot json\n")
    assert follower.new_records() == [{"step": 2}]


class StubS3:
    """The two calls the check makes, answering as S3 does."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def head_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        if Key not in self.keys:
            raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")
        return {"ContentLength": 10}

    def list_objects_v2(self, Bucket: str, Prefix: str, MaxKeys: int) -> dict[str, Any]:
        return {"Contents": [{"Key": k} for k in self.keys if k.startswith(Prefix)]}


@pytest.mark.parametrize(
    ("uri", "found", "detail"),
    [
        ("s3://b/data/t.jsonl", True, "s3://b/data/t.jsonl (10 bytes)"),
        ("s3://b/data/none.jsonl", False, "no object s3://b/data/none.jsonl"),
        ("s3://b/data", True, "1 .jsonl file(s) under s3://b/data"),
        ("s3://b/other", False, "no .jsonl object under s3://b/other"),
    ],
)
def test_the_dataset_check(uri: str, found: bool, detail: str) -> None:
    assert training_pod.dataset_exists(uri, StubS3(["data/t.jsonl"])) == (found, detail)


# ---- an on-policy round's training ----------------------------------------------------------
class FolderS3:
    """An S3 bucket kept in a folder: the calls the pod's staging makes."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def download_file(self, bucket: str, key: str, path: str) -> None:
        Path(path).write_bytes((self.root / bucket / key).read_bytes())

    def get_paginator(self, name: str) -> FolderS3:
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
        base = self.root / Bucket
        keys = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        return [{"Contents": [{"Key": k} for k in keys if k.startswith(Prefix)]}]


def test_a_round_stages_the_weights_it_served_but_not_their_optimizer_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = FolderS3(tmp_path / "s3")
    checkpoint = tmp_path / "s3" / "runs" / "tiny" / "checkpoints" / "round-000" / "step-000002"
    checkpoint.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "tokenizer.json", "trainer_state.pt"):
        (checkpoint / name).write_text(name)
    rollouts = tmp_path / "s3" / "runs" / "tiny" / "rounds" / "round-001" / "rollouts"
    rollouts.mkdir(parents=True)
    (rollouts / "kept.jsonl").write_text('{"id": 1}\n{"id": 2}\n{"id": 3}\n')
    monkeypatch.setattr(training_pod, "_s3", lambda: bucket)
    model, data = tmp_path / "model", tmp_path / "data"
    plan = {
        "config": {"model": str(model), "data": [str(data)], "max_steps": None,
                   "hyperparameters": {"batch_size": 2}},
        "configFile": str(tmp_path / "config.json"),
        "stage": {str(model): "s3://runs/tiny/checkpoints/round-000/step-000002",
                  str(data): "s3://runs/tiny/rounds/round-001/rollouts/kept.jsonl"},
        "epochs": 2,
        "keep": 1.0,
    }  # fmt: skip
    config = training_pod.prepare(plan)
    assert sorted(p.name for p in model.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json",
    ]  # fmt: skip
    assert (data / "kept.jsonl").is_file()
    assert config["max_steps"] == 3  # 3 trajectories × 2 epochs / batch 2


def test_a_round_that_goes_on_from_a_checkpoint_stages_its_optimizer_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later on-policy round carries AdamW over (config.optimizer_state_from names the
    staged checkpoint): its trainer_state.pt comes too; the reference's does not."""
    bucket = FolderS3(tmp_path / "s3")
    for prefix in ("checkpoints/round-000/step-000002", "models/tiny"):
        folder = tmp_path / "s3" / "runs" / prefix
        folder.mkdir(parents=True)
        for name in ("model.safetensors", "config.json", "trainer_state.pt"):
            (folder / name).write_text(name)
    monkeypatch.setattr(training_pod, "_s3", lambda: bucket)
    model, reference = tmp_path / "model", tmp_path / "reference"
    plan = {
        "config": {"model": str(model), "reference_model": str(reference),
                   "optimizer_state_from": str(model), "data": [], "max_steps": 2},
        "configFile": str(tmp_path / "config.json"),
        "stage": {str(model): "s3://runs/checkpoints/round-000/step-000002",
                  str(reference): "s3://runs/models/tiny"},
    }  # fmt: skip
    training_pod.prepare(plan)
    assert (model / "trainer_state.pt").is_file()
    assert not (reference / "trainer_state.pt").exists()
    assert (reference / "model.safetensors").is_file()


def test_a_ray_workers_init_container_stages_the_inputs_and_writes_no_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RayJob's worker pods share no disk with the head: each stages the plan's inputs into
    its own /tmp (``pod stage``); the config file and max_steps stay the head's business."""
    bucket = FolderS3(tmp_path / "s3")
    folder = tmp_path / "s3" / "runs" / "models" / "tiny"
    folder.mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):
        (folder / name).write_text(name)
    (tmp_path / "s3" / "runs" / "kept.jsonl").write_text('{"id": 1}\n')
    monkeypatch.setattr(training_pod, "_s3", lambda: bucket)
    model, data = tmp_path / "model", tmp_path / "data"
    plan = {
        "config": {"model": str(model), "data": [str(data)], "max_steps": None},
        "configFile": str(tmp_path / "config.json"),
        "stage": {str(model): "s3://runs/models/tiny", str(data): "s3://runs/kept.jsonl"},
    }
    monkeypatch.setenv("COWORKGYM_POD_INPUT", json.dumps(plan))
    assert training_pod.main(["stage"]) == 0
    assert (model / "model.safetensors").is_file() and (data / "kept.jsonl").is_file()
    assert not (tmp_path / "config.json").exists()

"""The training pod's reporter, with a real child process standing in for `cowork-gym
train` (a script that writes the JSONL metrics log as a trainer does): a status line per
step, the result in the termination message, a NaN loss stopping the trainer with the last
good checkpoint, a failing trainer reported as such. And how the dataset check reads S3's
answers (a stub client; the test-bed test runs it against a real S3 server)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from coworkgym_operator import training_pod
from coworkgym_operator.reconcile.training import last_report


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
        handle.write(': 2}\nnot json\n')
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


# ---- the on-policy loop -----------------------------------------------------------------
class FolderS3:
    """An S3 bucket kept in a folder: the calls the pod's staging and mirroring make."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def upload_file(self, path: str, bucket: str, key: str) -> None:
        target = self.root / bucket / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(path).read_bytes())

    def download_file(self, bucket: str, key: str, path: str) -> None:
        Path(path).write_bytes((self.root / bucket / key).read_bytes())

    def get_paginator(self, name: str) -> FolderS3:
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
        base = self.root / Bucket
        keys = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        return [{"Contents": [{"Key": k} for k in keys if k.startswith(Prefix)]}]

    def keys(self, bucket: str, prefix: str) -> list[str]:
        return [c["Key"] for c in self.paginate(bucket, prefix)[0]["Contents"]]


def fake_loop(tmp_path: Path, fail_round: int | None = None) -> list[str]:
    """A stand-in for `cowork-gym train --config ... --rounds N`: per round, as the trainer's
    loop does, it skips a round whose train/status.json says succeeded, writes the round's
    rollouts, fetches a served model (round-NNN/model/), trains (train/metrics.jsonl,
    train/status.json), then records the round in rounds.json and the loop's status.json.
    It logs the rounds it ran to ran.txt."""
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, sys, time
            from pathlib import Path
            config = json.loads(Path(sys.argv[sys.argv.index("--config") + 1]).read_text())
            rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
            out = Path(config["out"]); out.mkdir(parents=True, exist_ok=True)
            steps = config["max_steps"]
            records = []
            for r in range(rounds):
                folder = out / f"round-{{r:03d}}"; train = folder / "train"
                done = train / "status.json"
                if done.is_file() and json.loads(done.read_text())["state"] == "succeeded":
                    records.append({{"round": r, "state": "trained"}})
                    continue
                with (tmp_path_ran := Path({str(tmp_path)!r}) / "ran.txt").open("a") as ran:
                    ran.write(f"{{r}}\\n")
                (folder / "rollouts").mkdir(parents=True, exist_ok=True)
                (folder / "rollouts" / "trajectories.jsonl").write_text('{{"id": 1}}\\n')
                (folder / "model").mkdir(exist_ok=True)
                (folder / "model" / "weights.bin").write_bytes(b"0" * 64)
                time.sleep(0.2)
                train.mkdir(parents=True, exist_ok=True)
                checkpoint = f"s3://runs/tiny/checkpoints/round-{{r:03d}}/step-{{steps}}"
                for step in range(1, steps + 1):
                    with (train / "metrics.jsonl").open("a") as log:
                        log.write(json.dumps({{"step": step, "max_steps": steps,
                                               "loss": 2.0 - r - step / 10}}) + "\\n")
                    state = "failed" if r == {fail_round!r} else "running"
                    status = {{"state": state, "step": step, "max_steps": steps}}
                    if step == steps and state == "running":
                        status.update(state="succeeded", checkpoint=checkpoint)
                    if state == "failed":
                        status.update(reason="error", message=f"round {{r}} broke")
                    done.write_text(json.dumps(status))
                    time.sleep(0.2)
                if r == {fail_round!r}:
                    loop = {{"state": "failed", "reason": "error", "message": f"round {{r}} broke",
                             "step": r * steps, "max_steps": rounds * steps}}
                    (out / "status.json").write_text(json.dumps(loop))
                    sys.exit(1)
                records.append({{"round": r, "state": "trained", "checkpoint": checkpoint}})
                (out / "rounds.json").write_text(json.dumps({{"rounds": records}}))
                state = "succeeded" if r == rounds - 1 else "running"
                loop = {{"state": state, "step": (r + 1) * steps, "max_steps": rounds * steps,
                         "checkpoint": checkpoint}}
                (out / "status.json").write_text(json.dumps(loop))
            """
        )
    )
    return [sys.executable, str(script), "--config", str(tmp_path / "config.json")]


def run_loop_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], bucket: FolderS3,
    max_steps: int | None = 2,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    termination = tmp_path / "termination-log"
    monkeypatch.setattr(training_pod, "TERMINATION_LOG", termination)
    monkeypatch.setattr(training_pod, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(training_pod, "_s3", lambda: bucket)
    out = tmp_path / "out"
    plan = {
        "argv": [*argv, "--rounds", "2", "--packages", "s3://releases/a/pkg"],
        "config": {"out": str(out), "data": [], "max_steps": max_steps,
                   "hyperparameters": {"batch_size": 4}},
        "configFile": str(tmp_path / "config.json"),
        "stage": {},
        "epochs": 1,
        "keep": 1.0,
        "output": "s3://runs/tiny",
        "rounds": {"rounds": 2, "samples": 4, "packages": 3, "manifest": None,
                   "loop": "s3://runs/tiny/loop"},
    }  # fmt: skip
    monkeypatch.setenv("COWORKGYM_POD_INPUT", json.dumps(plan))
    code = training_pod.main(["train"])
    return code, json.loads(termination.read_text())


def test_the_loop_reports_its_round_and_mirrors_its_bookkeeping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    bucket = FolderS3(tmp_path / "s3")
    code, result = run_loop_pod(tmp_path, monkeypatch, fake_loop(tmp_path), bucket)
    assert code == 0, result
    assert result["ok"] is True
    assert (result["round"], result["rounds"], result["step"], result["totalSteps"]) == (2, 2, 4, 4)
    assert result["checkpoint"] == "s3://runs/tiny/checkpoints/round-001/step-2"
    log = capfd.readouterr().out
    lines = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines()
             if line.startswith(training_pod.STATUS_PREFIX)]  # fmt: skip
    seen = [(line["round"], line["step"]) for line in lines]
    assert (1, 1) in seen and (2, 3) in seen  # round 2's steps count on from round 1's
    assert all(line["totalSteps"] == 4 and line["rounds"] == 2 for line in lines)
    assert [r for r, _ in seen] == sorted(r for r, _ in seen)
    keys = bucket.keys("runs", "tiny/loop/")
    assert "tiny/loop/rounds.json" in keys and "tiny/loop/status.json" in keys
    for r in ("000", "001"):
        assert f"tiny/loop/round-{r}/rollouts/trajectories.jsonl" in keys
        assert f"tiny/loop/round-{r}/train/status.json" in keys
    assert not [k for k in keys if "/model/" in k]  # a served checkpoint is in checkpoints/
    assert "tiny/status.json" in bucket.keys("runs", "tiny/")  # the loop's, beside the rest


def test_a_new_pod_goes_on_from_the_last_finished_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = FolderS3(tmp_path / "s3")
    first = tmp_path / "first"
    first.mkdir()
    code, result = run_loop_pod(first, monkeypatch, fake_loop(first, fail_round=1), bucket)
    assert code == 1 and result["reason"] == "TrainerFailed" and "round 1 broke" in result["error"]
    assert result["round"] == 2  # it failed in round 2 of 2
    assert (first / "ran.txt").read_text().split() == ["0", "1"]
    # the retry's pod: a fresh folder, the bookkeeping staged back from <output>/loop/
    second = tmp_path / "second"
    second.mkdir()
    code, result = run_loop_pod(second, monkeypatch, fake_loop(second), bucket)
    assert code == 0 and result["ok"] is True
    assert (second / "ran.txt").read_text().split() == ["1"]  # round 1 was not rerun
    assert result["checkpoint"] == "s3://runs/tiny/checkpoints/round-001/step-2"


def test_with_epochs_a_round_trains_on_its_own_rollouts_worth_of_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = FolderS3(tmp_path / "s3")
    code, result = run_loop_pod(tmp_path, monkeypatch, fake_loop(tmp_path), bucket, None)
    # 3 packages × 4 samples, 1 epoch, batch 4: 3 steps a round
    assert json.loads((tmp_path / "config.json").read_text())["max_steps"] == 3
    assert code == 0 and result["totalSteps"] == 6

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
    tmp_path: Path, records: list[str], exit_code: int = 0, linger: float = 0
) -> list[str]:
    script = tmp_path / "trainer.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            with open(sys.argv[1], "a") as log:
                for line in {records!r}:
                    log.write(line + "\\n")
                    log.flush()
                    time.sleep(0.05)
            time.sleep({linger})
            sys.exit({exit_code})
            """
        )
    )
    return [sys.executable, str(script), str(tmp_path / "metrics.jsonl")]


def run_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> tuple[int, dict[str, Any], str]:
    termination = tmp_path / "termination-log"
    monkeypatch.setattr(training_pod, "TERMINATION_LOG", termination)
    monkeypatch.setattr(training_pod, "POLL_SECONDS", 0.05)
    wanted = {"argv": argv, "metricsLog": str(tmp_path / "metrics.jsonl")}
    monkeypatch.setenv("COWORKGYM_POD_INPUT", json.dumps(wanted))
    code = training_pod.main(["train"])
    return code, json.loads(termination.read_text()), ""


def test_a_training_reports_each_step_and_ends_with_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    records = [
        '{"step": 1, "total_steps": 3, "loss": 2.5, "tokens_per_s": 100}',
        '{"step": 2, "total_steps": 3, "loss": 2.0, "checkpoint": "s3://r/checkpoints/step-2"}',
        '{"step": 3, "total_steps": 3, "loss": 1.5, "checkpoint": "s3://r/checkpoints/step-3"}',
    ]
    code, result, _ = run_pod(tmp_path, monkeypatch, fake_trainer(tmp_path, records))
    assert code == 0
    assert result["ok"] is True and result["step"] == 3
    assert result["checkpoint"] == "s3://r/checkpoints/step-3"
    assert result["metrics"]["loss"] == 1.5
    log = capfd.readouterr().out
    report, logged = last_report(log)  # what the controller reads from the pod's log
    assert report is not None and report["step"] == 3 and report["totalSteps"] == 3
    assert logged == result


def test_a_nan_loss_stops_the_trainer_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [
        '{"step": 1, "loss": 2.5, "checkpoint": "s3://r/checkpoints/step-1"}',
        '{"step": 2, "loss": NaN}',
    ]
    # the trainer would go on for a minute: the reporter stops it at once
    argv = fake_trainer(tmp_path, records, linger=60)
    code, result, _ = run_pod(tmp_path, monkeypatch, argv)
    assert code == training_pod.EXIT_NO_RETRY
    assert result["reason"] == "NaNLoss"
    assert "loss=nan at step 2" in result["error"]
    assert result["checkpoint"] == "s3://r/checkpoints/step-1"
    assert result["metrics"] == {"loss": 2.5}


def test_a_failing_trainer_is_reported_with_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = fake_trainer(tmp_path, ['{"step": 1, "loss": 3.0}'], exit_code=7)
    code, result, _ = run_pod(tmp_path, monkeypatch, argv)
    assert code == 1  # retryable: backoffLimit resumes from the checkpoint
    assert result["reason"] == "TrainerFailed" and "exited with status 7" in result["error"]
    assert result["step"] == 1


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

"""What runs inside a TrainingRun's pods, and how they tell the operator how it goes.

    python -m coworkgym_operator.training_pod check-data   # is the s3:// dataset there?
    python -m coworkgym_operator.training_pod train        # run `cowork-gym train`, report

Both read their input from COWORKGYM_POD_INPUT (JSON, written by training_builders.py).

**How progress reaches the operator.** Training pods hold no API token (they must not
patch anything) and the operator holds no storage credentials (it must not read S3), so
the pod speaks through the two channels the kubelet keeps for it:

- while it trains: its log. ``train`` runs the trainer as a child process, follows the
  JSONL metrics log the trainer writes (one record per step: step, total_steps, loss, ...,
  and checkpoint when one was saved), and prints one line ``coworkgym-train-status {json}``
  whenever the step or the checkpoint changes. The controller reads the tail of the pod's
  log (``pods/log``, which it may read already) and takes the last such line. Lines it
  cannot parse are skipped; a missed line is made good by the next one (each carries the
  whole state, not a delta), so nothing depends on reading every line.
- when it ends: its termination message (the last line of /dev/termination-log), one JSON
  result: ``{"ok": true, "checkpoint": ...}`` or ``{"ok": false, "reason": ..., "error":
  ...}``, as the rollout pods do; printed too, as ``coworkgym-train-result {json}`` (a
  RayJob's driver has no termination message of its own: its submitter's log has it).

A non-finite loss stops the trainer at once (the checkpoints so far are kept: the last
good one is the last one saved before it) and exits with EXIT_NO_RETRY, which the Job's
podFailurePolicy turns into a failed Job instead of a retry: a rerun would diverge the
same way. A missing dataset does the same.

This module imports only the standard library and boto3 (for check-data): it runs in the
training image and in the role image alike, and never imports torch.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATUS_PREFIX = "coworkgym-train-status "
RESULT_PREFIX = "coworkgym-train-result "
TERMINATION_LOG = Path("/dev/termination-log")
# Exit codes the Job's podFailurePolicy fails the Job on at once (no retry).
EXIT_NO_RETRY = 3
POLL_SECONDS = 2.0


def _input() -> dict[str, Any]:
    raw = os.environ.get("COWORKGYM_POD_INPUT") or "{}"
    value = json.loads(raw)
    return value if isinstance(value, dict) else {}


def _finish(result: dict[str, Any], code: int) -> int:
    line = json.dumps(result, separators=(",", ":"), allow_nan=False)
    print(RESULT_PREFIX + line, flush=True)  # a RayJob's driver has no termination message
    with contextlib.suppress(OSError):  # not in a pod (tests, a laptop): stdout has it
        TERMINATION_LOG.write_text(line + "\n")
    return code


# ---- the dataset check ---------------------------------------------------------------------
def dataset_exists(uri: str, client: Any) -> tuple[bool, str]:
    """(found, what was found or why not): one object, or a prefix with .jsonl under it."""
    from botocore.exceptions import ClientError

    from coworkgym.release import split_s3_uri

    bucket, key = split_s3_uri(uri)
    if key.endswith(".jsonl"):
        try:
            head = client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchKey", "NotFound"):
                return False, f"no object {uri}"
            raise
        return True, f"{uri} ({head.get('ContentLength', 0)} bytes)"
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{key}/" if key else "", MaxKeys=1000)
    files = [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".jsonl")]
    if not files:
        return False, f"no .jsonl object under {uri}"
    return True, f"{len(files)} .jsonl file(s) under {uri}"


def check_data() -> int:
    from coworkgym.release import make_s3_client

    uri = str(_input().get("uri") or "")
    try:
        found, what = dataset_exists(uri, make_s3_client())
    except Exception as exc:  # reaching the store failed: say so, the controller retries
        error = f"{type(exc).__name__}: {exc}"
        return _finish({"ok": False, "reachable": False, "error": error}, 1)
    return _finish({"ok": True, "found": found, "detail": what}, 0)


# ---- the training ----------------------------------------------------------------------------
@dataclass
class Report:
    """The training's state as the metrics log tells it; printed whole on each change."""

    step: int = 0
    total_steps: int | None = None
    epoch: float | None = None
    round: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    non_finite: str | None = None  # "loss=nan at step 12" once it happens

    def update(self, record: dict[str, Any]) -> bool:
        """Fold one metrics record in; True if the step or the checkpoint changed."""
        before = (self.step, self.checkpoint)
        if isinstance(record.get("step"), int):
            self.step = record["step"]
        for key, attr in (("total_steps", "total_steps"), ("totalSteps", "total_steps")):
            if isinstance(record.get(key), int):
                setattr(self, attr, record[key])
        if isinstance(record.get("epoch"), int | float):
            self.epoch = float(record["epoch"])
        if isinstance(record.get("round"), int):
            self.round = record["round"]
        checkpoint = record.get("checkpoint") or record.get("checkpoint_uri")
        if isinstance(checkpoint, str) and checkpoint:
            self.checkpoint = checkpoint
        for key, value in record.items():
            if key in ("step", "total_steps", "totalSteps", "epoch", "round") or isinstance(
                value, bool
            ):
                continue
            if isinstance(value, int | float):
                if math.isfinite(value):
                    self.metrics[key] = float(value)
                elif key == "loss" or key.endswith("_loss"):
                    self.non_finite = f"{key}={value} at step {self.step}"
        return (self.step, self.checkpoint) != before

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "metrics": self.metrics}
        for key, value in (
            ("totalSteps", self.total_steps),
            ("epoch", self.epoch),
            ("round", self.round),
            ("checkpoint", self.checkpoint),
        ):
            if value is not None:
                out[key] = value
        return out


def _parse(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)  # Python's json reads NaN and Infinity, as trainers write
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class MetricsFollower:
    """Reads the records appended to a JSONL file since the last call (a partial last line
    waits for its newline)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""

    def new_records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("r", encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        text = self.partial + chunk
        lines = text.split("\n")
        self.partial = lines.pop()
        return [r for r in (_parse(line) for line in lines if line.strip()) if r is not None]


def status_line(report: Report) -> str:
    return STATUS_PREFIX + json.dumps(report.wire(), separators=(",", ":"), allow_nan=False)


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def train() -> int:
    wanted = _input()
    argv = [str(a) for a in wanted.get("argv") or []]
    metrics_path = Path(str(wanted.get("metricsLog") or "/tmp/train/metrics.jsonl"))
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    if not argv:
        return _finish({"ok": False, "reason": "TrainerFailed", "error": "no trainer argv"}, 1)
    report, follower = Report(), MetricsFollower(metrics_path)
    child = subprocess.Popen(argv)
    while True:
        code = child.poll()
        for record in follower.new_records():
            if report.update(record):
                print(status_line(report), flush=True)
            if report.non_finite:
                _stop(child)
                print(status_line(report), flush=True)
                return _finish(
                    {
                        "ok": False,
                        "reason": "NaNLoss",
                        "error": f"the loss stopped being finite ({report.non_finite}); "
                        "the training was stopped, the last good checkpoint is kept",
                        **report.wire(),
                    },
                    EXIT_NO_RETRY,
                )
        if code is not None:
            break
        time.sleep(POLL_SECONDS)
    print(status_line(report), flush=True)
    if code == 0:
        return _finish({"ok": True, **report.wire()}, 0)
    error = f"`{' '.join(argv[:3])} ...` exited with status {code}; its log says why"
    # 1 whatever the trainer's status: a retry (backoffLimit) resumes from the checkpoint
    return _finish({"ok": False, "reason": "TrainerFailed", "error": error, **report.wire()}, 1)


def main(argv: list[str]) -> int:
    commands = {"check-data": check_data, "train": train}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python -m coworkgym_operator.training_pod {'|'.join(commands)}")
        return 2
    return commands[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

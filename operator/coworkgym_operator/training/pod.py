"""What runs inside a TrainingRun's pods, and how they tell the operator how it goes.

    python -m coworkgym_operator.training.pod check-data   # is the s3:// dataset there?
    python -m coworkgym_operator.training.pod train        # run `cowork-gym train`, report

Both read their input from COWORKGYM_POD_INPUT (JSON, written by training/builders/run.py).

**How progress reaches the operator.** Training pods hold no API token (they must not
patch anything) and the operator holds no storage credentials (it must not read S3), so
the pod speaks through the two channels the kubelet keeps for it:

- while it trains: its log. ``train`` stages the s3:// data and weights, writes the
  trainer's config, runs ``cowork-gym train --config`` as a child process, follows the
  files the trainer keeps in its run folder (metrics.jsonl: one record per step, loss,
  tokens_per_second, grad_norm, ...; status.json: step, max_steps, the latest checkpoint,
  how it ended), and prints one line ``coworkgym-train-status {json}`` whenever that
  changes. The controller reads the tail of the pod's
  log (``pods/log``, which it may read already) and takes the last such line. Lines it
  cannot parse are skipped; a missed line is made good by the next one (each carries the
  whole state, not a delta), so nothing depends on reading every line.
- when it ends: its termination message (the last line of /dev/termination-log), one JSON
  result: ``{"ok": true, "checkpoint": ...}`` or ``{"ok": false, "reason": ..., "error":
  ...}``, as the rollout pods do; printed too, as ``coworkgym-train-result {json}`` (a
  RayJob's driver has no termination message of its own: its submitter's log has it).

An on-policy round's training (spec.rounds > 1) is this same pod, staging the weights the
round served and the round's RolloutBatch output (reconcile/training_rounds.py).

A non-finite loss stops the trainer (its status.json says non_finite_loss; the checkpoints
saved before it are kept, so the last good one is the latest) and the pod exits with
EXIT_NO_RETRY, which the Job's podFailurePolicy turns into a failed Job instead of a retry:
a rerun would diverge the same way. Data that is not there, or that gives no example, does
the same. Then the run's config.json, metrics.jsonl and status.json go beside the
checkpoints in spec.output.

This module imports only the standard library and boto3 (for check-data): it runs in the
training image and in the role image alike, and never imports torch.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
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
    """The training's state as the trainer's files tell it (OUT/status.json: step,
    max_steps, checkpoint, state; OUT/metrics.jsonl: the figures of each step); printed
    whole on each change."""

    step: int = 0
    total_steps: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None

    def fold_metrics(self, record: dict[str, Any]) -> None:
        if isinstance(record.get("step"), int):
            self.step = max(self.step, record["step"])
        if isinstance(record.get("max_steps"), int):
            self.total_steps = record["max_steps"]
        for key, value in record.items():
            if key in SKIPPED or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):  # the trainer writes a non-finite figure as null
                self.metrics[key] = float(value)

    def fold_status(self, status: dict[str, Any]) -> None:
        if isinstance(status.get("step"), int):
            self.step = max(self.step, status["step"])
        if isinstance(status.get("max_steps"), int):
            self.total_steps = status["max_steps"]
        if isinstance(status.get("checkpoint"), str) and status["checkpoint"]:
            self.checkpoint = status["checkpoint"]

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "metrics": self.metrics}
        if self.total_steps is not None:
            out["totalSteps"] = self.total_steps
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint
        return out


# record keys that are not figures of the training (or are said elsewhere)
SKIPPED = {"step", "max_steps", "time", "failed", "attempt"}
# how the trainer's failure reasons (trainer/status.py) read as the run's, and whether a
# retry could help (a non-finite loss or no data would only happen again)
FAILURES = {
    "non_finite_loss": ("NaNLoss", EXIT_NO_RETRY),
    "no_examples": ("NoExamples", EXIT_NO_RETRY),
    "worker_failures": ("TrainerFailed", 1),
    "error": ("TrainerFailed", 1),
}


def _parse(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return _parse(path.read_text(encoding="utf-8"))
    except OSError:
        return None


def status_line(report: Report) -> str:
    return STATUS_PREFIX + json.dumps(report.wire(), separators=(",", ":"), allow_nan=False)


# ---- staging and uploading ---------------------------------------------------------------
# What a checkpoint holds beyond the weights (trainer/checkpoint.py): the optimizer's state,
# about twice the weights, which a round that starts from the checkpoint never reads.
NOT_WEIGHTS = ("trainer_state.pt",)


def stage(uri: str, dest: Path, client: Any, skip: tuple[str, ...] = ()) -> int:
    """Download an s3:// object (``.jsonl``) or every object under a prefix into ``dest``
    (but those named in ``skip``); returns how many files."""
    from coworkgym.release import download_prefix, split_s3_uri

    bucket, key = split_s3_uri(uri)
    dest.mkdir(parents=True, exist_ok=True)
    if key.endswith(".jsonl"):
        client.download_file(bucket, key, str(dest / Path(key).name))
        return 1
    count = download_prefix(client, bucket, key, dest, skip)
    if not count:
        raise FileNotFoundError(f"nothing under {uri}")
    return count


def count_trajectories(location: Path) -> int:
    """The trajectories (non-empty lines) of a .jsonl file or of every one under a folder."""
    total = 0
    files = [location] if location.is_file() else sorted(location.rglob("*.jsonl"))
    for path in files:
        with path.open(encoding="utf-8") as handle:
            total += sum(1 for line in handle if line.strip())
    return total


def steps_for(trajectories: int, keep: float, epochs: int, batch_size: int) -> int:
    """The epochs' worth of optimizer steps: ceil(trajectories × keep × epochs / batch)."""
    return max(1, math.ceil(trajectories * keep * epochs / batch_size))


def upload_outputs(out: Path, output: str, client: Any) -> list[str]:
    """The run's config, metrics log and status beside its checkpoints."""
    from coworkgym.release import split_s3_uri

    bucket, prefix = split_s3_uri(output)
    sent = []
    for name in ("config.json", "metrics.jsonl", "status.json"):
        path = out / name
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{name}" if prefix else name)
            sent.append(f"{output}/{name}")
    return sent


def _s3() -> Any:
    from coworkgym.release import make_s3_client

    return make_s3_client()


def stage_inputs(plan: dict[str, Any]) -> dict[str, Any]:
    """Stage the plan's s3:// inputs (data, weights) where its config reads them; returns
    the config."""
    config = dict(plan.get("config") or {})
    staged = plan.get("stage") or {}
    client = _s3() if staged else None
    weights = {str(config.get(k)) for k in ("model", "teacher_model", "reference_model")}
    # a round that goes on from a checkpoint reads its optimizer state: that one is kept
    weights.discard(str(config.get("optimizer_state_from")))
    for local, uri in staged.items():
        skip = NOT_WEIGHTS if local in weights else ()
        files = stage(str(uri), Path(local), client, skip)
        print(f"staged {uri} -> {local} ({files} file(s))", flush=True)
    return config


def prepare(plan: dict[str, Any]) -> dict[str, Any]:
    """Stage the plan's s3:// inputs, fill in max_steps, write the trainer's config file;
    returns the config."""
    config = stage_inputs(plan)
    if config.get("max_steps") is None:
        data = Path(str((config.get("data") or ["/tmp/train/data"])[0]))
        trajectories = count_trajectories(data)
        batch = int((config.get("hyperparameters") or {}).get("batch_size") or 8)
        config["max_steps"] = steps_for(
            trajectories, float(plan.get("keep") or 1.0), int(plan.get("epochs") or 1), batch
        )
        print(f"{trajectories} trajectories: max_steps {config['max_steps']}", flush=True)
    target = Path(str(plan.get("configFile") or "/tmp/train/config.json"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config


def train() -> int:
    plan = _input()
    argv = [str(a) for a in plan.get("argv") or []]
    if not argv:
        return _finish({"ok": False, "reason": "TrainerFailed", "error": "no trainer argv"}, 1)
    try:
        config = prepare(plan)
    except FileNotFoundError as exc:  # a dataset or weights that are not there
        return _finish({"ok": False, "reason": "DatasetNotFound", "error": str(exc)}, EXIT_NO_RETRY)
    except Exception as exc:  # the store unreachable, a bad plan: a retry may help
        error = f"staging the inputs failed: {type(exc).__name__}: {exc}"
        return _finish({"ok": False, "reason": "TrainerFailed", "error": error}, 1)
    out = Path(str(config.get("out") or "/tmp/train/out"))
    report = Report(total_steps=config.get("max_steps"))
    follower = MetricsFollower(out / "metrics.jsonl")
    child = subprocess.Popen(argv)
    last = ""
    while True:
        code = child.poll()
        for record in follower.new_records():
            report.fold_metrics(record)
        report.fold_status(read_json(out / "status.json") or {})
        line = status_line(report)
        if line != last:
            print(line, flush=True)
            last = line
        if code is not None:
            break
        time.sleep(POLL_SECONDS)
    return _ended(plan, out, report, code)


def _ended(plan: dict[str, Any], out: Path, report: Report, code: int) -> int:
    status = read_json(out / "status.json") or {}
    if plan.get("output"):
        try:
            for uri in upload_outputs(out, str(plan["output"]), _s3()):
                print(f"uploaded {uri}", flush=True)
        except Exception as exc:  # the checkpoints are there already: say so, go on
            print(f"warning: could not upload the run's logs: {exc}", flush=True)
    if status.get("state") == "succeeded" and code == 0:
        return _finish({"ok": True, **report.wire()}, 0)
    reason, exit_code = FAILURES.get(str(status.get("reason") or ""), ("TrainerFailed", 1))
    message = str(status.get("message") or "")
    error = message or f"`cowork-gym train` exited with status {code}; its log says why"
    return _finish({"ok": False, "reason": reason, "error": error, **report.wire()}, exit_code)


def stage_worker() -> int:
    """A Ray worker pod's init container: the inputs its trainer process loads (the weights,
    the data) staged into the pod's own /tmp, as the head stages its own; a RayJob's pods
    share no disk."""
    try:
        stage_inputs(_input())
    except FileNotFoundError as exc:
        return _finish({"ok": False, "reason": "DatasetNotFound", "error": str(exc)}, EXIT_NO_RETRY)
    return 0


def main(argv: list[str]) -> int:
    commands = {"check-data": check_data, "train": train, "stage": stage_worker}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python -m coworkgym_operator.training.pod {'|'.join(commands)}")
        return 2
    return commands[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The driver: ``train(config)`` prepares the data, starts (or joins) Ray and runs the
workers with Ray Train's ``TorchTrainer``, then reads how the run ended.

Ray, on one machine, stays on 127.0.0.1: no dashboard, no usage stats, a small object store
(the data travel as file paths, not objects) and a private temporary folder under the
run's folder. Inside a Ray cluster (``RAY_ADDRESS`` set, as in a KubeRay RayJob's driver)
it joins that cluster instead.

Workers: gloo on CPU, NCCL on GPUs (one GPU per worker). ``FailureConfig(max_failures)``
restarts the whole worker group when a worker dies; the group resumes from the latest
checkpoint in the store (see ``loop``).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .board import status_board
from .config import TrainConfig
from .status import RunStatus, read_status

# Ray Train's own extras that need the dashboard or a cloud: off on one machine.
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_METRICS_ENABLED": "0",
    "RAY_CHDIR_TO_TRIAL_DIR": "0",  # workers keep the driver's working directory
    # a loaded 2-core machine takes longer than the default minute to start a group
    "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "300",
    "RAY_DEDUP_LOGS": "0",
}
SELECTED = "selected.jsonl"


class TrainError(ValueError):
    """The run could not start (bad data, selection failure, Ray unavailable)."""


@dataclass(frozen=True)
class TrainOutcome:
    status: RunStatus
    out: Path

    @property
    def succeeded(self) -> bool:
        return self.status.state == "succeeded"


def prepare_data(config: TrainConfig) -> list[Path]:
    """The files the workers read: the data as given, or what selection kept of it."""
    if config.selection is None:
        return list(config.data)
    from ..selection_report import write_report
    from ..selection_run import load_student, select_files

    student = load_student(config.model, "cpu")
    kept = config.out / SELECTED
    report = select_files(
        list(config.data),
        kept,
        student,
        method=config.selection.method,
        keep=config.selection.keep,
        bins=config.selection.bins,
        by_group=config.selection.groups_for(config.objective),  # GRPO: whole groups
    )
    write_report(report, config.out / "selection")
    if report.kept == 0:
        raise TrainError(f"selection kept none of {report.entered} trajectories")
    return [kept]


LOCAL_RAY_STARTS = 3


def start_ray(config: TrainConfig, gpus: int) -> bool:
    """Start a local Ray (True) or join the one already running or named by RAY_ADDRESS."""
    import ray

    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": {k: os.environ[k] for k in RAY_ENV}}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(runtime_env=runtime_env, log_to_driver=True)
        return True

    def start_local() -> None:
        # Ray's socket paths must stay short (AF_UNIX limit): a folder under /tmp, not OUT.
        temp = Path(tempfile.mkdtemp(prefix="cwg-ray-"))
        ray.init(
            address="local",
            num_cpus=config.workers + 1,
            num_gpus=gpus,
            include_dashboard=False,
            object_store_memory=config.object_store_mb * 1024 * 1024,
            _node_ip_address="127.0.0.1",
            _temp_dir=str(temp),
            runtime_env=runtime_env,
            log_to_driver=True,
        )

    for attempt in range(1, LOCAL_RAY_STARTS):
        try:
            start_local()
            return True
        except Exception as exc:
            # Ray gives its raylet a fixed 30 s to register; a node busy with other pods can
            # take longer ("The current node timed out during startup"). Start afresh.
            if "timed out during startup" not in str(exc):
                raise
            ray.shutdown()
            print(f"local Ray did not start in time (attempt {attempt}); starting it again")
    start_local()  # the last start: its failure is the run's
    return True


def train(config: TrainConfig) -> TrainOutcome:
    import ray
    import torch
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    if not config.data:
        raise TrainError("data: no trajectory file given; pass --data (JSONL files or folders)")
    missing = [str(p) for p in config.data if not p.exists()]
    if missing:
        raise TrainError(f"data: not found: {', '.join(missing)}")
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    data = prepare_data(config)
    use_gpu = config.use_gpu(torch.cuda.is_available())
    # A fresh attempt count: workers add one per (re)start of the group.
    previous = read_status(config.out)
    RunStatus(
        state="running",
        max_steps=config.max_steps,
        attempt=0,
        step=previous.step if previous else 0,
        checkpoint=previous.checkpoint if previous else None,
        checkpoint_step=previous.checkpoint_step if previous else None,
    ).write(config.out)
    started = start_ray(config, gpus=config.workers if use_gpu else 0)
    payload: dict[str, Any] = {
        "config": config.model_dump(mode="json"),
        "data": [str(p) for p in data],
        # what was made here (selection's kept file) travels with the loop's config: the
        # workers' pods of a RayJob have only what they staged themselves
        "files": {str(p): p.read_bytes() for p in data if p.is_relative_to(config.out)},
        "board": status_board(config.out),
    }
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config=payload,
        scaling_config=ScalingConfig(
            num_workers=config.workers,
            use_gpu=use_gpu,
            resources_per_worker={"CPU": 1, **({"GPU": 1} if use_gpu else {})},
        ),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        run_config=RunConfig(
            name=config.out.name,
            storage_path=str(config.out / "ray"),
            failure_config=FailureConfig(max_failures=config.max_failures),
        ),
    )
    error: BaseException | None = None
    try:
        with warnings.catch_warnings():
            # Ray Train copies Ray Data's context attribute by attribute, which sets its own
            # deprecated fields and warns about them: nothing a caller can act on.
            warnings.simplefilter("ignore", DeprecationWarning)
            trainer.fit()
    except Exception as exc:  # Ray's TrainingFailedError and its relatives
        error = exc
    finally:
        if started:
            ray.shutdown()
    status = read_status(config.out)
    if status is None:
        raise TrainError(f"{config.out}: the workers wrote no status.json")
    if error is not None and status.state != "failed":
        status = status.model_copy(
            update={
                "state": "failed",
                "reason": "worker_failures",
                "message": f"{type(error).__name__}: {str(error)[:2000]}",
            }
        )
        status.write(config.out)
    elif status.state == "running":  # the workers returned without saying how it ended
        status = status.model_copy(
            update={"state": "failed", "reason": "error", "message": "workers ended early"}
        )
        status.write(config.out)
    return TrainOutcome(status=status, out=config.out)


def _train_worker(payload: dict[str, Any]) -> None:
    from .loop import train_worker

    for name, content in (payload.get("files") or {}).items():
        path = Path(name)
        if not path.exists():  # another node's: written where this worker reads it
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    train_worker(payload)


__all__ = ["RAY_ENV", "TrainError", "TrainOutcome", "prepare_data", "start_ray", "train"]

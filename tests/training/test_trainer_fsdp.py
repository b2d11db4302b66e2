"""The FSDP strategy against the replicated one: two worker processes (gloo on CPU, float32,
no Ray: the worker loop as Ray runs it, with the process group set up here), the same data
and steps; both end with the same weights, up to float rounding, and FSDP's checkpoint
loads as a plain model folder and resumes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from coworkgym_training.trainer.config import TrainConfig
from coworkgym_training.trainer.loop import Worker
from coworkgym_training.trainer.metrics import read_log
from coworkgym_training.trainer.status import RunStatus, read_status
from tests.training.trainer_runs import config, weights, workspace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
WORLD = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker(rank: int, payload: str, port: int) -> None:
    dist.init_process_group(
        "gloo", rank=rank, world_size=WORLD, init_method=f"tcp://127.0.0.1:{port}"
    )
    try:
        cfg = TrainConfig.model_validate_json(payload)
        Worker(cfg, list(cfg.data), rank, WORLD, torch.device("cpu"), report=lambda _: None).run()
    finally:
        dist.destroy_process_group()


def run_two_workers(cfg: TrainConfig) -> RunStatus:
    cfg.out.mkdir(parents=True, exist_ok=True)
    previous = read_status(cfg.out)
    step = previous.step if previous else 0
    RunStatus(state="running", max_steps=cfg.max_steps, attempt=0, step=step).write(cfg.out)
    mp.start_processes(
        _worker, args=(cfg.model_dump_json(), free_port()), nprocs=WORLD, start_method="spawn"
    )
    status = read_status(cfg.out)
    assert status is not None
    return status


def test_fsdp_trains_to_the_weights_replication_does(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    common = {"objective": "grpo", "device": "cpu", "workers": WORLD, "max_steps": 3}
    replicated = run_two_workers(config(root, out=root / "replicated", **common))
    sharded = run_two_workers(config(root, out=root / "fsdp", strategy="fsdp", **common))
    assert replicated.state == sharded.state == "succeeded", sharded.message
    a = weights(Path(replicated.checkpoint or ""))
    b = weights(Path(sharded.checkpoint or ""))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-5)
    losses = [[r["loss"] for r in read_log(root / run)] for run in ("replicated", "fsdp")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    # and the sharded run resumes from its own (full, unsharded) checkpoint
    longer = {**common, "max_steps": 5}
    more = run_two_workers(config(root, out=root / "fsdp", strategy="fsdp", **longer))
    assert more.state == "succeeded" and more.step == 5
    assert [r["step"] for r in read_log(root / "fsdp")] == [1, 2, 3, 4, 5]

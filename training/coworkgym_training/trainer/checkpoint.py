"""Saving and restoring a worker group's training state through the checkpoint store.

A checkpoint is a Hugging Face model folder (``save_pretrained`` weights, config and the
tokenizer, so ``cowork-gym serve``, ``select`` or the next round load it as they load any
model) plus ``trainer_state.pt`` (the optimizer and scheduler, the step) and
``checkpoint.json`` (what produced it). The full, unsharded state is gathered with
``torch.distributed.checkpoint.state_dict`` — the same call for a replicated model and an
FSDP-sharded one — and rank 0 alone writes it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from .distributed import barrier
from .store import CheckpointStore

TRAINER_STATE = "trainer_state.pt"
CHECKPOINT_INFO = "checkpoint.json"


def save_checkpoint(
    store: CheckpointStore,
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    tokenizer: Any,
    info: dict[str, Any],
    keep: int,
    rank: int,
    staging: Path,
) -> str:
    """Every rank calls this (gathering the state is collective); rank 0 writes."""
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=full)
    optimizer_state = get_optimizer_state_dict(model, optimizer, options=full)
    uri = store.uri(step)
    if rank == 0:
        staging.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=staging, prefix="save-") as tmp:
            folder = Path(tmp)
            model.save_pretrained(folder, state_dict=weights)  # type: ignore[operator]
            tokenizer.save_pretrained(folder)
            torch.save(
                {"step": step, "optimizer": optimizer_state, "scheduler": scheduler.state_dict()},
                folder / TRAINER_STATE,
            )
            (folder / CHECKPOINT_INFO).write_text(
                json.dumps({"step": step, **info}, indent=2) + "\n", encoding="utf-8"
            )
            uri = store.save(step, folder, keep)
    barrier()  # nobody goes on (or dies) believing in a checkpoint not yet written
    return uri


def restore_trainer_state(
    folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> int:
    state = torch.load(folder / TRAINER_STATE, map_location="cpu", weights_only=False)
    set_optimizer_state_dict(
        model, optimizer, state["optimizer"], options=StateDictOptions(full_state_dict=True)
    )
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


__all__ = ["CHECKPOINT_INFO", "TRAINER_STATE", "restore_trainer_state", "save_checkpoint"]

"""The run's state, as ``OUT/status.json``: written by rank 0 as the run goes and read by
the driver (``cowork-gym train``) when Ray Train returns, and by whoever watches the run.

A run ends ``succeeded`` (``max_steps`` done, the last checkpoint saved) or ``failed``
with a reason a controller can map to a condition: ``non_finite_loss`` (the run stops at
once and keeps the last good checkpoint; a restart would only repeat it),
``no_examples`` (nothing in the data to train on, e.g. every GRPO group without reward
variance), ``worker_failures`` (workers died more often than ``max_failures`` allows) or
``error`` (anything else, with its message).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STATUS = "status.json"

State = Literal["running", "succeeded", "failed"]
FailureReason = Literal["non_finite_loss", "no_examples", "worker_failures", "error"]


class RunStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: State
    reason: FailureReason | None = None
    message: str = ""
    step: int = Field(0, description="the last optimizer step done")
    max_steps: int
    attempt: int = Field(1, description="1 + worker-group restarts")
    checkpoint: str | None = Field(None, description="the latest checkpoint's URI")
    checkpoint_step: int | None = None

    def write(self, out: Path) -> None:
        partial = out / f".{STATUS}.partial"
        partial.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        partial.replace(out / STATUS)


def read_status(out: Path) -> RunStatus | None:
    path = out / STATUS
    if not path.is_file():
        return None
    return RunStatus.model_validate(json.loads(path.read_text(encoding="utf-8")))


__all__ = ["STATUS", "FailureReason", "RunStatus", "State", "read_status"]

"""The build → execute → revise loop: a pure state machine and a local driver."""

from __future__ import annotations

from .machine import TRANSITIONS, Budget, LoopStatus, Phase, step

__all__ = ["TRANSITIONS", "Budget", "LoopStatus", "Phase", "step"]

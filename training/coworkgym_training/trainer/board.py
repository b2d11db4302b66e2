"""The run's status where the driver reads it, on whichever node rank 0 trains.

Rank 0 writes ``status.json`` beside the run all along (``loop.Worker``); the driver reads it
when the workers end, and the pod's reporter while they run. On one node that is one disk.
The pods of a RayJob share none: rank 0's pod has its own ``/tmp``. There, a small actor
pinned to the driver's node takes each status rank 0 writes and writes it on the driver's
disk instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .status import RunStatus


def status_board(out: Path) -> Any | None:
    """An actor on this (the driver's) node that writes statuses into ``out``; None when
    the cluster has one node, where rank 0 writes there itself."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [node for node in ray.nodes() if node.get("Alive")]  # type: ignore[no-untyped-call]
    if len(alive) < 2:
        return None
    here = ray.get_runtime_context().get_node_id()
    board = ray.remote(num_cpus=0)(StatusBoard)
    return board.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
    ).remote(str(out), here)


class StatusBoard:
    def __init__(self, out: str, node: str) -> None:
        self.out, self.node = Path(out), node

    def where(self) -> str:
        """The node whose disk it writes on (a worker there writes itself)."""
        return self.node

    def write(self, status: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        RunStatus.model_validate_json(status).write(self.out)


__all__ = ["StatusBoard", "status_board"]

"""Per-step training metrics: one JSON line per step in ``OUT/metrics.jsonl`` and the same
figures as Prometheus gauges — a textfile (``OUT/metrics.prom``, for node_exporter's
textfile collector or a sidecar) rewritten each step, and optionally an HTTP endpoint on
127.0.0.1. Only rank 0 writes them; every figure is already reduced over the workers.

Every metric carries the prefix ``coworkgym_training_`` and the label ``run`` (the run's
folder name), so several runs scraped together stay apart.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server, write_to_textfile

PREFIX = "coworkgym_training_"
METRICS_LOG = "metrics.jsonl"
TEXTFILE = "metrics.prom"

# The figures every step reports, each a gauge (help text = what it is).
GAUGES = {
    "step": "the last optimizer step done",
    "max_steps": "optimizer steps the run will do in all",
    "loss": "the objective's loss at the last step (mean over workers)",
    "tokens_per_second": "tokens (prompt and completion, no padding) per second, all workers",
    "grad_norm": "the gradient norm before clipping at the last step",
    "reward_mean": "mean reward of the trajectories in the last step's batch",
    "groups_kept": "environment groups with a learning signal kept for training",
    "learning_rate": "the learning rate at the last step",
    "last_checkpoint_step": "the step of the latest checkpoint saved",
    "attempt": "worker-group attempt (1 + restarts after a failure)",
    "failed": "1 once the run has failed (a non-finite loss), else 0",
}


class MetricsSink:
    def __init__(self, out: Path, run: str, port: int | None = None) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.log_path = out / METRICS_LOG
        self.textfile = out / TEXTFILE
        self.registry = CollectorRegistry()
        self.gauges = {
            name: Gauge(PREFIX + name, doc, ["run"], registry=self.registry).labels(run=run)
            for name, doc in GAUGES.items()
        }
        self.server: Any = None
        if port is not None:
            self.server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)

    def set(self, **values: float | None) -> None:
        for name, value in values.items():
            if value is not None and name in self.gauges:
                self.gauges[name].set(value)
        write_to_textfile(str(self.textfile), self.registry)

    def step(self, record: dict[str, Any]) -> None:
        """Log one step's record (a JSON line) and set the gauges it has."""
        line = sanitize({"time": round(time.time(), 3), **record})
        with self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, allow_nan=False) + "\n")
        self.set(**{k: _number(v) for k, v in line.items() if k in self.gauges})

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def sanitize(record: dict[str, Any]) -> dict[str, Any]:
    """NaN and infinities become null (JSON has neither)."""
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()
    }


def read_log(out: Path) -> list[dict[str, Any]]:
    path = out / METRICS_LOG
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


__all__ = ["GAUGES", "METRICS_LOG", "PREFIX", "TEXTFILE", "MetricsSink", "read_log", "sanitize"]

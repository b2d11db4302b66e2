"""What kopf is told at start-up, for every kind: its bookkeeping in annotations (status
holds only our schema), the finalizer, the events' source, the shard to watch, the first
listing in pages, and a quiet log; and the task that hands freed memory back
(core/memory.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import kopf

from coworkgym_operator.core import memory
from coworkgym_operator.core.api import GROUP
from coworkgym_operator.core.controller import QUIET_HANDLERS
from coworkgym_operator.core.metrics import RECONCILES
from coworkgym_operator.core.settings import SETTINGS
from coworkgym_operator.core.sharding import shard_from_env, watch_only_shard

COMPONENT = "cowork-gym-operator"  # events' source, in `kubectl describe` and `get events`
FINALIZER = f"{GROUP}/cleanup"


class _QuietSuccess(logging.Filter):
    """kopf logs "Handler 'on_stage_pod' succeeded." at INFO on every event of a child
    (core/controller.py's ``on_child`` handlers: many per object), and "Timer ...
    succeeded." on every timer run, saying nothing; and it posts what it logs at INFO as
    Kubernetes events (an API call each). Failures (logged at ERROR) still pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Handler '") and message.endswith("' succeeded."):
            return message[len("Handler '") : -len("' succeeded.")] not in QUIET_HANDLERS
        return not (message.startswith("Timer ") and message.endswith(" succeeded."))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # kopf's own bookkeeping in annotations, so that status holds only our schema
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.INFO  # INFO events and above
    settings.posting.reporting_component = COMPONENT
    settings.posting.reporting_instance = os.environ.get("POD_ID") or os.uname().nodename
    settings.posting.event_name_prefix = "cowork-gym-"
    settings.watching.server_timeout = 60
    # the first listing in pages: a replica holding thousands of objects never has one
    # answer of all of them in memory at once (kopf keeps one page while it hands it out)
    settings.watching.chunk_size = 500
    # we watch known CRDs; scanning for namespaces/CRDs only costs a namespaced operator
    # (without cluster-wide list rights) a minute of retries at start-up
    settings.scanning.disabled = True
    # a sharded replica watches its shard only (sharding.py)
    watch_only_shard(settings, shard_from_env())
    # A deleted object keeps its finalizer until its handlers have exited; one caught
    # mid-run (waiting for the object's turn) is polled again after this long (kopf's
    # default, 60 s, held each such deletion a minute)
    settings.background.cancellation_polling = 1.0
    quiet = _QuietSuccess()
    for name in ("kopf.objects", "kopf"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietSuccess) for f in logger.filters):
            logger.addFilter(quiet)


_TRIMMING: list[asyncio.Task[None]] = []


def _reconciles() -> float:
    """Every kind's reconciles so far: what moves while the operator works."""
    samples = (s for metric in RECONCILES.collect() for s in metric.samples)
    return sum(s.value for s in samples if s.name.endswith("_total"))


@kopf.on.startup()
async def start_trimming(**_: Any) -> None:
    if SETTINGS.malloc_trim_interval > 0:
        task = asyncio.create_task(
            memory.trim_while_working(SETTINGS.malloc_trim_interval, _reconciles)
        )
        _TRIMMING.append(task)


@kopf.on.cleanup()
async def stop_trimming(**_: Any) -> None:
    # the next operator in this process (tests run several) starts its own
    while _TRIMMING:
        _TRIMMING.pop().cancel()


__all__ = ["COMPONENT", "FINALIZER", "configure", "start_trimming", "stop_trimming"]

"""What kopf is told at start-up, for every kind: its bookkeeping in annotations (status
holds only our schema), the finalizer, the events' source, the shard to watch, and a quiet
log."""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from coworkgym_operator.core.api import GROUP
from coworkgym_operator.core.controller import QUIET_HANDLERS
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


__all__ = ["COMPONENT", "FINALIZER", "configure"]

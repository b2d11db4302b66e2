"""``python -m coworkgym_operator``: serve metrics, then run kopf with this package's handlers.

Flags are kopf's (``--namespace``, ``--all-namespaces``, ``--peering``, ``--standalone``,
``--liveness``); the metrics port comes from COWORKGYM_METRICS_PORT (default 8080).

kopf runs in a thread of its own, with a stop flag, and this (main) thread takes SIGTERM and
SIGINT: it first tells the handlers to stop (``shutdown.begin``: queued handler runs then
return at once instead of each making its API calls), then raises kopf's stop flag. Should
kopf still not have exited COWORKGYM_SHUTDOWN_TIMEOUT_SECONDS (default 20) after the
signal, the process exits anyway, before the kubelet's SIGKILL at the end of the pod's
grace period (the chart sets the timeout 5 s short of it).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from prometheus_client import start_http_server

log = logging.getLogger("coworkgym_operator")


class _SignalsHandledHere(logging.Filter):
    """kopf, run outside the main thread, warns that it ignores OS signals: here the main
    thread takes them and stops kopf through its stop flag."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("OS signals are ignored")


def main() -> None:
    from kopf.cli import CLIControls
    from kopf.cli import main as kopf_main

    from coworkgym_operator.core import shutdown
    from coworkgym_operator.core.metrics import REGISTRY

    start_http_server(int(os.environ.get("COWORKGYM_METRICS_PORT", "8080")), registry=REGISTRY)
    timeout = float(os.environ.get("COWORKGYM_SHUTDOWN_TIMEOUT_SECONDS", "20"))
    stop_flag = threading.Event()
    outcome: dict[str, Any] = {}
    signalled: list[float] = []

    def run_kopf() -> None:
        try:
            kopf_main(
                ["run", "-m", "coworkgym_operator.controllers", *sys.argv[1:]],
                obj=CLIControls(stop_flag=stop_flag),
                standalone_mode=False,
            )
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not signalled:
            signalled.append(time.monotonic())
            log.info(f"{signal.Signals(signum).name} received: stopping")
        shutdown.begin()
        stop_flag.set()

    logging.getLogger("kopf._core.reactor.running").addFilter(_SignalsHandledHere())
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker = threading.Thread(target=run_kopf, name="kopf")
    worker.start()
    while worker.is_alive():
        worker.join(0.2)  # short waits: the main thread runs the signal handler between them
        if signalled and time.monotonic() - signalled[0] > timeout:
            log.error(f"kopf did not stop within {timeout:g} s of the signal; exiting anyway")
            logging.shutdown()
            os._exit(1)
    if signalled:
        log.info(f"stopped {time.monotonic() - signalled[0]:.1f} s after the signal")
    error = outcome.get("error")
    if error is not None and not (isinstance(error, SystemExit) and not error.code):
        raise SystemExit(1) from error


if __name__ == "__main__":
    main()

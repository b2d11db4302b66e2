"""``python -m coworkgym_operator``: serve metrics, then run kopf with this package's handlers.

Flags are kopf's (``--namespace``, ``--all-namespaces``, ``--peering``, ``--standalone``,
``--liveness``); the metrics port comes from COWORKGYM_METRICS_PORT (default 8080).
"""

from __future__ import annotations

import os
import sys

from prometheus_client import start_http_server


def main() -> None:
    from kopf.cli import main as kopf_main

    from .metrics import REGISTRY

    start_http_server(int(os.environ.get("COWORKGYM_METRICS_PORT", "8080")), registry=REGISTRY)
    sys.argv = ["kopf", "run", "-m", "coworkgym_operator.controllers", *sys.argv[1:]]
    kopf_main()


if __name__ == "__main__":
    main()

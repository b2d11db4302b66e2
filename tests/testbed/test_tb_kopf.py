"""A kopf operator, run in-process by KopfRunner, reconciles a resource on the real API server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from coworkgym_testbed.kopfkit import kopf_runner
from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
FIXTURES = Path(__file__).parent / "fixtures"


def test_kopf_operator_writes_status(
    testbed_env: Testbed, widgets_crd: str, testbed_namespace: str
) -> None:
    tb, ns = testbed_env, testbed_namespace
    args = [
        "run",
        "--standalone",
        "--namespace",
        ns,
        "--verbose",
        str(FIXTURES / "operator_widgets.py"),
    ]
    status: dict[str, object] = {}
    with kopf_runner(args) as runner:
        tb.kubectl("apply", "-n", ns, "-f", str(FIXTURES / "widget-ok.yaml"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and status.get("phase") != "Ready":
            got = json.loads(tb.kubectl("get", "widget", "ok", "-n", ns, "-o", "json").stdout)
            status = got.get("status", {})
            time.sleep(0.3)

    assert runner.exception is None
    assert runner.exit_code == 0
    assert status.get("phase") == "Ready", f"status never became Ready: {status}"
    assert status.get("observedSize") == 3
    assert "Handler 'make_ready' succeeded" in runner.output

"""An operator holding many environments stops within the chart's grace period (30 s).

kopf waits on a stop for every sync-handler run it has queued in its thread pool; when a
3 s timer per environment queued one run per object, each with a few API calls, the
operator at 4,000 objects took ~145 s to exit. The timer is now a long resync and the
handlers are async, but the contract stays: here 300 environments have just been taken up
(each with its reconciles of work in flight at a short interval), and the process gets
SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster, manifest

# runs_last: its 300 environments' stage pods stay Pending on the shared test-bed after it,
# and the scheduler retrying them reported the next tests' pods late
pytestmark = [pytest.mark.testbed, pytest.mark.runs_last]
OBJECTS = 300
GRACE_SECONDS = 30.0  # the chart's operator.terminationGracePeriodSeconds


def test_an_operator_holding_many_environments_stops_within_the_grace_period(
    cluster: Cluster, testbed_env: Testbed, tmp_path: Path
) -> None:
    for i in range(OBJECTS):
        body = json.loads(manifest(f"idle-{i:04d}"))
        # stage pods select a node that does not exist: the environments stay Building
        body["spec"]["sandbox"] = {"nodeSelector": {"coworkgym.dev/kubelet": "nowhere"}}
        cluster.custom.create_namespaced_custom_object(
            "coworkgym.dev", "v1alpha1", cluster.ns, "coworkenvironments", body
        )
    env = (
        os.environ
        | testbed_env.env()
        | {
            "COWORKGYM_RECONCILE_INTERVAL": "0.2",
            "COWORKGYM_METRICS_PORT": "0",
            "COWORKGYM_SHUTDOWN_TIMEOUT_SECONDS": "25",
        }
    )
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", cluster.ns]
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:

        def all_building() -> bool:
            listed = cluster.custom.list_namespaced_custom_object(
                "coworkgym.dev", "v1alpha1", cluster.ns, "coworkenvironments"
            )
            phases = [(e.get("status") or {}).get("phase") for e in listed["items"]]
            return phases.count("Building") == OBJECTS

        cluster.wait(all_building, timeout=300, message=f"{OBJECTS} environments Building")
        time.sleep(5)  # the timers now keep the pool's queue full
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(GRACE_SECONDS + 30)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    fallback = "exiting anyway" in text
    print(
        f"stopped {took:.1f} s after SIGTERM holding {OBJECTS} environments (exit {code}; "
        f"{'by the shutdown timeout' if fallback else 'kopf stopped by itself'})"
    )
    # The contract: out within the pod's grace period, before the kubelet's SIGKILL. kopf
    # stops by itself in ~10 s here (the queued handler runs return at once); on a machine
    # loaded far past its cores (CI, load ~13 on 2) the event loop lagged 8 s behind the
    # signal, and the shutdown timeout (the chart's, 5 s short of the grace) ended the
    # process instead, as designed: a reconcile is level-triggered, so the next operator
    # redoes whatever was cut short (the kill drill shows a SIGKILL loses nothing).
    assert took < GRACE_SECONDS, f"took {took:.1f} s to stop\n{text[-3000:]}"
    assert code == (1 if fallback else 0), text[-3000:]
    assert "SIGTERM received: stopping" in text
    assert "OS signals are ignored" not in text

"""The stall issue 11 found, on the test-bed's node: a stage whose image is not on the node
(pull policy Never) sits in ErrImageNeverPull. The operator names it in the Built condition
and an event within seconds, and patching spec.sandbox.image fixes the running
environment: the stuck attempt is replaced by one with the new image, which runs, and the
environment is released."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkgym_testbed import images
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster
from tests.testbed.test_node import (
    RELEASE_TIMEOUT,
    node_ns,
    operator_env,
    spec_manifest,
    wait_phase,
)

pytestmark = [pytest.mark.testbed, pytest.mark.node]
__all__ = ["node_ns"]  # a fixture of test_node.py, used here too
MISSING_IMAGE = "localhost/cowork-gym/role-sandbox:not-built"


@pytest.fixture
def operator(testbed_env: Testbed, node_ns: str, tmp_path: Path) -> Iterator[Path]:
    env = os.environ | testbed_env.env() | operator_env(testbed_env)
    env["COWORKGYM_STAGE_START_GRACE_SECONDS"] = "60"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", node_ns]
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    yield log
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def built(cluster: Cluster, name: str) -> dict[str, Any]:
    status = cluster.env(name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == "Built"), {})


def test_err_image_never_pull_is_named_and_a_patched_image_fixes_the_stage(
    cluster: Cluster, operator: Path
) -> None:
    sandbox = {"image": MISSING_IMAGE, "nodeSelector": {"kubernetes.io/os": "linux"}}
    cluster.apply(spec_manifest("no-image", cluster.ns, sandbox=sandbox))
    cluster.job("no-image-builder-i0-a1")
    applied = time.monotonic()
    condition = cluster.wait(
        lambda: "ErrImageNeverPull" in built(cluster, "no-image").get("message", "")
        and built(cluster, "no-image"),
        timeout=30,
        message="ErrImageNeverPull in the Built condition",
    )
    named_after = time.monotonic() - applied
    assert condition["status"] == "Unknown" and MISSING_IMAGE in condition["message"]
    events = cluster.v1.list_namespaced_event(
        cluster.ns, field_selector="involvedObject.name=no-image"
    ).items
    warned = [e for e in events if e.reason == "StagePodNotStarting"]
    assert warned and warned[0].source.component == "cowork-gym-operator"

    patch = {"spec": {"sandbox": {"image": images.ROLE_IMAGE}}}
    cluster.tb.kubectl(
        "patch", "cwe", "no-image", "-n", cluster.ns, "--type=merge", "-p", json.dumps(patch)
    )
    second = cluster.job("no-image-builder-i0-a2")
    assert second.spec.template.spec.containers[0].image == images.ROLE_IMAGE
    phase = wait_phase(cluster, "no-image", ("Released", "Rejected", "Failed"), RELEASE_TIMEOUT)
    assert phase == "Released", cluster.env("no-image")["status"]["message"]
    assert "no-image-builder-i0-a1" not in cluster.jobs()
    print(f"ErrImageNeverPull named {named_after:.1f} s after the Job was created")
    assert named_after < 15

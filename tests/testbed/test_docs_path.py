"""docs/deploy.md, "Try it on the test-bed", followed as written: the shell blocks marked
`<!-- docs-path: try -->` and `<!-- docs-path: clean-up -->` are read out of the document and
run by bash from the repository folder, one command after the other, stopping at the first
that fails; the clean-up block starts from the exports the first one left, as in one shell.
The only thing the test adds is COWORKGYM_TESTBED_DIR (the session's test-bed, which the
documented `make testbed-up NODE=1` then reuses); every other test-bed variable is taken out
of the environment, so the block's own `eval "$(… env)"` has to provide it. (The blocks'
shape is checked without a test-bed in tests/unit/test_testbed_values.py.)
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from coworkgym.package.package import SOLVE_SH
from coworkgym.release import fetch_package
from coworkgym_testbed.testbed import Testbed
from tests.support.docs import ROOT, docs_block

NAMESPACE = "cowork-gym"  # what the docs install into and the examples name
ENVIRONMENT = "weather-report-two-turns"  # examples/specs/weather-report.yaml
TRY_TIMEOUT = 1500.0  # helm install and rollout, a whole environment on two CPUs, `check`


def shell_env(tb: Testbed) -> dict[str, str]:
    """This process's environment without the test-bed's variables, but with its run dir."""
    env = {k: v for k, v in os.environ.items() if k not in tb.env()}
    return env | {"COWORKGYM_TESTBED_DIR": str(tb.run_dir)}


def run_block(
    block: str, env: dict[str, str], timeout: float, shell_state: Path
) -> subprocess.CompletedProcess[str]:
    """Run `block` as the user's one shell would: it starts from the exports an earlier block
    left in `shell_state` (the `eval "$(… env)"` of the first), and leaves its own there."""
    script = "\n".join(
        [
            f"trap 'export -p > {shell_state}' EXIT",  # also when a command fails
            f"if [ -f {shell_state} ]; then source {shell_state}; fi",
            "set -euxo pipefail",  # -x: the log shows which documented command failed
            block,
            "",
        ]
    )
    return subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tail(cp: subprocess.CompletedProcess[str], chars: int = 6000) -> str:
    out, err = cp.stdout[-chars:], cp.stderr[-chars:]
    return f"exit {cp.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


@pytest.mark.testbed
@pytest.mark.node
def test_a_user_following_the_docs_gets_a_released_environment(
    testbed: Testbed, tmp_path: Path
) -> None:
    tb = testbed
    assert tb.node, "the session's test-bed has no node"
    if tb.kubectl("get", "namespace", NAMESPACE, check=False).returncode == 0:
        pytest.fail(
            f"namespace {NAMESPACE} already exists on the test-bed in {tb.run_dir} (left by an "
            f"earlier run, or someone is following the docs there): run the docs' clean-up "
            f"block first"
        )
    env = shell_env(tb)
    shell_state = tmp_path / "shell-exports.sh"
    started = time.monotonic()
    try:
        tried = run_block(docs_block("try"), env, TRY_TIMEOUT, shell_state)
        seconds = time.monotonic() - started
        assert tried.returncode == 0, tail(tried)
        got = tb.kubectl("get", "cwe", ENVIRONMENT, "-n", NAMESPACE, "-o", "json").stdout
        status = json.loads(got)["status"]
        assert status["phase"] == "Released", status
        # `cowork-gym check s3://…` ran on the downloaded package and passed.
        assert f"PASS {status['packageUri']}" in " ".join(tried.stdout.split()), tail(tried)
        # The release pod's upload kept the file modes (object metadata).
        package = fetch_package(status["packageUri"], tmp_path / "package", tb.s3_client())
        assert stat.S_IMODE((package / SOLVE_SH).stat().st_mode) == 0o755
        print(f"docs path: environment Released and checked {seconds:.0f}s after `up`")
    finally:
        cleaned = run_block(docs_block("clean-up"), env, 300, shell_state)
    assert cleaned.returncode == 0, tail(cleaned)
    assert tb.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0
    releases = tb.helm("list", "-A", "-o", "json").stdout
    assert NAMESPACE not in {r["namespace"] for r in json.loads(releases)}

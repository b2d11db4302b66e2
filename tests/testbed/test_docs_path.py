"""docs/deploy.md, "Try it on the test-bed", followed as written by a new user, from start to
uninstall: the shell blocks marked `<!-- docs-path: try -->` (an environment Released and
checked), `campaign` (the demo SynthesisCampaign, then the oracle+nop RolloutBatch over its
children), `train` (SmolLM2 uploaded, the gateway enabled, a two-round TrainingRun) and
`clean-up` (helm uninstall, the namespace deleted) are read out of the document and run by
bash from the repository folder, one command after the other, stopping at the first that
fails; each block starts from the exports the ones before it left, as in one shell.
The only thing the test adds is COWORKGYM_TESTBED_DIR (the session's test-bed, which the
documented `make testbed-up NODE=1` then reuses); every other test-bed variable is taken out
of the environment, so the block's own `eval "$(… env)"` has to provide it. (The blocks'
shape is checked without a test-bed in tests/unit/test_testbed_values.py.)

Slow: about half an hour on the node's two CPUs (an environment, four more from the
campaign, eight rollouts, two rounds of serving, rolling out and training SmolLM2); the
figures are printed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from coworkgym.package.package import SOLVE_SH
from coworkgym.release import fetch_package
from coworkgym_testbed.testbed import Testbed
from tests.support.docs import ROOT, docs_block

NAMESPACE = "cowork-gym"  # what the docs install into and the examples name
ENVIRONMENT = "weather-report-two-turns"  # examples/specs/weather-report.yaml
TRY_TIMEOUT = 1500.0  # helm install and rollout, a whole environment on two CPUs, `check`
CAMPAIGN_TIMEOUT = 3600.0 + 1800.0  # the block's own two waits
TRAIN_TIMEOUT = 3600.0 + 600.0  # the run's wait, the upload and the gateway's rollout
CAMPAIGN, BATCH, RUN = "demo", "demo-oracle-nop", "smollm2-rounds"  # the examples' names


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
@pytest.mark.slow
@pytest.mark.timeout(TRY_TIMEOUT + CAMPAIGN_TIMEOUT + TRAIN_TIMEOUT + 600)
def test_a_user_following_the_docs_runs_every_example_and_uninstalls_clean(
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
    took: dict[str, float] = {}

    def block(marker: str, timeout: float) -> subprocess.CompletedProcess[str]:
        began = time.monotonic()
        ran = run_block(docs_block(marker), env, timeout, shell_state)
        took[marker] = time.monotonic() - began
        assert ran.returncode == 0, f"the {marker} block: {tail(ran)}"
        return ran

    def why(status: dict[str, Any]) -> str:
        """The phase, message and the conditions that are not True: what a failure says."""
        off = [
            f"{c['type']}={c['status']} {c.get('reason')}: {c.get('message', '')[:300]}"
            for c in status.get("conditions") or []
            if c.get("status") != "True"
        ]
        return f"{status.get('phase')}: {status.get('message', '')[:600]} | {'; '.join(off)}"

    def get(resource: str, name: str) -> dict[str, Any]:
        found = tb.kubectl("get", resource, name, "-n", NAMESPACE, "-o", "json").stdout
        return dict(json.loads(found))

    try:
        tried = block("try", TRY_TIMEOUT)
        status = get("cwe", ENVIRONMENT)["status"]
        assert status["phase"] == "Released", status
        # `cowork-gym check s3://…` ran on the downloaded package and passed.
        assert f"PASS {status['packageUri']}" in " ".join(tried.stdout.split()), tail(tried)
        # The release pod's upload kept the file modes (object metadata).
        package = fetch_package(status["packageUri"], tmp_path / "package", tb.s3_client())
        assert stat.S_IMODE((package / SOLVE_SH).stat().st_mode) == 0o755

        block("campaign", CAMPAIGN_TIMEOUT)
        campaign = get("scamp", CAMPAIGN)["status"]
        assert campaign["phase"] == "Succeeded", why(campaign)
        children = json.loads(
            tb.kubectl(
                "get", "cwe", "-n", NAMESPACE, "-l", f"coworkgym.dev/campaign={CAMPAIGN}",
                "-o", "json",
            ).stdout
        )["items"]  # fmt: skip
        released = sorted(
            c["metadata"]["name"] for c in children if c["status"]["phase"] == "Released"
        )
        assert released and len(children) == campaign["counts"]["planned"], campaign
        batch = get("rb", BATCH)["status"]
        rates = {r["policy"]: r["passRate"] for r in batch["passRates"]}
        # every Released child replayed: its reference solution passes, doing nothing fails
        assert rates == {"oracle/oracle": 1.0, "nop/nop": 0.0}, batch
        assert batch["counts"]["total"] == 2 * len(released), batch

        block("train", TRAIN_TIMEOUT)
        run = get("tr", RUN)["status"]
        assert run["phase"] == "Succeeded", why(run)
        checkpoints = tb.s3_client().list_objects_v2(
            Bucket="cowork-gym", Prefix=f"runs/{RUN}/checkpoints/round-001/"
        )
        assert checkpoints.get("KeyCount", 0) > 0, f"no round-001 checkpoint under runs/{RUN}/"
    finally:
        cleaned = run_block(docs_block("clean-up"), env, 300, shell_state)
    assert cleaned.returncode == 0, tail(cleaned)
    # the uninstall ends clean: no namespace stuck Terminating, no release, no objects left
    assert tb.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0
    releases = tb.helm("list", "-A", "-o", "json").stdout
    assert NAMESPACE not in {r["namespace"] for r in json.loads(releases)}
    figures = ", ".join(f"{marker} {seconds:.0f} s" for marker, seconds in took.items())
    print(f"docs path: {figures}; {time.monotonic() - started:.0f} s from `up` to uninstalled")

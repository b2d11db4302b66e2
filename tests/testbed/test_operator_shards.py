"""Two label-sharded operators on one namespace (COWORKGYM_SHARD=a and =b, as the chart's
operator.shards runs them): each takes up only its shard's environments, its children and
their pods carry the shard, and an environment of a shard no operator serves is left
alone. Real processes (`python -m coworkgym_operator`), since a shard is read at start-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster, manifest

pytestmark = pytest.mark.testbed
SHARD = "coworkgym.dev/shard"
NOWHERE = {"nodeSelector": {"coworkgym.dev/kubelet": "nowhere"}}  # stage pods stay Pending
ENVIRONMENTS = {"alpha-1": "a", "alpha-2": "a", "beta-1": "b", "beta-2": "b", "gamma-1": "c"}


@pytest.fixture
def operators(cluster: Cluster, testbed_env: Testbed, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """An operator per shard a and b; their logs by shard."""
    logs, procs = {}, []
    for shard in ("a", "b"):
        env = os.environ | testbed_env.env() | {"COWORKGYM_METRICS_PORT": "0",
                                                "COWORKGYM_SHARD": shard}  # fmt: skip
        argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace",
                cluster.ns]  # fmt: skip
        logs[shard] = tmp_path / f"operator-{shard}.log"
        with logs[shard].open("wb") as out:
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT))
    try:
        yield logs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_each_sharded_operator_takes_up_only_its_shards_environments(
    cluster: Cluster, operators: dict[str, Path]
) -> None:
    for name, shard in ENVIRONMENTS.items():
        body = json.loads(manifest(name, sandbox=NOWHERE))
        body["metadata"]["labels"] = {SHARD: shard}
        cluster.custom.create_namespaced_custom_object(
            "coworkgym.dev", "v1alpha1", cluster.ns, "coworkenvironments", body
        )
    served = [n for n, s in ENVIRONMENTS.items() if s in ("a", "b")]
    cluster.wait(
        lambda: all(cluster.phase(n) == "Building" for n in served),
        timeout=180,
        message="the shards' environments Building",
    )
    time.sleep(3)  # what a wrong operator would do, it would have done by now
    assert cluster.phase("gamma-1") == "", "shard c has no operator"
    for name in served:
        job = cluster.job(f"{name}-builder-i0-a1")
        shard = ENVIRONMENTS[name]
        assert job.metadata.labels[SHARD] == shard
        assert job.spec.template.metadata.labels[SHARD] == shard
        claims = cluster.v1.list_namespaced_persistent_volume_claim(
            cluster.ns, label_selector=f"coworkgym.dev/environment={name}"
        ).items
        assert claims and all(c.metadata.labels[SHARD] == shard for c in claims)
    # a stage pod's end reaches its own shard's operator (the pod carries the shard)
    cluster.finish("beta-1-builder-i0-a1", {"stage": "builder", "ok": True})
    cluster.job("beta-1-verifier-i0-a1")
    for shard, log in operators.items():
        text = log.read_text()
        mine = [n for n, s in ENVIRONMENTS.items() if s == shard]
        others = [n for n in ENVIRONMENTS if n not in mine]
        for name in mine:
            assert f"created Job/{name}-builder-i0-a1" in text, text[-3000:]
        for name in others:
            assert f"Job/{name}-" not in text, f"operator {shard} touched {name}"

"""A SynthesisCampaign whose environments really run: on the test-bed's node, every stage of
every child runs in the role image and each package lands in the S3 server; the campaign
ends with its coverage in status.

The cheapest campaign that still covers the taxonomy: procedural roles (no model), one user
turn (the shortest tasks), the default revise budget, and four children in flight (the
node's two CPUs take four stage pods of 500m). The campaign is the issue's 30 (slow; it runs
in CI too, with its wall time printed); a smaller one ran the same checks and was dropped, as
the larger covers it and the node session is the suite's longest.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.kube import Cluster
from tests.testbed.test_node import node_ns, operator, operator_env  # noqa: F401 - fixtures

pytestmark = [pytest.mark.testbed, pytest.mark.node]
CONCURRENCY = 4


def run_campaign(
    cluster: Cluster, start: Callable[..., subprocess.Popen[bytes]], name: str, total: int
) -> tuple[dict[str, Any], float, list[str]]:
    start()
    body = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "SynthesisCampaign",
        "metadata": {"name": name},
        "spec": {
            "quotas": {"total": total},
            "maxTurns": 1,
            "seed": 1,
            "concurrency": CONCURRENCY,
            "release": {"uri": f"s3://cowork-gym/node/{cluster.ns}"},
        },
    }
    path = f"/tmp/scamp-node-{cluster.ns}.json"
    with open(path, "w") as out:
        json.dump(body, out)
    started = time.monotonic()
    cluster.tb.kubectl("apply", "-n", cluster.ns, "-f", path)
    watched: list[str] = []  # what `kubectl get scamp -w` would print, one line per change

    def complete() -> dict[str, Any] | None:
        found: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
            "coworkgym.dev", "v1alpha1", cluster.ns, "synthesiscampaigns", name
        )
        status = found.get("status") or {}
        line = (
            f"{status.get('phase')} {status.get('progress')} released "
            f"{(status.get('counts') or {}).get('released')} in flight "
            f"{(status.get('counts') or {}).get('inFlight')}"
        )
        if not watched or watched[-1] != line:
            watched.append(line)
            in_flight = (status.get("counts") or {}).get("inFlight", 0)
            assert in_flight <= CONCURRENCY, line
        done = any(
            c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", [])
        )
        return found if done else None

    found = cluster.wait(complete, timeout=60 * 60, message=f"campaign {name} Complete")
    return found, time.monotonic() - started, watched


def check(found: dict[str, Any], total: int, cluster: Cluster) -> None:
    status = found["status"]
    counts = status["counts"]
    assert status["phase"] == "Succeeded", status
    assert counts["created"] == total and counts["inFlight"] == 0
    assert counts["released"] + counts["rejected"] + counts["failed"] == total
    assert counts["released"] >= total - 1, counts  # a rejection is allowed, not the rule
    coverage = status["coverage"]
    assert sum(c["planned"] for c in coverage) == total
    assert sum(c["released"] for c in coverage) == counts["released"]
    # balanced: every served cell once before any twice
    assert max(c["planned"] for c in coverage) - min(c["planned"] for c in coverage) <= 1
    listing = cluster.tb.s3_client().list_objects_v2(
        Bucket="cowork-gym", Prefix=f"node/{cluster.ns}/manifests/"
    )
    assert len(listing.get("Contents", [])) == counts["released"]


def report(
    name: str, total: int, seconds: float, watched: list[str], found: dict[str, Any]
) -> None:
    status = found["status"]
    cells = len(status["coverage"])
    print(
        f"\ncampaign {name}: {total} environments over {cells} cells, concurrency "
        f"{CONCURRENCY}: {seconds:.0f} s wall ({seconds / total:.1f} s per environment); "
        f"{status['counts']}; failure ratio {status.get('failureRatio')}"
    )
    print("progress:", " | ".join(watched))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_campaign_of_30_finishes_on_the_node_with_its_coverage(
    cluster: Cluster,
    operator: Callable[..., subprocess.Popen[bytes]],  # noqa: F811
) -> None:
    found, seconds, watched = run_campaign(cluster, operator, "thirty", 30)
    report("thirty", 30, seconds, watched, found)
    check(found, 30, cluster)

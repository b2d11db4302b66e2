"""What the operator costs per kind on the test-bed's API server: for RolloutBatches,
SynthesisCampaigns and TrainingRuns (the sibling of operator_scale.py, which measures the
CoworkEnvironment), the API calls and CPU from create to idle (per phase change written),
then over an idle window the API calls per object and the CPU.

    python benchmarks/operator_kinds.py [--objects 50] [--idle 60]
    python benchmarks/operator_kinds.py --operator-path /tmp/old-tree/operator  # compare

Needs a running test-bed (`make testbed-up`; no node: no pod ever starts, so every object
comes to rest waiting, unfinished, which is what "idle" means here). For each kind in turn,
in its own namespace, with one operator replica holding only that namespace:

- RolloutBatch: a manifest batch (the oracle policy: no endpoint to probe) creates its
  volume, policies and fetch Job, then waits for the fetch pod;
- TrainingRun: a run on a RolloutBatch of that name that has not completed (one such batch
  each, created first: their own cost is in the RolloutBatch figures) waits for it;
- SynthesisCampaign: a campaign of two environments creates them; each environment creates
  its volumes, policies and builder Job, and waits for the builder pod. Its figures include
  those environments' (the children are the campaign's work).

API calls are the operator's own count (coworkgym_api_calls_total: the handlers' requests,
by verb and resource; kopf's watch streams, annotations and events are not in it);
transitions are coworkgym_transitions_total. The start grace is an hour, so no pod that
cannot start is ended meanwhile. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "testbed"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from operator_scale import cpu_seconds, free_port, rss_mib, scrape, settle  # noqa: E402

from coworkgym_testbed.testbed import Testbed  # noqa: E402

GROUP, VERSION = "coworkgym.dev", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PLAYED = {"nodeSelector": {"coworkgym.dev/kubelet": "none-here"}}  # never scheduled


def batch(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "RolloutBatch",
        "metadata": {"name": name},
        "spec": {
            "environments": {"manifestUri": "s3://cowork-gym/bench/manifest.jsonl"},
            "policies": [{"harness": "oracle", "model": "oracle"}],
            "output": {"uri": f"s3://cowork-gym/bench/{name}"},
            "sandbox": PLAYED,
        },
    }


def run(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingRun",
        "metadata": {"name": name},
        "spec": {
            "objective": "sft",
            "model": "s3://models/tiny",
            "data": {"rolloutBatch": {"name": f"{name}-data"}},
            "output": {"uri": f"s3://cowork-gym/bench/{name}"},
        },
    }


def campaign(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "SynthesisCampaign",
        "metadata": {"name": name},
        "spec": {
            "release": {"uri": "s3://cowork-gym/envs"},
            "sandbox": PLAYED,
            "quotas": {"total": 2},
            "concurrency": 2,
        },
    }


PLURALS = {
    "RolloutBatch": "rolloutbatches",
    "TrainingRun": "trainingruns",
    "SynthesisCampaign": "synthesiscampaigns",
}
# kind → the objects one of it needs, created in order (a run's batch first)
KINDS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "RolloutBatch": lambda n: [batch(n)],
    "TrainingRun": lambda n: [batch(f"{n}-data"), run(n)],
    "SynthesisCampaign": lambda n: [campaign(n)],
}


def by_resource(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """API calls made between two scrapes, by their labels (verb, resource)."""
    return {
        key.removeprefix("api_calls "): after[key] - before.get(key, 0.0)
        for key in after
        if key.startswith("api_calls {") and after[key] > before.get(key, 0.0)
    }


def measure(
    tb: Testbed, kind: str, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    from kubernetes import client

    custom = client.CustomObjectsApi(tb.kubernetes_client())
    ns = f"kinds-{kind.lower()}-{os.getpid()}"
    tb.kubectl("create", "namespace", ns)
    tb.kubectl("create", "serviceaccount", "cowork-gym-sandbox", "-n", ns)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix=f"operator-{kind.lower()}-")) / "operator.log"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", ns]
    with log.open("wb") as out:
        operator = subprocess.Popen(
            argv, env=env | {"COWORKGYM_METRICS_PORT": str(port)}, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    figures: dict[str, Any] = {"objects": args.objects, "operator_log": str(log)}
    try:
        time.sleep(6)  # kopf's start-up: watches and indices ready
        before, cpu0, t0 = scrape([port]), cpu_seconds(operator.pid), time.monotonic()
        for i in range(args.objects):
            for body in KINDS[kind](f"b{i:04d}"):
                plural = PLURALS[body["kind"]]
                custom.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body)
        # an operator that polls (timers) never falls quiet: then the limit ends the wait
        figures["settle_s"] = settle([port], quiet_s=args.quiet, limit_s=args.settle_limit)
        after, cpu1 = scrape([port]), cpu_seconds(operator.pid)
        transitions = after["transitions"] - before["transitions"]
        calls = after["api_calls"] - before["api_calls"]
        figures["to_idle"] = {
            "api_calls": calls,
            "transitions": transitions,
            "api_calls_per_transition": round(calls / transitions, 1) if transitions else None,
            "cpu_s": round(cpu1 - cpu0, 2),
            "cpu_s_per_transition": (
                round((cpu1 - cpu0) / transitions, 4) if transitions else None
            ),
            "by_resource": by_resource(before, after),
            "seconds": round(time.monotonic() - t0, 1),
        }
        listed: Any = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind])
        figures["phases"] = sorted(
            {(i.get("status") or {}).get("phase", "") for i in listed["items"]}
        )
        before, cpu0, t0 = scrape([port]), cpu_seconds(operator.pid), time.monotonic()
        time.sleep(args.idle)
        after, cpu1, t1 = scrape([port]), cpu_seconds(operator.pid), time.monotonic()
        calls = after["api_calls"] - before["api_calls"]
        figures["idle"] = {
            "window_s": round(t1 - t0, 1),
            "api_calls": calls,
            "api_calls_per_object_per_min": round(calls / args.objects / (t1 - t0) * 60, 2),
            "cpu_cores": round((cpu1 - cpu0) / (t1 - t0), 4),
            "by_resource": by_resource(before, after),
            "rss_mib": round(rss_mib(operator.pid), 1),
        }
    finally:
        for plural in (
            "trainingruns",
            "synthesiscampaigns",
            "rolloutbatches",
            "coworkenvironments",
        ):
            tb.kubectl("delete", plural, "--all", "-n", ns, "--wait=false", check=False)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            left = tb.kubectl(
                "get", "rolloutbatches,trainingruns,synthesiscampaigns,coworkenvironments",
                "-n", ns, "-o", "name", check=False,
            ).stdout.strip()  # fmt: skip
            if not left:
                break
            time.sleep(2)
        operator.terminate()
        try:
            operator.wait(40)
        except subprocess.TimeoutExpired:
            operator.kill()
        tb.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=50, help="objects of each kind")
    ap.add_argument("--idle", type=float, default=60.0, help="seconds of idle measurement")
    ap.add_argument("--quiet", type=float, default=8.0, help="no calls this long: settled")
    ap.add_argument(
        "--settle-limit", type=float, default=120.0, help="seconds at most to wait for quiet"
    )
    ap.add_argument("--kinds", default=",".join(KINDS), help="which, comma-separated")
    ap.add_argument("--operator-path", help="PYTHONPATH head for the operator (compare trees)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()

    tb = Testbed.load(ROOT / ".testbed")
    if tb is None or not tb.healthy():
        sys.exit("no healthy test-bed in .testbed: run `make testbed-up` first")
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        tb.kubectl("apply", "-f", str(crd))
    env = (
        dict(os.environ)
        | tb.env()
        | {"COWORKGYM_RECONCILE_INTERVAL": "3", "COWORKGYM_STAGE_START_GRACE_SECONDS": "3600"}
    )
    if args.operator_path:
        env["PYTHONPATH"] = args.operator_path + os.pathsep + env.get("PYTHONPATH", "")
    figures = {kind: measure(tb, kind, args, env) for kind in args.kinds.split(",")}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

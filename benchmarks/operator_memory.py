"""What a settled CoworkEnvironment costs an operator replica in memory, and where it goes.

    python benchmarks/operator_memory.py [--objects 3000] [--variant NAME=K=V,K=V ...]
    python benchmarks/operator_memory.py --objects 2000 --trace out/memory-trace.txt

Needs a running test-bed (`make testbed-up`; no node). Steps:

For each variant (the chart's default first, then allocator settings such as
``MALLOC_ARENA_MAX=2``), in namespaces of its own:

1. a replica on an empty namespace: the baseline RSS;
2. N environments created with a released status (one revision round: conditions, stage
   timings, the loop's record, as the operator's own pure reconcile builds it), then a
   replica started on them: it takes up each (a first start, or a fail-over to a new
   replica), then has nothing to do; its RSS once quiet ("taken_up");
3. a replica started again on the same, already taken-up environments (a rolling update);
   its RSS once quiet ("restarted").

Memory per environment = (RSS - baseline) / N. The no-op kopf operator
(``noop_operator.py``: a handler that returns) runs the same three steps: kopf's own share.

``--trace FILE`` also runs the last variant under tracemalloc and writes the largest
allocation sites by file and line once it is quiet (Python objects only: what the
allocator keeps beyond them is RSS minus the traced total).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "testbed"))
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from rich.progress import track  # noqa: E402

from coworkgym_testbed.testbed import Testbed  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from operator_scale import env_spec  # noqa: E402 - the same environment as the scale run

GROUP, VERSION, PLURAL = "coworkgym.dev", "v1alpha1", "coworkenvironments"
TRACER = Path(os.environ.get("MEMORY_TRACER", Path(__file__).with_name("traced_operator.py")))


def released_status(spec: dict[str, Any]) -> dict[str, Any]:
    """The status the operator's reconcile leaves on a release after one revision round."""
    from coworkgym_operator.core.observe import JobObservation
    from coworkgym_operator.core.settings import OperatorSettings
    from coworkgym_operator.environment.reconcile.loop import (
        Observed,
        pending_job_name,
        reconcile,
    )

    env: dict[str, Any] = {
        "metadata": {"name": "x", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": spec,
        "status": {},
    }
    loose = {
        "code": "VERIFIER_PERMISSIVE_CHECK",
        "owner": "verifier",
        "severity": "error",
        "message": "the check of the component total accepts a 90% tolerance",
    }
    results = [
        {"ok": True},  # builder
        {"ok": True},  # verifier
        {"ok": True, "defects": [loose]},  # detector: revise the verifier
        {"ok": True},  # verifier again
        {"ok": True, "defects": []},  # detector
        {"ok": True, "uri": "s3://cowork-gym/envs/x", "digest": "sha256:" + "a" * 64},
    ]
    settings = OperatorSettings()
    env["status"] = reconcile(env, Observed(), settings).status
    for result in results:
        name = pending_job_name(env)
        assert name is not None, f"no stage pending in {env['status'].get('phase')}"
        job = JobObservation(name, "succeeded", result, seconds=41.5)
        env["status"] = reconcile(env, Observed(job), settings).status
    assert env["status"]["phase"] == "Released", env["status"]["phase"]
    return dict(env["status"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_calls(port: int) -> float:
    """The operator's API calls so far (-1 while its metrics server is not up yet)."""
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError:
        return -1.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("coworkgym_api_calls_total{")
    )


def quiet(pid: int, port: int | None, quiet_s: float = 8.0, limit_s: float = 900.0) -> float:
    """Wait until the process has spent under 2 % of a core for ``quiet_s`` (and, for ours,
    made no API call): it has taken up every object. How long that took."""
    started = time.monotonic()
    last_cpu, last_calls, since = cpu_seconds(pid), -1.0, time.monotonic()
    while time.monotonic() - started < limit_s:
        time.sleep(2.0)
        cpu = cpu_seconds(pid)
        calls = api_calls(port) if port else 0.0
        busy = cpu - last_cpu > 0.04 or calls != last_calls or calls < 0
        last_cpu, last_calls = cpu, calls
        if busy:
            since = time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return round(time.monotonic() - started, 1)


class Replica:
    """One operator process (ours or the no-op) on one namespace, with its own log."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        port: int | None,
        trace: Path | None = None,
    ) -> None:
        self.port, self.trace = port, trace
        with log.open("wb") as out:
            self.process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def settle(self, quiet_s: float) -> dict[str, float]:
        took = quiet(self.process.pid, self.port, quiet_s)
        if self.trace is not None:  # traced_operator.py writes its report on SIGUSR2
            self.trace.unlink(missing_ok=True)
            self.process.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 300
            while not self.trace.exists() and time.monotonic() < deadline:
                time.sleep(1)
        return {"rss_mib": round(rss_mib(self.process.pid), 1), "settle_s": took}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(40)
        except subprocess.TimeoutExpired:
            self.process.kill()


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """NAME=K=V,K=V → (NAME, {K: V}); "default" alone has no settings."""
    name, _, rest = text.partition("=")
    settings = dict(pair.split("=", 1) for pair in rest.split(",") if pair)
    return name, settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=3000)
    ap.add_argument(
        "--variant", action="append", default=[],
        help="NAME=K=V,K=V: environment variables for the operator's process (repeatable; "
        "'default' runs first in any case)",
    )  # fmt: skip
    ap.add_argument(
        "--quiet", type=float, default=40.0,
        help="seconds without work before RSS is read (more than the operator's trim interval, "
        "30 s by default, so that a trim has run)",
    )  # fmt: skip
    ap.add_argument("--trace", type=Path, help="the last variant under tracemalloc: top sites")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    variants = [("default", {})] + [parse_variant(v) for v in args.variant]

    tb = Testbed.load(ROOT / ".testbed")
    if tb is None or not tb.healthy():
        sys.exit("no healthy test-bed in .testbed: run `make testbed-up` first")
    from kubernetes import client

    custom = client.CustomObjectsApi(tb.kubernetes_client())
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        tb.kubectl("apply", "-f", str(crd))
    spec = env_spec()
    status = released_status(spec)
    figures: dict[str, Any] = {"objects": args.objects, "status_bytes": len(json.dumps(status))}
    logs = Path(tempfile.mkdtemp(prefix="operator-memory-"))
    base_env = os.environ | tb.env()
    ours = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace"]
    noop = [sys.executable, "-m", "kopf", "run", "--standalone",
            str(ROOT / "benchmarks" / "noop_operator.py"), "--namespace"]  # fmt: skip
    runs: list[tuple[str, list[str], dict[str, str], bool]] = [
        (name, ours, settings, True) for name, settings in variants
    ]
    runs.append(("no-op kopf", noop, {}, False))
    if args.trace:
        traced = [sys.executable, str(TRACER), str(args.trace), "--standalone", "--namespace"]
        runs.append(("traced", traced, variants[-1][1], True))
    namespaces: list[str] = []

    def fill(ns: str) -> None:
        """N released environments in a new namespace, none taken up by an operator yet."""
        tb.kubectl("create", "namespace", ns)
        tb.kubectl("create", "serviceaccount", "cowork-gym-sandbox", "-n", ns)
        namespaces.append(ns)

        def create(i: int) -> None:
            name = f"settled-{i:05d}"
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "CoworkEnvironment",
                "metadata": {"name": name},
                "spec": spec,
            }
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
            custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, ns, PLURAL, name, {"status": status}
            )

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(track(pool.map(create, range(args.objects)), total=args.objects,
                       description=f"{ns}: creating released environments"))  # fmt: skip

    figures["runs"] = {}
    try:
        for index, (name, argv, settings, counted) in enumerate(runs):
            empty, full = f"mem-{os.getpid()}-{index}-empty", f"mem-{os.getpid()}-{index}"
            tb.kubectl("create", "namespace", empty)
            namespaces.append(empty)
            fill(full)
            measured: dict[str, Any] = {"settings": settings}
            # empty: the baseline; taken up: every environment new to it (a first start, or
            # a fail-over); restarted: the same, all taken up already (a rolling update)
            for which, ns in (("empty", empty), ("taken_up", full), ("restarted", full)):
                port = free_port()
                env = base_env | settings | {"COWORKGYM_METRICS_PORT": str(port)}
                tag = f"{index}-{which}"
                trace = args.trace if name == "traced" and which == "taken_up" else None
                replica = Replica(
                    [*argv, ns], env, logs / f"{tag}.log", port if counted else None, trace
                )
                try:
                    time.sleep(3)
                    measured[which] = replica.settle(args.quiet)
                finally:
                    replica.stop()
            baseline = measured["empty"]["rss_mib"]
            for which in ("taken_up", "restarted"):
                grew = measured[which]["rss_mib"] - baseline
                per = grew * 1024 / args.objects
                measured[which]["kib_per_environment"] = round(per, 1)
                measured[which]["environments_per_gib"] = (
                    int((1024 - baseline) * 1024 / per) if per > 0 else None
                )
            figures["runs"][name] = measured
            print(name, json.dumps(measured))
    finally:
        print(json.dumps(figures, indent=2))
        print(f"logs: {logs}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        clean_up(tb, custom, namespaces, args.objects)


def clean_up(tb: Testbed, custom: Any, namespaces: list[str], objects: int) -> None:
    """No operator runs now: the environments' finalizers would hold the namespaces' deletes,
    so drop them first."""

    def release(where: tuple[str, str]) -> None:
        with contextlib.suppress(Exception):  # never created, or gone
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, where[0], PLURAL, where[1], {"metadata": {"finalizers": None}}
            )

    wheres = [(ns, f"settled-{i:05d}") for ns in namespaces for i in range(objects)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(release, wheres))
    for ns in namespaces:
        tb.kubectl("delete", "namespace", ns, "--wait=false", check=False)


if __name__ == "__main__":
    main()

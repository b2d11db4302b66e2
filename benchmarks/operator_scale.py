"""One operator replica (or ``--shards`` label-sharded ones) holding N CoworkEnvironments
on the test-bed's API server: memory, idle CPU and API calls, API calls per state
transition, create → Building latency at a create rate, and how soon a finished stage Job
is noticed.

    python benchmarks/operator_scale.py [--objects 500] [--rate 20] [--idle 30] [--finish 50]
    python benchmarks/operator_scale.py --shards 2 ...  # replicas s0, s1; RSS per replica
    python benchmarks/operator_scale.py --operator-path /tmp/old-tree/operator ...  # compare

Needs a running test-bed (`make testbed-up`; no node: the stage pods select a node that does
not exist, and this script plays their kubelet). Steps:

1. create N environments at ``--rate`` per second; time each from its create to its
   status.phase Building (the operator has made its volumes, policies and builder Job);
2. mark every builder pod Running (started: nothing waits for the clock), let it settle,
   then measure over ``--idle`` seconds: the operator's CPU, RSS and API calls;
3. finish ``--finish`` builder pods (a result in the termination message, as a stage writes
   it) and time each until the environment's Built condition is True; count the API calls
   and transitions meanwhile.

Beside ours runs ``noop_operator.py`` (kopf with a handler that returns) on the same
objects: its CPU in the same windows and its RSS are the baseline for "CPU per transition"
and memory per object.

API calls are the operator's own count (coworkgym_api_calls_total: the handlers' requests;
kopf's watch streams, annotation patches and events are not in it). Prints figures;
asserts nothing. The operator runs with the chart's defaults (events, wake-ups for work in
flight every 3 s, a 300 s resync sweep; kopf's pool).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "testbed"))
sys.path.insert(0, str(ROOT))

from rich.progress import track  # noqa: E402

from coworkgym_testbed.testbed import Testbed  # noqa: E402

GROUP, VERSION, PLURAL = "coworkgym.dev", "v1alpha1", "coworkenvironments"
TICK = os.sysconf("SC_CLK_TCK")


def env_spec() -> dict[str, Any]:
    """The environment the operator benchmarks create (operator_memory.py too)."""
    return {
        "task": {
            "labels": {
                "capabilities": ["data_analysis"],
                "scenario": "data_analysis/reporting/periodic_report",
            },
            "turns": 2,
            "seed": 3,
        },
        "release": {"uri": "s3://cowork-gym/envs"},
    }


def env_body(name: str, shard: str | None = None) -> dict[str, Any]:
    labels = {"coworkgym.dev/shard": shard} if shard else {}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CoworkEnvironment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            **env_spec(),
            "sandbox": {"nodeSelector": {"coworkgym.dev/kubelet": "played-by-benchmark"}},
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(ports: list[int]) -> dict[str, float]:
    """coworkgym_api_calls_total summed over the replicas (and by its labels, "api_calls
    <labels>"), and coworkgym_transitions_total summed."""
    out = {"api_calls": 0.0, "transitions": 0.0}
    lines = []
    for port in ports:
        url = f"http://127.0.0.1:{port}/metrics"
        lines += urllib.request.urlopen(url, timeout=10).read().decode().splitlines()
    for line in lines:
        if line.startswith("coworkgym_api_calls_total{"):
            labels, value = line.removeprefix("coworkgym_api_calls_total").rsplit(" ", 1)
            out["api_calls"] += float(value)
            out[f"api_calls {labels}"] = out.get(f"api_calls {labels}", 0.0) + float(value)
        elif line.startswith("coworkgym_transitions_total{"):
            out["transitions"] += float(line.rsplit(" ", 1)[1])
    return out


def settle(ports: list[int], quiet_s: float = 6.0, limit_s: float = 600.0) -> float:
    """Wait until the operator's API calls stop (none for ``quiet_s``): every environment
    has folded in its started pod. How long that took."""
    started = time.monotonic()
    last, quiet_since = scrape(ports)["api_calls"], time.monotonic()
    while time.monotonic() - started < limit_s:
        time.sleep(1.0)
        now = scrape(ports)["api_calls"]
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            break
    return round(time.monotonic() - started, 1)


def cpu_seconds(*pids: int) -> float:
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    return total


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Moments:
    """When each environment was first seen Building, and with Built True: a watch of its
    own (a listing per check costs O(N) each time, O(N²) over a run at 10,000 objects)."""

    def __init__(self, tb: Testbed, ns: str) -> None:
        from kubernetes import client, watch

        self.custom = client.CustomObjectsApi(tb.kubernetes_client())
        self.ns, self.watch = ns, watch.Watch()  # type: ignore[no-untyped-call]
        self.building: dict[str, float] = {}
        self.built: dict[str, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        version = None
        while True:
            try:
                stream = self.watch.stream(  # type: ignore[no-untyped-call]
                    self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL,
                    resource_version=version, timeout_seconds=300,
                )  # fmt: skip
                for event in stream:
                    obj = event["object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    self._fold(obj["metadata"]["name"], obj.get("status") or {})
            except Exception:  # a dropped or expired watch: list afresh
                version = None
                time.sleep(0.5)

    def _fold(self, name: str, status: dict[str, Any]) -> None:
        now = time.monotonic()
        built = any(
            c.get("type") == "Built" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        with self._lock:
            if status.get("phase") == "Building":
                self.building.setdefault(name, now)
            if built:
                self.built.setdefault(name, now)

    def count(self, which: str) -> int:
        with self._lock:
            return len(getattr(self, which))


class Bench:
    def __init__(self, tb: Testbed, ns: str) -> None:
        from kubernetes import client

        api = tb.kubernetes_client()
        self.ns = ns
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def phases(self) -> dict[str, dict[str, Any]]:
        listed: Any = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)
        return {e["metadata"]["name"]: e.get("status") or {} for e in listed["items"]}

    def builder_pods(self) -> list[Any]:
        selector = "coworkgym.dev/stage=builder"
        return list(self.core.list_namespaced_pod(self.ns, label_selector=selector).items)

    def set_pod(self, name: str, phase: str, state: dict[str, Any]) -> None:
        status = {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "role",
                        "ready": phase == "Running",
                        "restartCount": 0,
                        "image": "role",
                        "imageID": "",
                        "state": state,
                    }
                ],
            }
        }
        self.core.patch_namespaced_pod_status(name, self.ns, status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=500)
    ap.add_argument("--rate", type=float, default=20.0, help="creates per second")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of idle measurement")
    ap.add_argument("--finish", type=int, default=50, help="builder pods to finish")
    ap.add_argument(
        "--shards", type=int, default=1,
        help="operator replicas, each watching its shard (COWORKGYM_SHARD=s<i>); the "
        "environments are labelled round-robin",
    )  # fmt: skip
    ap.add_argument("--operator-path", help="PYTHONPATH head for the operator (compare trees)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument(
        "--profile",
        type=Path,
        help="profile the operator with py-spy (on PATH): a flame graph (.svg) or folded stacks",
    )
    ap.add_argument(
        "--operator-env", action="append", default=[], metavar="KEY=VALUE",
        help="an environment variable for the operator's process (repeatable)",
    )  # fmt: skip
    args = ap.parse_args()

    tb = Testbed.load(ROOT / ".testbed")
    if tb is None or not tb.healthy():
        sys.exit("no healthy test-bed in .testbed: run `make testbed-up` first")
    ns = f"scale-{os.getpid()}"
    for crd in sorted((ROOT / "crds").glob("*.yaml")):  # every kind the operator watches
        tb.kubectl("apply", "-f", str(crd))
    tb.kubectl("create", "namespace", ns)
    tb.kubectl("create", "serviceaccount", "cowork-gym-sandbox", "-n", ns)
    bench = Bench(tb, ns)
    ports = [free_port() for _ in range(args.shards)]
    shards = [f"s{i}" for i in range(args.shards)] if args.shards > 1 else [None]
    env = (
        os.environ
        | tb.env()
        | {
            "COWORKGYM_RECONCILE_INTERVAL": "3",
            # the benchmark starts the stage pods only once every environment is Building,
            # which at thousands of objects takes longer than the start grace (120 s): the
            # attempts would end and be retried, a churn no kubelet would cause
            "COWORKGYM_STAGE_START_GRACE_SECONDS": "3600",
        }
    )
    for setting in args.operator_env:  # e.g. MALLOC_ARENA_MAX=2
        key, _, value = setting.partition("=")
        env[key] = value
    if args.operator_path:
        env["PYTHONPATH"] = args.operator_path + os.pathsep + env.get("PYTHONPATH", "")
    log = Path(tempfile.mkdtemp(prefix="operator-scale-")) / "operator.log"
    argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "--namespace", ns]
    spy = shutil.which("py-spy") if args.profile else None
    if args.profile and spy is None:
        raise SystemExit("--profile needs py-spy on PATH (pip install py-spy)")
    replicas = []
    for i, (shard, port) in enumerate(zip(shards, ports, strict=True)):
        own = (
            env
            | {"COWORKGYM_METRICS_PORT": str(port)}
            | ({"COWORKGYM_SHARD": shard} if shard else {})
        )
        with log.with_name(f"operator-{i}.log").open("wb") as out:
            replicas.append(subprocess.Popen(argv, env=own, stdout=out, stderr=subprocess.STDOUT))
    operator = replicas[0]  # the one profiled
    pids = [r.pid for r in replicas]
    profiler = None
    if spy:  # attached from outside and nonblocking: the operator's own CPU figures hold
        profiler = subprocess.Popen(
            [spy, "record", "--nonblocking", "--pid", str(operator.pid), "-o", str(args.profile)]
            + ([] if args.profile.suffix == ".svg" else ["--format", "raw"]),  # raw: folded stacks
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    # kopf alone, on the same objects: a handler per event that returns (noop_operator.py)
    noop_argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", ns]
    with (log.parent / "noop.log").open("wb") as out:
        noop = subprocess.Popen(
            [*noop_argv, str(ROOT / "benchmarks" / "noop_operator.py")],
            env=env | {"COWORKGYM_METRICS_PORT": str(free_port())},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    figures: dict[str, Any] = {
        "objects": args.objects,
        "create_rate": args.rate,
        "replicas": args.shards,
    }
    try:
        time.sleep(5)  # kopf's start-up: watches and indices ready
        moments = Moments(tb, ns)
        # 1. creates at a rate (two client threads, so the API's latency does not cap the
        # rate), and the time to Building
        created: dict[str, float] = {}
        start = time.monotonic()

        def create(i: int) -> None:
            due = start + i / args.rate
            while time.monotonic() < due:
                time.sleep(min(0.05, due - time.monotonic()))
            name = f"scale-{i:05d}"
            body = env_body(name, shards[i % len(shards)])
            bench.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
            created[name] = time.monotonic()

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(
                track(
                    pool.map(create, range(args.objects)),
                    total=args.objects,
                    description=f"creating at {args.rate:g}/s",
                )
            )
        figures["create_rate_reached"] = round(args.objects / (time.monotonic() - start), 1)
        deadline = time.monotonic() + max(600, args.objects / 10)
        while moments.count("building") < args.objects and time.monotonic() < deadline:
            time.sleep(0.5)
        building = dict(moments.building)
        waits = [building[n] - created[n] for n in building if n in created]
        figures["create_to_building_s"] = {
            "p50": round(pct(waits, 0.5), 2),
            "p99": round(pct(waits, 0.99), 2),
            "reached": len(building),
            "resolution_s": "a watch of the environments",
        }
        figures["rss_mib_after_creates"] = [round(rss_mib(pid), 1) for pid in pids]
        # 2. every builder pod started; settle; idle figures
        for pod in bench.builder_pods():
            bench.set_pod(pod.metadata.name, "Running", {"running": {"startedAt": now_iso()}})
        figures["settle_s"] = settle(ports)
        before, cpu0, t0 = scrape(ports), cpu_seconds(*pids), time.monotonic()
        noop0 = cpu_seconds(noop.pid)
        time.sleep(args.idle)
        after, cpu1, t1 = scrape(ports), cpu_seconds(*pids), time.monotonic()
        figures["idle"] = {
            "cpu_cores": round((cpu1 - cpu0) / (t1 - t0), 3),
            "api_calls_per_s": round((after["api_calls"] - before["api_calls"]) / (t1 - t0), 1),
            "api_calls_by_kind": {
                key.removeprefix("api_calls "): after[key] - before.get(key, 0.0)
                for key in after
                if key.startswith("api_calls {") and after[key] > before.get(key, 0.0)
            },
            "rss_mib": [round(rss_mib(pid), 1) for pid in pids],
            "noop_kopf_cpu_cores": round((cpu_seconds(noop.pid) - noop0) / (t1 - t0), 3),
            "noop_kopf_rss_mib": round(rss_mib(noop.pid), 1),
        }
        # 3. finish some builder pods: how soon noticed, API calls per transition
        pods = sorted(bench.builder_pods(), key=lambda p: p.metadata.name)[: args.finish]
        before, cpu0, noop0 = scrape(ports), cpu_seconds(*pids), cpu_seconds(noop.pid)
        finished: dict[str, float] = {}
        for pod in pods:
            env_name = pod.metadata.labels["coworkgym.dev/environment"]
            result = json.dumps({"stage": "builder", "ok": True})
            terminated = {
                "exitCode": 0,
                "reason": "Completed",
                "message": result,
                "startedAt": now_iso(),
                "finishedAt": now_iso(),
            }
            bench.set_pod(pod.metadata.name, "Succeeded", {"terminated": terminated})
            finished[env_name] = time.monotonic()
        deadline = time.monotonic() + 300
        while (
            sum(1 for n in finished if n in moments.built) < len(finished)
            and time.monotonic() < deadline
        ):
            time.sleep(0.25)
        time.sleep(10)  # the follow-up reconciles (a verifier Job each) settle
        after, cpu1, noop1 = scrape(ports), cpu_seconds(*pids), cpu_seconds(noop.pid)
        noticed = {n: t for n, t in dict(moments.built).items() if n in finished}
        delays = [noticed[n] - finished[n] for n in noticed]
        transitions = after["transitions"] - before["transitions"]
        calls = after["api_calls"] - before["api_calls"]
        figures["finished_job"] = {
            "noticed_p50_s": round(pct(delays, 0.5), 2),
            "noticed_p99_s": round(pct(delays, 0.99), 2),
            "noticed": len(noticed),
            "finished": len(finished),
            "api_calls": calls,
            "transitions": transitions,
            "api_calls_per_transition": round(calls / transitions, 1) if transitions else None,
            "cpu_s_per_transition": round((cpu1 - cpu0) / transitions, 4) if transitions else None,
            # the no-op kopf operator saw the same objects change in the same window
            "noop_kopf_cpu_s_per_transition": (
                round((noop1 - noop0) / transitions, 4) if transitions else None
            ),
            "cpu_ratio_to_noop": (
                round((cpu1 - cpu0) / (noop1 - noop0), 2) if noop1 > noop0 else None
            ),
            "note": "the window includes any resync sweep that fell in it",
        }
        figures["rss_mib_end"] = [round(rss_mib(pid), 1) for pid in pids]
    finally:
        # the figures first: a clean-up that fails (an API server busy with thousands of
        # deletes) must not lose them
        print(json.dumps(figures, indent=2))
        print(f"operator logs: {log.parent}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        if profiler is not None:  # py-spy writes the flame graph on SIGINT
            profiler.send_signal(signal.SIGINT)
            profiler.wait(60)
            print(f"profile: {args.profile}")
        clean_up(tb, bench, ns, [noop, *replicas])


def clean_up(tb: Testbed, bench: Bench, ns: str, processes: list[subprocess.Popen[bytes]]) -> None:
    """Delete the environments while the operator still runs (their finalizers go with it),
    then stop the operators and drop the namespace."""
    try:
        tb.kubectl("delete", "cwe", "--all", "-n", ns, "--wait=false", check=False, timeout=600)
        deadline = time.monotonic() + 300
        while bench.phases() and time.monotonic() < deadline:
            time.sleep(2)
    except subprocess.TimeoutExpired:
        print("clean-up: the environments' delete timed out; the namespace goes anyway")
    except Exception as exc:  # the API server gone (a test-bed stopped): the processes still go
        print(f"clean-up: could not delete the environments ({type(exc).__name__})")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(40)
            except subprocess.TimeoutExpired:
                process.kill()
    tb.kubectl("delete", "namespace", ns, "--wait=false", check=False)


if __name__ == "__main__":
    main()

"""Drill 2 (issue 17): the control plane and the object store fail under a working operator.
On a test-bed of its own (restarting its API server would disturb every other test
session), the operator runs as its own process while CoworkEnvironments walk the loop (the
test plays the kubelet: tests/drills/loop.py), and, each while environments are in flight:

1. the kube-apiserver is SIGKILLed mid-loop and started again after COWORKGYM_DRILL_DOWN_S
   (3) seconds;
2. etcd likewise;
3. the S3 server (SeaweedFS) likewise, while release stages publish: the test plays those
   stages with the release stage's own publisher (``S3Publisher``, its client's retries
   and backoff, ``S3_RETRIES``), several at once; one whose retries run out fails as a
   retryable stage, and the loop makes its next attempt.

Throughout, kopf's liveness endpoint is probed every second, as the chart's livenessProbe
does (every 15 s, restart after 4 failures): the operator must never exit nor fail the probe
60 s on end (a crash loop). Throughout, a watcher reads the store: no package may be listed
as released (its manifest record visible) before every one of its objects is. At the end
every environment is Released once, with one Job per stage and attempt, no Job made twice,
every attempt past the first one a stage the outage failed, and one manifest record per
environment in S3, pointing at a complete package. COWORKGYM_DRILL_RESTART_ENVIRONMENTS
(10) environments.

Not covered here: the LLM endpoint failing mid-stage and mid-rollout (item 2's last part),
and the operator's pod on the node (it runs beside the test-bed, as its own process)."""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from coworkgym.release import S3_RETRIES, S3Publisher
from coworkgym_operator.environment.builders import LABEL_STAGE
from coworkgym_testbed.s3 import client as s3_client
from coworkgym_testbed.testbed import Testbed, restart, up
from tests.drills.loop import (
    STAGES,
    Kubelet,
    Ledger,
    OperatorProcess,
    Result,
    announced,
    left_behind,
    phases,
    pod_input,
    result_for,
)
from tests.drills.record import DrillResult, Row, record
from tests.support.builders import good_package
from tests.support.kube import Cluster, manifest

pytestmark = [pytest.mark.testbed, pytest.mark.slow, pytest.mark.timeout(900)]
ENVIRONMENTS = int(os.environ.get("COWORKGYM_DRILL_RESTART_ENVIRONMENTS", "10"))
DOWN_S = float(os.environ.get("COWORKGYM_DRILL_DOWN_S", "3"))
FAULTS = ("kube-apiserver", "etcd", "s3")  # in the order they strike
CRDS = Path(__file__).resolve().parents[2] / "crds"
NS = "drill-restarts"
RELEASE_TARGET = "s3://cowork-gym/envs"  # tests.support.kube.manifest's spec.release.uri
# the chart's livenessProbe: every 15 s, the pod restarted after 4 failures in a row
CRASH_LOOP_S = 15 * 4
DEADLINE_S = 600.0
TERMINAL = ("Released", "Rejected", "Failed")
API_DOWN = (ApiException, urllib3.exceptions.HTTPError, OSError)


@pytest.fixture(scope="module")
def own_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    tb, _ = up(tmp_path_factory.mktemp("restart-testbed"), timeout=300)
    try:
        tb.kubectl("apply", *(f"--filename={p}" for p in sorted(CRDS.glob("*.yaml"))))
        tb.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        tb.kubectl("create", "namespace", NS)
        tb.kubectl("create", "serviceaccount", "cowork-gym-sandbox", "-n", NS)
        yield tb
    finally:
        tb.stop()


class LivenessWatch(threading.Thread):
    """Probes the operator's liveness endpoint every second, once it first answered (before
    that the chart's startupProbe stands in); the longest failing stretch."""

    def __init__(self, operator: OperatorProcess) -> None:
        super().__init__(daemon=True)
        self.operator = operator
        self.halt = threading.Event()
        self.failures = 0
        self.exited = False
        self.longest_down_s = 0.0
        self.answered = False

    def run(self) -> None:
        down_since: float | None = None
        while not self.halt.wait(1.0):
            if not self.operator.alive():
                self.exited = True
            if self.operator.live():
                self.answered, down_since = True, None
                continue
            if not self.answered:
                continue
            self.failures += 1
            down_since = down_since or time.monotonic()
            self.longest_down_s = max(self.longest_down_s, time.monotonic() - down_since)


class StoreWatch(threading.Thread):
    """Reads the store while packages are published: a manifest record listed before all
    of its package's objects are is a package visible as released too early."""

    def __init__(self, tb: Testbed, expected_keys: set[str]) -> None:
        super().__init__(daemon=True)
        self.s3 = tb.s3_client()
        self.bucket = tb.s3_bucket
        self.expected = expected_keys  # a package's keys, relative to its folder
        self.halt = threading.Event()
        self.seen: set[str] = set()
        self.early: list[str] = []
        self.failed_reads = 0

    def keys(self, prefix: str) -> set[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", [])}

    def run(self) -> None:
        while not self.halt.wait(0.2):
            try:
                for record in sorted(self.keys("envs/manifests/") - self.seen):
                    name = record.removesuffix(".json")
                    if not self.expected <= self.keys(f"envs/{name}/"):
                        self.early.append(name)
                    self.seen.add(record)
            except Exception:  # the store is down: that is the drill
                self.failed_reads += 1


@dataclass
class Releases:
    """The release stages, played with the release stage's own publisher, several at once;
    held until ``open`` (so that the S3 outage finds publishes in flight)."""

    s3: Any  # one client for every thread (making clients is not thread-safe)
    package: Any
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(4))
    open: bool = False
    running: dict[str, Future[Result]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # Job names whose publish gave up

    def publish(self, job: Any) -> Result:
        name = pod_input(job)["name"]
        begun = time.monotonic()
        try:
            uri = S3Publisher(RELEASE_TARGET, self.s3).publish(
                name, self.package, {"name": name, "digest": self.package.digest()}
            )
        except Exception as exc:  # as coworkgym.roles.job does: retryable
            self.failed.append(str(job.metadata.name))
            return {"stage": "release", "ok": False, "retryable": True, "error": repr(exc)[:500]}
        finally:
            self.seconds.append(time.monotonic() - begun)
        return {"stage": "release", "ok": True, "uri": uri, "digest": self.package.digest()}

    def result(self, job: Any) -> Result | None:
        if job.metadata.labels.get(LABEL_STAGE) != "release":
            return result_for(job)
        if not self.open:
            return None
        uid = str(job.metadata.uid)
        if uid not in self.running:
            self.running[uid] = self.pool.submit(self.publish, job)
        future = self.running[uid]
        return future.result() if future.done() else None


@dataclass
class Fault:
    component: str
    outage_s: float = 0.0  # stop → ready again
    recovery_s: float | None = None  # ready → the operator's next Job or status write
    in_flight: int = 0  # environments not yet Released when it struck
    struck: bool = False


def test_the_operator_rides_out_api_server_etcd_and_s3_restarts(
    own_testbed: Testbed, tmp_path: Path
) -> None:
    tb = own_testbed
    cluster = Cluster(tb, NS)
    names = [f"restart-{i:02d}" for i in range(ENVIRONMENTS)]
    package = good_package()
    store = StoreWatch(tb, set(package.files) | set(package.symlinks))
    # the release stage's own retry policy (coworkgym.release.make_s3_client)
    releases = Releases(s3_client(tb.s3_endpoint, tb.s3_credentials, retries=S3_RETRIES), package)
    operator = OperatorProcess(tb, NS, tmp_path / "operator.log")
    ledger = Ledger(cluster.custom, NS)
    kubelet = Kubelet(cluster.v1, cluster.batch, NS, releases.result)
    faults = {c: Fault(c) for c in FAULTS}
    s3_outage: threading.Thread | None = None
    started = time.monotonic()
    operator.start()
    liveness = LivenessWatch(operator)
    liveness.start()
    store.start()
    items = [json.loads(manifest(n)) for n in names]
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    current: dict[str, str] = {}
    jobs: list[Any] = []

    def poll() -> bool:
        """One round of playing the kubelet; False while the API server is settling."""
        nonlocal current, jobs
        try:
            jobs = cluster.batch.list_namespaced_job(NS).items
            ledger.observe(jobs)
            kubelet.step(jobs)
            current = phases(cluster.custom, NS)
        except API_DOWN:
            time.sleep(0.5)
            return False
        return True

    def worked_since(moment: float) -> bool:
        poll()
        return ledger.first_progress_after(moment) is not None

    try:
        while time.monotonic() < started + DEADLINE_S:
            if not poll():
                continue
            in_flight = sum(1 for n in names if current.get(n) not in TERMINAL)
            if in_flight == 0 and all(f.outage_s for f in faults.values()):
                break
            releases_made = sum(
                1 for j in jobs if (j.metadata.labels or {}).get(LABEL_STAGE) == "release"
            )
            strike = _next_fault(faults, len(kubelet.finished), releases_made, ENVIRONMENTS)
            if strike:
                fault = faults[strike]
                fault.struck, fault.in_flight = True, in_flight
            if strike in ("kube-apiserver", "etcd"):
                fault.outage_s = restart(tb, strike, kill=True, down_s=DOWN_S)
                back_at = time.monotonic()
                cluster.wait(partial(worked_since, back_at), timeout=120, message="recovery")
                fault.recovery_s = ledger.first_progress_after(back_at)
            elif strike == "s3":
                s3_outage = threading.Thread(target=_restart_s3, args=(tb, fault), daemon=True)
                s3_outage.start()
                time.sleep(0.3)  # down now: the held releases publish into the outage
                releases.open = True
            time.sleep(0.1)
        if s3_outage is not None:
            s3_outage.join(120)
        cluster.wait(lambda: not left_behind(cluster.v1, NS)["pods"], timeout=60)
    finally:
        liveness.halt.set()
        store.halt.set()
        operator.stop()
        releases.pool.shutdown(wait=True)
    liveness.join()
    store.join()
    releases.s3.close()
    total_s = time.monotonic() - started

    final = phases(cluster.custom, NS)
    not_released = sorted(n for n in names if final.get(n) != "Released")
    retried = {
        name.rsplit("-a", 1)[0] + f"-a{int(name.rsplit('-a', 1)[1]) + 1}"
        for name in releases.failed
    }
    expected = {
        f"{n}-{s}-i{1 if s == 'release' else 0}-a1" for n in names for s in STAGES
    } | retried
    made = set(ledger.jobs)
    twice = ledger.made_twice()
    extra, missing = sorted(made - expected), sorted(expected - made)
    counted = announced(cluster.v1, NS, "Released", names)
    released_twice = sorted(n for n, c in counted.items() if c > 1)
    s3 = tb.s3_client()
    records = {
        o["Key"].removeprefix("envs/manifests/").removesuffix(".json"): o["Key"]
        for o in s3.list_objects_v2(Bucket=tb.s3_bucket, Prefix="envs/manifests/").get(
            "Contents", []
        )
    }
    s3.close()
    incomplete = sorted(n for n in records if not store.expected <= store.keys(f"envs/{n}/"))
    store.s3.close()
    left = left_behind(cluster.v1, NS)
    left_count = sum(len(v) for v in left.values())
    api, etcd, obj = faults["kube-apiserver"], faults["etcd"], faults["s3"]

    def restart_row(fault: Fault, what: str) -> Row:
        ok = fault.recovery_s is not None and not liveness.exited
        return Row(
            what=f"{what} SIGKILLed, down {DOWN_S:g} s, started again, "
            f"{fault.in_flight} environments in flight",
            runs=1,
            held=int(ok),
            lost="nothing" if ok and not not_released else "see the rows below",
            recovery_s=None if fault.recovery_s is None else round(fault.recovery_s, 1),
            note=f"outage {fault.outage_s:.1f} s (kill → ready); time to recover: ready → "
            "the operator's next Job or status write",
        )

    rows = [
        restart_row(api, "kube-apiserver"),
        restart_row(etcd, "etcd"),
        Row(
            what=f"the S3 server SIGKILLed, down {DOWN_S:g} s, while release stages publish "
            f"({obj.in_flight} environments in flight)",
            runs=len(releases.seconds),
            held=len(releases.seconds) - len(store.early),
            lost="nothing" if not (not_released or incomplete) else "see below",
            recovery_s=round(obj.outage_s, 1),
            note=f"{len(releases.seconds)} publishes, {len(releases.failed)} gave up after "
            f"boto3's retries (the stage then retried by the loop); longest publish "
            f"{max(releases.seconds, default=0):.1f} s; {len(store.early)} manifest records "
            f"seen before their package; {store.failed_reads} reads refused while down",
        ),
        Row(
            what=f"{len(names)} environments Released, each once, one manifest record each "
            "in S3 over a complete package",
            runs=len(names),
            held=len(names)
            - len(not_released)
            - len(released_twice)
            - len(set(names) - set(records))
            - len(incomplete),
            lost="nothing" if not not_released else f"{len(not_released)} not Released",
        ),
        Row(
            what="one Job per stage and attempt, none made twice; each attempt past the "
            "first one after a publish the outage failed",
            runs=len(expected),
            held=len(expected) - len(missing) - len(extra),
            note=f"{len(twice)} Job names made twice, {len(retried)} release attempts retried",
        ),
        Row(
            what="the operator: never exited, liveness never failing a crash loop's "
            f"{CRASH_LOOP_S} s",
            runs=1,
            held=int(not liveness.exited and liveness.longest_down_s < CRASH_LOOP_S),
            note=f"{liveness.failures} failed probes, longest stretch "
            f"{liveness.longest_down_s:.0f} s; {operator.tracebacks()} tracebacks logged",
        ),
        Row(
            what="nothing left behind: pods, claims, volumes",
            runs=1,
            held=int(left_count == 0),
            note=", ".join(f"{len(v)} {k}" for k, v in left.items()),
        ),
    ]
    recoveries = [f.recovery_s for f in (api, etcd) if f.recovery_s is not None]
    record(
        DrillResult(
            drill="control-plane",
            title="Control plane and dependencies",
            summary=f"On a test-bed of its own, the operator as a process while {len(names)} "
            "environments walk the loop (the test plays the kubelet; release stages publish "
            "to the real S3 server with the release stage's own publisher); the API server, "
            "etcd and the S3 server each SIGKILLed and restarted mid-loop.",
            rows=rows,
            figures={
                "restarts": list(faults),
                "environments": len(names),
                "apiserver_outage_s": round(api.outage_s, 1),
                "apiserver_recovery_s": api.recovery_s and round(api.recovery_s, 2),
                "etcd_outage_s": round(etcd.outage_s, 1),
                "etcd_recovery_s": etcd.recovery_s and round(etcd.recovery_s, 2),
                "s3_outage_s": round(obj.outage_s, 1),
                "recovery_median_s": round(statistics.median(recoveries), 2)
                if recoveries
                else None,
                "publishes": len(releases.seconds),
                "publishes_given_up": len(releases.failed),
                "manifests_before_package": len(store.early),
                "operator_exits": int(liveness.exited),
                "liveness_failures": liveness.failures,
                "jobs_made_twice": len(twice),
                "left_behind": left_count,
            },
            seconds=round(total_s, 1),
        )
    )
    assert all(f.outage_s for f in faults.values()), faults
    assert api.recovery_s is not None and etcd.recovery_s is not None, faults
    assert not liveness.exited, "the operator exited"
    assert liveness.longest_down_s < CRASH_LOOP_S, liveness.longest_down_s
    assert not not_released, {n: final.get(n) for n in not_released}
    assert not released_twice, released_twice
    assert not twice and not extra and not missing, (twice, extra, missing)
    assert not store.early, store.early
    assert sorted(records) == sorted(names) and not incomplete, (records, incomplete)
    assert left_count == 0, left


def _next_fault(faults: dict[str, Fault], finished: int, releases: int, envs: int) -> str:
    """Which fault strikes now: the API server once a quarter of the stage pods finished,
    etcd at half, the S3 server once half the environments are at their release."""
    api, etcd, s3 = faults["kube-apiserver"], faults["etcd"], faults["s3"]
    stages = envs * len(STAGES)
    if not api.struck and finished >= stages // 4:
        return "kube-apiserver"
    if api.recovery_s is not None and not etcd.struck and finished >= stages // 2:
        return "etcd"
    if etcd.recovery_s is not None and not s3.struck and releases >= max(1, envs // 2):
        return "s3"
    return ""


def _restart_s3(tb: Testbed, fault: Fault) -> None:
    fault.outage_s = restart(tb, "s3", kill=True, down_s=DOWN_S)

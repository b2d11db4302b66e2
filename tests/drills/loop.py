"""What the two operator drills (kills; control-plane and S3 restarts) share: the operator as
a process of its own, the test playing the kubelet, and a ledger of what the operator did.

- ``OperatorProcess``: ``python -m coworkgym_operator --standalone -n <ns>``, as in its pod,
  SIGKILLed and started again by the drill, with kopf's liveness endpoint on.
- ``Kubelet``: there is no node (or the stage pods select a node label no node has), so the
  drill finishes each Job's pod itself, writing to the pod's status the result a real stage
  or rollout step writes to its termination message (as tests/testbed/test_operator.py
  does). Stages are instant, so the operator is always mid-reconcile when it is killed.
- ``Ledger``: every Job the operator made, by name and uid (a Job made twice under one name
  has two uids; one made under a new attempt's name shows as a retry), and the moments the
  operator visibly worked: a new Job, or a changed status of an environment or a batch.
  "Time to recover" is a restart (or an outage's end) to the next such moment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from coworkgym_operator.environment.builders import LABEL_STAGE
from coworkgym_operator.rollouts.builders import LABEL_BATCH, LABEL_STEP
from coworkgym_testbed.testbed import Testbed

GROUP, VERSION = "coworkgym.dev", "v1alpha1"
STAGES = ("builder", "verifier", "detector", "release")
# no node carries this label: a stage pod stays Pending until the drill finishes it, even on
# a test-bed with a node
NOWHERE = {"coworkgym.dev/kubelet": "played-by-test"}

Result = dict[str, Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    """The operator as its own process, killed with SIGKILL and started again."""

    def __init__(self, tb: Testbed, ns: str, log: Path) -> None:
        self.env = {
            **os.environ,
            **tb.env(),
            "COWORKGYM_RECONCILE_INTERVAL": "0.5",
            "COWORKGYM_SANDBOX_DEFAULTS": json.dumps({"nodeSelector": NOWHERE}),
        }
        self.ns, self.log = ns, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.liveness_port = 0
        self.starts = 0
        self.kills = 0

    def start(self) -> None:
        self.liveness_port = free_port()
        env = {**self.env, "COWORKGYM_METRICS_PORT": str(free_port())}
        liveness = f"--liveness=http://127.0.0.1:{self.liveness_port}/healthz"
        argv = [sys.executable, "-m", "coworkgym_operator", "--standalone", "-n", self.ns, liveness]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.starts += 1

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def live(self) -> bool:
        """kopf's liveness endpoint answers 200 (what the chart's livenessProbe asks)."""
        url = f"http://127.0.0.1:{self.liveness_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def tracebacks(self) -> int:
        return self.log.read_text(errors="replace").count("Traceback (most recent call last)")


def pod_input(job: Any) -> dict[str, Any]:
    """The JSON input the operator gave the Job's first container (stage or rollout step)."""
    for var in job.spec.template.spec.containers[0].env or []:
        if var.name in ("COWORKGYM_STAGE_INPUT", "COWORKGYM_POD_INPUT"):
            return dict(json.loads(var.value))
    return {}


def stage_result(job: Any) -> Result:
    """What a CoworkEnvironment stage that went well writes (release: where it released)."""
    stage = job.metadata.labels[LABEL_STAGE]
    if stage == "detector":
        return {"stage": stage, "ok": True, "defects": [], "digest": "sha256:abc"}
    if stage == "release":
        uri = f"s3://cowork-gym/envs/{pod_input(job)['name']}"
        return {"stage": stage, "ok": True, "uri": uri, "digest": "sha256:abc"}
    return {"stage": stage, "ok": True}


def batch_step_result(job: Any) -> Result:
    """What a RolloutBatch step that went well writes: every rollout verified and passed."""
    step = job.metadata.labels[LABEL_STEP]
    given = pod_input(job)
    if step == "fetch":
        found = [
            {**e, "digest": "sha256:abc", "workdir": "/home/user/work"}
            for e in given.get("environments", [])
        ]
        return {"ok": True, "environments": found}
    if step == "rollout":
        return {"ok": True, "tokens": 0, "seconds": 0.1, "termination": "done", "verify": True}
    if step == "verify":
        return {"ok": True, "valid": True, "passed": True, "reward": 1.0}
    return {"ok": True, "kept": 0, "funnel": [], "uri": "s3://cowork-gym/rollouts/drill"}


def result_for(job: Any) -> Result:
    labels = job.metadata.labels or {}
    return batch_step_result(job) if LABEL_BATCH in labels else stage_result(job)


class Kubelet:
    """Finishes every Job's pod once, with the result ``results`` gives for its Job (None:
    not now, ask again next step). ``finished``: Job uid → the result written."""

    def __init__(
        self, v1: Any, batch: Any, ns: str, results: Callable[[Any], Result | None] = result_for
    ) -> None:
        self.v1, self.batch, self.ns, self.results = v1, batch, ns, results
        self.finished: dict[str, Result] = {}

    def step(self, jobs: list[Any]) -> None:
        by_name = {str(j.metadata.name): j for j in jobs}
        for pod in self.v1.list_namespaced_pod(self.ns).items:
            job = by_name.get((pod.metadata.labels or {}).get("job-name", ""))
            if job is None or job.metadata.uid in self.finished:
                continue
            if (pod.status.phase or "") in ("Succeeded", "Failed"):
                continue
            result = self.results(job)
            if result is None:
                continue
            try:
                self.finish(pod, result)
            except ApiException as exc:
                if exc.status != 404:  # gone since the listing: its Job's next pod, if any
                    raise
                continue
            self.finished[str(job.metadata.uid)] = result

    def finish(self, pod: Any, result: Result) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ok = bool(result.get("ok"))
        terminated = {
            "exitCode": 0 if ok else 1,
            "reason": "Completed" if ok else "Error",
            "message": json.dumps(result),
            "startedAt": now,
            "finishedAt": now,
        }
        status = {
            "status": {
                "phase": "Succeeded" if ok else "Failed",
                "containerStatuses": [
                    {
                        "name": c.name,
                        "ready": False,
                        "restartCount": 0,
                        "image": c.image,
                        "imageID": "",
                        "state": {"terminated": terminated},
                    }
                    for c in pod.spec.containers
                ],
            }
        }
        self.v1.patch_namespaced_pod_status(pod.metadata.name, self.ns, status)


class Ledger:
    """Every Job seen (name → uids) and when the operator last visibly worked."""

    def __init__(self, custom: Any, ns: str) -> None:
        self.custom, self.ns = custom, ns
        self.jobs: dict[str, set[str]] = {}
        self.statuses: dict[tuple[str, str], str] = {}
        self.progress: list[float] = []  # monotonic times of new Jobs / changed statuses

    def observe(self, jobs: list[Any]) -> bool:
        """Fold one listing in; True when it shows the operator did something new."""
        moved = False
        for job in jobs:
            uids = self.jobs.setdefault(str(job.metadata.name), set())
            if job.metadata.uid not in uids:
                uids.add(str(job.metadata.uid))
                moved = True
        for plural in ("coworkenvironments", "rolloutbatches"):
            listed = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, plural)
            for item in listed["items"]:
                key = (plural, item["metadata"]["name"])
                status = json.dumps(item.get("status") or {}, sort_keys=True)
                if self.statuses.get(key, status) != status:
                    moved = True
                self.statuses[key] = status
        if moved:
            self.progress.append(time.monotonic())
        return moved

    def first_progress_after(self, moment: float) -> float | None:
        later = [t for t in self.progress if t > moment]
        return later[0] - moment if later else None

    def made_twice(self) -> list[str]:
        return sorted(name for name, uids in self.jobs.items() if len(uids) > 1)


def phases(custom: Any, ns: str, plural: str = "coworkenvironments") -> dict[str, str]:
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)
    return {
        i["metadata"]["name"]: str((i.get("status") or {}).get("phase", ""))
        for i in listed["items"]
    }


def announced(v1: Any, ns: str, reason: str, names: list[str]) -> dict[str, int]:
    """How often each object's ``reason`` event was posted (repeats fold into a count)."""
    counts = dict.fromkeys(names, 0)
    for event in v1.list_namespaced_event(ns).items:
        if event.reason == reason and event.involved_object.name in counts:
            counts[event.involved_object.name] += event.count or 1
    return counts


def left_behind(v1: Any, ns: str) -> dict[str, list[str]]:
    """Pods, claims and provisioned volumes of the namespace that still exist."""
    volumes = [
        str(pv.metadata.name)
        for pv in v1.list_persistent_volume().items
        if pv.spec.claim_ref is not None and pv.spec.claim_ref.namespace == ns
    ]
    return {
        "pods": sorted(str(p.metadata.name) for p in v1.list_namespaced_pod(ns).items),
        "claims": sorted(
            str(c.metadata.name) for c in v1.list_namespaced_persistent_volume_claim(ns).items
        ),
        "volumes": sorted(volumes),
    }

"""A stage Job's state, read from the Job and its pods as plain dicts (camelCase, as the API
serves them and as kopf's watches deliver them): one reading for both ways the operator
sees them — a GET and a LIST (``Kube.observe_job``) or the in-memory indices kept by watches
(``core/watches.py``), so the decision is the same either way.

The watches keep only what this reading needs (``job_summary``, ``pod_summary``): a few
hundred bytes per object instead of the whole manifest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from coworkgym_operator.core.builders import LABEL_GENERATION
from coworkgym_operator.core.pods import PodStart, pod_start

Plain = dict[str, Any]
JobState = Literal["missing", "running", "succeeded", "failed"]


@dataclass(frozen=True)
class JobObservation:
    name: str
    state: JobState
    result: dict[str, Any] | None = None  # the stage's termination message
    reason: str = ""
    seconds: float | None = None
    created_at: datetime | None = None  # the Job's creationTimestamp
    generation: int | None = None  # the environment's generation the Job was built from
    start: PodStart = field(default_factory=PodStart)  # whether its pod started, and why not


def stuck(job: JobObservation, now: datetime | None, grace_s: float) -> str:
    """Why a running Job's pod will not start (image pull, no node fits, bad config), once
    it has failed to start for ``grace_s``; "" while it may still start. A scheduled pod
    still pulling its image is left alone (the Job's deadline bounds it)."""
    start = job.start
    if start.started or now is None or job.created_at is None:
        return ""
    if start.problem is None and start.scheduled:
        return ""
    if (now - job.created_at).total_seconds() < grace_s:
        return ""
    why = start.problem.describe() if start.problem else "its pod was not scheduled"
    return f"did not start within {grace_s:g} s: {why}"


def start_wait(
    jobs: Iterable[JobObservation], now: datetime | None, grace_s: float, interval: float
) -> float | None:
    """Seconds until time alone may change what ``stuck`` says of these Jobs (the soonest
    end of a running Job's start grace, while its pod has not started); past the grace, or
    while a Job's creation time is not known yet, ``interval``. None: only an event can."""
    waits: list[float] = []
    for job in jobs:
        if job.state != "running" or job.start.started:
            continue
        if job.created_at is None or now is None:
            waits.append(interval)
            continue
        left = grace_s - (now - job.created_at).total_seconds()
        waits.append(left + 0.1 if left > 0 else interval)
    return min(waits) if waits else None


def job_summary(job: Plain) -> Plain:
    """What ``job_observation`` reads of a Job: its name, generation label, creation time,
    start/completion times and its True conditions (with when they became true); and its
    owner's uid."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    owners = [o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("controller")]
    return {
        "metadata": {
            "name": meta.get("name"),
            "ownerUid": owners[0] if owners else None,  # its environment's, for pod events
            "creationTimestamp": meta.get("creationTimestamp"),
            "labels": {
                k: v for k, v in (meta.get("labels") or {}).items() if k == LABEL_GENERATION
            },
        },
        "status": {
            "startTime": status.get("startTime"),
            "completionTime": status.get("completionTime"),
            "conditions": [
                {k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")}
                for c in status.get("conditions") or []
                if c.get("status") == "True"
            ],
        },
    }


def pod_summary(pod: Plain) -> Plain:
    """What the readers need of a stage pod: phase, node, scheduling conditions, container
    states (with the termination message: the stage's result)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return {
        "spec": {"nodeName": spec.get("nodeName")},
        "status": {
            "phase": status.get("phase"),
            "conditions": [
                {k: c.get(k) for k in ("type", "status", "reason", "message")}
                for c in status.get("conditions") or []
                if c.get("type") == "PodScheduled"
            ],
            "initContainerStatuses": [
                {"state": c.get("state") or {}} for c in status.get("initContainerStatuses") or []
            ],
            "containerStatuses": [
                {"state": c.get("state") or {}} for c in status.get("containerStatuses") or []
            ],
        },
    }


def job_observation(
    name: str, job: Plain | None, pods: Iterable[Plain], wait_for_pods: bool = False
) -> JobObservation:
    """The Job's state: missing, running (with whether its pod started), succeeded or
    failed (with the stage's result from its pod's termination message).

    ``wait_for_pods``: the pods come from a watch that may lag the Job's: a finished Job
    whose pods are all still shown unfinished reads as running until the pod's own update
    arrives (a GET then a LIST never sees that)."""
    if job is None:
        return JobObservation(name, "missing")
    pods = list(pods)
    result, pod_state = _pod_result(pods)
    status = job.get("status") or {}
    conditions = {
        c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"
    }
    finished = "Complete" in conditions or "Failed" in conditions
    lagging = wait_for_pods and finished and pods and pod_state is None
    seconds = _run_seconds(job, conditions.get("Failed"), pods)
    if not lagging and (pod_state == "succeeded" or "Complete" in conditions):
        return JobObservation(name, "succeeded", result, seconds=seconds)
    if not lagging and (pod_state == "failed" or "Failed" in conditions):
        failed = conditions.get("Failed")
        reason = f"{failed.get('reason')}: {failed.get('message')}" if failed else "pod failed"
        return JobObservation(name, "failed", result, reason=reason, seconds=seconds)
    meta = job.get("metadata") or {}
    generation = str((meta.get("labels") or {}).get(LABEL_GENERATION, ""))
    return JobObservation(
        name,
        "running",
        created_at=parse_time(meta.get("creationTimestamp")),
        generation=int(generation) if generation.isdigit() else None,
        start=pod_start(pods),
    )


def _pod_result(pods: list[Plain]) -> tuple[dict[str, Any] | None, str | None]:
    """The stage's JSON result from its pod's termination message, and the pod's phase."""
    for pod in pods:
        status = pod.get("status") or {}
        phase = str(status.get("phase") or "").lower()
        for container in status.get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated") or {}
            message = terminated.get("message")
            if message:
                try:
                    return json.loads(message.strip().splitlines()[-1]), phase
                except ValueError:
                    return {"ok": False, "error": message[-500:]}, phase
        if phase in ("succeeded", "failed"):
            return None, phase
    return None, None


def parse_time(value: Any) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339, "Z" or an offset; a datetime as kopf may hand it)."""
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _run_seconds(job: Plain, failed: Plain | None, pods: list[Plain]) -> float | None:
    """How long a finished Job ran: from its start to its end, as the first of these says.

    The Job's ``completionTime`` alone is not enough: Kubernetes sets it on success only,
    and only once the Job controller has seen the pod end, which the pod's own watch event
    usually precedes; that is the event whose reconcile moves the stage on, so the time
    would be lost (``status.stageTimings`` stayed empty on the test-bed). The pod's
    containers say when they ended; a failed Job, when its ``Failed`` condition came."""
    status, meta = job.get("status") or {}, job.get("metadata") or {}
    begun = parse_time(status.get("startTime") or meta.get("creationTimestamp"))
    ends = [
        parse_time(status.get("completionTime")),
        parse_time((failed or {}).get("lastTransitionTime")),
        _containers_ended(pods),
    ]
    ended = next((end for end in ends if end is not None), None)
    if begun is None or ended is None:
        return None
    return max(0.0, (ended - begun).total_seconds())


def _containers_ended(pods: list[Plain]) -> datetime | None:
    """When the last container of a finished pod ended (its ``finishedAt``)."""
    ends = [
        parse_time(((container.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for pod in pods
        for container in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    known = [end for end in ends if end is not None]
    return max(known) if known else None


__all__ = ["job_observation", "job_summary", "parse_time", "pod_summary", "start_wait", "stuck"]

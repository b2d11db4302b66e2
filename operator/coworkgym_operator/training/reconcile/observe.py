"""A TrainingRun's RolloutBatch and an on-policy round's server, read from the objects as
the API serves them (plain dicts, camelCase), so that what the reconcile is told is decided
by pure, testable code; training/kube.py and the watches' indices only fetch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coworkgym_operator.core.observe import parse_time
from coworkgym_operator.core.pods import pod_start
from coworkgym_operator.training.builders.rounds import SERVE_CONTAINER
from coworkgym_operator.training.reconcile.state import BatchSeen, ServingSeen

Plain = dict[str, Any]


def batch_seen(name: str, batch: Plain | None) -> BatchSeen:
    """A RolloutBatch's outcome and counts (None: there is none of that name)."""
    if batch is None:
        return BatchSeen(found=False, name=name)
    status = batch.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    counts = status.get("counts") or {}
    return BatchSeen(
        found=True,
        name=name,
        phase=str(status.get("phase") or ""),
        complete=(conditions.get("Complete") or {}).get("status") == "True",
        failed=(conditions.get("Failed") or {}).get("status") == "True",
        output_uri=status.get("outputUri"),
        kept=counts.get("kept"),
        succeeded=int(counts.get("succeeded") or 0),
        invalid=int(counts.get("invalid") or 0),
        message=str(status.get("message") or ""),
        deleting=bool((batch.get("metadata") or {}).get("deletionTimestamp")),
    )


def batch_summary(batch: Plain) -> Plain:
    """What ``batch_seen`` reads of a RolloutBatch: what the watch's index keeps."""
    meta, status = batch.get("metadata") or {}, batch.get("status") or {}
    counts = status.get("counts") or {}
    return {
        "metadata": {"deletionTimestamp": meta.get("deletionTimestamp")},
        "status": {
            "phase": status.get("phase"),
            "message": status.get("message"),
            "outputUri": status.get("outputUri"),
            "counts": {k: counts.get(k) for k in ("kept", "succeeded", "invalid")},
            "conditions": [
                {"type": c.get("type"), "status": c.get("status")}
                for c in status.get("conditions") or []
                if c.get("type") in ("Complete", "Failed")
            ],
        },
    }


def serving_seen(
    name: str, deployment: Plain | None, service: Plain | None, pods: Iterable[Plain]
) -> ServingSeen:
    """The round's server: available once its Deployment counts an available replica (a
    pod ready for minReadySeconds), its Service's cluster IP, and of its pods (those not
    being deleted: a resumed round's old ones may linger) whether one started and how
    often the server exited, with its last words (the termination message, or the log's
    tail: FallbackToLogsOnError)."""
    if deployment is None:
        return ServingSeen(name=name, found=False)
    status = deployment.get("status") or {}
    spec = (service or {}).get("spec") or {}
    cluster_ip = spec.get("clusterIP")
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    restarts, last_error = 0, ""
    for pod in live:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            if container.get("name") != SERVE_CONTAINER:
                continue
            count = int(container.get("restartCount") or 0)
            if count >= restarts:
                restarts = count
                ended = (container.get("lastState") or {}).get("terminated") or {}
                last_error = _last_words(ended) or last_error
    return ServingSeen(
        name=name,
        found=True,
        available=int(status.get("availableReplicas") or 0) >= 1,
        cluster_ip=str(cluster_ip) if cluster_ip and cluster_ip != "None" else None,
        created_at=parse_time((deployment.get("metadata") or {}).get("creationTimestamp")),
        start=pod_start(live),
        restarts=restarts,
        last_error=last_error,
    )


def _last_words(terminated: Plain) -> str:
    message = str(terminated.get("message") or "").strip()
    if message:
        return message.splitlines()[-1][:300]
    if terminated:
        return f"{terminated.get('reason') or 'exited'} (exit code {terminated.get('exitCode')})"
    return ""


__all__ = ["batch_seen", "batch_summary", "serving_seen"]

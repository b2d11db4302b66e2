"""Whether a stage's pod has started, and why not — read from the pod as the API serves it
(a plain dict, camelCase), so the decision is pure and testable without a cluster.

A pod that cannot start says so in two places: the scheduler's ``PodScheduled`` condition
(no node fits, or its volumes cannot be bound) and the kubelet's waiting reason of each
container (the image cannot be pulled, the container cannot be created). A pod that is
scheduled and still pulling its image (``ContainerCreating``) has no problem yet: a big
image may take minutes, and the stage timeout bounds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# kubelet waiting reasons that do not clear by themselves, by the kind of problem they are
WAITING_REASONS: dict[str, str] = {
    "ErrImagePull": "ImagePull",
    "ImagePullBackOff": "ImagePull",
    "ErrImageNeverPull": "ImagePull",
    "InvalidImageName": "ImagePull",
    "CreateContainerConfigError": "ContainerConfig",
    "CreateContainerError": "ContainerConfig",
    "RunContainerError": "ContainerConfig",
}
# words of the scheduler's message when it is the volumes, not the nodes, that do not fit
_VOLUME_WORDS = ("persistentvolumeclaim", "persistent volume", "volume node affinity")


@dataclass(frozen=True)
class PodProblem:
    """Why a stage's pod cannot start: ``kind`` is the class (ImagePull, Unschedulable,
    VolumeBinding, ContainerConfig), ``reason`` and ``message`` are Kubernetes' own."""

    kind: str
    reason: str
    message: str

    def describe(self) -> str:
        text = f"{self.reason}: {self.message}" if self.message else self.reason
        return f"{self.kind} ({text})"


@dataclass(frozen=True)
class PodStart:
    started: bool = False  # a container of the pod runs or ran
    scheduled: bool = False  # a node was chosen for the pod
    problem: PodProblem | None = None


def pod_start(pods: Iterable[dict[str, Any]]) -> PodStart:
    """The start state of a Job's pods (a Job of ours runs one pod at a time)."""
    problem: PodProblem | None = None
    scheduled = False
    for pod in pods:
        status = pod.get("status") or {}
        if str(status.get("phase", "")) in ("Running", "Succeeded", "Failed"):
            return PodStart(started=True, scheduled=True)
        scheduled = scheduled or bool((pod.get("spec") or {}).get("nodeName"))
        containers = [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        for container in containers:
            state = container.get("state") or {}
            if "running" in state or "terminated" in state:
                return PodStart(started=True, scheduled=True)
            waiting = state.get("waiting") or {}
            kind = WAITING_REASONS.get(str(waiting.get("reason", "")))
            if kind and problem is None:
                problem = PodProblem(kind, str(waiting["reason"]), str(waiting.get("message", "")))
        if problem is None:
            problem = _scheduling_problem(status)
    return PodStart(started=False, scheduled=scheduled, problem=problem)


def _scheduling_problem(status: dict[str, Any]) -> PodProblem | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") != "PodScheduled" or condition.get("status") != "False":
            continue
        reason = str(condition.get("reason") or "Unschedulable")
        message = str(condition.get("message") or "")
        volumes = any(word in message.lower() for word in _VOLUME_WORDS)
        return PodProblem("VolumeBinding" if volumes else "Unschedulable", reason, message)
    return None

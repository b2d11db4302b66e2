"""A TrainingRun as a KubeRay ``RayJob`` (ray.io/v1): the builder, and how its status reads.

    build_rayjob(run, settings) -> dict        # the RayJob manifest (pure; no I/O)
    rayjob_outcome(rayjob) -> "running" | "succeeded" | "failed" | "suspended", why

Used when the cluster serves rayjobs.ray.io (KubeRay installed) and the chart's
``training.ray`` is auto; otherwise the run is a plain Job (builders/run.py). What
the RayJob holds, field by field:

- ``entrypoint``: ``python -m coworkgym_operator.training.pod train``, the same reporter
  the plain Job runs, with the same plan (builders/run.py: train_plan: what to stage, the
  trainer's config, ``cowork-gym train --config``) in COWORKGYM_POD_INPUT. It runs as the
  Ray job's driver on the head pod; ``cowork-gym train`` joins the cluster through
  RAY_ADDRESS, which the Ray job supervisor sets (trainer/run.py's start_ray).
- ``submissionMode: K8sJobMode``: KubeRay's submitter is a Job named like the RayJob. It
  follows the driver's output, so its pod's log carries the reporter's
  ``coworkgym-train-status`` lines: the controller reads progress there, as from the plain
  Job's pod.
- the RayCluster: a head (``num-cpus: 0``: it schedules no training) and one worker group of
  ``spec.resources.workers`` replicas (min = max: Ray Train wants them all), each with the
  run's CPU, memory and ``gpusPerWorker`` GPUs (settings.gpu_resource), on the training
  nodes (node selector, tolerations, runtime class of the chart's ``training`` values).
  Every pod gets the object store's endpoint and credentials (workers write checkpoints).
- lifecycle: ``backoffLimit``, ``activeDeadlineSeconds``, ``ttlSecondsAfterFinished``,
  ``suspend`` and ``shutdownAfterJobFinishes`` are the run's own, which KubeRay applies.

Pods run as the sandbox user (uid 10001, non-root, no service-account token) with /tmp
(where Ray keeps its session) and /dev/shm (Ray's object store) as emptyDirs. Every pod (head,
workers, submitter) is a sandbox pod of the run's training step (``training_labels``): the
chart's sandbox policies and the run's ``<run>-training`` policy (builders/network.py) fence
them to each other, the object store and the cluster DNS.
"""

from __future__ import annotations

from typing import Any, Literal

from coworkgym_operator.training.api.types import TrainingRunSpec
from coworkgym_operator.training.builders.run import (
    LABEL_STEP,
    OWNER,
    host_checkout,
    train_plan,
    trainer_container,
    training_labels,
    training_pod_spec,
    worker_resources,
)
from coworkgym_operator.training.settings import TrainingSettings

Manifest = dict[str, Any]
RAY_API_VERSION = "ray.io/v1"
RAYJOB_KIND = "RayJob"
RAYJOB_PLURAL = "rayjobs"
RAY_GROUP, RAY_VERSION = "ray.io", "v1"
ENTRYPOINT = "python -m coworkgym_operator.training.pod train"
DASHBOARD_PORT = 8265  # job submission and state: the submitter's and KubeRay's
HEAD_PORTS = [
    {"name": "gcs-server", "containerPort": 6379},
    {"name": "dashboard", "containerPort": DASHBOARD_PORT},
    {"name": "client", "containerPort": 10001},
]
# Fixed ports for each Ray node's agents. Left at 0, a raylet waits for its agents to write
# the ports they picked to files, and aborts when they are slow to start (seen on a busy
# 2-core node: "Timed out waiting for file .../metrics_agent_port_..." and
# ".../dashboard_agent_listen_port_...", the raylet down 18 s after start); fixed, it
# needs no file. 52365 and 8080 are the ports KubeRay's probes and metrics expect; each
# Ray pod has its own network namespace.
AGENT_PORTS = {
    "dashboard-agent-listen-port": "52365",
    "dashboard-agent-grpc-port": "52366",
    "runtime-env-agent-port": "52367",
    "metrics-export-port": "8080",
}
Outcome = Literal["running", "succeeded", "failed", "suspended"]


def rayjob_name(run: str, start: int) -> str:
    """The RayJob of a run's ``start``-th start (the plain Job's naming, for one scheme)."""
    from coworkgym_operator.training.builders.run import train_job_name

    return train_job_name(run, start)


def _ray_container(
    name: str, spec: TrainingRunSpec, data_uri: str, settings: TrainingSettings, head: bool
) -> Manifest:
    # the head trains nothing (num-cpus 0): a small request, room to burst
    head_resources = {
        "requests": {"cpu": "250m", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    resources = head_resources if head else worker_resources(spec, settings, 1)
    # the driver (on the head) reads its argv from the plan; workers ignore it
    plan = train_plan(spec, data_uri, settings)
    container = trainer_container(name, spec, plan, settings, resources)
    if head:
        container["ports"] = [dict(p) for p in HEAD_PORTS]
    return container


def _template(run: Manifest, container: Manifest, settings: TrainingSettings) -> Manifest:
    volumes, _, _ = host_checkout(settings)
    pod = training_pod_spec(settings, [container], volumes)
    # Ray restarts a lost worker itself; the pod's own restarts follow the RayCluster's
    pod.pop("restartPolicy", None)
    return {"metadata": {"labels": training_labels(run)}, "spec": pod}


def _submitter_template(
    run: Manifest, spec: TrainingRunSpec, settings: TrainingSettings
) -> Manifest:
    """KubeRay's submitter pod (it runs `ray job submit` and follows the driver's log). Its
    default has only the head's image: this one is hardened like the training pods and has
    the test-bed shortcut's checkout, without which `ray` is not importable there."""
    from coworkgym_operator.core.builders import container_security

    volumes, mounts, pythonpath = host_checkout(settings)
    container: Manifest = {
        "name": "ray-job-submitter",
        "image": spec.image or settings.image,
        "imagePullPolicy": settings.operator.image_pull_policy,
        "env": [{"name": "HOME", "value": "/tmp"}, *([pythonpath] if pythonpath else [])],
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "securityContext": container_security(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts],
    }
    pod = training_pod_spec(settings, [container], volumes)
    pod["restartPolicy"] = "Never"
    # KubeRay keeps the template's labels: the submitter reaches the head's dashboard
    # under the run's training policy, like the rest of the cluster
    return {"metadata": {"labels": training_labels(run)}, "spec": pod}


def _stage_container(spec: TrainingRunSpec, data_uri: str, settings: TrainingSettings) -> Manifest:
    """A worker pod's init container: ``training/pod.py stage`` fills the pod's /tmp with
    the plan's staged inputs before Ray starts there."""
    plan = train_plan(spec, data_uri, settings)
    resources = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    container = trainer_container("stage", spec, plan, settings, resources)
    container["command"] = ["python", "-m", "coworkgym_operator.training.pod", "stage"]
    return container


def build_rayjob(run: Manifest, settings: TrainingSettings, start: int = 1) -> Manifest:
    """The RayJob of a TrainingRun (the manifest with metadata, spec and status.dataUri
    as the controller reads it). ``start`` numbers resumes, as for the plain Job. Not for
    on-policy rounds (rounds > 1): each round trains in a plain Job (one node) for now."""
    spec = TrainingRunSpec.model_validate(run.get("spec") or {})
    given = spec.data.uri if spec.data is not None else None
    data_uri = str((run.get("status") or {}).get("dataUri") or given or "")
    name = run["metadata"]["name"]
    workers = spec.resources.workers
    head = _ray_container("ray-head", spec, data_uri, settings, head=True)
    worker = _ray_container("ray-worker", spec, data_uri, settings, head=False)
    worker_template = _template(run, worker, settings)
    # the pods share no disk: each worker stages the weights and data its trainer loads
    worker_template["spec"]["initContainers"] = [_stage_container(spec, data_uri, settings)]
    ray_spec: Manifest = {
        "entrypoint": ENTRYPOINT,
        "submissionMode": "K8sJobMode",
        "submitterPodTemplate": _submitter_template(run, spec, settings),
        "shutdownAfterJobFinishes": spec.shutdown_after_job_finishes,
        "ttlSecondsAfterFinished": (
            spec.ttl_seconds_after_finished
            if spec.ttl_seconds_after_finished is not None
            else settings.ttl_seconds_after_finished
        ),
        "backoffLimit": spec.backoff_limit,
        "suspend": spec.suspend,
        "rayClusterSpec": {
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0", **AGENT_PORTS},
                "template": _template(run, head, settings),
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": workers,
                    "maxReplicas": workers,
                    "rayStartParams": dict(AGENT_PORTS),
                    "template": worker_template,
                }
            ],
        },
    }
    if spec.active_deadline_seconds:
        ray_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": RAY_API_VERSION,
        "kind": RAYJOB_KIND,
        "metadata": OWNER.metadata(run, rayjob_name(name, start), **{LABEL_STEP: "train"}),
        "spec": ray_spec,
    }


def rayjob_outcome(rayjob: Manifest) -> tuple[Outcome, str]:
    """Where a RayJob is, from its status (KubeRay's jobDeploymentStatus and jobStatus),
    and KubeRay's reason and message when it failed."""
    status = rayjob.get("status") or {}
    deployment = str(status.get("jobDeploymentStatus") or "")
    job = str(status.get("jobStatus") or "")
    why = ": ".join(str(p) for p in (status.get("reason"), status.get("message")) if p)
    if deployment in ("Suspended", "Suspending"):
        return "suspended", why
    if job == "SUCCEEDED" and deployment in ("Complete", ""):
        return "succeeded", why
    if deployment == "Failed" or job in ("FAILED", "STOPPED"):
        return "failed", why or f"the Ray job ended {job or deployment}"
    if deployment == "Complete":  # complete without SUCCEEDED: the driver failed
        return "failed", why or f"the Ray job ended {job or 'without a status'}"
    return "running", why


__all__ = [
    "DASHBOARD_PORT",
    "ENTRYPOINT",
    "RAYJOB_KIND",
    "RAYJOB_PLURAL",
    "RAY_API_VERSION",
    "RAY_GROUP",
    "RAY_VERSION",
    "build_rayjob",
    "rayjob_name",
    "rayjob_outcome",
]

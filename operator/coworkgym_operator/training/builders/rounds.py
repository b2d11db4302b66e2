"""Pure builders of an on-policy round's serving and rollout children (spec.rounds > 1):
the checkpoint server (a Deployment and its Service), the NetworkPolicy that fences every
server of the run, and the round's RolloutBatch. The round's training Job is the plain
training Job (builders/run.py: training_job with a RoundTraining). No I/O; every object
carries the run's owner reference, its shard label and a deterministic name.

    <run>-serve-r<r>        Deployment + Service: `cowork-gym serve-checkpoint` on port 8000
    <run>-serving           NetworkPolicy: in from the LLM gateway (and the operator's
                            probe) on that port only; out to the object store only
    <run>-rollouts-r<r>     RolloutBatch: spec.rollout against the Service's address

The rollout pods never reach the server: their model traffic goes to the LLM gateway
(egress=gateway, the only destination their NetworkPolicies admit), which forwards it to
the policy's baseUrl, the Service. The server pod holds the storage credentials (envFrom
the chart's Secret) only when it must fetch the checkpoint from S3, no API token, and runs
as the sandbox user with a read-only root.
"""

from __future__ import annotations

from typing import Any

from coworkgym_operator.core.builders import (
    LABEL_EGRESS,
    LABEL_SANDBOX,
    child_name,
    container_security,
)
from coworkgym_operator.core.sharding import inherited
from coworkgym_operator.rollouts.api.types import API_VERSION as BATCH_API_VERSION
from coworkgym_operator.rollouts.api.types import BATCH_KIND, MAX_NAMES, ResolvedEnvironment
from coworkgym_operator.training.api.types import RoundRollout, TrainingRunSpec
from coworkgym_operator.training.builders.run import (
    LABEL_ROUND,
    LABEL_STEP,
    LABEL_TRAINING,
    OWNER,
    cli,
    host_checkout,
    round_folder,
    round_suffix,
    store_env,
    training_pod_spec,
    worker_resources,
)
from coworkgym_operator.training.settings import TrainingSettings

Manifest = dict[str, Any]
SERVING_PORT = 8000
SERVE_CONTAINER = "serve"
# A server counts as available once its pod has been ready this long: time for the
# Service's endpoint to reach every node's proxy before the RolloutBatch's first probe
# (which fails the batch when the endpoint does not answer).
SERVING_MIN_READY_SECONDS = 5


def serve_name(run: str, index: int) -> str:
    """The round's Deployment and Service. A Service name must start with a letter; a run
    name may not."""
    owner = run if run[:1].isalpha() else f"tr-{run}"
    return child_name(owner, f"serve-r{index}")


def serving_policy_name(run: str) -> str:
    return child_name(run, "serving")


def rollouts_name(run: str, index: int, attempt: int = 1) -> str:
    return child_name(run, round_suffix("rollouts", index, attempt))


def served_as(run: str, index: int) -> str:
    """The model name the round's server answers to, and its trajectories record."""
    return f"{run}@round-{index}"


def endpoint_of(cluster_ip: str) -> str:
    """The server's OpenAI base URL, by the Service's cluster IP rather than its DNS name:
    the RolloutBatch controller probes it from the operator's process, which may run
    outside the cluster (the test-bed), where no cluster DNS answers but the node's proxy
    routes cluster IPs; the gateway reaches it either way. A Service keeps its IP for life."""
    return f"http://{cluster_ip}:{SERVING_PORT}/v1"


def _server_labels(run: Manifest, index: int) -> dict[str, str]:
    return {
        LABEL_TRAINING: run["metadata"]["name"],
        LABEL_STEP: "serve",
        LABEL_ROUND: str(index),
    }


def serving_deployment(
    run: Manifest,
    spec: TrainingRunSpec,
    index: int,
    served: str,
    settings: TrainingSettings,
) -> Manifest:
    """One server pod (a worker's resources: its GPUs serve on cuda) that fetches
    ``served`` (an s3:// checkpoint or model folder, or a path in the image) and answers
    the OpenAI chat-completions API on SERVING_PORT; ready once /v1/models answers."""
    name = run["metadata"]["name"]
    selector = _server_labels(run, index)
    gpu = spec.resources.gpus_per_worker > 0
    env, env_from = store_env(settings)
    volumes, mounts, pythonpath = host_checkout(settings)
    command = [
        *cli(settings),
        "serve-checkpoint",
        served,
        "--host", "0.0.0.0",
        "--port", str(SERVING_PORT),
        "--model-name", served_as(name, index),
        "--device", "cuda" if gpu else "cpu",
    ]  # fmt: skip
    container: Manifest = {
        "name": SERVE_CONTAINER,
        "image": spec.image or settings.image,
        "imagePullPolicy": settings.operator.image_pull_policy,
        "command": command,
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            *env,
            *([pythonpath] if pythonpath else []),
        ],
        "ports": [{"name": "http", "containerPort": SERVING_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/v1/models", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 5,
        },
        "resources": worker_resources(spec, settings, 1),
        "securityContext": container_security(),
        # a server that cannot fetch or load its checkpoint says why in the pod's status
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts],
    }
    if env_from and served.startswith("s3://"):  # a checkpoint in the image needs no key
        container["envFrom"] = env_from
    pod = training_pod_spec(settings, [container], volumes, shm=False)
    pod["restartPolicy"] = "Always"  # a Deployment's pods; the reconcile counts restarts
    pod_labels = {
        **inherited(run["metadata"].get("labels")),
        **selector,
        LABEL_SANDBOX: "true",  # the chart's deny-all and object-store policies apply
        LABEL_EGRESS: "object-store",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": OWNER.metadata(run, serve_name(name, index), **selector),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "minReadySeconds": SERVING_MIN_READY_SECONDS,
            "revisionHistoryLimit": 1,
            "strategy": {"type": "Recreate"},  # never two servers of a round (GPUs)
            "template": {"metadata": {"labels": pod_labels}, "spec": pod},
        },
    }


def serving_service(run: Manifest, index: int) -> Manifest:
    selector = _server_labels(run, index)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": OWNER.metadata(run, serve_name(run["metadata"]["name"], index), **selector),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [
                {"name": "http", "port": SERVING_PORT, "targetPort": "http", "protocol": "TCP"}
            ],
        },
    }


def _peer(labels: dict[str, str], namespace: str) -> Manifest:
    """Pods with ``labels`` in ``namespace`` ("" = the policy's own namespace)."""
    peer: Manifest = {"podSelector": {"matchLabels": dict(labels)}}
    if namespace:
        peer["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return peer


def serving_policy(run: Manifest, settings: TrainingSettings) -> Manifest:
    """Every server of the run: in, the LLM gateway's pods (they carry the rollouts' model
    traffic) and the operator's (its RolloutBatch controller probes the endpoint first),
    on the serving port only; out, the object store only (the checkpoint). The kubelet's
    readiness probe comes from the node, which NetworkPolicies let through."""
    op = settings.operator
    clients = [_peer(op.gateway_labels, settings.gateway_namespace)]
    if settings.operator_labels:
        clients.append(_peer(settings.operator_labels, settings.operator_namespace))
    name = run["metadata"]["name"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": OWNER.metadata(run, serving_policy_name(name), **{LABEL_STEP: "serve"}),
        "spec": {
            "podSelector": {"matchLabels": {LABEL_TRAINING: name, LABEL_STEP: "serve"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": clients, "ports": [{"protocol": "TCP", "port": SERVING_PORT}]}],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": op.store_cidr}}],
                    "ports": [{"protocol": "TCP", "port": op.store_port}],
                }
            ],
        },
    }


def batch_environments(
    selection: RoundRollout, environments: list[ResolvedEnvironment] | None, manifest: str | None
) -> Manifest:
    """The round's spec.environments: the environments the run resolved once (by name, so
    every round rolls out on the same ones), or the manifest. A selector that resolved to
    more names than a RolloutBatch takes is passed on as it is (the batch resolves it
    again: an environment released since joins)."""
    if manifest:
        return {"manifestUri": manifest}
    names = [e.name for e in environments or []]
    chosen = selection.environments
    if chosen.selector is not None and len(names) > MAX_NAMES:
        return {"selector": chosen.selector.model_dump(mode="json", by_alias=True)}
    return {"names": names}


def round_batch(
    run: Manifest,
    spec: TrainingRunSpec,
    index: int,
    attempt: int,
    endpoint: str,
    environments: list[ResolvedEnvironment] | None,
    manifest: str | None,
) -> Manifest:
    """The round's RolloutBatch: spec.rollout's harness, samples and sampling against the
    round's server, written under the round's folder (a later attempt to its own
    subfolder: the first attempt's batch, which cannot be deleted, may still write)."""
    assert spec.rollout is not None  # rounds > 1: the spec's validator
    rollout = spec.rollout
    name = run["metadata"]["name"]
    folder = "rollouts" if attempt == 1 else f"rollouts-{attempt}"
    output = f"{round_folder(spec.output.uri, index)}/{folder}"
    policy = {
        "harness": rollout.harness,
        "model": served_as(name, index),
        "baseUrl": endpoint,
        "sampling": rollout.sampling.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return {
        "apiVersion": BATCH_API_VERSION,
        "kind": BATCH_KIND,
        "metadata": OWNER.metadata(
            run, rollouts_name(name, index, attempt), **{LABEL_ROUND: str(index)}
        ),
        "spec": {
            "environments": batch_environments(rollout, environments, manifest),
            "policies": [policy],
            "samplesPerEnvironment": rollout.samples_per_environment,
            "concurrency": rollout.concurrency,
            "output": {"uri": output},
        },
    }


__all__ = [
    "SERVE_CONTAINER",
    "SERVING_MIN_READY_SECONDS",
    "SERVING_PORT",
    "batch_environments",
    "endpoint_of",
    "rollouts_name",
    "round_batch",
    "serve_name",
    "served_as",
    "serving_deployment",
    "serving_policy",
    "serving_policy_name",
    "serving_service",
]

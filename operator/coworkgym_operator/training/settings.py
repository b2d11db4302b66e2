"""What the TrainingRun controller needs beyond the operator's settings: the training image
and where training pods may run on a GPU cluster (set by the Helm chart's ``training``
values; docs/training.md shows a GPU cluster's values)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from coworkgym_operator.core.settings import OperatorSettings

RayMode = Literal["auto", "off"]
# the labels the KubeRay Helm chart gives its operator's pods
KUBERAY_SELECTOR = "app.kubernetes.io/name=kuberay-operator"


@dataclass(frozen=True)
class TrainingSettings:
    operator: OperatorSettings = field(default_factory=OperatorSettings)
    # The image with the training extra (torch, transformers, ray[train]) and `cowork-gym
    # train`: sandbox-images/training/Dockerfile.
    image: str = "ghcr.io/cowork-gym/training:0.1.0"
    # Where training pods may run: GPU nodes' labels and taints, a RuntimeClass (e.g. nvidia).
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    runtime_class_name: str | None = None
    # The extended resource GPUs are requested by (the NVIDIA device plugin's).
    gpu_resource: str = "nvidia.com/gpu"
    # Per worker, where a run sets none.
    cpu: str = "2"
    memory: str = "8Gi"
    # /dev/shm of a training pod (a memory emptyDir): data loaders and NCCL use it.
    shm_size: str = "2Gi"
    # auto: a RayJob where the cluster serves ray.io/v1 RayJobs (KubeRay), else a Job;
    # off: always the plain Job.
    ray: RayMode = "auto"
    # Seconds a finished Job or RayJob stays, where a run sets no ttlSecondsAfterFinished.
    ttl_seconds_after_finished: int = 86_400
    # A training pod whose step has not advanced for this long is reported stalled (the
    # alert's window is the chart's; this only words the condition message).
    stall_seconds: float = 1800.0
    # How often (seconds) the controller reads a running training pod's log for progress.
    progress_interval_seconds: float = 10.0
    # Who may reach an on-policy round's checkpoint server (its NetworkPolicy): the LLM
    # gateway's pods (the operator's gateway labels and port), which carry the rollouts'
    # model traffic, in gateway_namespace ("" = the run's own namespace); and the operator's
    # own pods (operator_labels in operator_namespace), whose RolloutBatch controller probes
    # the endpoint before the first rollout. No operator_labels: the operator runs outside
    # the cluster, and its probe comes from the node, which NetworkPolicies let through.
    gateway_namespace: str = ""
    operator_labels: dict[str, str] = field(default_factory=dict)
    operator_namespace: str = ""
    # The run's <run>-training NetworkPolicy (builders/network.py). Its pods resolve names
    # (a RayJob's workers find the head by its Service's name; an S3 endpoint may be a
    # name) through the cluster DNS only: the pods dns_labels selects in dns_namespace, or,
    # where the cluster DNS is not a pod (a node-local cache; the test-bed's node), the
    # addresses in dns_cidrs instead. KubeRay's operator (kuberay_labels, in
    # kuberay_namespace; "" = any namespace) asks a RayJob's head for its job's state on
    # the dashboard port.
    dns_labels: dict[str, str] = field(default_factory=lambda: {"k8s-app": "kube-dns"})
    dns_namespace: str = "kube-system"
    dns_cidrs: tuple[str, ...] = ()
    kuberay_labels: dict[str, str] = field(default_factory=lambda: _labels(KUBERAY_SELECTOR))
    kuberay_namespace: str = ""
    # A training pod (or a round's server) the scheduler cannot place yet (no node has the
    # CPU, memory or GPUs free; its volumes cannot be bound) waits this long after its Job
    # (or Deployment) was created, saying why in the Running condition, before the run
    # fails PodCannotStart: nodes free up, an autoscaler adds one. A pod that cannot start
    # for another reason (its image cannot be pulled, its container not created) fails
    # after the operator's stage_start_grace_seconds, as before: that does not clear alone.
    scheduling_deadline_seconds: float = 900.0
    # TEST-BED SHORTCUT, never on a real cluster: a host folder (a checkout whose .venv has
    # the training extra) mounted read-only into the pod at the same path and put on
    # PYTHONPATH, so the python-base image trains without a ~6 GB torch image. "" = off.
    host_checkout: str = ""

    @classmethod
    def from_env(cls) -> TrainingSettings:
        env = os.environ
        return cls(
            operator=OperatorSettings.from_env(),
            image=env.get("COWORKGYM_TRAINING_IMAGE", cls.image),
            node_selector=_json(env, "COWORKGYM_TRAINING_NODE_SELECTOR", {}),
            tolerations=_json(env, "COWORKGYM_TRAINING_TOLERATIONS", []),
            runtime_class_name=env.get("COWORKGYM_TRAINING_RUNTIME_CLASS") or None,
            gpu_resource=env.get("COWORKGYM_TRAINING_GPU_RESOURCE", cls.gpu_resource),
            cpu=env.get("COWORKGYM_TRAINING_CPU", cls.cpu),
            memory=env.get("COWORKGYM_TRAINING_MEMORY", cls.memory),
            shm_size=env.get("COWORKGYM_TRAINING_SHM_SIZE", cls.shm_size),
            ray=_ray_mode(env.get("COWORKGYM_TRAINING_RAY", "auto")),
            ttl_seconds_after_finished=int(
                env.get("COWORKGYM_TRAINING_TTL_SECONDS", cls.ttl_seconds_after_finished)
            ),
            gateway_namespace=env.get("COWORKGYM_GATEWAY_NAMESPACE", ""),
            operator_labels=_labels(
                env.get("COWORKGYM_OPERATOR_SELECTOR", ""), "COWORKGYM_OPERATOR_SELECTOR"
            ),
            operator_namespace=env.get("COWORKGYM_OPERATOR_NAMESPACE", ""),
            dns_labels=_labels(
                env.get("COWORKGYM_TRAINING_DNS_SELECTOR", "k8s-app=kube-dns"),
                "COWORKGYM_TRAINING_DNS_SELECTOR",
            ),
            dns_namespace=env.get("COWORKGYM_TRAINING_DNS_NAMESPACE", cls.dns_namespace),
            dns_cidrs=tuple(_json(env, "COWORKGYM_TRAINING_DNS_CIDRS", [])),
            kuberay_labels=_labels(
                env.get("COWORKGYM_TRAINING_KUBERAY_SELECTOR", KUBERAY_SELECTOR),
                "COWORKGYM_TRAINING_KUBERAY_SELECTOR",
            ),
            kuberay_namespace=env.get("COWORKGYM_TRAINING_KUBERAY_NAMESPACE", ""),
            scheduling_deadline_seconds=float(
                env.get(
                    "COWORKGYM_TRAINING_SCHEDULING_DEADLINE_SECONDS",
                    cls.scheduling_deadline_seconds,
                )
            ),
            host_checkout=env.get("COWORKGYM_TRAINING_HOST_CHECKOUT", ""),
        )


def _json(env: os._Environ[str], name: str, default: Any) -> Any:
    raw = env.get(name) or ""
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r} is not JSON (the chart writes it with toJson)") from exc
    if not isinstance(value, type(default)):
        raise ValueError(f"{name}: expected a JSON {type(default).__name__}, got {raw!r}")
    return value


def _labels(selector: str, name: str = "") -> dict[str, str]:
    """a=1,b=2 (the chart's selectorString) as a matchLabels map (``name``: the variable
    it came from, for the error)."""
    pairs = [pair.split("=", 1) for pair in selector.split(",") if pair.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"{name or 'selector'}={selector!r}: expected key=value,...")
    return {key.strip(): value.strip() for key, value in pairs}


def _ray_mode(value: str) -> RayMode:
    if value not in ("auto", "off"):
        raise ValueError(
            f"COWORKGYM_TRAINING_RAY={value!r}: expected auto or off (the chart's training.ray)"
        )
    return "auto" if value == "auto" else "off"

"""Builders every kind's children share: owner references and metadata, the hardened
sandbox pod and its one-pod Job, the isolation NetworkPolicies, volume claims and token
Secrets, child names within 63 characters. Pure: no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coworkgym.spec import ResourceRequirements, SandboxSettings
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.core.sharding import inherited

Manifest = dict[str, Any]
SANDBOX_UID = 10001
LABEL_SANDBOX = "coworkgym.dev/sandbox"
LABEL_EGRESS = "coworkgym.dev/egress"
# the owner's metadata.generation a stage Job was built from: a Job from an older spec
# whose pod cannot start is replaced at once (the fix may be in the new spec)
LABEL_GENERATION = "coworkgym.dev/generation"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cowork-gym"}


def child_name(batch: str, suffix: str) -> str:
    """``<batch>-<suffix>``, at most 63 characters (Job names become pod labels): a long
    batch name is shortened and made unique by a hash of it."""
    name = f"{batch}-{suffix}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(batch.encode()).hexdigest()[:8]
    return f"{batch[: 63 - len(suffix) - 10]}-{digest}-{suffix}"


def controller_reference(owner: Manifest, api_version: str, kind: str) -> Manifest:
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(
    owner: Manifest, reference: Manifest, owner_label: str, name: str, labels: dict[str, str]
) -> Manifest:
    """A child's metadata: the owner's namespace, managed-by, ``owner_label`` naming the
    owner, the owner's shard (sharding.py), then ``labels``, and ``reference`` as its only
    owner reference."""
    shard = inherited(owner["metadata"].get("labels"))
    return {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": {**MANAGED_BY, owner_label: owner["metadata"]["name"], **shard, **labels},
        "ownerReferences": [reference],
    }


@dataclass(frozen=True)
class Owner:
    """A kind as the owner of its children: each child's metadata names its object by
    ``label`` and holds a controller reference to it (``api_version``, ``kind``)."""

    api_version: str
    kind: str
    label: str

    def reference(self, owner: Manifest) -> Manifest:
        return controller_reference(owner, self.api_version, self.kind)

    def metadata(self, owner: Manifest, name: str, **labels: str) -> Manifest:
        """A child's metadata (``child_metadata``): ``name``, then ``labels``."""
        return child_metadata(owner, self.reference(owner), self.label, name, labels)

    def isolation_policies(self, owner: Manifest, settings: OperatorSettings) -> list[Manifest]:
        """``isolation_policies`` over the sandbox pods of ``owner``, each policy named
        ``<owner>-<suffix>``."""
        name = owner["metadata"]["name"]
        select = {self.label: name, LABEL_SANDBOX: "true"}

        def meta(suffix: str) -> Manifest:
            return self.metadata(owner, child_name(name, suffix))

        return isolation_policies(meta, select, settings)


def volume_claim(
    metadata: Manifest, access_mode: str, size: str, storage_class: str | None
) -> Manifest:
    """A PersistentVolumeClaim of ``size``; no ``storage_class``: the cluster's default."""
    spec: Manifest = {"accessModes": [access_mode], "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
    }


def token_secret(metadata: Manifest, tokens: dict[str, str]) -> Manifest:
    """The Secret of a child's gateway tokens, one key each (a stage's, a rollout's)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "stringData": tokens,
    }


def isolation_policies(
    meta: Callable[[str], Manifest], select: dict[str, str], settings: OperatorSettings
) -> list[Manifest]:
    """Deny everything for the pods ``select`` matches; then allow only the LLM gateway for
    pods labelled egress=gateway, and only the object store for egress=object-store.
    ``meta`` gives a policy's metadata from its name suffix."""

    def policy(suffix: str, extra: dict[str, str], egress: list[Manifest]) -> Manifest:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta(suffix),
            "spec": {
                "podSelector": {"matchLabels": {**select, **extra}},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [],
                "egress": egress,
            },
        }

    gateway = {
        "to": [{"podSelector": {"matchLabels": settings.gateway_labels}}],
        "ports": [{"protocol": "TCP", "port": settings.gateway_port}],
    }
    store = {
        "to": [{"ipBlock": {"cidr": settings.store_cidr}}],
        "ports": [{"protocol": "TCP", "port": settings.store_port}],
    }
    return [
        policy("deny-all", {}, []),
        policy("egress-gateway", {LABEL_EGRESS: "gateway"}, [gateway]),
        policy("egress-store", {LABEL_EGRESS: "object-store"}, [store]),
    ]


FALLBACK_RESOURCES = ResourceRequirements(cpu="1", memory="2Gi")  # no chart value set either


def resolve_sandbox(mine: SandboxSettings, settings: OperatorSettings) -> SandboxSettings:
    """A spec's sandbox settings, with the operator's defaults where the spec has none."""
    defaults = settings.sandbox_defaults
    # The CRDs default none of these, so a field the user left out is None or empty here.
    return SandboxSettings(
        image=mine.image or settings.role_image,
        resources=ResourceRequirements(
            cpu=mine.resources.cpu or defaults.resources.cpu or FALLBACK_RESOURCES.cpu,
            memory=mine.resources.memory or defaults.resources.memory or FALLBACK_RESOURCES.memory,
        ),
        runtime_class_name=mine.runtime_class_name or defaults.runtime_class_name,
        node_selector=mine.node_selector or defaults.node_selector,
        tolerations=mine.tolerations or defaults.tolerations,
    )


def container_security() -> Manifest:
    """A sandbox container's securityContext (a fresh dict each call)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": SANDBOX_UID,
        "runAsGroup": SANDBOX_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def sandbox_pod(
    service_account: str,
    containers: list[Manifest],
    volumes: list[Manifest],
    sandbox: SandboxSettings,
    *,
    share_process_namespace: bool | None = None,
) -> Manifest:
    """A hardened sandbox pod spec: never restarted, no service-account token, no service
    links, non-root with the sandbox's runtime class, node selector and tolerations."""
    pod: Manifest = {
        "restartPolicy": "Never",
        "serviceAccountName": service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if share_process_namespace is not None:
        pod["shareProcessNamespace"] = share_process_namespace
    pod["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": SANDBOX_UID,
        "runAsGroup": SANDBOX_UID,
        "fsGroup": SANDBOX_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod["containers"] = containers
    pod["volumes"] = volumes
    if sandbox.runtime_class_name:
        pod["runtimeClassName"] = sandbox.runtime_class_name
    if sandbox.node_selector:
        pod["nodeSelector"] = dict(sandbox.node_selector)
    if sandbox.tolerations:
        pod["tolerations"] = [
            t.model_dump(by_alias=True, exclude_none=True) for t in sandbox.tolerations
        ]
    return pod


def job_manifest(
    metadata: Manifest, deadline: int, ttl: int, pod_labels: dict[str, str], pod: Manifest
) -> Manifest:
    """A Job of one pod that is never retried: a failed pod is the caller's to judge. The
    pod takes the Job's shard label, so that its replica sees it."""
    labels = {**inherited(metadata.get("labels")), **pod_labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline,
            "ttlSecondsAfterFinished": ttl,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }

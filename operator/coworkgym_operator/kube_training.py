"""The Kubernetes calls of the TrainingRun controller: what it observes for the pure
reconcile (the run, the RolloutBatch it names or the environments its rounds roll out on,
its Jobs or RayJobs, the training pod's log tail, whether KubeRay is installed), and
applying its plan. Synchronous, like kube.py."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .api.batch import BATCH_PLURAL, EnvironmentSelection
from .api.training import TRAINING_PLURAL
from .api.types import GROUP, VERSION
from .kube import Kube, created, merge_patch
from .kube_batch import BatchKube
from .rayjob import RAY_GROUP, RAY_VERSION, RAYJOB_KIND, RAYJOB_PLURAL
from .reconcile.environment import JobObservation
from .reconcile.training import BatchSeen, EnvironmentsSeen
from .training_builders import LABEL_TRAINING, Manifest

LOG_TAIL_LINES = 200
DISCOVERY_TTL_SECONDS = 60.0


class TrainingKube:
    def __init__(self, kube: Kube, *, ray_enabled: bool = True) -> None:
        self.kube = kube
        self.custom = client.CustomObjectsApi(kube.api)
        self.batches = BatchKube(kube)  # its environment lookup, shared with RolloutBatches
        # training.ray off: the operator has no RayJob rights, so it never asks
        self.ray_enabled = ray_enabled
        self._ray: tuple[float, bool] | None = None

    # ---- the run itself -----------------------------------------------------------------
    def read_run(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(GROUP, VERSION, namespace, TRAINING_PLURAL, name)

    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            TRAINING_PLURAL,
            name,
            {"status": merge_patch(before, after)},
            _content_type="application/merge-patch+json",
        )

    def _get(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any] | None:
        try:
            found: Any = self.custom.get_namespaced_custom_object(
                group, version, namespace, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found)

    # ---- what it reads ------------------------------------------------------------------
    def read_batch(self, namespace: str, name: str) -> BatchSeen:
        batch = self._get(GROUP, VERSION, namespace, BATCH_PLURAL, name)
        if batch is None:
            return BatchSeen(found=False)
        status = batch.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        complete = (conds.get("Complete") or {}).get("status") == "True"
        failed = (conds.get("Failed") or {}).get("status") == "True"
        return BatchSeen(
            found=True,
            phase=str(status.get("phase") or ""),
            complete=complete,
            failed=failed,
            output_uri=status.get("outputUri"),
            kept=(status.get("counts") or {}).get("kept"),
            message=str(status.get("message") or ""),
        )

    def resolve_environments(
        self, namespace: str, selection: EnvironmentSelection
    ) -> EnvironmentsSeen:
        """spec.rollout.environments (names or a selector) as a RolloutBatch resolves its
        spec.environments: the Released ones, and the named ones that are not."""
        released, not_released = self.batches.resolve_selection(namespace, selection)
        return EnvironmentsSeen(released=released or [], not_released=not_released)

    def observe_job(self, namespace: str, name: str) -> JobObservation:
        return self.kube.observe_job(namespace, name)

    def read_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(RAY_GROUP, RAY_VERSION, namespace, RAYJOB_PLURAL, name)

    def ray_available(self) -> bool:
        """Whether the API server serves ray.io/v1 rayjobs (KubeRay's CRD), asked of the
        discovery API (readable by every authenticated client) at most once a minute."""
        if not self.ray_enabled:
            return False
        now = time.monotonic()
        if self._ray is not None and now - self._ray[0] < DISCOVERY_TTL_SECONDS:
            return self._ray[1]
        try:
            found: Any = self.custom.get_api_resources(RAY_GROUP, RAY_VERSION)
            served = any(r.name == RAYJOB_PLURAL for r in found.resources or [])
        except ApiException as exc:
            if exc.status not in (404, 503):
                raise
            served = False
        self._ray = (now, served)
        return served

    def log_tail(self, namespace: str, job: str) -> str:
        """The last lines of the newest pod of Job ``job`` (a RayJob's submitter Job has
        the RayJob's name); "" while no container has started."""
        pods: Any = self.kube.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}")
        if not pods.items:
            return ""
        newest: Any = max(pods.items, key=lambda p: p.metadata.creation_timestamp)
        try:
            text: Any = self.kube.core.read_namespaced_pod_log(
                newest.metadata.name, namespace, tail_lines=LOG_TAIL_LINES
            )
        except ApiException as exc:
            if exc.status in (400, 404):  # not started yet, or gone
                return ""
            raise
        return str(text)

    def existing_children(self, namespace: str, run: str) -> frozenset[str]:
        selector = f"{LABEL_TRAINING}={run}"
        jobs: Any = self.kube.batch.list_namespaced_job(namespace, label_selector=selector)
        names = {f"Job/{j.metadata.name}" for j in jobs.items}
        if self.ray_available():
            listed: Any = self.custom.list_namespaced_custom_object(
                RAY_GROUP, RAY_VERSION, namespace, RAYJOB_PLURAL, label_selector=selector
            )
            names |= {f"{RAYJOB_KIND}/{r['metadata']['name']}" for r in listed.get("items", [])}
        return frozenset(names)

    # ---- what it does -------------------------------------------------------------------
    def create(self, manifest: Manifest) -> bool:
        if manifest["kind"] != RAYJOB_KIND:
            return self.kube.create(manifest)
        body: Any = manifest
        return created(
            lambda: self.custom.create_namespaced_custom_object(
                RAY_GROUP, RAY_VERSION, manifest["metadata"]["namespace"], RAYJOB_PLURAL, body
            )
        )

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        if kind != RAYJOB_KIND:
            return self.kube.delete(namespace, kind, name)
        try:
            self.custom.delete_namespaced_custom_object(
                RAY_GROUP,
                RAY_VERSION,
                namespace,
                RAYJOB_PLURAL,
                name,
                body=client.V1DeleteOptions(propagation_policy="Background"),
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def delete_children(self, namespace: str, run: str) -> None:
        """Belt and braces next to owner references."""
        selector = f"{LABEL_TRAINING}={run}"
        body = client.V1DeleteOptions(propagation_policy="Background")
        self.kube.batch.delete_collection_namespaced_job(
            namespace, label_selector=selector, body=body
        )
        if self.ray_available():
            self.custom.delete_collection_namespaced_custom_object(
                RAY_GROUP, RAY_VERSION, namespace, RAYJOB_PLURAL, label_selector=selector
            )


__all__ = ["TrainingKube"]

"""The Kubernetes calls of the TrainingRun controller: what it observes for the pure
reconcile (the run, the RolloutBatch it names or the environments its rounds roll out on,
its Jobs or RayJobs, the training pod's log tail, whether KubeRay is installed; with
rounds, the round's server and RolloutBatch), and applying its plan. Synchronous, like
core/kube.py.

A RolloutBatch is never deleted from here: the chart lets the operator create them (an
on-policy round's) but not delete them (users make them too); the owner reference lets
the garbage collector remove a run's batches with it."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from coworkgym_operator.core.kube import (
    CustomObjects,
    Kube,
    OwnStatus,
    background,
    created,
    deleted,
)
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.environment.selection import EnvironmentLookup
from coworkgym_operator.rollouts.api.types import BATCH_KIND, BATCH_PLURAL, EnvironmentSelection
from coworkgym_operator.training.api.types import TRAINING_PLURAL
from coworkgym_operator.training.builders.rayjob import (
    RAY_GROUP,
    RAY_VERSION,
    RAYJOB_KIND,
    RAYJOB_PLURAL,
)
from coworkgym_operator.training.builders.rounds import serve_name
from coworkgym_operator.training.builders.run import (
    LABEL_ROUND,
    LABEL_STEP,
    LABEL_TRAINING,
    Manifest,
)
from coworkgym_operator.training.reconcile.observe import batch_seen, serving_seen
from coworkgym_operator.training.reconcile.plan import BatchSeen, EnvironmentsSeen, ServingSeen

LOG_TAIL_LINES = 200
DISCOVERY_TTL_SECONDS = 60.0


class TrainingKube(OwnStatus):
    def __init__(self, kube: Kube, *, ray_enabled: bool = True) -> None:
        self.kube = kube
        self.custom = client.CustomObjectsApi(kube.api)
        self.apps = client.AppsV1Api(kube.api)
        self.own = CustomObjects(kube.api, TRAINING_PLURAL)
        self.batches = CustomObjects(kube.api, BATCH_PLURAL)
        self.rayjobs_api = CustomObjects(kube.api, RAYJOB_PLURAL, RAY_GROUP, RAY_VERSION)
        self.environments = EnvironmentLookup(kube)  # as RolloutBatches resolve theirs
        # training.ray off: the operator has no RayJob rights, so it never asks
        self.ray_enabled = ray_enabled
        self._ray: tuple[float, bool] | None = None

    # ---- what it reads ------------------------------------------------------------------
    def read_batch(self, namespace: str, name: str) -> BatchSeen:
        return batch_seen(name, self.batches.read(namespace, name))

    def observe_serving(self, namespace: str, run: str, index: int) -> ServingSeen:
        """Round ``index``'s server: its Deployment, Service and pods."""
        name = serve_name(run, index)
        read = self.kube.read_plain
        deployment = read(lambda: self.apps.read_namespaced_deployment(name, namespace))
        if deployment is None:
            return serving_seen(name, None, None, [])
        service = read(lambda: self.kube.core.read_namespaced_service(name, namespace))
        selector = f"{LABEL_TRAINING}={run},{LABEL_STEP}=serve,{LABEL_ROUND}={index}"
        pods: Any = self.kube.core.list_namespaced_pod(namespace, label_selector=selector)
        plain = [self.kube.plain(p) for p in pods.items]
        return serving_seen(name, deployment, service, plain)

    def resolve_environments(
        self, namespace: str, selection: EnvironmentSelection
    ) -> EnvironmentsSeen:
        """spec.rollout.environments (names or a selector) as a RolloutBatch resolves its
        spec.environments: the Released ones, and the named ones that are not."""
        released, not_released = self.environments.resolve_selection(namespace, selection)
        return EnvironmentsSeen(released=released or [], not_released=not_released)

    def observe_job(self, namespace: str, name: str) -> JobObservation:
        return self.kube.observe_job(namespace, name)

    def read_rayjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.rayjobs_api.read(namespace, name)

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

    def existing_children(self, namespace: str, run: str, rounds: bool = False) -> frozenset[str]:
        """ "Kind/name" of the run's children; ``rounds``: with the rounds' servers, their
        NetworkPolicy and the rounds' RolloutBatches."""
        selector = f"{LABEL_TRAINING}={run}"
        jobs: Any = self.kube.batch.list_namespaced_job(namespace, label_selector=selector)
        names = {f"Job/{j.metadata.name}" for j in jobs.items}
        if rounds:
            names |= self._round_children(namespace, selector)
        return frozenset(names | self.rayjobs(namespace, run))

    def rayjobs(self, namespace: str, run: str) -> set[str]:
        """ "RayJob/name" of the run's RayJobs (none where KubeRay is not served: no watch
        of them, as the operator may not even read them)."""
        if not self.ray_available():
            return set()
        listed: Any = self.custom.list_namespaced_custom_object(
            RAY_GROUP,
            RAY_VERSION,
            namespace,
            RAYJOB_PLURAL,
            label_selector=f"{LABEL_TRAINING}={run}",
        )
        return {f"{RAYJOB_KIND}/{r['metadata']['name']}" for r in listed.get("items", [])}

    def _round_children(self, namespace: str, selector: str) -> set[str]:
        core, net = self.kube.core, self.kube.net
        deployments: Any = self.apps.list_namespaced_deployment(namespace, label_selector=selector)
        services: Any = core.list_namespaced_service(namespace, label_selector=selector)
        policies: Any = net.list_namespaced_network_policy(namespace, label_selector=selector)
        batches = self.batches.list(namespace, selector)
        return (
            {f"Deployment/{d.metadata.name}" for d in deployments.items}
            | {f"Service/{s.metadata.name}" for s in services.items}
            | {f"NetworkPolicy/{p.metadata.name}" for p in policies.items}
            | {f"{BATCH_KIND}/{b['metadata']['name']}" for b in batches}
        )

    # ---- what it does -------------------------------------------------------------------
    def create(self, manifest: Manifest) -> bool:
        """As Kube.create (the raw answer dropped), for the kinds only TrainingRuns make."""
        kind, namespace = manifest["kind"], manifest["metadata"]["namespace"]
        body: Any = manifest  # the client takes plain dicts as request bodies
        apps, core = self.apps, self.kube.core
        if kind == "Deployment":
            return created(
                lambda: apps.create_namespaced_deployment(namespace, body, _preload_content=False)
            )
        if kind == "Service":
            return created(
                lambda: core.create_namespaced_service(namespace, body, _preload_content=False)
            )
        if kind == RAYJOB_KIND:
            return self.rayjobs_api.create(manifest)
        if kind == BATCH_KIND:
            return self.batches.create(manifest)
        return self.kube.create(manifest)

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        raw = background()
        if kind == "Deployment":
            return deleted(lambda: self.apps.delete_namespaced_deployment(name, namespace, **raw))
        if kind == "Service":
            return deleted(lambda: self.kube.core.delete_namespaced_service(name, namespace, **raw))
        if kind == RAYJOB_KIND:
            return self.rayjobs_api.delete(namespace, name)
        return self.kube.delete(namespace, kind, name)

    def delete_children(self, namespace: str, run: str) -> None:
        """Belt and braces next to owner references (but RolloutBatches: see above)."""
        selector = f"{LABEL_TRAINING}={run}"
        body = client.V1DeleteOptions(propagation_policy="Background")
        self.kube.batch.delete_collection_namespaced_job(
            namespace, label_selector=selector, body=body
        )
        self.apps.delete_collection_namespaced_deployment(
            namespace, label_selector=selector, body=body
        )
        # Services are deleted one by one: not every API server version serves a
        # deletecollection of them
        services: Any = self.kube.core.list_namespaced_service(namespace, label_selector=selector)
        for service in services.items:
            self.delete(namespace, "Service", service.metadata.name)
        self.kube.net.delete_collection_namespaced_network_policy(
            namespace, label_selector=selector
        )
        if self.ray_available():
            self.rayjobs_api.delete_all(namespace, selector)


__all__ = ["TrainingKube"]

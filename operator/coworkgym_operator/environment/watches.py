"""What the CoworkEnvironment controller knows of its children without asking: kopf
indices kept by watches on the stage Jobs, their pods, and the environments' volume claims
and NetworkPolicies (each selected by the environment label, each kept as a small summary).

Before these, every timer run of every environment made four blocking API calls (a GET of
its Job, LISTs of pods, claims and NetworkPolicies), whose cost on the API server grew with
the objects in the namespace: a sweep cost about N². Now a reconcile observes from memory,
and a timer run that finds nothing changed since the last reconcile (the same environment
resourceVersion, the same observation) returns without any API call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from coworkgym_operator.core.observe import (
    JobObservation,
    job_observation,
    job_summary,
    pod_summary,
)
from coworkgym_operator.environment.builders import LABEL_ENV

Key = tuple[str, str]  # (namespace, name)


@kopf.index("batch", "v1", "jobs", labels={LABEL_ENV: kopf.PRESENT})
def env_jobs(name: str, namespace: str | None, body: kopf.Body, **_: Any) -> dict[Key, Any]:
    return {(str(namespace), name): job_summary(dict(body))}


@kopf.index("v1", "pods", labels={LABEL_ENV: kopf.PRESENT, "job-name": kopf.PRESENT})
def env_pods(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[Key, Any]:
    return {(str(namespace), labels["job-name"]): pod_summary(dict(body))}


@kopf.index("v1", "persistentvolumeclaims", labels={LABEL_ENV: kopf.PRESENT})
def env_claims(
    name: str, namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Key, str]:
    return {(str(namespace), labels[LABEL_ENV]): f"PersistentVolumeClaim/{name}"}


@kopf.index("networking.k8s.io", "v1", "networkpolicies", labels={LABEL_ENV: kopf.PRESENT})
def env_policies(
    name: str, namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Key, str]:
    return {(str(namespace), labels[LABEL_ENV]): f"NetworkPolicy/{name}"}


@dataclass(frozen=True)
class Indices:
    """The four indices, as kopf hands them to a handler (``None``: not registered, e.g.
    a test that imports one controller module: the controller then asks the API)."""

    jobs: Any
    pods: Any
    claims: Any
    policies: Any

    @classmethod
    def of(cls, kwargs: Mapping[str, Any]) -> Indices | None:
        found = [kwargs.get(n) for n in ("env_jobs", "env_pods", "env_claims", "env_policies")]
        return None if any(i is None for i in found) else cls(*found)

    def job(self, namespace: str, name: str, created: bool) -> JobObservation:
        """The Job's state from the watches; one this process created that the watch has
        not delivered yet reads as running, not missing (no second create)."""
        stored = list(self.jobs.get((namespace, name), ()))
        if not stored and created:
            return JobObservation(name, "running")
        pods = list(self.pods.get((namespace, name), ()))
        return job_observation(name, stored[0] if stored else None, pods, wait_for_pods=True)

    def owner(self, namespace: str, job: str) -> str | None:
        """The uid of the environment that owns a stage Job, if the watch has the Job."""
        stored = list(self.jobs.get((namespace, job), ()))
        uid = stored[0]["metadata"].get("ownerUid") if stored else None
        return str(uid) if uid else None

    def children(self, namespace: str, env: str) -> frozenset[str]:
        key = (namespace, env)
        return frozenset([*self.claims.get(key, ()), *self.policies.get(key, ())])


__all__ = ["Indices", "env_claims", "env_jobs", "env_pods", "env_policies"]

"""What a controller knows of its children without asking: kopf indices kept by watches,
each selected by the label that names the owner, each entry a small summary.

Every kind keeps the same shapes (``watch_children`` registers them under the kind's
prefix): its Jobs by name (``job_summary``), their pods by Job name (``pod_summary``), and
any other child by its owner's name ("Kind/name": what a LIST by label used to answer).
A reconcile reads them through ``Indices``; before them, every timer run of every object
made a GET of each Job and LISTs of its pods and children, a cost on the API server that
grew with the objects in the namespace (a sweep cost about N²).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import kopf

from coworkgym_operator.core.observe import (
    JobObservation,
    job_observation,
    job_summary,
    pod_summary,
)

Key = tuple[str, str]  # (namespace, name)
Resource = tuple[str, ...]  # kopf's positional (group, version, plural) or (version, plural)
JOBS: Resource = ("batch", "v1", "jobs")
PODS: Resource = ("v1", "pods")
CLAIMS: Resource = ("v1", "persistentvolumeclaims")
POLICIES: Resource = ("networking.k8s.io", "v1", "networkpolicies")
EMPTY: Mapping[Any, Any] = MappingProxyType({})


def jobs_by_name(name: str, namespace: str | None, body: kopf.Body, **_: Any) -> dict[Key, Any]:
    return {(str(namespace), name): job_summary(dict(body))}


def pods_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[Key, Any]:
    return {(str(namespace), labels["job-name"]): pod_summary(dict(body))}


def by_owner(label: str, kind: str) -> Callable[..., dict[Key, str]]:
    """An index of children by their owner's name (``label``'s value): "Kind/name"."""

    def index(name: str, namespace: str | None, labels: Mapping[str, str], **_: Any) -> Any:
        return {(str(namespace), labels[label]): f"{kind}/{name}"}

    return index


@dataclass(frozen=True)
class Watches:
    """The names of one kind's indices (``watch_children`` registers them)."""

    jobs: str | None = None
    pods: str | None = None
    owned: tuple[str, ...] = ()
    more: tuple[str, ...] = ()  # the kind's own indices, handed over by name

    def of(self, kwargs: Mapping[str, Any]) -> Indices | None:
        """The indices as kopf hands them to a handler (``None``: not all registered, e.g. a
        test that imports one controller module: the controller then asks the API)."""
        names = [n for n in (self.jobs, self.pods, *self.owned, *self.more) if n is not None]
        if any(kwargs.get(n) is None for n in names):
            return None
        return Indices(
            jobs=kwargs[self.jobs] if self.jobs else EMPTY,
            pods=kwargs[self.pods] if self.pods else EMPTY,
            owned=tuple(kwargs[n] for n in self.owned),
            more={n: kwargs[n] for n in self.more},
        )


def watch_children(
    prefix: str,
    label: str,
    owned: Mapping[str, Resource],
    *,
    jobs: bool = True,
    more: Sequence[str] = (),
) -> Watches:
    """Register the indices of a kind whose children carry ``label`` (the owner's name):
    ``<prefix>_jobs`` and ``<prefix>_pods`` (the Jobs' pods) where ``jobs``, and one by
    owner per ``owned`` entry (child kind → its resource), ``<prefix>_owned_<kind>``."""
    selected = {label: kopf.PRESENT}
    if jobs:
        kopf.index(*JOBS, id=f"{prefix}_jobs", labels=selected)(jobs_by_name)
        pod_labels = {**selected, "job-name": kopf.PRESENT}
        kopf.index(*PODS, id=f"{prefix}_pods", labels=pod_labels)(pods_by_job)
    ids = []
    for kind, resource in owned.items():
        ids.append(f"{prefix}_owned_{kind.lower()}")
        kopf.index(*resource, id=ids[-1], labels=selected)(by_owner(label, kind))
    return Watches(
        f"{prefix}_jobs" if jobs else None,
        f"{prefix}_pods" if jobs else None,
        tuple(ids),
        tuple(more),
    )


@dataclass(frozen=True)
class Indices:
    """One kind's indices, read as the API would answer: a Job's state, the owner of a
    Job, an owner's children."""

    jobs: Any = EMPTY
    pods: Any = EMPTY
    owned: tuple[Any, ...] = ()
    more: Mapping[str, Any] = field(default_factory=dict)

    def job(self, namespace: str, name: str, created: bool) -> JobObservation:
        """The Job's state from the watches; one this process created that the watch has
        not delivered yet reads as running, not missing (no second create)."""
        stored = list(self.jobs.get((namespace, name), ()))
        if not stored and created:
            return JobObservation(name, "running")
        pods = list(self.pods.get((namespace, name), ()))
        return job_observation(name, stored[0] if stored else None, pods, wait_for_pods=True)

    def owner(self, namespace: str, job: str) -> str | None:
        """The uid of the object that owns a Job (its controller), if the watch has it."""
        stored = list(self.jobs.get((namespace, job), ()))
        uid = stored[0]["metadata"].get("ownerUid") if stored else None
        return str(uid) if uid else None

    def children(self, namespace: str, owner: str) -> frozenset[str]:
        """ "Kind/name" of the owner's children in the by-owner indices."""
        key = (namespace, owner)
        return frozenset(child for index in self.owned for child in index.get(key, ()))

    def get(self, index: str, key: Any) -> list[Any]:
        """The entries of one of the kind's own indices under ``key``."""
        return list(self.more[index].get(key, ()))


__all__ = [
    "CLAIMS",
    "JOBS",
    "PODS",
    "POLICIES",
    "Indices",
    "Watches",
    "by_owner",
    "jobs_by_name",
    "pods_by_job",
    "watch_children",
]

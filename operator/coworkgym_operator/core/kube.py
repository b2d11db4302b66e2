"""The client every kind's cluster I/O goes through (the kubernetes client, synchronous:
kopf runs sync handlers in its thread pool): each request counted, write calls' raw answers
dropped, the plain creates and deletes of children, and a stage Job's observation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from coworkgym_operator.core import metrics
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import Manifest
from coworkgym_operator.core.observe import JobObservation, job_observation

# Write calls ask for the raw response (``_preload_content=False``) and drop it: the answer
# is not read, and turning a created Job into the client's models was most of a create's
# CPU. A non-2xx answer still raises ApiException.


def dropped(response: Any) -> None:
    """Read a raw answer to the end and give its connection back to the pool (an answer the
    client already read, from a call made without it, needs nothing)."""
    if hasattr(response, "release_conn"):
        response.read()
        response.release_conn()


def _tolerating(call: Callable[[], Any], status: int) -> bool:
    """Run a write call (raw, ``_preload_content=False``); True if it did it, False if the
    API answered ``status`` (the object was there already, or gone already)."""
    try:
        dropped(call())
    except ApiException as exc:
        if exc.status == status:
            return False
        raise
    return True


def created(create: Callable[[], Any]) -> bool:
    """Run a create call; an object that already exists is fine (level-triggered: a
    restarted operator plans the same creates again). True if this call created it."""
    return _tolerating(create, 409)


def background() -> Any:
    """The keyword arguments of a delete call: children deleted in the background (the
    object's pods with it), the raw answer (dropped by ``deleted``)."""
    return {
        "body": client.V1DeleteOptions(propagation_policy="Background"),
        "_preload_content": False,
    }


def deleted(delete: Callable[[], Any]) -> bool:
    """Run a delete call; an object already gone is fine. True if this call deleted it."""
    return _tolerating(delete, 404)


def found(get: Callable[[], Any]) -> Any | None:
    """Run a read call; None where there is nothing of that name (404)."""
    try:
        return get()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


class CustomObjects:
    """One custom kind through the custom objects API: what every kind does to itself and
    to its custom children (read, status write, create, list and delete by label)."""

    def __init__(
        self, api: client.ApiClient, plural: str, group: str = GROUP, version: str = VERSION
    ) -> None:
        self.api = client.CustomObjectsApi(api)
        self.where = (group, version)
        self.plural = plural

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as it is now (None: it is gone)."""
        group, version = self.where
        obj = found(
            lambda: self.api.get_namespaced_custom_object(
                group, version, namespace, self.plural, name
            )
        )
        return None if obj is None else dict(obj)

    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        """Make the status ``after`` (read as ``before``): a merge patch that also removes the
        keys ``after`` no longer has (a plain merge would keep them)."""
        group, version = self.where
        dropped(
            self.api.patch_namespaced_custom_object_status(
                group, version, namespace, self.plural, name,
                {"status": merge_patch(before, after)},
                _content_type="application/merge-patch+json", _preload_content=False,
            )
        )  # fmt: skip

    def create(self, manifest: Manifest) -> bool:
        """Create one; one that exists is fine (level-triggered). True if created."""
        group, version = self.where
        body: Any = manifest  # the client accepts plain dicts as request bodies
        namespace = manifest["metadata"]["namespace"]
        return created(
            lambda: self.api.create_namespaced_custom_object(
                group, version, namespace, self.plural, body, _preload_content=False
            )
        )

    def delete(self, namespace: str, name: str) -> bool:
        group, version = self.where
        return deleted(
            lambda: self.api.delete_namespaced_custom_object(
                group, version, namespace, self.plural, name, **background()
            )
        )

    def list(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        group, version = self.where
        listed: Any = self.api.list_namespaced_custom_object(
            group, version, namespace, self.plural, label_selector=selector
        )
        return list(listed.get("items", []))

    def delete_all(self, namespace: str, selector: str) -> None:
        """Delete those ``selector`` matches (in the background: children go with them)."""
        group, version = self.where
        self.api.delete_collection_namespaced_custom_object(
            group, version, namespace, self.plural, label_selector=selector,
            propagation_policy="Background",
        )  # fmt: skip


class OwnStatus:
    """Mixed into a kind's I/O: the status writes of its own objects (``own``)."""

    own: CustomObjects

    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        self.own.write_status(namespace, name, before, after)


class Kube:
    def __init__(self, api: client.ApiClient | None = None) -> None:
        self.api = api or client.ApiClient()
        _count_calls(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.core = client.CoreV1Api(self.api)
        self.net = client.NetworkingV1Api(self.api)

    def observe_job(self, namespace: str, name: str) -> JobObservation:
        """The Job's state by a GET of it and a LIST of its pods (read as
        ``reconcile.observe.job_observation`` reads the watches' copies)."""
        job = found(lambda: self.batch.read_namespaced_job(name, namespace))
        if job is None:
            return JobObservation(name, "missing")
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
        return job_observation(name, self.plain(job), [self.plain(p) for p in pods])

    def plain(self, obj: Any) -> dict[str, Any]:
        """A client object as the API serves it (camelCase keys), for the pure readers."""
        plain: dict[str, Any] = self.api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return plain

    def read_plain(self, get: Callable[[], Any]) -> dict[str, Any] | None:
        """A read call's object as the API serves it (None: not found)."""
        obj = found(get)
        return None if obj is None else self.plain(obj)

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        """Delete a child (its pods with it); one already gone is fine. True if deleted."""
        raw = background()
        if kind == "Job":
            return deleted(lambda: self.batch.delete_namespaced_job(name, namespace, **raw))
        if kind == "PersistentVolumeClaim":
            return deleted(
                lambda: self.core.delete_namespaced_persistent_volume_claim(name, namespace, **raw)
            )
        if kind == "Secret":  # the gateway tokens
            return deleted(lambda: self.core.delete_namespaced_secret(name, namespace, **raw))
        raise ValueError(f"cannot delete {kind}")

    def delete_labelled(self, namespace: str, selector: str) -> None:
        """Delete the children ``selector`` matches (Jobs, pods, volume claims, policies,
        Secrets): belt and braces next to owner references, without a garbage collector."""
        body = client.V1DeleteOptions(propagation_policy="Background")
        self.batch.delete_collection_namespaced_job(namespace, label_selector=selector, body=body)
        for delete in (
            self.core.delete_collection_namespaced_pod,
            self.core.delete_collection_namespaced_persistent_volume_claim,
            self.net.delete_collection_namespaced_network_policy,
            self.core.delete_collection_namespaced_secret,
        ):
            delete(namespace, label_selector=selector)

    def create(self, manifest: Manifest) -> bool:
        """Create a child; an existing one is fine (level-triggered). True if created."""
        namespace = manifest["metadata"]["namespace"]
        kind = manifest["kind"]
        body: Any = manifest  # the client accepts plain dicts as request bodies
        if kind == "Job":
            return created(
                lambda: self.batch.create_namespaced_job(namespace, body, _preload_content=False)
            )
        if kind == "PersistentVolumeClaim":
            return created(
                lambda: self.core.create_namespaced_persistent_volume_claim(
                    namespace, body, _preload_content=False
                )
            )
        if kind == "NetworkPolicy":
            return created(
                lambda: self.net.create_namespaced_network_policy(
                    namespace, body, _preload_content=False
                )
            )
        if kind == "Secret":  # the gateway tokens of LLM-backed stages and rollouts
            return created(
                lambda: self.core.create_namespaced_secret(namespace, body, _preload_content=False)
            )
        raise ValueError(f"cannot create {kind}")


def _count_calls(api: client.ApiClient) -> None:
    """Count every request made through ``api`` (metrics.API_CALLS), by verb and resource:
    the figure behind "API calls per transition" and "idle means no calls"."""
    if getattr(api, "_coworkgym_counted", False):
        return
    send = api.call_api

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = api_call_of(method, url)
        metrics.API_CALLS.labels(verb, resource).inc()
        return send(method, url, *args, **kwargs)

    api.call_api = counted  # type: ignore[method-assign]
    api._coworkgym_counted = True  # type: ignore[attr-defined]


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def api_call_of(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request: GET of a collection is a list, DELETE of one is a
    deletecollection; the resource is the path's plural (with /status, /log...)."""
    path = urlsplit(url).path.strip("/").split("/")
    # /api/v1/... or /apis/<group>/<version>/...; then namespaces/<ns>/ when namespaced
    rest = path[2:] if path[:1] == ["api"] else path[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = "/".join([rest[0], *rest[2:3]]) if rest else "(root)"
    named = len(rest) >= 2
    if method == "GET":
        return ("get" if named else "list"), resource
    if method == "DELETE":
        return ("delete" if named else "deletecollection"), resource
    return _VERBS.get(method, method.lower()), resource


def merge_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``before`` into ``after``."""
    patch: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            if value != old:
                patch[key] = merge_patch(old, value)
        elif value != old or key not in before:
            patch[key] = value
    return patch


_shared: Kube | None = None


def kube() -> Kube:
    """The operator's one client (in-cluster config, else the kubeconfig), made on first use."""
    global _shared
    if _shared is None:
        from kubernetes import config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        _shared = Kube()
    return _shared

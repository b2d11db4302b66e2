"""The Kubernetes calls (and the endpoint probe) of the RolloutBatch controller: what it
observes for the pure reconcile, and applying its plan. Synchronous, like kube.py (kopf
runs sync handlers in its thread pool)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import Kube, merge_patch
from coworkgym_operator.environment.selection import EnvironmentLookup
from coworkgym_operator.rollouts.api.types import (
    BATCH_PLURAL,
    ResolvedEnvironment,
    RolloutBatchSpec,
)
from coworkgym_operator.rollouts.builders import LABEL_BATCH, Manifest


class BatchKube:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.custom = client.CustomObjectsApi(kube.api)
        self.environments = EnvironmentLookup(kube)

    # ---- the batch itself ----------------------------------------------------------------
    def read_batch(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The RolloutBatch as it is now (None: it is gone)."""
        try:
            found: Any = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, BATCH_PLURAL, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found)

    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        """Make the status ``after`` (read as ``before``): a merge patch that also removes
        the keys ``after`` no longer has (a finished rollout leaves status.running)."""
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            BATCH_PLURAL,
            name,
            {"status": merge_patch(before, after)},
            _content_type="application/merge-patch+json",
        )

    # ---- environments ------------------------------------------------------------------
    def resolve(
        self, namespace: str, spec: RolloutBatchSpec
    ) -> tuple[list[ResolvedEnvironment] | None, dict[str, str]]:
        return self.environments.resolve_selection(namespace, spec.environments)

    # ---- children ----------------------------------------------------------------------
    def existing_children(self, namespace: str, batch: str) -> frozenset[str]:
        selector = f"{LABEL_BATCH}={batch}"
        core, net, jobs = self.kube.core, self.kube.net, self.kube.batch
        listed: list[tuple[str, Any]] = [
            ("Job", jobs.list_namespaced_job(namespace, label_selector=selector)),
            (
                "PersistentVolumeClaim",
                core.list_namespaced_persistent_volume_claim(namespace, label_selector=selector),
            ),
            (
                "NetworkPolicy",
                net.list_namespaced_network_policy(namespace, label_selector=selector),
            ),
        ]
        names = {f"{kind}/{item.metadata.name}" for kind, found in listed for item in found.items}
        return frozenset(names)  # Secrets are not listed: the operator may not read them

    def create(self, manifest: Manifest) -> bool:
        return self.kube.create(manifest)  # Secrets too (the rollouts' gateway tokens)

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        if kind != "Secret":
            return self.kube.delete(namespace, kind, name)
        try:
            self.kube.core.delete_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def delete_children(self, namespace: str, batch: str) -> None:
        """Belt and braces next to owner references."""
        selector = f"{LABEL_BATCH}={batch}"
        body = client.V1DeleteOptions(propagation_policy="Background")
        k = self.kube
        k.batch.delete_collection_namespaced_job(namespace, label_selector=selector, body=body)
        k.core.delete_collection_namespaced_pod(namespace, label_selector=selector)
        k.core.delete_collection_namespaced_persistent_volume_claim(
            namespace, label_selector=selector
        )
        k.net.delete_collection_namespaced_network_policy(namespace, label_selector=selector)
        k.core.delete_collection_namespaced_secret(namespace, label_selector=selector)


def probe(urls: Iterable[str], timeout_s: float) -> dict[str, str]:
    """Endpoint → why it did not answer. Any HTTP answer counts as reachable (a 401 or
    404 means a server is there); a refused connection, a DNS failure or a timeout not."""
    down: dict[str, str] = {}
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    for url in urls:
        try:
            request = urllib.request.Request(url.rstrip("/") + "/models", method="GET")
            with direct.open(request, timeout=timeout_s):
                pass
        except urllib.error.HTTPError:
            continue
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            down[url] = f"{type(reason).__name__}: {reason}"[:300]
    return down


__all__ = ["BatchKube", "probe"]

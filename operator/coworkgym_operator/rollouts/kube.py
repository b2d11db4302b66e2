"""The Kubernetes calls (and the endpoint probe) of the RolloutBatch controller: what it
observes for the pure reconcile, and applying its plan. Synchronous, like core/kube.py
(reconciles run in worker threads)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from coworkgym_operator.core.kube import CustomObjects, Kube, OwnStatus
from coworkgym_operator.environment.selection import EnvironmentLookup
from coworkgym_operator.rollouts.api.types import (
    BATCH_PLURAL,
    ResolvedEnvironment,
    RolloutBatchSpec,
)
from coworkgym_operator.rollouts.builders import LABEL_BATCH, Manifest


class BatchKube(OwnStatus):
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.own = CustomObjects(kube.api, BATCH_PLURAL)
        self.environments = EnvironmentLookup(kube)

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
        return self.kube.delete(namespace, kind, name)

    def delete_children(self, namespace: str, batch: str) -> None:
        self.kube.delete_labelled(namespace, f"{LABEL_BATCH}={batch}")


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

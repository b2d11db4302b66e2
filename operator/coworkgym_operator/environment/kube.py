"""The CoworkEnvironment's cluster I/O: its children by label, its status writes and
finalizer (the shared client, core/kube.py, does the rest)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import LABEL_SANDBOX
from coworkgym_operator.core.kube import CustomObjects, Kube, OwnStatus
from coworkgym_operator.environment.api.types import PLURAL
from coworkgym_operator.environment.builders import LABEL_ENV


class EnvironmentKube(Kube, OwnStatus):
    def __init__(self, api: client.ApiClient | None = None) -> None:
        super().__init__(api)
        self.own = CustomObjects(self.api, PLURAL)

    def existing_children(self, namespace: str, env_name: str) -> frozenset[str]:
        selector = f"{LABEL_ENV}={env_name}"
        names = {
            f"PersistentVolumeClaim/{p.metadata.name}"
            for p in self.core.list_namespaced_persistent_volume_claim(
                namespace, label_selector=selector
            ).items
        }
        names |= {
            f"NetworkPolicy/{p.metadata.name}"
            for p in self.net.list_namespaced_network_policy(
                namespace, label_selector=selector
            ).items
        }
        return frozenset(names)

    def delete_stage_pods(self, namespace: str, env_name: str) -> None:
        """The environment's stage pods (the Jobs, finished, stay)."""
        selector = f"{LABEL_ENV}={env_name},{LABEL_SANDBOX}=true"
        self.core.delete_collection_namespaced_pod(namespace, label_selector=selector)

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        """Drop one finalizer from a CoworkEnvironment (a JSON patch that tests the index,
        so a concurrent change of the list makes it fail instead of removing another)."""
        custom = client.CustomObjectsApi(self.api)
        body: Any = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        finalizers: list[str] = body.get("metadata", {}).get("finalizers") or []
        if finalizer not in finalizers:
            return
        at = finalizers.index(finalizer)
        patch = [
            {"op": "test", "path": f"/metadata/finalizers/{at}", "value": finalizer},
            {"op": "remove", "path": f"/metadata/finalizers/{at}"},
        ]
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            patch,
            _content_type="application/json-patch+json",
        )

    def delete_children(self, namespace: str, env_name: str) -> None:
        self.delete_labelled(namespace, f"{LABEL_ENV}={env_name}")

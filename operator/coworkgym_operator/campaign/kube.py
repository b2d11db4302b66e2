"""The Kubernetes calls of the SynthesisCampaign controller: the campaign, and its child
CoworkEnvironments (listed by label, created, deleted). Synchronous, like kube.py."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from coworkgym_operator.campaign.api.types import CAMPAIGN_PLURAL
from coworkgym_operator.campaign.reconcile.children import LABEL_CAMPAIGN
from coworkgym_operator.campaign.reconcile.plan import child_state
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import Manifest
from coworkgym_operator.core.kube import Kube, created, merge_patch
from coworkgym_operator.environment.api.types import PLURAL


class CampaignKube:
    def __init__(self, kube: Kube) -> None:
        self.custom = client.CustomObjectsApi(kube.api)

    def read_campaign(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The SynthesisCampaign as it is now (None: it is gone)."""
        try:
            found: Any = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, CAMPAIGN_PLURAL, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found)

    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            CAMPAIGN_PLURAL,
            name,
            {"status": merge_patch(before, after)},
            _content_type="application/merge-patch+json",
        )

    def children(self, namespace: str, name: str, uid: str) -> list[Any]:
        """The campaign's children (one LIST by label), those this campaign owns: a campaign
        deleted and made again under the same name does not adopt the old one's."""
        listed: Any = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=f"{LABEL_CAMPAIGN}={name}"
        )
        return [
            child_state(item)
            for item in listed.get("items", [])
            if any(o.get("uid") == uid for o in item["metadata"].get("ownerReferences") or [])
        ]

    def create(self, manifest: Manifest) -> bool:
        """Create a child; one that exists is fine (level-triggered). True if created."""
        body: Any = manifest
        return created(
            lambda: self.custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                manifest["metadata"]["namespace"],
                PLURAL,
                body,
                _preload_content=False,
            )
        )

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        raise ValueError(f"a campaign deletes no single {kind}")  # its plans delete nothing

    def delete_children(self, namespace: str, name: str) -> None:
        """Belt and braces next to owner references: works without a garbage collector.
        Each child's own finalizer has the environment controller delete its children."""
        self.custom.delete_collection_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            label_selector=f"{LABEL_CAMPAIGN}={name}",
            propagation_policy="Background",
        )


__all__ = ["CampaignKube"]

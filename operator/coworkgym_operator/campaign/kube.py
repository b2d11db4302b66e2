"""The Kubernetes calls of the SynthesisCampaign controller: the campaign, and its child
CoworkEnvironments (listed by label, created, deleted). Synchronous, like core/kube.py."""

from __future__ import annotations

from coworkgym_operator.campaign.api.types import CAMPAIGN_PLURAL
from coworkgym_operator.campaign.reconcile.children import LABEL_CAMPAIGN
from coworkgym_operator.campaign.reconcile.plan import ChildState, child_state
from coworkgym_operator.core.builders import Manifest
from coworkgym_operator.core.kube import CustomObjects, Kube, OwnStatus
from coworkgym_operator.environment.api.types import PLURAL


class CampaignKube(OwnStatus):
    def __init__(self, kube: Kube) -> None:
        self.own = CustomObjects(kube.api, CAMPAIGN_PLURAL)
        self.environments = CustomObjects(kube.api, PLURAL)

    def children(self, namespace: str, name: str, uid: str) -> list[ChildState]:
        """The campaign's children (one LIST by label), those this campaign owns: a campaign
        deleted and made again under the same name does not adopt the old one's."""
        return [
            child_state(item)
            for item in self.environments.list(namespace, f"{LABEL_CAMPAIGN}={name}")
            if any(o.get("uid") == uid for o in item["metadata"].get("ownerReferences") or [])
        ]

    def create(self, manifest: Manifest) -> bool:
        """Create a child; one that exists is fine (level-triggered). True if created."""
        return self.environments.create(manifest)

    def delete(self, namespace: str, kind: str, name: str) -> bool:
        raise ValueError(f"a campaign deletes no single {kind}")  # its plans delete nothing

    def delete_children(self, namespace: str, name: str) -> None:
        """Belt and braces next to owner references: works without a garbage collector.
        Each child's own finalizer has the environment controller delete its children."""
        self.environments.delete_all(namespace, f"{LABEL_CAMPAIGN}={name}")


__all__ = ["CampaignKube"]

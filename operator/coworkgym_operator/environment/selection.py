"""The Released CoworkEnvironments a selection takes (names or a label selector): read by
RolloutBatches and TrainingRuns alike, the one way another kind reads environments."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import Kube
from coworkgym_operator.environment.api.types import PLURAL
from coworkgym_operator.rollouts.api.types import EnvironmentSelection, ResolvedEnvironment

RELEASED = "Released"


class EnvironmentLookup:
    def __init__(self, kube: Kube) -> None:
        self.custom = client.CustomObjectsApi(kube.api)

    def _environments(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        listed: Any = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=selector or None
        )
        items: list[dict[str, Any]] = listed.get("items", [])
        return sorted(items, key=lambda e: str(e["metadata"]["name"]))

    def resolve_selection(
        self, namespace: str, selection: EnvironmentSelection
    ) -> tuple[list[ResolvedEnvironment] | None, dict[str, str]]:
        """The Released environments the selection takes, and the named ones that are
        missing or not Released (with their phase). A manifest: (None, {}). A
        RolloutBatch's spec.environments and a TrainingRun's spec.rollout.environments
        alike."""
        if selection.manifest_uri is not None:
            return None, {}
        if selection.selector is not None:
            found = self._environments(namespace, selection.selector.to_query())
            return [_ref(e) for e in found if _released(e)], {}
        by_name = {e["metadata"]["name"]: e for e in self._environments(namespace)}
        released, missing = [], {}
        for name in selection.names or []:
            env = by_name.get(name)
            if env is None:
                missing[name] = "not found"
            elif not _released(env):
                missing[name] = str((env.get("status") or {}).get("phase") or "Pending")
            else:
                released.append(_ref(env))
        return released, missing


def _released(env: dict[str, Any]) -> bool:
    status = env.get("status") or {}
    return status.get("phase") == RELEASED and bool(status.get("packageUri"))


def _ref(env: dict[str, Any]) -> ResolvedEnvironment:
    status = env.get("status") or {}
    return ResolvedEnvironment(
        name=env["metadata"]["name"],
        uri=str(status["packageUri"]),
        digest=status.get("packageDigest"),
    )

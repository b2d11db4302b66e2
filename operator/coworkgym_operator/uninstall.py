"""What `helm uninstall` runs before it removes the operator (the chart's pre-delete hook):
``python -m coworkgym_operator.uninstall``.

Every object of the four kinds carries the operator's finalizer (``coworkgym.dev/cleanup``):
the operator removes it once it has deleted what owner references do not cover. With the
operator gone nobody would, and the namespace's deletion would wait on them for good. So,
while the operator still runs, the hook deletes every object of the four kinds (a run and
a batch before the environments they read; a campaign before its environments) and waits
for the operator to finish them. What is still there at the deadline (an operator that is
not running, or is stuck) loses the finalizer: the garbage collector then removes its
children through their owner references. ``--keep`` only drops the finalizers, and the
objects stay for an operator installed later.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from coworkgym_operator.campaign.api.types import CAMPAIGN_PLURAL
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import kube
from coworkgym_operator.environment.api.types import PLURAL as ENVIRONMENT_PLURAL
from coworkgym_operator.rollouts.api.types import BATCH_PLURAL
from coworkgym_operator.training.api.types import TRAINING_PLURAL

# Dependants first: a TrainingRun makes RolloutBatches, a RolloutBatch reads environments,
# a campaign owns environments.
PLURALS = (TRAINING_PLURAL, BATCH_PLURAL, CAMPAIGN_PLURAL, ENVIRONMENT_PLURAL)
FINALIZERS = (f"{GROUP}/cleanup", "kopf.zalando.org/KopfFinalizerMarker")
POLL_SECONDS = 2.0
log = logging.getLogger("coworkgym_operator.uninstall")


@dataclass(frozen=True)
class Ref:
    plural: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.plural}/{self.name} in {self.namespace}"


class Cluster:
    """The custom-objects calls the hook makes, in one namespace or all of them."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str | None) -> None:
        self.api, self.namespace = api, namespace

    def list(self, plural: str) -> list[Ref]:
        found: dict[str, Any]
        if self.namespace is None:
            found = cast(
                dict[str, Any], self.api.list_cluster_custom_object(GROUP, VERSION, plural)
            )
        else:
            found = cast(
                dict[str, Any],
                self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, plural),
            )
        return [
            Ref(plural, item["metadata"]["namespace"], item["metadata"]["name"])
            for item in found.get("items", [])
        ]

    def delete(self, ref: Ref) -> None:
        try:
            self.api.delete_namespaced_custom_object(
                GROUP, VERSION, ref.namespace, ref.plural, ref.name
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def drop_finalizers(self, ref: Ref, attempts: int = 3) -> None:
        """Remove the operator's finalizers from ``ref``, keeping any other. The patch names
        the resourceVersion it read, so it fails (409) rather than drop a finalizer
        someone added meanwhile; it is then tried again on a fresh read."""
        for attempt in range(attempts):
            try:
                obj = cast(
                    dict[str, Any],
                    self.api.get_namespaced_custom_object(
                        GROUP, VERSION, ref.namespace, ref.plural, ref.name
                    ),
                )
                meta = obj["metadata"]
                kept = [f for f in meta.get("finalizers") or [] if f not in FINALIZERS]
                body = {"metadata": {"finalizers": kept or None,
                                     "resourceVersion": meta["resourceVersion"]}}  # fmt: skip
                self.api.patch_namespaced_custom_object(
                    GROUP, VERSION, ref.namespace, ref.plural, ref.name, body
                )
                return
            except ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status != 409 or attempt == attempts - 1:
                    raise


def everything(cluster: Cluster) -> list[Ref]:
    return [ref for plural in PLURALS for ref in cluster.list(plural)]


def uninstall(cluster: Cluster, *, keep: bool, timeout: float) -> list[Ref]:
    """Delete (or, with ``keep``, release) every object of the four kinds; the objects whose
    finalizers were dropped are returned."""
    if keep:
        left = everything(cluster)
    else:
        for ref in everything(cluster):
            log.info("deleting %s", ref)
            cluster.delete(ref)
        left = wait_gone(cluster, timeout)
    for ref in left:
        cluster.drop_finalizers(ref)
    return left


def wait_gone(cluster: Cluster, timeout: float) -> list[Ref]:
    deadline = time.monotonic() + timeout
    while True:
        left = everything(cluster)
        if not left or time.monotonic() >= deadline:
            return left
        log.info("waiting for the operator to finish %d object(s)", len(left))
        time.sleep(POLL_SECONDS)


def _names(refs: Iterable[Ref]) -> str:
    return ", ".join(str(r) for r in refs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coworkgym_operator.uninstall")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--namespace", help="the namespace the operator watches")
    where.add_argument("--all-namespaces", action="store_true")
    parser.add_argument(
        "--keep", action="store_true", help="drop the finalizers only; delete nothing"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    api = client.CustomObjectsApi(kube().api)  # in-cluster config, else the kubeconfig
    cluster = Cluster(api, None if args.all_namespaces else args.namespace)
    dropped = uninstall(cluster, keep=args.keep, timeout=args.timeout)
    if dropped and not args.keep:
        log.warning(
            "the operator did not finish these within %g s; their finalizers were dropped and "
            "the garbage collector removes their children: %s",
            args.timeout,
            _names(dropped),
        )
    elif dropped:
        log.info("released (finalizers dropped, objects kept): %s", _names(dropped))
    log.info("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

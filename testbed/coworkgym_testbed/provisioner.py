"""The node's volume provisioner: PersistentVolumeClaims of the test-bed's default
StorageClass get a hostPath PersistentVolume in the run dir; released ones are deleted.

A cluster normally has a CSI driver or local-path-provisioner here; the test-bed has neither
image nor registry, and kube-controller-manager's own hostPath provisioner makes directories
only root can write, while sandbox pods run as an unprivileged user. So, like
local-path-provisioner, each volume is a world-writable directory (on hostPath, fsGroup does
not apply). Isolation between roles comes from which volumes a pod mounts, and how.

Level-triggered: every pass lists all claims and volumes and fixes what differs, so a restart
loses nothing. Run as `python -m coworkgym_testbed.provisioner KUBECONFIG VOLUME_DIR`.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

STORAGE_CLASS = "testbed-local"
PROVISIONER = "testbed.coworkgym.dev/hostpath"
log = logging.getLogger("provisioner")


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def persistent_volume(claim: Any, root: Path) -> dict[str, Any]:
    meta = claim.metadata
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta.uid}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": claim.spec.resources.requests["storage"]},
            "accessModes": claim.spec.access_modes,
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta.namespace,
                "name": meta.name,
                "uid": meta.uid,
            },
            "hostPath": {"path": str(root / f"pvc-{meta.uid}"), "type": "Directory"},
        },
    }


def reconcile(core: Any, storage: Any, root: Path) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        storage.read_storage_class(STORAGE_CLASS)
    except ApiException as e:
        if e.status != 404:
            raise
        storage.create_storage_class(storage_class())
        log.info("created StorageClass %s", STORAGE_CLASS)

    volumes = {pv.metadata.name: pv for pv in core.list_persistent_volume().items}
    for claim in core.list_persistent_volume_claim_for_all_namespaces().items:
        if claim.spec.storage_class_name != STORAGE_CLASS or claim.spec.volume_name:
            continue
        if claim.metadata.deletion_timestamp or f"pvc-{claim.metadata.uid}" in volumes:
            continue
        path = root / f"pvc-{claim.metadata.uid}"
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)  # chmod, not mkdir's mode: the umask would mask it
        try:
            core.create_persistent_volume(persistent_volume(claim, root))
        except ApiException as e:
            if e.status != 409:
                raise
        log.info("provisioned %s/%s at %s", claim.metadata.namespace, claim.metadata.name, path)

    for pv in volumes.values():
        annotations = pv.metadata.annotations or {}
        if annotations.get("pv.kubernetes.io/provisioned-by") != PROVISIONER:
            continue
        if pv.status.phase not in ("Released", "Failed"):
            continue
        path = Path(pv.spec.host_path.path)
        if path.parent == root:  # never delete anything outside our own directory
            shutil.rmtree(path, ignore_errors=True)
        try:
            core.delete_persistent_volume(pv.metadata.name)
        except ApiException as e:
            if e.status != 404:
                raise
        log.info("deleted released volume %s", pv.metadata.name)


def main(argv: list[str]) -> int:
    from kubernetes import client, config

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    kubeconfig, root = argv[0], Path(argv[1])
    root.mkdir(parents=True, exist_ok=True)
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    while True:
        try:
            reconcile(core, storage, root)
        except Exception:  # keep going: the next pass sees the whole state again
            log.exception("reconcile pass failed")
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

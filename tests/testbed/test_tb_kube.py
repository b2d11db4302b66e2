"""The control plane is real: CRDs, server-side validation, RBAC, garbage collection."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
FIXTURES = Path(__file__).parent / "fixtures"


def test_crd_and_custom_resource_with_kubectl(
    testbed: Testbed, widgets_crd: str, testbed_namespace: str
) -> None:
    testbed.kubectl("apply", "-n", testbed_namespace, "-f", str(FIXTURES / "widget-ok.yaml"))
    got = json.loads(
        testbed.kubectl("get", "widget", "ok", "-n", testbed_namespace, "-o", "json").stdout
    )
    assert got["spec"] == {"size": 3, "color": "green"}
    assert got["metadata"]["uid"]


def test_schema_violation_is_rejected_by_the_server(
    testbed: Testbed, widgets_crd: str, testbed_namespace: str
) -> None:
    with pytest.raises(subprocess.CalledProcessError) as err:
        testbed.kubectl(
            "apply", "-n", testbed_namespace, "-f", str(FIXTURES / "widget-bad-type.yaml")
        )
    assert "spec.size" in err.value.stderr and "integer" in err.value.stderr

    # The same through the Python client: 422 from the API server, naming the field.
    from kubernetes import client

    api = client.CustomObjectsApi(testbed.kubernetes_client())
    body = {
        "apiVersion": "cowork.test/v1",
        "kind": "Widget",
        "metadata": {"name": "small"},
        "spec": {"size": 0},
    }
    with pytest.raises(client.ApiException) as api_err:
        api.create_namespaced_custom_object("cowork.test", "v1", testbed_namespace, "widgets", body)
    assert api_err.value.status == 422
    assert "spec.size" in str(api_err.value.body)
    api.api_client.close()


def test_unknown_field_is_rejected_with_strict_validation(
    testbed: Testbed, widgets_crd: str, testbed_namespace: str
) -> None:
    manifest = (
        "apiVersion: cowork.test/v1\nkind: Widget\nmetadata: {name: typo}\n"
        "spec: {size: 1, colour: red}\n"
    )
    cp = testbed.kubectl(
        "apply",
        "-n",
        testbed_namespace,
        "--validate=strict",
        "-f",
        "-",
        input=manifest,
        check=False,
    )
    assert cp.returncode != 0
    assert "spec.colour" in cp.stderr


def test_rbac_is_enforced(testbed: Testbed) -> None:
    admin = testbed.kubectl("auth", "can-i", "create", "pods", check=False)
    stranger = testbed.kubectl("auth", "can-i", "create", "pods", "--as=nobody", check=False)
    assert admin.stdout.strip() == "yes"
    assert stranger.stdout.strip() == "no"


def _wait_gone(read: Any, timeout: float = 60) -> bool:
    from kubernetes import client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            read()
        except client.ApiException as e:
            if e.status == 404:
                return True
            raise
        time.sleep(0.5)
    return False


def test_controller_manager_collects_garbage(testbed: Testbed, testbed_namespace: str) -> None:
    from kubernetes.client import CoreV1Api, V1ConfigMap, V1ObjectMeta, V1OwnerReference

    v1 = CoreV1Api(testbed.kubernetes_client())
    ns = testbed_namespace
    owner = v1.create_namespaced_config_map(
        ns, V1ConfigMap(metadata=V1ObjectMeta(name=f"owner-{uuid.uuid4().hex[:6]}"))
    ).metadata
    assert owner is not None and owner.name and owner.uid
    ref = V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.name, uid=owner.uid)
    dep = v1.create_namespaced_config_map(
        ns, V1ConfigMap(metadata=V1ObjectMeta(name="dependent", owner_references=[ref]))
    ).metadata
    assert dep is not None and dep.owner_references and dep.owner_references[0].uid == owner.uid

    v1.delete_namespaced_config_map(owner.name, ns)
    assert _wait_gone(lambda: v1.read_namespaced_config_map("dependent", ns)), (
        "the garbage collector did not delete the dependent ConfigMap within 60s"
    )
    v1.api_client.close()


def test_default_service_account_exists(testbed: Testbed, testbed_namespace: str) -> None:
    """The controller-manager's token/SA controllers run: ServiceAccount admission needs them."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cp = testbed.kubectl(
            "get", "serviceaccount", "default", "-n", testbed_namespace, check=False
        )
        if cp.returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("no default ServiceAccount in a new namespace after 30s")

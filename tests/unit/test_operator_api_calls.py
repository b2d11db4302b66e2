"""Every Kubernetes request the operator's handlers make is counted by verb and resource
(coworkgym_api_calls_total), so calls per transition and "idle makes no calls" can be read
off /metrics."""

from __future__ import annotations

from typing import Any

import pytest

from coworkgym_operator.core.kube import Kube, api_call_of
from coworkgym_operator.core.metrics import REGISTRY

BASE = "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/apis/batch/v1/namespaces/ns/jobs/demo-builder-i0-a1", ("get", "jobs")),
        ("GET", "/api/v1/namespaces/ns/pods?labelSelector=job-name%3Dx", ("list", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", ("get", "pods/log")),
        (
            "PATCH",
            "/apis/coworkgym.dev/v1alpha1/namespaces/ns/coworkenvironments/demo/status",
            ("patch", "coworkenvironments/status"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/persistentvolumeclaims",
            ("deletecollection", "persistentvolumeclaims"),
        ),
        ("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", ("delete", "jobs")),
        (
            "POST",
            "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies",
            ("create", "networkpolicies"),
        ),
        ("GET", "/api/v1/namespaces", ("list", "namespaces")),
    ],
)
def test_a_request_is_named_by_verb_and_resource(
    method: str, path: str, expected: tuple[str, str]
) -> None:
    assert api_call_of(method, BASE + path) == expected


def test_the_client_counts_what_it_sends() -> None:
    from kubernetes import client

    api = client.ApiClient()
    sent: list[tuple[str, str]] = []

    def fake_call_api(method: str, url: str, *_: Any, **__: Any) -> None:
        sent.append((method, url))

    api.call_api = fake_call_api  # type: ignore[method-assign]
    kube = Kube(api)
    Kube(api)  # wrapping twice counts once

    def count() -> float:
        labels = {"verb": "get", "resource": "coworkenvironments"}
        return REGISTRY.get_sample_value("coworkgym_api_calls_total", labels) or 0.0

    before = count()
    kube.api.call_api(
        "GET", BASE + "/apis/coworkgym.dev/v1alpha1/namespaces/n/coworkenvironments/e"
    )
    assert count() == before + 1 and len(sent) == 1

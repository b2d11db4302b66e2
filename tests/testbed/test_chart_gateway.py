"""The chart's LLM gateway (gateway.enabled): a Deployment + Service whose pods carry the
labels the sandbox egress policies admit; the upstream keys mounted by the gateway alone;
the operator handed the gateway's address and the token signing key, never a key."""

from __future__ import annotations

from typing import Any

import pytest

from coworkgym_testbed.testbed import Testbed
from tests.testbed.test_chart import by_kind, kube_version, render

pytestmark = pytest.mark.testbed
__all__ = ["kube_version"]  # the fixture, used by name


def named(docs: list[Any], kind: str, suffix: str) -> Any:
    (found,) = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    return found


def test_off_by_default(testbed: Testbed, kube_version: str) -> None:
    docs = render(testbed, kube_version)
    assert not [
        d
        for d in docs
        if d["kind"] in ("Deployment", "Service") and d["metadata"]["name"].endswith("-gateway")
    ]
    operator = by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert "COWORKGYM_GATEWAY_URL" not in {e["name"] for e in operator["env"]}


def test_the_gateway_holds_the_keys_and_the_operator_gets_address_and_signing_key(
    testbed: Testbed, kube_version: str
) -> None:
    docs = render(
        testbed, kube_version,
        "--set", "gateway.enabled=true", "--set", "gateway.upstreamKeysSecret=llm-keys",
    )  # fmt: skip
    gateway = named(docs, "Deployment", "-gateway")
    pod = gateway["spec"]["template"]
    assert pod["metadata"]["labels"]["app"] == "llm-gateway"  # networkPolicy.gateway.podSelector
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert {v["name"]: v for v in spec["volumes"]}["upstream-keys"]["secret"] == {
        "secretName": "llm-keys"
    }
    container = spec["containers"][0]
    assert container["command"] == ["python", "-m", "coworkgym.llm.serve"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    service = named(docs, "Service", "-gateway")
    assert service["spec"]["ports"][0]["port"] == 8000
    ingress = named(docs, "NetworkPolicy", "-gateway-ingress")["spec"]["ingress"][0]
    assert ingress["from"][0]["podSelector"]["matchLabels"] == {"coworkgym.dev/egress": "gateway"}

    operator = next(d for d in by_kind(docs, "Deployment") if d is not gateway)
    env = {e["name"]: e for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COWORKGYM_GATEWAY_URL"]["value"] == "http://demo-cowork-gym-gateway.gym.svc:8000/v1"
    assert env["COWORKGYM_GATEWAY_SIGNING_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "key"
    assert env["COWORKGYM_ROLLOUT_TOKEN_BUDGET"]["value"] == "2000000"
    assert env["COWORKGYM_ENVIRONMENT_TOKEN_BUDGET"]["value"] == "2000000"
    mounted = [
        v.get("secret", {}).get("secretName")
        for v in operator["spec"]["template"]["spec"].get("volumes", [])
    ]
    assert "llm-keys" not in mounted  # the keys reach the gateway only
    signing = named(docs, "Secret", "-gateway-signing")
    assert len(signing["data"]["key"]) > 40


def test_the_gateway_url_can_be_given_where_services_do_not_route(
    testbed: Testbed, kube_version: str
) -> None:
    docs = render(
        testbed, kube_version,
        "--set", "gateway.enabled=true", "--set", "gateway.url=http://10.88.0.7:8000/v1",
        "--set", "gateway.environmentTokenBudget=50000",
    )  # fmt: skip
    gateway = named(docs, "Deployment", "-gateway")
    operator = next(d for d in by_kind(docs, "Deployment") if d is not gateway)
    env = {e["name"]: e for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COWORKGYM_GATEWAY_URL"]["value"] == "http://10.88.0.7:8000/v1"
    assert env["COWORKGYM_ENVIRONMENT_TOKEN_BUDGET"]["value"] == "50000"

"""The deployed gateway's tokens: signed per rollout by the operator, the upstream key looked
up by name in the gateway's own folder (over real HTTP, a scripted upstream)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coworkgym.llm.gateway import Gateway
from coworkgym.llm.serve import signed_resolver
from coworkgym.llm.signed_tokens import TokenClaims, mint
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(30)
KEY, SIGNING = "sk-real-upstream-key", "signing-secret"


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer.from_fixture("gateway", expected_key=KEY) as server:
        yield server


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "upstream").write_text(KEY + "\n")
    with Gateway(resolve=signed_resolver(SIGNING, keys)) as gw:
        yield gw


def chat(gateway: Gateway, token: str) -> httpx.Response:
    body = {"model": "anything", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(
        f"{gateway.url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def token(server: ScriptedServer, key_name: str = "upstream", signing: str = SIGNING) -> str:
    claims = TokenClaims(scope="ns/rb/e0-p0-s0", base_url=server.url, model="m", key_name=key_name)
    return mint(signing, claims)


def test_a_signed_token_reaches_the_upstream_with_the_key_only_the_gateway_holds(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    reply = chat(gateway, token(upstream))
    assert reply.status_code == 200, reply.text
    sent = upstream.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {KEY}" and sent.body["model"] == "m"
    assert gateway.usage("ns/rb/e0-p0-s0").requests == 1  # charged to the rollout


@pytest.mark.parametrize(
    "bad",
    [
        "cwgs.e30.forged",
        "not-a-token",
    ],
)
def test_forged_tokens_are_refused(upstream: ScriptedServer, gateway: Gateway, bad: str) -> None:
    assert chat(gateway, bad).status_code == 401
    assert upstream.requests == []


def test_a_token_signed_with_another_key_or_naming_an_unknown_upstream_key_is_refused(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    assert chat(gateway, token(upstream, signing="other")).status_code == 401
    assert chat(gateway, token(upstream, key_name="missing")).status_code == 401
    assert chat(gateway, token(upstream, key_name="../keys/upstream")).status_code == 401
    assert upstream.requests == []


def test_the_budget_a_token_carries_is_the_one_the_gateway_holds_its_scope_to(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    """An environment's token carries the environment's budget (signed, so the role cannot
    raise it): 120 tokens per scripted reply against 200 admits two requests, not three."""
    claims = TokenClaims(
        scope="ns/env/uid", base_url=upstream.url, model="m", key_name="upstream",
        role="builder", token_budget=200,
    )  # fmt: skip
    signed = mint(SIGNING, claims)
    assert [chat(gateway, signed).status_code for _ in range(3)] == [200, 200, 429]
    refused = chat(gateway, signed)
    assert refused.json()["error"]["code"] == "budget_exhausted"
    assert "used 240 of its 200 tokens" in refused.json()["error"]["message"]
    assert len(upstream.requests) == 2
    # a token without a budget is held to the gateway's own (2,000,000 here)
    other = mint(SIGNING, TokenClaims(scope="ns/other", base_url=upstream.url, model="m",
                                      key_name="upstream"))  # fmt: skip
    assert [chat(gateway, other).status_code for _ in range(3)] == [200, 200, 200]

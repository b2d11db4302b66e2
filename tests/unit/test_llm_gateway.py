"""The LLM gateway over real HTTP (a scripted upstream on 127.0.0.1): token → key swap,
pinned model, per-environment token budgets, rate limits, error pass-through, accounting
and metrics, the Unix socket."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from coworkgym.llm.gateway import Gateway, Route
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(30)
KEY = "sk-real-upstream-key"


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer.from_fixture("gateway", expected_key=KEY) as server:
        yield server


def route(server: ScriptedServer, **extra: Any) -> Route:
    return Route(base_url=server.url, model="pinned-model", api_key=KEY, **extra)


def chat(gateway: Gateway, token: str, **body: Any) -> httpx.Response:
    payload = {"model": "anything", "messages": [{"role": "user", "content": "hi"}], **body}
    return httpx.post(
        f"{gateway.url}/chat/completions",
        json=payload,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def test_a_token_is_swapped_for_the_routes_key_and_the_model_is_pinned(
    upstream: ScriptedServer,
) -> None:
    with Gateway() as gateway:
        token = gateway.grant("env-a", "builder", route(upstream, defaults={"temperature": 0.0}))
        reply = chat(gateway, token)
        explicit = chat(gateway, token, temperature=0.7)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "ok"
    assert token.startswith("cwg-") and KEY not in token
    seen = upstream.requests
    assert [r.headers["authorization"] for r in seen] == [f"Bearer {KEY}"] * 2
    assert [r.body["model"] for r in seen] == ["pinned-model"] * 2
    assert [r.body["temperature"] for r in seen] == [0.0, 0.7]  # a default, unless asked
    assert explicit.status_code == 200


@pytest.mark.parametrize(
    "authorization", ["", "Bearer cwg-made-up", f"Bearer {KEY}", "Basic abc"], ids=repr
)
def test_requests_without_a_granted_token_are_refused(
    upstream: ScriptedServer, authorization: str
) -> None:
    with Gateway() as gateway:
        reply = httpx.post(
            f"{gateway.url}/chat/completions",
            json={"messages": []},
            headers={"Authorization": authorization} if authorization else {},
        )
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_token"
    assert upstream.requests == []


def test_the_token_budget_is_per_environment_and_refuses_without_retry(
    upstream: ScriptedServer,
) -> None:
    with Gateway(token_budget=150) as gateway:
        spender = gateway.grant("env-a", "builder", route(upstream))
        other_role = gateway.grant("env-a", "verifier", route(upstream))
        other_env = gateway.grant("env-b", "builder", route(upstream))
        first, second = chat(gateway, spender), chat(gateway, other_role)  # 120, then 240
        refused = chat(gateway, spender)
        elsewhere = chat(gateway, other_env)
        usage, by_role = gateway.usage("env-a"), gateway.usage("env-a", "verifier")
    assert (first.status_code, second.status_code) == (200, 200)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "budget_exhausted"
    assert refused.headers["x-should-retry"] == "false"  # the openai client fails fast
    assert elsewhere.status_code == 200
    assert (usage.requests, usage.total_tokens, by_role.total_tokens) == (2, 240, 120)
    assert len(upstream.requests) == 3  # the refused request never left the gateway


def test_the_rate_limit_asks_the_client_to_wait(upstream: ScriptedServer) -> None:
    now = [0.0]
    with Gateway(requests_per_minute=60, burst=2, clock=lambda: now[0]) as gateway:
        token = gateway.grant("env-a", "builder", route(upstream))
        burst = [chat(gateway, token).status_code for _ in range(2)]
        limited = chat(gateway, token)
        now[0] += 1.0  # one request per second comes back
        later = chat(gateway, token)
    assert burst == [200, 200]
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert limited.headers["x-should-retry"] == "true"
    assert limited.headers["retry-after-ms"] == "1000"
    assert later.status_code == 200


def test_upstream_errors_pass_through_and_an_unreachable_upstream_is_a_502() -> None:
    down = ScriptedServer.from_fixture("gateway", select={"default": "down"})
    with down, Gateway() as gateway:
        failing = chat(gateway, gateway.grant("e", "builder", route(down)))
    assert failing.status_code == 503
    assert failing.headers["retry-after-ms"] == "5"  # the client's backoff sees the hint
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = Route(base_url=f"http://127.0.0.1:{probe.getsockname()[1]}/v1", model="m")
        with Gateway() as gateway:
            unreachable = chat(gateway, gateway.grant("e", "builder", dead))
    assert unreachable.status_code == 502
    assert unreachable.json()["error"]["code"] == "upstream_unreachable"


def test_bad_requests_are_refused_before_the_upstream(upstream: ScriptedServer) -> None:
    with Gateway() as gateway:
        token = gateway.grant("e", "builder", route(upstream))
        streaming = chat(gateway, token, stream=True)
        not_json = httpx.post(
            f"{gateway.url}/chat/completions",
            content=b"{not json",
            headers={"Authorization": f"Bearer {token}"},
        )
        elsewhere = httpx.post(f"{gateway.url}/embeddings", json={})
    assert streaming.status_code == 400 and "does not stream" in streaming.text
    assert not_json.status_code == 400
    assert elsewhere.status_code == 404
    assert upstream.requests == []


def test_revoking_an_environment_invalidates_its_tokens(upstream: ScriptedServer) -> None:
    with Gateway() as gateway:
        token = gateway.grant("env-a", "builder", route(upstream))
        keep = gateway.grant("env-b", "builder", route(upstream))
        gateway.revoke_environment("env-a")
        assert chat(gateway, token).status_code == 401
        assert chat(gateway, keep).status_code == 200


def test_tokens_and_cost_are_counted_per_role_as_metrics(upstream: ScriptedServer) -> None:
    priced = route(upstream, usd_per_mtok_prompt=1.0, usd_per_mtok_completion=2.0)
    with Gateway() as gateway:
        token = gateway.grant("env-a", "verifier", priced)
        for _ in range(2):
            chat(gateway, token)
        metrics = httpx.get(f"{gateway.url.removesuffix('/v1')}/metrics").text
        usage = gateway.usage("env-a")
    labels = 'model="pinned-model",role="verifier"'
    assert f'coworkgym_llm_tokens_total{{kind="prompt",{labels}}} 200.0' in metrics
    assert f'coworkgym_llm_tokens_total{{kind="completion",{labels}}} 40.0' in metrics
    ok = 'model="pinned-model",outcome="ok",role="verifier"'  # labels in sorted order
    assert f"coworkgym_llm_requests_total{{{ok}}} 2.0" in metrics
    assert "coworkgym_llm_request_duration_seconds_count" in metrics
    assert usage.cost_usd == pytest.approx((200 * 1.0 + 40 * 2.0) / 1e6)
    assert f"coworkgym_llm_cost_usd_total{{{labels}}} {usage.cost_usd}" in metrics


def test_a_reply_without_usage_is_estimated_never_free() -> None:
    server = ScriptedServer.from_fixture("gateway", select={"default": "nousage"})
    with server, Gateway() as gateway:
        chat(gateway, gateway.grant("e", "builder", route(server)))
        usage = gateway.usage("e")
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("gateway")
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.path))


def test_the_gateway_also_serves_a_unix_socket(upstream: ScriptedServer, tmp_path: Path) -> None:
    path = tmp_path / "run" / "llm.sock"
    with Gateway(unix_socket=path) as gateway:
        token = gateway.grant("e", "builder", route(upstream))
        connection = _UnixConnection(path)
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
        connection.request(
            "POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {token}"}
        )
        reply = connection.getresponse()
        data = json.loads(reply.read())
        connection.close()
        assert path.stat().st_mode & 0o777 == 0o666  # an unprivileged sandbox can connect
    assert reply.status == 200 and data["choices"][0]["message"]["content"] == "ok"
    assert not path.exists()  # removed on close

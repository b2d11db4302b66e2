"""The controller's endpoint probe over real sockets: any HTTP answer is reachable (a 404 or
401 means a server is there), a refused connection or a bad address is not, with why."""

from __future__ import annotations

import socket

from coworkgym_operator.rollouts.kube import probe
from tests.fixtures.llm.server import ScriptedServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: connecting is refused


def test_a_server_that_answers_anything_is_reachable() -> None:
    with ScriptedServer.from_lanes({}) as server:  # answers GET /models with 501
        assert probe([server.url], timeout_s=5) == {}


def test_a_refused_connection_is_unreachable_with_the_reason() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    down = probe([url], timeout_s=2)
    assert list(down) == [url] and "Connection refused" in down[url]


def test_a_malformed_url_is_unreachable_not_a_crash() -> None:
    assert "not-a-url" in probe(["not-a-url"], timeout_s=1)

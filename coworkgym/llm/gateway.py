"""The LLM gateway: a local OpenAI-compatible proxy, so that no API key enters a sandbox.

Every LLM call of a role goes through here. The caller holds only a *gateway token*, minted
per (environment, role); the gateway swaps it for the role's upstream route (base URL, real
key, pinned model, sampling defaults), enforces the environment's token budget and request
rate, counts tokens and cost, and forwards to the upstream. Keys live in this process only:
the agent loops (which run outside the sandboxes) get tokens, and a sandboxed client can
reach the gateway only through its Unix socket when a role mounts it (the sandboxes have no
network at all).

    role agent ──token──▶ gateway (127.0.0.1:port or unix socket) ──real key──▶ upstream

Only non-streaming chat completions are proxied; the agent loop and the judge do not stream.
A spent budget answers 429 with ``x-should-retry: false`` and error code
``budget_exhausted`` (the openai client then fails fast instead of backing off); a rate
limit answers 429 with ``retry-after-ms`` (the client waits and retries). Usage may overshoot
the budget by at most the one request in flight when it runs out.
"""

from __future__ import annotations

import json
import secrets
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from .metrics import GatewayMetrics

log = structlog.get_logger(__name__)

PASSED_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-should-retry", "x-request-id")
CHARS_PER_TOKEN = 4  # estimate, only when an upstream reports no usage


@dataclass(frozen=True)
class Route:
    """Where one role's requests go. ``api_key`` never leaves the gateway process."""

    base_url: str
    model: str
    api_key: str = field(default="EMPTY", repr=False)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # sampling when the request omits it
    usd_per_mtok_prompt: float = 0.0
    usd_per_mtok_completion: float = 0.0

    def cost(self, prompt: int, completion: int) -> float:
        return (prompt * self.usd_per_mtok_prompt + completion * self.usd_per_mtok_completion) / 1e6


@dataclass(frozen=True)
class Grant:
    environment: str
    role: str
    route: Route
    token_budget: int | None = None  # this scope's budget; None = the gateway's own


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt: int, completion: int, cost: float) -> None:
        self.requests += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost_usd += cost


@dataclass
class _Bucket:
    """A token bucket: ``rate`` requests per second, bursts up to ``capacity``."""

    rate: float
    capacity: float
    level: float
    stamp: float

    def take(self, now: float) -> float:
        """0 when a request may go now, else the seconds until one may."""
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.rate


@dataclass
class _Ledger:
    total: Usage = field(default_factory=Usage)
    by_role: dict[str, Usage] = field(default_factory=dict)
    bucket: _Bucket | None = None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, code: str, message: str, **headers: str) -> Reply:
        """An OpenAI-style error; ``retry_after_ms="5"`` becomes header ``retry-after-ms``."""
        payload = {"error": {"message": message, "type": code, "code": code}}
        extra = {k.replace("_", "-"): v for k, v in headers.items()}
        return cls(
            status, json.dumps(payload).encode(), {"content-type": "application/json", **extra}
        )


class Gateway:
    """Serve on 127.0.0.1 (and optionally a Unix socket); ``grant`` mints tokens."""

    def __init__(
        self,
        *,
        token_budget: int = 2_000_000,
        requests_per_minute: float = 600.0,
        burst: int = 20,
        upstream_timeout_s: float = 300.0,
        unix_socket: Path | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        host: str = "127.0.0.1",
        port: int = 0,
        resolve: Callable[[str], Grant | None] | None = None,
    ) -> None:
        self.token_budget = token_budget
        # a deployed gateway (coworkgym.llm.serve) listens on the pod's address and
        # resolves tokens it did not mint itself: signed ones (coworkgym.llm.signed_tokens)
        self.host, self._port = host, port
        self._resolve = resolve
        self.requests_per_minute = requests_per_minute
        self.burst = burst
        self.unix_socket = unix_socket
        self.metrics = GatewayMetrics(registry)
        self.clock = clock
        self._grants: dict[str, Grant] = {}
        self._ledgers: dict[str, _Ledger] = {}
        self._lock = threading.Lock()
        # Upstream calls honour HTTP(S)_PROXY/NO_PROXY like any client: deployments behind
        # an egress proxy need that.
        self._upstream = httpx.Client(timeout=httpx.Timeout(upstream_timeout_s, connect=10.0))
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self.port = 0

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self) -> Gateway:
        tcp = _TcpServer((self.host, self._port), self)
        self.port = tcp.server_address[1]
        self._serve(tcp)
        if self.unix_socket is not None:
            self.unix_socket.parent.mkdir(parents=True, exist_ok=True)
            self.unix_socket.unlink(missing_ok=True)
            unix = _UnixServer(str(self.unix_socket), self)
            # a sandbox runs as an unprivileged uid: it must be able to connect()
            self.unix_socket.chmod(0o666)
            self._serve(unix)
        log.info("llm gateway started", url=self.url, socket=str(self.unix_socket or ""))
        return self

    def _serve(self, server: socketserver.BaseServer) -> None:
        thread = threading.Thread(
            target=server.serve_forever, args=(0.1,), name="llm-gateway", daemon=True
        )
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers, self._threads = [], []
        self._upstream.close()
        if self.unix_socket is not None:
            self.unix_socket.unlink(missing_ok=True)

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The OpenAI base URL for clients outside the sandboxes."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- grants and accounting ---------------------------------------------------------
    def grant(self, environment: str, role: str, route: Route) -> str:
        token = f"cwg-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._grants[token] = Grant(environment, role, route)
            self._ledgers.setdefault(environment, _Ledger())
        return token

    def revoke_environment(self, environment: str) -> None:
        with self._lock:
            self._grants = {t: g for t, g in self._grants.items() if g.environment != environment}

    def usage(self, environment: str, role: str | None = None) -> Usage:
        with self._lock:
            ledger = self._ledgers.get(environment, _Ledger())
            found = ledger.total if role is None else ledger.by_role.get(role, Usage())
            return Usage(
                found.requests, found.prompt_tokens, found.completion_tokens, found.cost_usd
            )

    def exposition(self) -> bytes:
        return generate_latest(self.metrics.registry)

    # ---- the proxy -------------------------------------------------------------------
    def handle_chat(self, authorization: str | None, raw: bytes) -> Reply:
        grant = self.lookup(authorization)
        if grant is None:
            self.metrics.requests.labels("unknown", "unknown", "unauthorized").inc()
            return Reply.error(401, "invalid_token", "unknown or missing gateway token")
        role, model = grant.role, grant.route.model
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
        except ValueError as exc:
            self.metrics.requests.labels(role, model, "bad_request").inc()
            return Reply.error(400, "invalid_request_error", f"request is not JSON: {exc}")
        if body.get("stream"):
            self.metrics.requests.labels(role, model, "bad_request").inc()
            return Reply.error(400, "invalid_request_error", "the gateway does not stream")
        refused = self._admit(grant)
        if refused is not None:
            return refused
        body = {**grant.route.defaults, **body, "model": model}  # the route pins the model
        return self._forward(grant, body)

    def lookup(self, authorization: str | None) -> Grant | None:
        """The grant behind an ``Authorization: Bearer <token>`` header."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = token.strip()
        with self._lock:
            grant = self._grants.get(token)
        if grant is None and self._resolve is not None and token:
            grant = self._resolve(token)
            if grant is not None:
                with self._lock:
                    self._ledgers.setdefault(grant.environment, _Ledger())
        return grant

    def _admit(self, grant: Grant) -> Reply | None:
        role, model = grant.role, grant.route.model
        with self._lock:
            ledger = self._ledgers[grant.environment]
            used = ledger.total.total_tokens
            budget = grant.token_budget or self.token_budget
            if used >= budget:
                self.metrics.requests.labels(role, model, "rejected_budget").inc()
                log.warning("llm budget exhausted", environment=grant.environment, used=used)
                return Reply.error(
                    429,
                    "budget_exhausted",
                    f"environment {grant.environment} used {used} of its {budget} tokens",
                    x_should_retry="false",
                )
            if ledger.bucket is None:
                rate = self.requests_per_minute / 60.0
                ledger.bucket = _Bucket(rate, float(self.burst), float(self.burst), self.clock())
            wait = ledger.bucket.take(self.clock())
        if wait > 0:
            self.metrics.requests.labels(role, model, "rejected_rate").inc()
            return Reply.error(
                429,
                "rate_limited",
                f"environment {grant.environment} exceeds {self.requests_per_minute} requests/min",
                retry_after_ms=str(max(1, int(wait * 1000))),
                x_should_retry="true",
            )
        return None

    def _forward(self, grant: Grant, body: dict[str, Any]) -> Reply:
        route, role = grant.route, grant.role
        url = route.base_url.rstrip("/") + "/chat/completions"
        started = time.perf_counter()
        try:
            response = self._upstream.post(
                url, json=body, headers={"Authorization": f"Bearer {route.api_key}"}
            )
        except httpx.TimeoutException:
            self.metrics.requests.labels(role, route.model, "unreachable").inc()
            return Reply.error(504, "upstream_timeout", f"upstream {route.base_url} timed out")
        except httpx.HTTPError as exc:
            self.metrics.requests.labels(role, route.model, "unreachable").inc()
            # the message names the URL only: httpx errors never carry request headers
            return Reply.error(502, "upstream_unreachable", f"upstream unreachable: {exc}")
        finally:
            self.metrics.latency.labels(role, route.model).observe(time.perf_counter() - started)
        headers = {k: v for k, v in response.headers.items() if k.lower() in PASSED_HEADERS}
        if response.status_code != 200:
            self.metrics.requests.labels(role, route.model, "upstream_error").inc()
            return Reply(response.status_code, response.content, headers)
        self._account(grant, body, response.content)
        self.metrics.requests.labels(role, route.model, "ok").inc()
        return Reply(200, response.content, headers)

    def _account(self, grant: Grant, body: dict[str, Any], content: bytes) -> None:
        prompt, completion = _usage_of(body, content)
        cost = grant.route.cost(prompt, completion)
        role, model = grant.role, grant.route.model
        self.metrics.tokens.labels(role, model, "prompt").inc(prompt)
        self.metrics.tokens.labels(role, model, "completion").inc(completion)
        self.metrics.cost.labels(role, model).inc(cost)
        with self._lock:
            ledger = self._ledgers[grant.environment]
            ledger.total.add(prompt, completion, cost)
            ledger.by_role.setdefault(role, Usage()).add(prompt, completion, cost)


def _usage_of(body: dict[str, Any], content: bytes) -> tuple[int, int]:
    """The upstream's reported usage, else an estimate (a budget must never count 0)."""
    try:
        reply = json.loads(content)
        usage = reply.get("usage") or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            return prompt, completion
    except (ValueError, AttributeError):
        reply = {}
    log.warning("upstream reported no usage; estimating from characters")
    prompt_chars = len(json.dumps(body.get("messages", [])))
    completion_chars = len(json.dumps(reply.get("choices", []))) if isinstance(reply, dict) else 0
    return prompt_chars // CHARS_PER_TOKEN, completion_chars // CHARS_PER_TOKEN


# ---- HTTP plumbing ----------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the openai client reuses connections

    @property
    def gateway(self) -> Gateway:
        gateway: Gateway = getattr(self.server, "gateway")  # noqa: B009 - set by our servers
        return gateway

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path.rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send(Reply.error(404, "not_found", f"no route {path}"))
            return
        self._send(self.gateway.handle_chat(self.headers.get("Authorization"), raw))

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/metrics":
            self._send(Reply(200, self.gateway.exposition(), {"content-type": "text/plain"}))
        elif path == "/healthz":
            self._send(Reply(200, b"ok\n", {"content-type": "text/plain"}))
        elif path in ("/v1/models", "/models"):
            grant = self.gateway.lookup(self.headers.get("Authorization"))
            if grant is None:
                self._send(Reply.error(401, "invalid_token", "unknown or missing gateway token"))
                return
            data = {"object": "list", "data": [{"id": grant.route.model, "object": "model"}]}
            self._send(Reply(200, json.dumps(data).encode(), {"content-type": "application/json"}))
        else:
            self._send(Reply.error(404, "not_found", f"no route {path}"))

    def _send(self, reply: Reply) -> None:
        try:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            log.debug("llm gateway client went away before the reply")  # it timed out

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("llm gateway request", line=format % args)


class _TcpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], gateway: Gateway) -> None:
        self.gateway = gateway
        super().__init__(address, _Handler)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, gateway: Gateway) -> None:
        self.gateway = gateway
        super().__init__(path, _Handler)


__all__ = ["Gateway", "Grant", "Reply", "Route", "Usage"]

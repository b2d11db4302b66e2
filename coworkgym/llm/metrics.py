"""Every LLM metric, in one place, with one prefix (``coworkgym_llm_``).

Labels are the role and the model, never the environment: a campaign has tens of thousands
of environments, and per-environment accounting lives in the gateway's ledger instead.
Each gateway gets its own registry (tests run several); the process serving ``/metrics``
passes the registry it exposes.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

OUTCOMES = (
    "ok",  # upstream answered 200
    "upstream_error",  # upstream answered an error status (passed through to the client)
    "unreachable",  # upstream timed out or refused the connection
    "rejected_budget",  # the environment's token budget is spent
    "rejected_rate",  # the environment's request rate limit
    "bad_request",  # not JSON, streaming asked for, …
    "unauthorized",  # no or unknown gateway token
)


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "coworkgym_llm_requests",
            "Chat-completion requests through the LLM gateway, by outcome",
            ["role", "model", "outcome"],
            registry=self.registry,
        )
        self.tokens = Counter(
            "coworkgym_llm_tokens",
            "Tokens used upstream, by kind (prompt, completion)",
            ["role", "model", "kind"],
            registry=self.registry,
        )
        self.cost = Counter(
            "coworkgym_llm_cost_usd",
            "Estimated upstream cost in US dollars (from the route's prices)",
            ["role", "model"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "coworkgym_llm_request_duration_seconds",
            "Wall time of an upstream chat-completion request",
            ["role", "model"],
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=self.registry,
        )

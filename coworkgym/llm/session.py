"""An LLM session: one gateway for this process, one route per role, clients on demand.

The session is the only holder of upstream keys (inside its gateway). A role asks it for a
client for (environment, role) and gets an ``openai.OpenAI`` pointed at the gateway with a
freshly minted token; closing an environment revokes its tokens.

A stage pod on a cluster has no gateway of its own: ``GatewaySession`` points its roles at
the cluster's gateway (the chart's Deployment) with the signed token the operator minted
for this environment and role, and never sees a key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import openai

from .agent import AgentConfig
from .gateway import Gateway, Route
from .settings import LLMSettings, env_float, env_int, take_api_key

TOKEN_BUDGET_ENV = "COWORKGYM_LLM_TOKEN_BUDGET"  # tokens per environment, all roles together
RATE_ENV = "COWORKGYM_LLM_REQUESTS_PER_MINUTE"
# what the operator hands an LLM-backed stage pod: the gateway's OpenAI base URL, and the
# signed token of this environment and role (from a Secret)
GATEWAY_URL_ENV = "COWORKGYM_GATEWAY_URL"
GATEWAY_TOKEN_ENV = "COWORKGYM_GATEWAY_TOKEN"


class RoleSession(Protocol):
    """What an LLM-backed role needs: a client for (environment, role), its agent config."""

    def client(self, environment: str, role: str) -> openai.OpenAI: ...
    def agent_config(self, role: str) -> AgentConfig: ...


def _agent_config(s: LLMSettings, stage_timeout_s: float) -> AgentConfig:
    return AgentConfig(
        model=s.model,
        temperature=s.temperature,
        max_turns=s.max_turns,
        max_tokens=s.max_tokens,
        stage_timeout_s=stage_timeout_s,
    )


@dataclass
class LLMSession:
    gateway: Gateway
    settings: Mapping[str, LLMSettings]  # role → settings
    stage_timeout_s: float = 900.0
    _owns_gateway: bool = field(default=False, repr=False)

    @classmethod
    def start(
        cls,
        settings: Mapping[str, LLMSettings],
        *,
        stage_timeout_s: float = 900.0,
        unix_socket: Path | None = None,
    ) -> LLMSession:
        gateway = Gateway(
            token_budget=env_int(TOKEN_BUDGET_ENV, 2_000_000),
            requests_per_minute=env_float(RATE_ENV, 600.0),
            unix_socket=unix_socket,
        ).start()
        return cls(gateway, dict(settings), stage_timeout_s, _owns_gateway=True)

    def route(self, role: str) -> Route:
        s = self._settings(role)
        return Route(base_url=s.base_url, model=s.model, api_key=take_api_key(s))

    def client(self, environment: str, role: str) -> openai.OpenAI:
        s = self._settings(role)
        token = self.gateway.grant(environment, role, self.route(role))
        return openai.OpenAI(
            base_url=self.gateway.url,
            api_key=token,
            max_retries=s.max_retries,
            timeout=s.request_timeout_s,
            # the gateway is on loopback: never route it through an HTTP(S)_PROXY
            http_client=openai.DefaultHttpxClient(trust_env=False),
        )

    def agent_config(self, role: str) -> AgentConfig:
        return _agent_config(self._settings(role), self.stage_timeout_s)

    def end_environment(self, environment: str) -> None:
        self.gateway.revoke_environment(environment)

    def close(self) -> None:
        if self._owns_gateway:
            self.gateway.close()

    def _settings(self, role: str) -> LLMSettings:
        try:
            return self.settings[role]
        except KeyError:
            raise KeyError(f"no LLM backend configured for role {role!r}") from None


@dataclass(frozen=True)
class GatewaySession:
    """The roles of one stage pod, through a gateway that runs elsewhere. ``token`` is
    signed for one (environment, role): the gateway charges its usage to the environment,
    holds it to the environment's budget and swaps it for the upstream key."""

    url: str
    token: str = field(repr=False)
    settings: Mapping[str, LLMSettings]  # role → settings (model, sampling, turns)
    stage_timeout_s: float = 900.0

    @classmethod
    def from_env(
        cls, settings: Mapping[str, LLMSettings], *, stage_timeout_s: float = 900.0
    ) -> GatewaySession | None:
        """From the stage pod's environment; None where the operator gave it no gateway."""
        url, token = os.environ.get(GATEWAY_URL_ENV, ""), os.environ.get(GATEWAY_TOKEN_ENV, "")
        if not (url and token):
            return None
        return cls(url, token, dict(settings), stage_timeout_s)

    def client(self, environment: str, role: str) -> openai.OpenAI:
        s = self.settings[role]
        return openai.OpenAI(
            base_url=self.url,
            api_key=self.token,
            max_retries=s.max_retries,
            timeout=s.request_timeout_s,
            # in-cluster, by address: never through an HTTP(S)_PROXY
            http_client=openai.DefaultHttpxClient(trust_env=False),
        )

    def agent_config(self, role: str) -> AgentConfig:
        return _agent_config(self.settings[role], self.stage_timeout_s)


__all__ = ["GatewaySession", "LLMSession", "RoleSession"]

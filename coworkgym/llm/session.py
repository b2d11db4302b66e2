"""An LLM session: one gateway for this process, one route per role, clients on demand.

The session is the only holder of upstream keys (inside its gateway). A role asks it for a
client for (environment, role) and gets an ``openai.OpenAI`` pointed at the gateway with a
freshly minted token; closing an environment revokes its tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import openai

from .agent import AgentConfig
from .gateway import Gateway, Route
from .settings import LLMSettings, env_float, env_int, take_api_key

TOKEN_BUDGET_ENV = "COWORKGYM_LLM_TOKEN_BUDGET"  # tokens per environment, all roles together
RATE_ENV = "COWORKGYM_LLM_REQUESTS_PER_MINUTE"


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
        s = self._settings(role)
        return AgentConfig(
            model=s.model,
            temperature=s.temperature,
            max_turns=s.max_turns,
            max_tokens=s.max_tokens,
            stage_timeout_s=self.stage_timeout_s,
        )

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


__all__ = ["LLMSession"]

"""Per-role LLM settings, read from the spec's ``backends`` and the environment.

Only the gateway ever sees an upstream API key; everything else gets a per-environment
token from it. Locally the key comes from an environment variable of this process:
``apiKeySecret`` names that variable when set (on a cluster it names a Secret that the
gateway pod mounts under the same name), else ``COWORKGYM_LLM_API_KEY``, else
``OPENAI_API_KEY``. Self-hosted servers without auth (vLLM, SGLang) need none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..spec import RoleBackend

KEY_VARIABLES = ("COWORKGYM_LLM_API_KEY", "OPENAI_API_KEY")
NO_KEY = "EMPTY"  # what vLLM's docs use for servers started without --api-key


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str
    temperature: float = 0.2
    max_turns: int = 40
    api_key_env: str | None = None
    request_timeout_s: float = 180.0
    max_retries: int = 4  # the openai client backs off on 408/409/429/5xx and timeouts
    max_tokens: int | None = None  # per completion; None leaves it to the server

    @classmethod
    def from_backend(cls, backend: RoleBackend) -> LLMSettings:
        if not (backend.model and backend.base_url):
            raise ValueError("an 'llm' backend needs 'model' and 'baseUrl'")
        return cls(
            model=backend.model,
            base_url=backend.base_url,
            temperature=backend.temperature,
            max_turns=backend.max_turns,
            api_key_env=backend.api_key_secret,
        )

    @property
    def key_variables(self) -> tuple[str, ...]:
        return (self.api_key_env,) if self.api_key_env else KEY_VARIABLES

    def api_key(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        for name in self.key_variables:
            value = env.get(name)
            if value:
                return value
        return NO_KEY


_TAKEN: dict[str, str] = {}  # keys moved out of os.environ, by variable name


def take_api_key(settings: LLMSettings) -> str:
    """The upstream key, moved out of this process's environment on first use.

    Every child process inherits the environment: bubblewrap itself, before it clears the
    sandboxed command's. As root, the sandbox's uid cannot read bubblewrap's
    /proc/1/environ; with an unprivileged user namespace it could. So the key does not stay
    in the environment at all: the gateway (this process) keeps it in memory only.
    """
    for name in settings.key_variables:
        value = os.environ.pop(name, None)
        if value:
            _TAKEN[name] = value
            return value
        if name in _TAKEN:
            return _TAKEN[name]
    return NO_KEY


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default

"""Third-party agent harnesses from PyPI, wrapped as adapters: ``mini-swe-agent`` and
``openai-agents``.

Each adapter lets the library's own agent loop drive the model and replaces the library's
environment/tool layer with the ``Episode``: every tool call the library dispatches becomes
``Episode.execute`` (so it runs in the agent's bubblewrap sandbox and is recorded), every
completion is recorded with ``Episode.record_agent``, and a later user turn continues the
same conversation. The libraries are an optional extra (``pip install
'cowork-gym[harnesses]'``): the names are registered here, always, and a library is imported
only when a rollout asks for its harness — a missing one ends that rollout as
``harness_crash`` with the install line, instead of breaking ``import coworkgym``.
"""

from __future__ import annotations

import importlib.util

import httpx

from ..harness import Harness, HarnessError, register

EXTRA = "pip install 'cowork-gym[harnesses]'"
# the gateway's answer when the rollout's token budget is spent; a provider's own
# "insufficient_quota" is the endpoint failing (model_error), as in the tool-calling harness
BUDGET_CODES = frozenset({"budget_exhausted"})
# harness name → the module it needs (what ``missing_library`` checks before importing)
LIBRARIES = {"mini-swe-agent": "minisweagent", "openai-agents": "agents"}


def missing_library(harness: str) -> str | None:
    """Why ``harness`` cannot run here (its library is not installed), or None."""
    module = LIBRARIES.get(harness)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"the {harness} harness needs its library ({module!r} is not installed): {EXTRA}"


def endpoint_failure(exc: Exception, library: str) -> HarnessError:
    """The endpoint failed after the client's retries (``model_error``); the gateway's
    spent-budget answer (error code ``budget_exhausted``) is ``budget_exhausted``."""
    status = getattr(exc, "status_code", None)
    text = str(exc)
    detail = f"{library}: HTTP {status}: {text[:300]}" if status else f"{library}: {text[:300]}"
    if _error_codes(exc) & BUDGET_CODES:
        return HarnessError("budget_exhausted", detail)
    return HarnessError("model_error", detail)


def _error_codes(exc: BaseException) -> set[str]:
    """The error codes the server sent, wherever the library kept them: ``code``, a parsed
    ``body``, the HTTP ``response`` — on the exception or on one it wraps (litellm puts the
    HTTP status in ``code`` and the server's code in ``body``)."""
    codes: set[str] = set()
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            break
        code = getattr(seen, "code", None)
        if isinstance(code, str):
            codes.add(code)
        body = getattr(seen, "body", None)
        response = getattr(seen, "response", None)
        if body is None and isinstance(response, httpx.Response):
            try:
                body = response.json()
            except ValueError:
                body = None
        if isinstance(body, dict):
            error = body.get("error", body)
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                codes.add(str(error["code"]))
        seen = seen.__cause__ or seen.__context__
    return codes


def _require(harness: str) -> None:
    reason = missing_library(harness)
    if reason is not None:
        raise HarnessError("harness_crash", reason)


@register("mini-swe-agent")
def _mini_swe_agent() -> Harness:
    _require("mini-swe-agent")
    from .mini_swe_agent import MiniSweAgentHarness

    return MiniSweAgentHarness()


@register("openai-agents")
def _openai_agents() -> Harness:
    _require("openai-agents")
    from .openai_agents import OpenAIAgentsHarness

    return OpenAIAgentsHarness()


__all__ = ["EXTRA", "LIBRARIES", "endpoint_failure", "missing_library"]

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

from ..harness import Harness, HarnessError, register

EXTRA = "pip install 'cowork-gym[harnesses]'"
BUDGET_CODES = ("budget_exhausted", "insufficient_quota")
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
    spent-budget answer (code ``budget_exhausted`` in its body) is ``budget_exhausted``."""
    status = getattr(exc, "status_code", None)
    text = str(exc)
    detail = f"{library}: HTTP {status}: {text[:300]}" if status else f"{library}: {text[:300]}"
    if any(code in text for code in BUDGET_CODES):
        return HarnessError("budget_exhausted", detail)
    return HarnessError("model_error", detail)


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

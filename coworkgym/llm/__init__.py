"""The LLM backend: tool-using agents over any OpenAI-compatible endpoint (vLLM, SGLang,
OpenAI …), behind the same role interface as the procedural backend.

- ``agent``    the tool-using loop (chat completions + function calling), bounded in
               turns, time and context
- ``tools``    shell / read / write / edit / list, confined to a role's sandbox and mounts
- ``layout``   the directories through which roles hand over their outputs
- ``prompts``  the role prompts
- ``gateway``  the local proxy that alone holds API keys; budgets, rate limits, metrics
- ``session``  one gateway per process and a route per role
- ``judge``    the rubric judge (V_LLM); a failure is *invalid*, never 0
- ``review``   the Issue Detector's optional LLM review (adds evidence-based defects)

The roles themselves are ``coworkgym.roles.llm``. Errors: see ``coworkgym.llm.errors``.
The ``openai`` client is imported here, so this package needs the ``llm`` extra.
"""

from __future__ import annotations

from .errors import AgentError, AgentStatus, JudgeError

__all__ = ["AgentError", "AgentStatus", "JudgeError"]

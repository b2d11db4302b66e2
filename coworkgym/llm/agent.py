"""A tool-using agent loop over an OpenAI-compatible chat-completions endpoint.

The loop runs in this process; every tool call it makes runs in the role's sandbox (see
``coworkgym.llm.tools``). It ends when a tool reports ``done`` (a role's ``submit`` whose
output validated), and otherwise raises ``AgentError`` with a status — never hangs:

- ``max_turns`` model calls at most (a reply without a tool call counts as a turn);
- a wall-clock deadline for the whole stage, checked before every call;
- per-request timeouts and retries with backoff on 408/409/429/5xx are the openai client's
  (``max_retries``, honouring ``retry-after``); what is left after them is a status here;
- a malformed tool call (bad JSON, unknown tool, arguments that do not validate) is
  answered with an error tool message, so the model can correct itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import openai
import structlog

from . import context
from .errors import AgentError, AgentStatus
from .tools import ToolBox, ToolResult

log = structlog.get_logger(__name__)

NUDGE = (
    "You replied without calling a tool. Work only through the tools; when your output is "
    "complete, call `submit`."
)
CUT_OFF = (
    "Your reply was cut off at the token limit before a complete tool call. Write large "
    "files in smaller pieces (several write_file/edit_file calls, or a shell heredoc)."
)
BUDGET_CODES = {"budget_exhausted", "insufficient_quota"}


@dataclass(frozen=True)
class AgentConfig:
    model: str
    temperature: float = 0.2
    max_turns: int = 40
    max_tokens: int | None = None
    stage_timeout_s: float = 900.0
    context_chars: int = 160_000  # about 40k tokens of conversation
    keep_recent: int = 8  # newest messages never compacted


@dataclass
class AgentUsage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class AgentResult:
    turns: int
    final: ToolResult
    usage: AgentUsage
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_errors: int = 0


class Agent:
    def __init__(
        self,
        client: openai.OpenAI,
        toolbox: ToolBox,
        config: AgentConfig,
        *,
        name: str = "agent",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.toolbox = toolbox
        self.config = config
        self.name = name
        self.clock = clock
        self.usage = AgentUsage()  # of this agent's runs, as they go (a failed run's too)

    def run(self, system: str, task: str) -> AgentResult:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task},
        ]
        usage = self.usage
        deadline = self.clock() + self.config.stage_timeout_s
        tool_errors = 0
        for turn in range(1, self.config.max_turns + 1):
            if self.clock() > deadline:
                raise AgentError(
                    AgentStatus.STAGE_TIMEOUT,
                    f"{self.name} ran out of its {self.config.stage_timeout_s:g}s stage budget",
                    turns=turn - 1,
                )
            context.compact(messages, self.config.context_chars, self.config.keep_recent)
            reply = self._complete(messages, usage, turn)
            choice = reply.choices[0] if reply.choices else None
            message = choice.message if choice else None
            calls = list(message.tool_calls or []) if message else []
            messages.append(_assistant(message, calls, turn))
            if not calls:
                cut = choice is not None and choice.finish_reason == "length"
                messages.append({"role": "user", "content": CUT_OFF if cut else NUDGE})
                continue
            for index, call in enumerate(calls):
                result = self._call(call)
                tool_errors += not result.ok
                call_id = call.id or f"call_{turn}_{index}"
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result.text})
                if result.done:
                    log.info("agent done", agent=self.name, turns=turn, tokens=usage.prompt_tokens)
                    return AgentResult(turn, result, usage, messages, tool_errors)
        raise AgentError(
            AgentStatus.TURNS_EXHAUSTED,
            f"{self.name} made {self.config.max_turns} model calls without an accepted output "
            f"({tool_errors} tool errors)",
            turns=self.config.max_turns,
        )

    def _call(self, call: Any) -> ToolResult:
        function = getattr(call, "function", None)
        if function is None:  # a non-function tool call type (e.g. a custom tool)
            return ToolResult("error: only function tool calls are supported", ok=False)
        result = self.toolbox.dispatch(function.name, function.arguments)
        log.debug("tool call", agent=self.name, tool=function.name, ok=result.ok)
        return result

    def _complete(self, messages: list[dict[str, Any]], usage: AgentUsage, turn: int) -> Any:
        extra: dict[str, Any] = {}
        if self.config.max_tokens is not None:
            extra["max_tokens"] = self.config.max_tokens
        try:
            reply = self.client.chat.completions.create(
                model=self.config.model,
                messages=cast(Any, messages),  # plain dicts: the wire format we also compact
                tools=cast(Any, self.toolbox.specs()),
                tool_choice="auto",
                temperature=self.config.temperature,
                **extra,
            )
        except openai.APIStatusError as exc:
            raise _status_error(exc, self.name, turn) from exc
        except openai.APITimeoutError as exc:
            raise AgentError(
                AgentStatus.UPSTREAM_UNAVAILABLE, f"{self.name}: model call timed out", turns=turn
            ) from exc
        except openai.APIConnectionError as exc:
            raise AgentError(
                AgentStatus.UPSTREAM_UNAVAILABLE, f"{self.name}: cannot reach the model: {exc}"
            ) from exc
        usage.requests += 1
        if reply.usage is not None:
            usage.prompt_tokens += reply.usage.prompt_tokens
            usage.completion_tokens += reply.usage.completion_tokens
        return reply


def _status_error(exc: openai.APIStatusError, name: str, turn: int) -> AgentError:
    code = _error_code(exc)
    detail = f"{name}: HTTP {exc.status_code} {code or ''}: {_error_message(exc)}"
    if code in BUDGET_CODES:
        return AgentError(AgentStatus.TOKENS_EXHAUSTED, detail, turns=turn)
    if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
        return AgentError(AgentStatus.UPSTREAM_UNAVAILABLE, detail, turns=turn)
    return AgentError(AgentStatus.UPSTREAM_REJECTED, detail, turns=turn)


def _error_code(exc: openai.APIStatusError) -> str | None:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    if not isinstance(error, dict):
        return None
    return str(error.get("code") or error.get("type") or "") or None


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:300]
    return str(exc)[:300]


def _assistant(message: Any, calls: list[Any], turn: int) -> dict[str, Any]:
    """The assistant turn as it goes back on the wire (ids filled in when a server omits them)."""
    entry: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None)}
    if calls:
        entry["tool_calls"] = [
            {
                "id": call.id or f"call_{turn}_{index}",
                "type": "function",
                "function": {
                    "name": getattr(getattr(call, "function", None), "name", "?"),
                    "arguments": getattr(getattr(call, "function", None), "arguments", "") or "",
                },
            }
            for index, call in enumerate(calls)
        ]
    return entry


__all__ = ["Agent", "AgentConfig", "AgentResult", "AgentUsage"]

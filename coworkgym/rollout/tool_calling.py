"""The built-in harness: OpenAI chat completions with tools.

The tools are the episode's (the package's interfaces, ``ask_user``, ``finish``); every
call runs through ``Episode.execute`` in the agent's sandbox. The endpoint is the LLM
gateway with this rollout's token (the engine sets ``policy.base_url``/``api_key``).

- A reply with tool calls: each is executed and answered; a malformed one (bad JSON, an
  unknown tool, arguments that do not validate) is answered as an error — the episode
  counts it — and the model goes on.
- A reply without tool calls ends the agent's turn (``Episode.end_turn``).
- A user message that arrives (a later turn, with its patch) is shown next.
- Token ids and logprobs: asked for (``logprobs`` and vLLM's ``return_token_ids``) and
  recorded when the server returns them — ``choice.logprobs.content[*].logprob``,
  ``choice.token_ids`` and ``prompt_token_ids`` (on the choice or the response); a server
  that refuses those parameters (HTTP 400) is asked again without them, once.
- The endpoint failing after the client's retries ends the rollout as ``model_error``
  (``budget_exhausted`` when the gateway says the rollout's token budget is spent). A
  provider's own spent quota (429 ``insufficient_quota``, passed through by the gateway)
  is the endpoint failing, not the policy's budget: ``model_error``, never verified.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import openai
import structlog

from ..llm import context
from .harness import Episode, HarnessError, PolicyConfig, register
from .trajectory import TokenRecord, ToolCall

log = structlog.get_logger(__name__)

CONTEXT_CHARS = 160_000  # about 40k tokens of conversation on the wire
KEEP_RECENT = 8
# the gateway's answer when this rollout's token budget is spent (coworkgym.llm.gateway);
# an upstream's "insufficient_quota" is its account's, and says nothing about the policy
BUDGET_CODES = {"budget_exhausted"}


@register("tool-calling")
class ToolCallingHarness:
    name = "tool-calling"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        if not policy.base_url:
            raise HarnessError("model_error", "the tool-calling harness needs a model endpoint")
        with client_for(policy) as client:
            drive(
                client,
                episode,
                policy,
                system=episode.system_prompt,
                tools=episode.tool_schemas(),
                dispatch=lambda call: episode.execute(call).text,
            )


def client_for(policy: PolicyConfig) -> openai.OpenAI:
    """The OpenAI client on the rollout's gateway address, with the policy's retries."""
    return openai.OpenAI(
        base_url=policy.base_url,
        api_key=policy.api_key,
        max_retries=int(policy.extra.get("max_retries", 3)),
        timeout=float(policy.extra.get("request_timeout_s", 180.0)),
        http_client=openai.DefaultHttpxClient(trust_env=False),  # the gateway: loopback
    )


def drive(
    client: openai.OpenAI,
    episode: Episode,
    policy: PolicyConfig,
    *,
    system: str,
    tools: list[dict[str, Any]],
    dispatch: Callable[[ToolCall], str],
) -> None:
    """The chat-completions loop: ``system`` and the instruction, then model call → each
    tool call answered by ``dispatch`` (which must see it reach the episode: executed, or
    refused with ``Episode.reject``) → again, until the episode is done. A harness with its
    own interface passes its own system prompt, tools and dispatch."""
    wire: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": episode.instruction},
    ]
    extras = _token_extras(policy)
    while not episode.done:
        context.compact(wire, CONTEXT_CHARS, KEEP_RECENT)
        reply, extras = _complete(client, policy, wire, tools, extras)
        choice = reply.choices[0] if reply.choices else None
        if choice is None:
            raise HarnessError("model_error", "the endpoint returned no choices")
        message = choice.message
        calls = [
            ToolCall(
                id=call.id or f"call_{len(wire)}_{index}",
                name=getattr(getattr(call, "function", None), "name", "") or "",
                arguments=getattr(getattr(call, "function", None), "arguments", "") or "",
            )
            for index, call in enumerate(message.tool_calls or [])
        ]
        content = message.content or ""
        episode.record_agent(
            content, calls, tokens_of(reply, choice), getattr(choice, "finish_reason", None)
        )
        wire.append(_assistant(content, calls))
        if not calls:
            episode.end_turn(content)
        for call in calls:
            wire.append({"role": "tool", "tool_call_id": call.id, "content": dispatch(call)})
        pending = episode.pending_user_message()
        if pending is not None:
            wire.append({"role": "user", "content": pending})


def _token_extras(policy: PolicyConfig) -> dict[str, Any]:
    if not policy.request_logprobs:
        return {}
    return {"logprobs": True, "extra_body": {"return_token_ids": True}}


def _complete(
    client: openai.OpenAI,
    policy: PolicyConfig,
    wire: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    extras: dict[str, Any],
) -> tuple[Any, dict[str, Any]]:
    """One model call; returns the reply and the token extras still in use."""
    try:
        return _create(client, policy, wire, tools, extras), extras
    except openai.BadRequestError as exc:
        if not extras:
            raise _model_error(exc) from exc
        log.info("endpoint refused token ids/logprobs; asking without them", error=str(exc))
    try:
        return _create(client, policy, wire, tools, {}), {}
    except openai.APIError as exc:
        raise _model_error(exc) from exc


def _create(
    client: openai.OpenAI,
    policy: PolicyConfig,
    wire: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    extras: dict[str, Any],
) -> Any:
    try:
        return client.chat.completions.create(
            model=policy.model,
            messages=cast(Any, wire),
            tools=cast(Any, tools),
            tool_choice="auto",
            **policy.sampling(),
            **extras,
        )
    except openai.BadRequestError:
        raise
    except openai.APIError as exc:
        raise _model_error(exc) from exc


def _model_error(exc: openai.APIError) -> HarnessError:
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if not code and isinstance(body, dict):
        error = body.get("error", body)
        code = error.get("code") if isinstance(error, dict) else None
    status = getattr(exc, "status_code", None)
    detail = f"HTTP {status} {code or ''}: {str(exc)[:300]}" if status else str(exc)[:300]
    if code in BUDGET_CODES:
        return HarnessError("budget_exhausted", detail)
    return HarnessError("model_error", detail)


def _assistant(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    # content is "" rather than null beside tool calls: OpenAI and vLLM take either, but
    # llama.cpp's server (llama-cpp-python) refuses a null (its schema wants a string)
    entry: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return entry


def tokens_of(reply: Any, choice: Any) -> TokenRecord | None:
    """The policy's exact tokens, when the server sent them (read defensively: every field
    is an extension some servers have and others lack)."""
    extra: dict[str, Any] = getattr(choice, "model_extra", None) or {}
    ids: Any = extra.get("token_ids")
    if not _int_list(ids):
        return None
    prompt: Any = extra.get("prompt_token_ids")
    if not _int_list(prompt):
        prompt = (getattr(reply, "model_extra", None) or {}).get("prompt_token_ids")
    logprobs: list[float] | None = None
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if isinstance(content, list) and len(content) == len(ids):
        try:
            logprobs = [float(item.logprob) for item in content]
        except (AttributeError, TypeError, ValueError):
            logprobs = None
    return TokenRecord(
        completion_ids=list(ids),
        logprobs=logprobs,
        prompt_ids=list(prompt) if _int_list(prompt) else None,
    )


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


__all__ = ["ToolCallingHarness", "client_for", "drive", "tokens_of"]

"""The OpenAI Agents SDK (``pip install openai-agents``, import ``agents``) as a harness.

What is the SDK's and what is the episode's:

- The loop is the SDK's ``Runner`` (model call → tool calls → tool results → again, until a
  final output), with its ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client pointed
  at the LLM gateway with this rollout's token. Tracing is off (it would upload every span
  to OpenAI); no other traffic leaves this process.
- The tools are the episode's, as SDK ``FunctionTool``s whose ``on_invoke_tool`` is
  ``Episode.execute``: a shell command runs in the agent's bubblewrap sandbox. Their schemas
  go out as the SDK sends its function tools: its strict rewrite (``"strict": true``, every
  property required, no extra properties), so the model sees what an Agents SDK agent sees;
  the raw argument text still reaches the episode, which answers a malformed call as an
  error and counts it; a call to a tool that does not exist goes to the episode too (the
  SDK's ``tool_error_formatter`` hook), so its answer and its count are the episode's.
- Each completion is recorded as it arrives, from the HTTP response itself (an ``httpx``
  response hook on the SDK's client), because the SDK turns completions into its own items
  and drops token ids and logprobs.
- Turn ends: after each batch of tool calls the SDK asks ``tool_use_behavior`` whether to
  stop; it stops when the user has a message (``finish`` was called, or a trigger fired) or
  the episode is done. A reply without tool calls is the SDK's final output and ends the
  turn (``Episode.end_turn``). A later user turn is appended to the run's input list
  (``to_input_list()``) and the Runner goes on with the same conversation.
"""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

# Before the SDK is imported: no trace export to OpenAI's servers.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

import httpx
import openai
from agents import (
    Agent,
    FunctionTool,
    FunctionToolResult,
    MaxTurnsExceeded,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolErrorFormatterArgs,
    ToolExecutionConfig,
    ToolsToFinalOutputResult,
)
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext
from openai.types.chat import ChatCompletion

from ...llm import context
from ..engine import AGENT_LANE_MARKER
from ..harness import ASK_USER_TOOL, FINISH_TOOL, Episode, HarnessError, PolicyConfig
from ..tool_calling import CONTEXT_CHARS, KEEP_RECENT, tokens_of
from ..trajectory import ToolCall
from . import endpoint_failure

LIBRARY = "openai-agents"


class _CompletionTap:
    """Records every completion the SDK receives, before the SDK acts on it."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.completions = 0
        self.arguments: dict[str, tuple[str, str]] = {}  # call id → (name, raw arguments)

    async def on_response(self, response: httpx.Response) -> None:
        if response.status_code != 200 or not response.request.url.path.endswith(
            "/chat/completions"
        ):
            return
        await response.aread()
        try:
            reply = ChatCompletion.model_validate_json(response.content)
        except ValueError:
            return  # the SDK reports an unreadable reply itself
        if not reply.choices:
            return
        choice = reply.choices[0]
        calls = []
        for index, call in enumerate(choice.message.tool_calls or []):
            function = getattr(call, "function", None)
            name = getattr(function, "name", "") or ""
            arguments = getattr(function, "arguments", "") or ""
            calls.append(ToolCall(id=call.id or f"call_{index}", name=name, arguments=arguments))
            self.arguments[calls[-1].id] = (name, arguments)
        self.completions += 1
        self.episode.record_agent(
            choice.message.content or "",
            calls,
            tokens_of(reply, choice),
            getattr(choice, "finish_reason", None),
        )

    def tool_not_found(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """A call to a tool the SDK does not know: the episode answers (and counts) it."""
        if args.kind != "tool_not_found":
            return None
        name, arguments = self.arguments.get(args.call_id, (args.tool_name, ""))
        return self.episode.execute(ToolCall(id=args.call_id, name=name, arguments=arguments)).text


class _TurnControl:
    """The SDK's ``tool_use_behavior``: stop the Runner when the user speaks or is done."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.pending: str | None = None
        self.stopped = False

    def reset(self) -> None:
        self.pending, self.stopped = None, False

    def after_tools(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        self.pending = self.episode.pending_user_message()
        self.stopped = self.pending is not None or self.episode.done
        return ToolsToFinalOutputResult(is_final_output=self.stopped, final_output="")


def _compact(data: CallModelData[Any]) -> ModelInputData:
    """The SDK sends the whole run every call; keep it under the built-in harness's
    character budget the same way (old tool outputs, then old call arguments, elided — the
    record keeps them whole). The SDK's items are viewed as chat messages for
    ``context.compact`` and the elisions copied back into copies of the items."""
    items: list[Any] = [dict(item) for item in data.model_data.input]
    views: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call_output":
            views.append({"role": "tool", "content": str(item.get("output") or "")})
        elif kind == "function_call":
            function = {"arguments": str(item.get("arguments") or "")}
            views.append({"role": "assistant", "tool_calls": [{"function": function}]})
        else:
            content = str(item.get("content") or "")
            views.append({"role": str(item.get("role", "")), "content": content})
    before = copy.deepcopy(views)
    if context.compact(views, CONTEXT_CHARS, KEEP_RECENT):
        for item, view, was in zip(items, views, before, strict=True):
            if view == was:
                continue  # untouched: the item keeps its own form
            if item.get("type") == "function_call_output":
                item["output"] = view["content"]
            elif item.get("type") == "function_call":
                item["arguments"] = view["tool_calls"][0]["function"]["arguments"]
    return ModelInputData(input=items, instructions=data.model_data.instructions)


def _episode_tools(episode: Episode) -> list[FunctionTool]:
    def invoke(name: str) -> Any:
        async def on_invoke(context: ToolContext[Any], arguments: str) -> str:
            call = ToolCall(id=context.tool_call_id, name=name, arguments=arguments)
            return episode.execute(call).text

        return on_invoke

    tools = []
    for spec in episode.tool_schemas():
        function = spec["function"]
        tools.append(
            FunctionTool(
                name=function["name"],
                description=function.get("description", ""),
                params_json_schema=function.get("parameters", {"type": "object"}),
                on_invoke_tool=invoke(function["name"]),
                strict_json_schema=True,  # the SDK's default: its strict rewrite
            )
        )
    return tools


def agent_instructions(episode: Episode) -> str:
    """An Agents SDK agent's ``instructions``: who the agent is and what done means. The SDK
    describes the tools in the request's ``tools`` (strict schemas), so unlike the built-in
    harness's system prompt these do not enumerate them. The first words are the episode's
    (the gateway's lane for agent requests)."""
    return (
        f"{AGENT_LANE_MARKER}. Your job: carry out the user's request on the files in "
        f"{episode.workdir}, using the tools you are given; there is no network. When a detail "
        f"you need is missing, use {ASK_USER_TOOL}. When the work is done, call {FINISH_TOOL}; "
        "the user may reply with a follow-up request, which you handle the same way."
    )


def _settings(policy: PolicyConfig, token_extras: bool) -> ModelSettings:
    extra_args: dict[str, Any] = {}
    if policy.seed is not None:
        extra_args["seed"] = policy.seed
    if token_extras:
        extra_args["logprobs"] = True
    return ModelSettings(
        temperature=policy.temperature,
        top_p=policy.top_p,
        max_tokens=policy.max_tokens,
        extra_args=extra_args or None,
        extra_body={"return_token_ids": True} if token_extras else None,
    )


class OpenAIAgentsHarness:
    name = LIBRARY

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        if not policy.base_url:
            raise HarnessError("model_error", "the openai-agents harness needs a model endpoint")
        try:
            asyncio.run(self._drive(episode, policy))
        except HarnessError:
            raise
        except MaxTurnsExceeded as exc:
            if not episode.done:
                raise HarnessError("max_steps", f"{LIBRARY}: {exc}") from exc
        except openai.APIError as exc:
            raise endpoint_failure(exc, LIBRARY) from exc
        except Exception as exc:  # AgentsException (ModelBehaviorError, UserError, …) or a bug
            raise HarnessError(
                "harness_crash", f"{LIBRARY}: {type(exc).__name__}: {exc}"[:500]
            ) from exc

    async def _drive(self, episode: Episode, policy: PolicyConfig) -> None:
        tap = _CompletionTap(episode)
        client = openai.AsyncOpenAI(
            base_url=policy.base_url,
            api_key=policy.api_key,
            max_retries=int(policy.extra.get("max_retries", 3)),
            timeout=float(policy.extra.get("request_timeout_s", 180.0)),
            http_client=openai.DefaultAsyncHttpxClient(
                trust_env=False,  # the gateway: loopback, never a proxy
                event_hooks={"response": [tap.on_response]},
            ),
        )
        turn = _TurnControl(episode)
        agent: Agent[Any] = Agent(
            name="cowork-agent",
            instructions=agent_instructions(episode),
            tools=list(_episode_tools(episode)),
            model=OpenAIChatCompletionsModel(model=policy.model, openai_client=client),
            model_settings=_settings(policy, policy.request_logprobs),
            tool_use_behavior=turn.after_tools,
        )
        run_config = RunConfig(
            tracing_disabled=True,
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=tap.tool_not_found,
            tool_execution=ToolExecutionConfig(max_function_tool_concurrency=1),  # in order
            call_model_input_filter=_compact,
        )
        items: list[Any] = [{"role": "user", "content": episode.instruction}]
        try:
            while not episode.done:
                turn.reset()
                try:
                    result = await Runner.run(
                        agent, items, run_config=run_config, max_turns=policy.max_steps + 1
                    )
                except openai.BadRequestError:
                    if tap.completions or agent.model_settings.extra_body is None:
                        raise
                    # the endpoint refuses token ids/logprobs: ask without them
                    agent.model_settings = _settings(policy, token_extras=False)
                    continue
                items = result.to_input_list()
                pending = turn.pending
                if not turn.stopped:  # a reply without tool calls: the agent's turn ends
                    episode.end_turn(str(result.final_output or ""))
                    pending = episode.pending_user_message()
                if pending is not None:
                    items.append({"role": "user", "content": pending})
        finally:
            await client.close()


__all__ = ["OpenAIAgentsHarness"]

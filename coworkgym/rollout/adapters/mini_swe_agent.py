"""mini-swe-agent (``pip install mini-swe-agent``) as a harness.

What is mini-swe-agent's and what is the episode's:

- The loop is mini-swe-agent's ``DefaultAgent`` (query the model → execute its actions →
  add the observations → again, until an exit message) and the model class is its
  ``LitellmModel`` (litellm's OpenAI provider), pointed at the LLM gateway with this
  rollout's token. Its retries are the OpenAI client's (``max_retries``), as for the
  built-in harness, not mini's ten-attempt backoff, so a dead endpoint fails in seconds.
- The environment is the episode: every action becomes ``Episode.execute`` — a shell
  command runs in the agent's bubblewrap sandbox, which mounts the workspace and nothing
  else — instead of mini's ``LocalEnvironment`` (``subprocess`` on this host).
- The model is offered the episode's tools and system prompt instead of mini's bash-only
  templates, and each observation is the tool's output verbatim, so the trajectory records
  what the model saw (past the built-in harness's context budget the oldest tool results
  go out elided, as there; the record keeps them whole). Every tool call is handed to the
  episode, which answers a malformed one (unknown tool, bad JSON) as an error and counts
  it; mini's own format-error retries never fire.
- Turn ends: a ``finish`` call, a reply without tool calls, or mini's own submit signal (a
  shell command whose output starts with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``). A later
  user turn is appended to mini's message list and its loop goes on; once the episode is
  done the loop gets mini's exit message.

Offline: litellm reads its bundled cost map (``LITELLM_LOCAL_MODEL_COST_MAP``), mini's
startup banner and its per-user config (``~/.config/mini-swe-agent/.env``, which could set
keys or limits) are kept out of rollouts.
"""

from __future__ import annotations

import copy
import os
import tempfile
from typing import Any

# Before litellm or minisweagent is imported: no cost map download, no banner, and mini's
# global config folder (whose .env it loads into the environment) a fresh private one, not
# the user's ~/.config/mini-swe-agent nor a shared path someone else could plant a .env in.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="cwg-mini-swe-agent-")

import litellm
import openai
from minisweagent.agents.default import DefaultAgent
from minisweagent.exceptions import Submitted
from minisweagent.models.litellm_model import LitellmModel
from openai.types.chat import ChatCompletion

from ...llm import context
from ..harness import Episode, HarnessError, PolicyConfig
from ..tool_calling import CONTEXT_CHARS, KEEP_RECENT, tokens_of
from ..trajectory import TokenRecord, ToolCall
from . import endpoint_failure

litellm.suppress_debug_info = True  # no "Provider List" banner on every call

# What litellm raises once the endpoint has failed (after the client's retries).
ENDPOINT_ERRORS = (
    litellm.exceptions.APIError,
    litellm.exceptions.APIConnectionError,
    openai.APIError,
)
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini's own "task done" signal


class _EpisodeModel(LitellmModel):
    """mini's litellm model with the episode's tools; records every completion."""

    # Retry nothing here: the OpenAI client under litellm retries (``max_retries``) and
    # honours the gateway's ``x-should-retry: false`` on a spent budget.
    abort_exceptions: list[type[Exception]] = [Exception]  # noqa: RUF012 - mini's class attribute

    def __init__(self, episode: Episode, policy: PolicyConfig) -> None:
        model_kwargs: dict[str, Any] = {
            "api_base": policy.base_url,
            "api_key": policy.api_key,
            "max_retries": int(policy.extra.get("max_retries", 3)),
            "timeout": float(policy.extra.get("request_timeout_s", 180.0)),
            **policy.sampling(),
        }
        super().__init__(
            model_name=f"openai/{policy.model}",
            model_kwargs=model_kwargs,
            cost_tracking="ignore_errors",
            observation_template="{{ output.output }}",
        )
        self.episode = episode
        self.tools = episode.tool_schemas()
        # Our own client for litellm to use: no proxy from the environment (the gateway is
        # loopback), and closed with the rollout — litellm would otherwise cache a client per
        # (endpoint, key), and every rollout has its own key.
        self.client = openai.OpenAI(
            base_url=policy.base_url,
            api_key=policy.api_key,
            max_retries=model_kwargs["max_retries"],
            timeout=model_kwargs["timeout"],
            http_client=openai.DefaultHttpxClient(trust_env=False),
        )
        self.token_extras: dict[str, Any] = (
            {"logprobs": True, "extra_body": {"return_token_ids": True}}
            if policy.request_logprobs
            else {}
        )

    def _query(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        return litellm.completion(
            model=self.config.model_name,
            messages=messages,
            tools=self.tools,
            client=self.client,
            **(self.config.model_kwargs | self.token_extras | kwargs),
        )

    def _prepare_messages_for_api(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """mini keeps the whole conversation; the wire is kept under the built-in harness's
        character budget the same way (old tool results, then old arguments, elided — the
        record keeps them whole)."""
        prepared: list[dict[str, Any]] = super()._prepare_messages_for_api(messages)
        if context.size(prepared) > CONTEXT_CHARS:
            prepared = copy.deepcopy(prepared)  # mini's own history stays whole
            context.compact(prepared, CONTEXT_CHARS, KEEP_RECENT)
        return prepared

    def query(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        try:
            try:
                message: dict[str, Any] = super().query(messages, **kwargs)
            except litellm.exceptions.BadRequestError:
                if not self.token_extras:
                    raise
                self.token_extras = {}  # the endpoint refuses token ids/logprobs: ask without
                message = super().query(messages, **kwargs)
        except ENDPOINT_ERRORS as exc:
            raise endpoint_failure(exc, "mini-swe-agent") from exc
        extra = message.get("extra", {})
        calls = [
            ToolCall(id=a["tool_call_id"], name=a["tool"], arguments=a["arguments"])
            for a in extra.get("actions", [])
        ]
        response = extra.get("response")
        self.episode.record_agent(
            str(message.get("content") or ""), calls, _tokens(response), _finish(response)
        )
        return message

    def _parse_actions(self, response: Any) -> list[dict[str, Any]]:
        """Every tool call, as the model wrote it: the episode judges it, not mini."""
        calls = response.choices[0].message.tool_calls or []
        return [
            {
                "tool": getattr(call.function, "name", "") or "",
                "arguments": getattr(call.function, "arguments", "") or "",
                "tool_call_id": call.id or f"call_{index}",
            }
            for index, call in enumerate(calls)
        ]


class _EpisodeEnvironment:
    """mini's environment protocol over the episode: actions run in the agent's sandbox."""

    config: Any = None

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    def execute(self, action: dict[str, Any], cwd: str = "") -> dict[str, Any]:
        call = ToolCall(
            id=action["tool_call_id"], name=action["tool"], arguments=action["arguments"]
        )
        output = self.episode.execute(call)
        if call.name == "shell" and not output.is_error and _submitted(output.text):
            self.episode.end_turn(output.text)
        return {"output": output.text, "returncode": int(output.is_error), "exception_info": ""}

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    def serialize(self) -> dict[str, Any]:
        return {}


class _EpisodeAgent(DefaultAgent):
    """mini's loop; after each step the user may speak (same conversation) or be done."""

    def __init__(self, model: _EpisodeModel, env: _EpisodeEnvironment, episode: Episode) -> None:
        super().__init__(
            model,
            env,
            system_template="{{ cowork_system }}",  # rendered once, from the episode
            instance_template="{{ task }}",
            step_limit=0,  # the episode counts steps and time, across turns
            cost_limit=0,
            max_consecutive_format_errors=0,
        )
        self.episode = episode

    def execute_actions(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        actions = message.get("extra", {}).get("actions", [])
        if not actions:  # a reply without a tool call ends the agent's turn
            self.episode.end_turn(str(message.get("content") or ""))
        added = super().execute_actions(message)
        pending = self.episode.pending_user_message()
        if pending is not None:
            added += self.add_messages({"role": "user", "content": pending})
        if self.episode.done:
            raise Submitted({"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}})
        return added


class MiniSweAgentHarness:
    name = "mini-swe-agent"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        if not policy.base_url:
            raise HarnessError("model_error", "the mini-swe-agent harness needs a model endpoint")
        model = _EpisodeModel(episode, policy)
        agent = _EpisodeAgent(model, _EpisodeEnvironment(episode), episode)
        try:
            agent.run(task=episode.instruction, cowork_system=episode.system_prompt)
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(
                "harness_crash", f"mini-swe-agent: {type(exc).__name__}: {exc}"[:500]
            ) from exc
        finally:
            model.client.close()


def _submitted(text: str) -> bool:
    """mini's submit signal: the command's stdout starts with the marker line."""
    _, sep, stdout = text.partition("--- stdout ---\n")
    return bool(sep) and stdout.lstrip().startswith(SUBMIT_MARKER)


def _tokens(response: Any) -> TokenRecord | None:
    """Token ids and logprobs, when litellm passed the server's through (it keeps the
    choice's extra fields in the response mini stores with each message)."""
    if not isinstance(response, dict) or not response.get("choices"):
        return None
    try:
        reply = ChatCompletion.model_validate(response)
    except ValueError:  # pydantic's ValidationError: not a reply we can read tokens from
        return None
    return tokens_of(reply, reply.choices[0]) if reply.choices else None


def _finish(response: Any) -> str | None:
    """The first choice's finish_reason in the raw response mini keeps, when it has one."""
    if not isinstance(response, dict) or not response.get("choices"):
        return None
    first = response["choices"][0]
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return reason if isinstance(reason, str) else None


__all__ = ["MiniSweAgentHarness"]

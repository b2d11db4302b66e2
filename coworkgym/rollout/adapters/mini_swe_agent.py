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
- The model sees mini's own interface: the system, instance, observation and format-error
  templates of the installed package's ``config/default.yaml`` (loaded, not copied), plain
  text completions with no ``tools`` field, one ```` ```mswea_bash_command ```` block per
  reply parsed by mini's ``LitellmTextbasedModel`` regex, observations rendered with their
  ``<returncode>``/``<output>``. The episode's tools are adapted into that bash interface:
  a command runs as the episode's ``shell`` tool (workspace files are read and written with
  bash, as mini expects), ``cowork-ask-user "question"`` reaches the user (the
  ``ask_user`` tool), and mini's submit command ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
  ends the turn (the ``finish`` tool). The instance template's task is the instruction
  followed by a short note naming those two commands. A reply without exactly one action
  gets mini's format-error message, and is recorded as an agent message without calls.
- A later user turn is appended to mini's message list as a new ``instance_template``-less
  user message (``New instruction from the user: ...``) and its loop goes on; once the
  episode is done the loop gets mini's exit message.

Offline: litellm reads its bundled cost map (``LITELLM_LOCAL_MODEL_COST_MAP``), mini's
startup banner and its per-user config (``~/.config/mini-swe-agent/.env``, which could set
keys or limits) are kept out of rollouts.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import shlex
import tempfile
from importlib import resources
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
import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.exceptions import FormatError, Submitted
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel
from openai.types.chat import ChatCompletion

from ...llm import context
from ..harness import ASK_USER_TOOL, FINISH_TOOL, Episode, HarnessError, PolicyConfig
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
ASK_USER_COMMAND = "cowork-ask-user"  # the user, reachable from bash


def mini_default_config() -> dict[str, Any]:
    """The installed mini-swe-agent's ``config/default.yaml`` (its own templates)."""
    text = resources.files("minisweagent.config").joinpath("default.yaml").read_text()
    config: dict[str, Any] = yaml.safe_load(text)
    return config


def episode_note(workdir: str) -> str:
    """How the episode's non-shell tools are reached from mini's bash-only interface."""
    return (
        f"\n\nYour working directory is {workdir}. To ask the user a clarifying question, "
        f'run `{ASK_USER_COMMAND} "your question"` as the whole command; its output is their '
        "answer. When you are done, submit as described below; the user may then give you a "
        "new instruction."
    )


MINI_CONFIG = mini_default_config()


class _EpisodeModel(LitellmTextbasedModel):
    """mini's text-based litellm model (no tools field); records every completion."""

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
        super().__init__(  # type: ignore[no-untyped-call]  # mini's untyped constructor
            model_name=f"openai/{policy.model}",
            model_kwargs=model_kwargs,
            cost_tracking="ignore_errors",
            observation_template=MINI_CONFIG["model"]["observation_template"],
            format_error_template=MINI_CONFIG["model"]["format_error_template"],
        )
        self.episode = episode
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
        self.n_replies = 0
        self.token_extras: dict[str, Any] = (
            {"logprobs": True, "extra_body": {"return_token_ids": True}}
            if policy.request_logprobs
            else {}
        )

    def _query(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        return litellm.completion(
            model=self.config.model_name,
            messages=messages,
            client=self.client,
            **(self.config.model_kwargs | self.token_extras | kwargs),
        )

    def _prepare_messages_for_api(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """mini keeps the whole conversation; the wire is kept under the built-in harness's
        character budget the same way (old observations elided — the record keeps them
        whole)."""
        prepared: list[dict[str, Any]] = super()._prepare_messages_for_api(messages)
        if context.size(prepared) > CONTEXT_CHARS:
            prepared = copy.deepcopy(prepared)  # mini's own history stays whole
            context.compact(prepared, CONTEXT_CHARS, KEEP_RECENT)
        return prepared

    def query(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        self.n_replies += 1
        try:
            try:
                message: dict[str, Any] = super().query(messages, **kwargs)
            except litellm.exceptions.BadRequestError:
                if not self.token_extras:
                    raise
                self.token_extras = {}  # the endpoint refuses token ids/logprobs: ask without
                message = super().query(messages, **kwargs)
        except FormatError as error:  # not exactly one action: recorded, answered by mini
            self.episode.record_agent(str(error.messages[0]["extra"]["model_response"]), [])
            raise
        except ENDPOINT_ERRORS as exc:
            raise endpoint_failure(exc, "mini-swe-agent") from exc
        extra = message.get("extra", {})
        content = str(message.get("content") or "")
        calls = [
            _tool_call(a["command"], content, f"call_{self.n_replies}_{index}")
            for index, a in enumerate(extra.get("actions", []))
        ]
        for action, call in zip(extra.get("actions", []), calls, strict=True):
            action["tool_call"] = call
        response = extra.get("response")
        self.episode.record_agent(content, calls, _tokens(response), _finish(response))
        return message


class _EpisodeEnvironment:
    """mini's environment protocol over the episode: actions run in the agent's sandbox."""

    config: Any = None

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    def execute(self, action: dict[str, Any], cwd: str = "") -> dict[str, Any]:
        call: ToolCall = action["tool_call"]
        output = self.episode.execute(call)
        return {"output": output.text, "returncode": int(output.is_error), "exception_info": ""}

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # what mini's LocalEnvironment offers its instance template (the sandbox shares
        # this kernel)
        return platform.uname()._asdict() | dict(kwargs)

    def serialize(self) -> dict[str, Any]:
        return {}


class _EpisodeAgent(DefaultAgent):
    """mini's loop; after each step the user may speak (same conversation) or be done."""

    def __init__(self, model: _EpisodeModel, env: _EpisodeEnvironment, episode: Episode) -> None:
        super().__init__(
            model,
            env,
            system_template=MINI_CONFIG["agent"]["system_template"],
            instance_template=MINI_CONFIG["agent"]["instance_template"],
            step_limit=0,  # the episode counts steps and time, across turns
            cost_limit=0,
            max_consecutive_format_errors=0,
        )
        self.episode = episode

    def execute_actions(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        added = super().execute_actions(message)
        pending = self.episode.pending_user_message()
        if pending is not None:
            added += self.add_messages(
                {"role": "user", "content": f"New instruction from the user: {pending}"}
            )
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
            agent.run(task=episode.instruction + episode_note(episode.workdir))
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(
                "harness_crash", f"mini-swe-agent: {type(exc).__name__}: {exc}"[:500]
            ) from exc
        finally:
            model.client.close()


def _tool_call(command: str, thought: str, call_id: str) -> ToolCall:
    """One bash action as the episode tool it stands for: mini's submit command is
    ``finish`` (the reply's text its summary), ``cowork-ask-user`` is ``ask_user``, anything
    else runs in the shell."""
    if command.strip() == f"echo {SUBMIT_MARKER}":
        arguments = {"summary": thought.split("```")[0].strip() or "Submitted."}
        return ToolCall(id=call_id, name=FINISH_TOOL, arguments=json.dumps(arguments))
    if command.strip().startswith(ASK_USER_COMMAND + " "):
        try:
            words = shlex.split(command.strip())[1:]
        except ValueError:
            words = command.strip().split()[1:]
        arguments = {"question": " ".join(words)}
        return ToolCall(id=call_id, name=ASK_USER_TOOL, arguments=json.dumps(arguments))
    return ToolCall(id=call_id, name="shell", arguments=json.dumps({"command": command}))


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

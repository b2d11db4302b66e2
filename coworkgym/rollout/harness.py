"""The harness is a variable of a rollout: the same environment under several harnesses.

A harness drives a policy (a model endpoint, or a scripted replay such as ``oracle``) and
talks to the environment only through an ``Episode``: it reads the first request and the
tool schemas, asks the episode to execute tool calls (they run inside the agent's sandbox),
records what the policy said, and ends its turns. The episode owns everything the agent
must not touch — the stateful user, the private files, the verifier — and keeps the
trajectory record, so every harness yields the same record format.

    harness ──tool call──▶ Episode.execute ──▶ agent sandbox (workspace only)
            ◀──result────
            ──end_turn──▶ Episode ──▶ user simulator: next turn (patch applied) or done

A harness raises nothing for the policy's mistakes (a malformed tool call is answered as an
error and counted); it raises ``HarnessError`` only when it cannot go on, and the episode
records that as the rollout's termination.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .trajectory import TerminationReason, TokenRecord, ToolCall

# The two tools every episode offers besides the package's interfaces. ``finish`` takes
# {"summary": str, "deliverables": [workspace paths the agent says it produced]} and ends the
# agent's turn; ``ask_user`` takes {"question": str} and returns the user's answer.
FINISH_TOOL = "finish"
ASK_USER_TOOL = "ask_user"
# The first words of the acting agent's system prompt under the harnesses that write their
# own (tool-calling, openai-agents, shell-patch): tests' scripted server reads the agent's
# requests by them.
AGENT_LANE_MARKER = "You are an AI coworker"


class HarnessError(Exception):
    """The harness cannot continue; ``reason`` is how the trajectory records it."""

    def __init__(self, reason: TerminationReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: TerminationReason = reason
        self.detail = detail


@dataclass(frozen=True)
class ToolOutput:
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class PolicyConfig:
    """Which policy a harness drives and how it samples. ``base_url`` is the LLM gateway's
    address for this rollout and ``api_key`` the gateway's per-rollout token: a harness
    never holds an upstream key."""

    model: str
    base_url: str | None = None
    api_key: str = field(default="EMPTY", repr=False)
    temperature: float = 0.7
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    max_steps: int = 60  # model calls across the whole episode
    request_logprobs: bool = True  # ask for token ids and logprobs (vLLM returns them)
    extra: dict[str, Any] = field(default_factory=dict)

    def sampling(self) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.temperature}
        for key in ("top_p", "max_tokens", "seed"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class Episode(Protocol):
    """What a harness may do with the environment (implemented by the rollout engine)."""

    @property
    def instruction(self) -> str:
        """The user's first request."""

    @property
    def system_prompt(self) -> str:
        """The harness-neutral system prompt: workdir, tools, how to finish."""

    @property
    def workdir(self) -> str:
        """The workspace path inside the agent's sandbox."""

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries: the package's interfaces, ``ask_user`` and ``finish``."""

    def record_agent(
        self,
        content: str,
        tool_calls: list[ToolCall],
        tokens: TokenRecord | None = None,
        finish_reason: str | None = None,
    ) -> None:
        """What the policy generated in one model call, and why it stopped (the endpoint's
        ``finish_reason``; an unknown value is not recorded)."""

    def execute(self, call: ToolCall) -> ToolOutput:
        """Run one tool call (in the agent's sandbox, or at the user for ``ask_user``) and
        record its result. ``finish`` ends the current turn: see ``pending_user_message``."""

    def reject(self, call: ToolCall, error: str) -> ToolOutput:
        """Answer a call that the harness's own interface refuses before any tool runs (a
        tool that interface lacks, arguments its schema does not accept, a patch that does
        not parse): ``error`` is recorded as the call's result and the call is counted as
        malformed, as one the episode refuses itself."""

    def end_turn(self, content: str = "") -> None:
        """The policy ended its turn without calling ``finish`` (a reply with no tool call).
        The user reacts as to ``finish``: the next turn, or the episode is done. Call it
        after ``record_agent`` for that reply."""

    def pending_user_message(self) -> str | None:
        """A user message that arrived since the last call (a later turn whose trigger
        fired, e.g. after ``finish`` or once a deliverable appeared). The harness must show
        it to the policy next. Reading it consumes it."""

    @property
    def done(self) -> bool:
        """True once the user has nothing more to say and the agent finished its last turn."""


class Harness(Protocol):
    name: str

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        """Drive the policy until ``episode.done`` or a budget runs out."""


HarnessFactory = Callable[[], Harness]
_REGISTRY: dict[str, HarnessFactory] = {}


def register(name: str) -> Callable[[HarnessFactory], HarnessFactory]:
    def add(factory: HarnessFactory) -> HarnessFactory:
        _REGISTRY[name] = factory
        return factory

    return add


def get_harness(name: str) -> Harness:
    try:
        return _REGISTRY[name]()
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none registered"
        raise ValueError(f"unknown harness {name!r}; choose one of: {known}") from None


def harness_names() -> list[str]:
    return sorted(_REGISTRY)


__all__ = [
    "AGENT_LANE_MARKER",
    "ASK_USER_TOOL",
    "FINISH_TOOL",
    "Episode",
    "Harness",
    "HarnessError",
    "PolicyConfig",
    "ToolOutput",
    "get_harness",
    "harness_names",
    "register",
]

"""The trajectory record: one rollout of one policy, under one harness, in one environment.

This schema is the contract between the rollout engine (which writes it), the filters, the
exporters (ATIF, Hugging Face datasets) and the trainers in ``training/`` (which read it),
so it is versioned: ``schema_version`` names the layout, and a reader refuses a version it
does not know rather than guessing.

Provenance is per message: ``source`` says who produced the text. Only ``agent`` messages
are training targets; system prompts, user turns, tool output and workspace events are
context. When the endpoint returned the policy's own token ids (vLLM does), an agent
message carries them in ``tokens``, so training uses exactly the tokens that were sampled.

*Invalid is not zero*: a rollout whose verifier crashed, whose infrastructure failed or
whose user simulator misbehaved has ``verification.valid = False`` (or no verification at
all) and a reason; its reward is ``None``, never a 0 standing in for "we do not know".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION: Final = "cowork-gym.trajectory/v1"

Role = Literal["system", "user", "assistant", "tool"]
# Who produced a message's text: the policy (a training target) or the context around it.
Source = Literal["agent", "system", "user", "tool", "workspace"]
# OpenAI's finish reasons (vLLM's too); "length" matters to training: the reply was cut off,
# so no end-of-turn token may be appended as a target after it.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCall(_Record):
    """A tool call as the model emitted it; ``arguments`` is the raw JSON text, kept even
    when it does not parse (a malformed call is part of what the policy did)."""

    id: str
    name: str
    arguments: str


class TokenRecord(_Record):
    """The policy's exact tokens for one agent message, when the endpoint reports them.
    ``prompt_ids`` is the rendered context the policy saw for this call (optional: not
    every server returns it); ``completion_ids`` and ``logprobs`` align one to one."""

    completion_ids: list[int]
    logprobs: list[float] | None = None
    prompt_ids: list[int] | None = None

    @model_validator(mode="after")
    def _aligned(self) -> TokenRecord:
        if self.logprobs is not None and len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"logprobs has {len(self.logprobs)} entries for "
                f"{len(self.completion_ids)} completion ids; they must align"
            )
        return self


class Message(_Record):
    """One chat message. ``turn`` is the user turn it belongs to (0 = the first request)."""

    role: Role
    source: Source
    content: str = ""
    turn: int = Field(0, ge=0)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(None, description="the call a tool message answers")
    is_error: bool = Field(False, description="a tool result that reports a failure")
    tokens: TokenRecord | None = None
    finish_reason: FinishReason | None = Field(
        None,
        description="why the model stopped generating this agent message, as the endpoint "
        "said: stop (its end-of-turn), length (cut off by max_tokens: no end-of-turn was "
        "produced), tool_calls, content_filter; None when not reported",
    )
    elapsed_s: float = Field(0.0, ge=0, description="seconds since the rollout started")

    @model_validator(mode="after")
    def _consistent(self) -> Message:
        if self.source == "agent" and self.role != "assistant":
            raise ValueError("only assistant messages can be agent-generated")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool calls")
        if self.finish_reason is not None and self.source != "agent":
            raise ValueError("finish_reason is recorded for agent messages only")
        if self.tokens is not None and self.source != "agent":
            raise ValueError("token ids are recorded for agent messages only")
        return self

    @property
    def trainable(self) -> bool:
        return self.source == "agent"


class FileChange(_Record):
    path: str
    change: Literal["created", "modified", "deleted"]
    sha256_before: str | None = None
    sha256_after: str | None = None


class WorkspaceEvent(_Record):
    """Something that changed the shared workspace outside the agent's own tool calls
    (a user patch), or a snapshot diff the engine took between turns."""

    kind: Literal["patch_applied", "files_changed"]
    turn: int = Field(ge=0)
    at_message: int = Field(ge=0, description="index into messages where it happened")
    files: list[FileChange] = Field(default_factory=list)
    invalidates: list[str] = Field(
        default_factory=list, description="artifacts the agent must redo after this event"
    )


# "artifact_exists" is how records before "artifact_appeared" named it (still read)
TriggerKind = Literal[
    "agent_ended_turn",
    "agent_claimed_done",
    "artifact_appeared",
    "artifact_changed",
    "artifact_exists",
    "tool_calls",
]


class UserIntervention(_Record):
    """The simulated user speaking: a later turn (with its patch) or an answer to a
    clarifying question (``ask_user``)."""

    kind: Literal["turn", "answer"]
    turn: int = Field(ge=0)
    at_message: int = Field(ge=0)
    message: str
    trigger: TriggerKind | None = Field(None, description="what the user observed (turns)")
    trigger_detail: str = ""
    patch_kind: str | None = Field(None, description="input_replaced / input_edited / …")
    revealed: list[str] = Field(
        default_factory=list, description="private signals disclosed in this message"
    )
    speaker: Literal["scripted", "llm"] = "scripted"


SimulatorFaultKind = Literal[
    "private_state_leaked",  # said something from .user/ it should not reveal
    "contradicts_patch",  # the message disagrees with the authorized update it applies
    "stopped_early",  # ended the episode before all planned turns fired
    "unauthorized_update",  # tried to change a file the turn does not authorize
    "simulator_error",  # the simulator itself crashed or its model failed
    "trap_given_away",  # said a giveaway of one of the family's declared traps
]


class SimulatorFault(_Record):
    kind: SimulatorFaultKind
    turn: int = Field(ge=0)
    detail: str


class FileDigest(_Record):
    path: str
    sha256: str
    size: int = Field(ge=0)


class VerificationRecord(_Record):
    """The verifier's verdict on the collected workspace, in a fresh sandbox."""

    valid: bool
    reward: float | None = Field(None, description="None when invalid: never a stand-in 0")
    code_score: float | None = None
    rubric_score: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    invalid_reason: str | None = None
    passed: bool | None = Field(
        None, description="reward reached the package's pass threshold (None when invalid)"
    )
    judge_ran: bool = False
    duration_s: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _reward_iff_valid(self) -> VerificationRecord:
        if self.valid and self.reward is None:
            raise ValueError("a valid verification needs a reward")
        if not self.valid and (self.reward is not None or not self.invalid_reason):
            raise ValueError("an invalid verification has no reward and needs invalid_reason")
        return self


TerminationReason = Literal[
    "agent_done",  # the agent said it is finished (after the user's last turn)
    "max_steps",  # the harness's step budget ran out
    "timeout",  # the wall-clock limit ran out
    "budget_exhausted",  # the gateway's token budget for this rollout ran out
    "model_error",  # the endpoint failed after retries
    "harness_crash",  # the harness itself raised
    "infrastructure_error",  # sandbox, storage or node trouble: nothing the policy did
    "simulator_fault",  # the user simulator failed the episode
]


class Termination(_Record):
    reason: TerminationReason
    detail: str = ""


class EnvironmentRef(_Record):
    name: str
    digest: str = Field(description="the package digest (Harbor-style, Cowork files included)")
    uri: str | None = Field(None, description="where the package was read from")
    family: str | None = None
    labels: dict[str, Any] = Field(default_factory=dict)
    turns: int = Field(1, ge=1)


class PolicyRef(_Record):
    harness: str
    model: str
    base_url: str | None = Field(None, description="the endpoint (never a key)")
    sampling: dict[str, Any] = Field(default_factory=dict)


class Usage(_Record):
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    tool_errors: int = Field(0, description="tool calls that returned an error")
    malformed_tool_calls: int = Field(0, description="calls whose name or JSON was invalid")


class Timings(_Record):
    started_at: datetime
    finished_at: datetime | None = None
    agent_s: float = 0.0
    user_s: float = 0.0
    verify_s: float = 0.0


class RolloutKey(_Record):
    """What makes a rollout unique; a resumed run skips keys it already has."""

    package_digest: str
    harness: str
    model: str
    sample: int = Field(ge=0)

    @property
    def id(self) -> str:
        wire = f"{self.package_digest}|{self.harness}|{self.model}|{self.sample}"
        return hashlib.sha256(wire.encode()).hexdigest()[:20]


class Trajectory(_Record):
    schema_version: Literal["cowork-gym.trajectory/v1"] = SCHEMA_VERSION
    key: RolloutKey
    environment: EnvironmentRef
    policy: PolicyRef
    tools: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the tool schemas the policy was offered (OpenAI form), so training "
        "renders the prompt the policy saw (a replay records the episode's tools too)",
    )
    messages: list[Message] = Field(default_factory=list)
    interventions: list[UserIntervention] = Field(default_factory=list)
    workspace_events: list[WorkspaceEvent] = Field(default_factory=list)
    simulator_faults: list[SimulatorFault] = Field(default_factory=list)
    claimed_deliverables: list[str] = Field(
        default_factory=list, description="workspace paths the agent said it produced"
    )
    initial_workspace: list[FileDigest] = Field(default_factory=list)
    final_workspace: list[FileDigest] = Field(default_factory=list)
    verification: VerificationRecord | None = None
    termination: Termination
    usage: Usage = Field(default_factory=Usage)
    timings: Timings

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def reward(self) -> float | None:
        """The reward to train on, or None when there is none to trust."""
        v = self.verification
        return v.reward if v is not None and v.valid else None

    def agent_messages(self) -> list[Message]:
        return [m for m in self.messages if m.trainable]

    def tool_steps(self) -> int:
        return sum(len(m.tool_calls) for m in self.messages if m.trainable)


# ---- storage: one JSON object per line ------------------------------------------------
def now() -> datetime:
    return datetime.now(UTC)


def dump_line(trajectory: Trajectory) -> str:
    return trajectory.model_dump_json(exclude_defaults=False) + "\n"


def parse_line(line: str, where: str = "<line>") -> Trajectory:
    data = json.loads(line)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{where}: trajectory schema {version!r} is not {SCHEMA_VERSION!r}; "
            "re-export it with this version of cowork-gym"
        )
    return Trajectory.model_validate(data)


def read_jsonl(path: Path) -> Iterator[Trajectory]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield parse_line(line, f"{path}:{number}")


def write_jsonl(path: Path, trajectories: Iterable[Trajectory]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(dump_line(trajectory))
            count += 1
    return count


__all__ = [
    "SCHEMA_VERSION",
    "EnvironmentRef",
    "FileChange",
    "FileDigest",
    "Message",
    "PolicyRef",
    "RolloutKey",
    "SimulatorFault",
    "Termination",
    "Timings",
    "TokenRecord",
    "ToolCall",
    "Trajectory",
    "Usage",
    "UserIntervention",
    "VerificationRecord",
    "WorkspaceEvent",
    "now",
    "read_jsonl",
    "write_jsonl",
]

"""The Cowork extensions that ride inside a Harbor package.

- ``.user/user.json``      πU's private state: persona, latent goals, knowledge, signal plan
- ``.patch/turn-NN/``      one later user turn: trigger, message, authorized file updates
- ``.cowork/interfaces.json``  I: the tools and paths the acting agent may use
- ``.cowork/artifacts.json``   the artifact dependency graph (which outputs depend on which inputs)

None of these is visible to the acting agent: they are not in ``environment/``.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def safe_relpath(value: str) -> str:
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or value.startswith("./"):
        raise ValueError(f"{value!r} must be a relative path inside the workspace, without '..'")
    return value


class Signal(_Model):
    """When the user volunteers a piece of private knowledge, and what they say."""

    trigger: str = Field(description="the agent behaviour or progress that prompts it")
    reveals: str


class UserState(_Model):
    persona: str = Field(min_length=10)
    role: str
    latent_goals: list[str] = Field(
        min_length=1, description="goals the user has but did not state"
    )
    knowledge_boundary: list[str] = Field(
        default_factory=list, description="what the user does not know and must not invent"
    )
    signal_plan: list[Signal] = Field(default_factory=list)
    tone: str = "concise"


class FileUpdate(_Model):
    """One authorized edit of the shared workspace by the user."""

    op: Literal["write", "delete"]
    path: str
    source: str | None = Field(None, description="file under the patch's files/ for 'write'")
    reason: str = ""

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return safe_relpath(value)

    @model_validator(mode="after")
    def _write_needs_source(self) -> FileUpdate:
        if self.op == "write" and not self.source:
            raise ValueError("a 'write' update needs 'source' (a file under files/)")
        return self


class Trigger(_Model):
    """When the user simulator applies the turn: after the agent's n-th turn ends, once an
    artifact appeared (absent when the turn began, present now: the user reviews a first
    version), once it changed (its digest differs from the one at the turn's start:
    created, rewritten or deleted), or after the agent made n tool calls in the current
    turn, whichever the plan says. ``artifact_exists`` is the old name of
    ``artifact_appeared``. A mid-turn trigger fires only once the agent has made
    ``min_tool_calls`` calls in the turn (one when unset): an agent that looks before it
    edits is not cut off by its first write."""

    kind: Literal[
        "after_agent_turn", "artifact_appeared", "artifact_changed", "artifact_exists", "tool_calls"
    ]
    agent_turn: int | None = Field(None, ge=1)
    artifact: str | None = None
    tool_calls: int | None = Field(None, ge=1)
    min_tool_calls: int | None = Field(
        None, ge=1, description="tool calls the turn gets before a mid-turn trigger may fire"
    )

    @model_validator(mode="after")
    def _has_argument(self) -> Trigger:
        if self.kind == "after_agent_turn" and self.agent_turn is None:
            raise ValueError("'after_agent_turn' needs 'agent_turn'")
        if self.kind in ARTIFACT_TRIGGERS and not self.artifact:
            raise ValueError(f"{self.kind!r} needs 'artifact'")
        if self.kind == "tool_calls" and self.tool_calls is None:
            raise ValueError("'tool_calls' needs 'tool_calls' (how many calls to wait for)")
        return self


ARTIFACT_TRIGGERS = frozenset({"artifact_appeared", "artifact_changed", "artifact_exists"})


class TurnPatch(_Model):
    turn: int = Field(ge=1)
    trigger: Trigger
    message: str = Field(min_length=5, description="what the user says at this turn")
    kind: Literal["input_replaced", "input_edited", "requirement_changed"]
    updates: list[FileUpdate] = Field(default_factory=list)
    invalidates: list[str] = Field(default_factory=list, description="artifacts to redo")

    @model_validator(mode="after")
    def _carries_news(self) -> TurnPatch:
        if self.kind != "requirement_changed" and not self.updates:
            raise ValueError(f"a '{self.kind}' turn must update at least one workspace file")
        return self


class Interfaces(_Model):
    """Only the operations the task needs; enforced by the harness and the sandbox."""

    tools: list[Literal["shell", "read_file", "write_file", "edit_file", "list_files"]] = Field(
        min_length=1
    )
    workdir: str = "/app"
    readable: list[str] = Field(default_factory=lambda: ["."])
    writable: list[str] = Field(default_factory=lambda: ["."])
    network: Literal["none", "gateway"] = "none"


class Artifact(_Model):
    path: str
    role: Literal["input", "output"]
    format: Literal["csv", "xlsx", "json", "docx", "md", "txt", "py", "other"]
    depends_on: list[str] = Field(default_factory=list)
    required: bool = True
    in_place: bool = Field(
        False,
        description="an output the task edits where it stands (code to fix, a file to "
        "revise): it is in s0 on purpose; any other output must not be there",
    )

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return safe_relpath(value)

    @model_validator(mode="after")
    def _in_place_output(self) -> Artifact:
        if self.in_place and self.role != "output":
            raise ValueError("only an output is edited in place")
        return self


class ArtifactGraph(_Model):
    artifacts: list[Artifact] = Field(min_length=1)

    @model_validator(mode="after")
    def _edges_resolve(self) -> ArtifactGraph:
        known = {a.path for a in self.artifacts}
        for a in self.artifacts:
            missing = [d for d in a.depends_on if d not in known]
            if missing:
                raise ValueError(f"{a.path} depends on undeclared artifacts {missing}")
        return self

    @property
    def inputs(self) -> list[Artifact]:
        return [a for a in self.artifacts if a.role == "input"]

    @property
    def outputs(self) -> list[Artifact]:
        return [a for a in self.artifacts if a.role == "output"]

    def dependents(self, path: str) -> set[str]:
        """Every artifact that (transitively) depends on ``path``: what a patch invalidates."""
        found: set[str] = set()
        frontier = {path}
        while frontier:
            frontier = {a.path for a in self.artifacts if set(a.depends_on) & frontier} - found
            found |= frontier
        return found

    def unlisted_invalidations(self, patch: TurnPatch) -> list[str]:
        """Artifacts that depend on a file ``patch`` changes but that it does not list in
        ``invalidates`` (sorted)."""
        dependents: set[str] = set()
        for update in patch.updates:
            dependents |= self.dependents(update.path)
        return sorted(dependents - set(patch.invalidates))

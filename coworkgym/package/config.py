"""``task.toml``: Harbor's task configuration (schema 1.4) plus the Cowork metadata.

Field names and defaults follow Harbor 0.25's ``TaskConfig``. Unlike Harbor's loader we
refuse unknown keys (``extra="forbid"``): a typo such as ``timeout_secs`` would otherwise
silently mean "no timeout".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASK_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$"
NetworkMode = Literal["public", "no-network", "allowlist"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Author(_Section):
    name: str
    email: str | None = None


class TaskSection(_Section):
    name: str = Field(pattern=TASK_NAME_PATTERN, description="org/name")
    version: str | None = None
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _no_dotdot(cls, value: str) -> str:
        if ".." in value:
            raise ValueError("must not contain '..'")
        return value


class AgentSection(_Section):
    timeout_sec: float | None = Field(None, gt=0)
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class EnvironmentSection(_Section):
    build_timeout_sec: float = Field(600.0, gt=0)
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    cpus: int | float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, gt=0)
    storage_mb: int | None = Field(None, gt=0)
    gpus: int | None = Field(None, ge=0)
    gpu_types: list[str] | None = None
    network_mode: NetworkMode = "public"
    allowed_hosts: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    healthcheck: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    skills_dir: str | None = None


class CollectHook(_Section):
    command: str
    service: str = "main"
    timeout_sec: float = 60.0
    user: str | int | None = None


class VerifierSection(_Section):
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentSection | None = None
    collect: list[CollectHook] = Field(default_factory=list)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None

    @property
    def mode(self) -> Literal["shared", "separate"]:
        """Harbor's rule: explicit mode, else separate iff a verifier environment is set."""
        if self.environment_mode is not None:
            return self.environment_mode
        return "separate" if self.environment is not None else "shared"


class SolutionSection(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactSpec(_Section):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str = "main"


class StepSection(_Section):
    name: str
    agent: AgentSection | None = None
    verifier: VerifierSection | None = None
    min_reward: float | dict[str, float] | None = None
    healthcheck: dict[str, Any] | None = None
    artifacts: list[str | ArtifactSpec] = Field(default_factory=list)


class TaxonomyLabels(_Section):
    """The six taxonomy dimensions of g (see coworkgym.taxonomy)."""

    capabilities: list[str] = Field(min_length=1)
    scenario: str = Field(description="scenario path, e.g. 'finance/accounting/reconciliation'")
    difficulty: Literal["easy", "medium", "hard"]
    user_role: str
    deliverables: list[str] = Field(min_length=1)
    modality: list[str] = Field(min_length=1)
    safety: list[str] = Field(default_factory=list)


class CoworkMetadata(_Section):
    """Our extension, stored under ``[metadata.cowork]`` so Harbor ignores it."""

    format_version: Literal[1] = 1
    taxonomy: TaxonomyLabels
    turns: int = Field(1, ge=1, description="user turns, including the first request")
    family: str | None = Field(None, description="procedural family or 'llm'")
    seed: int | None = None
    spec_digest: str | None = None
    iterations: int | None = Field(None, ge=0)
    generator: str = "cowork-gym"


class TaskConfig(_Section):
    schema_version: str = "1.4"
    source: str | None = None
    task: TaskSection | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    artifacts: list[str | ArtifactSpec] = Field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepSection] | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_version_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data and "schema_version" not in data:
            data = {**data, "schema_version": data.pop("version")}
        return data

    @property
    def cowork(self) -> CoworkMetadata | None:
        raw = self.metadata.get("cowork")
        return CoworkMetadata.model_validate(raw) if raw is not None else None

    def artifact_sources(self) -> list[str]:
        return [a if isinstance(a, str) else a.source for a in self.artifacts]

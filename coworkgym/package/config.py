"""``task.toml``: Harbor's task configuration (schema 1.4) plus the Cowork metadata.

Field names and defaults follow Harbor 0.25's ``TaskConfig``, including the legacy input it
still loads: the top-level ``version`` (now ``schema_version``) and ``[environment]``
``allow_internet``, ``memory`` and ``storage``. The models refuse unknown keys
(``extra="forbid"``): in a Cowork package a typo such as ``timeout_secs`` would otherwise
silently mean "no timeout". A plain Harbor task is read as Harbor reads it, unknown keys
dropped and named (see ``package.load_task_config``).

Validating with a context ``{"notes": []}`` collects a line per legacy field migrated.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

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


def _note(info: ValidationInfo, line: str) -> None:
    notes = (info.context or {}).get("notes")
    if isinstance(notes, list):
        notes.append(line)


def size_to_mb(size: str) -> int:
    """Harbor's reading of the legacy ``memory``/``storage`` strings ("2G", "512M", "64K")."""
    text = size.strip().upper()
    factors = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not text or text[-1] not in factors:
        raise ValueError(f"invalid size {size!r}; write it like '2G' or '512M'")
    return int(float(text[:-1]) * factors[text[-1]])


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

    @model_validator(mode="before")
    @classmethod
    def _legacy_fields(cls, data: Any, info: ValidationInfo) -> Any:
        """Harbor 0.25 still loads these deprecated fields; migrate them as it does."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        allow_internet = data.pop("allow_internet", None)
        if allow_internet is not None:
            if "network_mode" not in data and data.get("allowed_hosts") is None:
                data["network_mode"] = "public" if allow_internet else "no-network"
            _note(info, "environment.allow_internet is deprecated; use network_mode")
        for legacy in ("memory", "storage"):
            if legacy not in data:
                continue
            value = data.pop(legacy)
            _note(info, f"environment.{legacy} is deprecated; use {legacy}_mb")
            if not isinstance(value, str):
                continue  # Harbor drops a non-string legacy size as well
            size = size_to_mb(value)
            if data.get(f"{legacy}_mb", size) != size:
                raise ValueError(
                    f"{legacy}={value!r} ({size} MB) conflicts with "
                    f"{legacy}_mb={data[f'{legacy}_mb']!r}; keep only {legacy}_mb"
                )
            data.setdefault(f"{legacy}_mb", size)
        return data


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
    def _legacy_version_key(cls, data: Any, info: ValidationInfo) -> Any:
        """Harbor renames the legacy top-level ``version``; with both set it keeps
        ``schema_version`` and drops ``version``."""
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            legacy = data.pop("version")
            data.setdefault("schema_version", legacy)
            _note(info, "the top-level version is legacy; use schema_version")
        return data

    @property
    def cowork(self) -> CoworkMetadata | None:
        raw = self.metadata.get("cowork")
        return CoworkMetadata.model_validate(raw) if raw is not None else None

    def artifact_sources(self) -> list[str]:
        return [a if isinstance(a, str) else a.source for a in self.artifacts]

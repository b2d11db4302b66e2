"""The environment spec: what a user asks for. The same schema is the ``spec`` of the
``CoworkEnvironment`` custom resource (the operator generates its CRD from these models),
and what ``cowork-gym synth`` reads from YAML. Field names are camelCase on the wire, as
Kubernetes users expect; Python code uses snake_case.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from .package.errors import PackageError

API_GROUP = "coworkgym.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "CoworkEnvironment"


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


class TaskLabels(_Spec):
    """A point in the taxonomy (see ``coworkgym.taxonomy``); validated against it."""

    capabilities: list[str] = Field(min_length=1, max_length=6)
    scenario: str = Field(
        description="scenario leaf path, e.g. data_analysis/reporting/periodic_report"
    )
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    user_role: str = "analyst"
    deliverables: list[str] = Field(default_factory=lambda: ["xlsx"], min_length=1)
    modality: list[str] = Field(default_factory=lambda: ["tabular"], min_length=1)
    safety: list[str] = Field(default_factory=list)


class TaskSpec(_Spec):
    labels: TaskLabels
    family: str | None = Field(None, description="procedural family; chosen from labels if unset")
    instruction: str | None = Field(None, description="a user request to ground (LLM backend)")
    resources: list[str] = Field(default_factory=list, description="resource references")
    turns: int = Field(1, ge=1, le=3, description="user turns, including the first request")
    seed: int = Field(0, ge=0)


class RoleBackend(_Spec):
    kind: Literal["procedural", "llm"] = "procedural"
    model: str | None = None
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint (LLM backend)")
    api_key_secret: str | None = Field(None, description="Secret holding the API key (cluster)")
    temperature: float = Field(0.2, ge=0, le=2)
    max_turns: int = Field(40, ge=1, le=500)

    @model_validator(mode="after")
    def _llm_needs_model(self) -> RoleBackend:
        if self.kind == "llm" and not (self.model and self.base_url):
            raise ValueError("an 'llm' backend needs 'model' and 'baseUrl'")
        return self


class Backends(_Spec):
    builder: RoleBackend = Field(default_factory=RoleBackend)
    verifier: RoleBackend = Field(default_factory=RoleBackend)
    detector: RoleBackend = Field(default_factory=RoleBackend)


class Budget(_Spec):
    max_iterations: int = Field(3, ge=1, le=10, description="build → execute → revise rounds")
    stage_timeout_seconds: int = Field(900, ge=30, le=86_400)


FaultKind = Literal["leak", "permissive_check", "wrong_reference", "missing_red_line"]
ALL_FAULTS: tuple[FaultKind, ...] = (
    "leak",
    "permissive_check",
    "wrong_reference",
    "missing_red_line",
)


class FaultInjection(_Spec):
    """Make the constructors emit realistic defects on purpose, to exercise the revise loop."""

    probability: float = Field(0.0, ge=0, le=1)
    kinds: list[FaultKind] = Field(default_factory=lambda: list(ALL_FAULTS))


class Release(_Spec):
    uri: str | None = Field(None, description="s3://bucket/prefix or a local directory")


class Toleration(_Spec):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class ResourceRequirements(_Spec):
    cpu: str = "1"
    memory: str = "2Gi"


class SandboxSettings(_Spec):
    image: str = "ghcr.io/cowork-gym/role-sandbox:0.1.0"
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    runtime_class_name: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class EnvironmentSpec(_Spec):
    task: TaskSpec
    backends: Backends = Field(default_factory=Backends)
    budget: Budget = Field(default_factory=Budget)
    fault_injection: FaultInjection = Field(default_factory=FaultInjection)
    release: Release = Field(default_factory=Release)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)

    def digest(self) -> str:
        """Identity of what was asked for (resumable runs skip a digest already released)."""
        wire = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True)
        return hashlib.sha256(wire.encode()).hexdigest()[:16]

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class NamedSpec(BaseModel):
    name: str
    spec: EnvironmentSpec


def parse_spec_document(doc: Any, source: str) -> NamedSpec:
    """A ``CoworkEnvironment`` manifest, or a bare spec; errors name the file and the field."""
    if not isinstance(doc, dict):
        raise PackageError.single(source, "expected a mapping (a CoworkEnvironment or a spec)")
    name = Path(source).stem
    body = doc
    if "kind" in doc or "apiVersion" in doc:
        if doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
            raise PackageError.single(
                source, f"must be kind {KIND}, apiVersion {API_VERSION}", field="kind"
            )
        name = str(doc.get("metadata", {}).get("name") or name)
        body = doc.get("spec") or {}
        prefix = "spec."
    else:
        prefix = ""
    try:
        spec = EnvironmentSpec.model_validate(body)
    except ValidationError as exc:
        problems = PackageError.from_validation(source, exc).problems
        raise PackageError([p.replace(": ", f": {prefix}", 1) for p in problems]) from exc
    return NamedSpec(name=name, spec=spec)


def load_specs(path: Path) -> list[NamedSpec]:
    """Specs from a YAML file (several documents allowed) or a folder of them."""
    files = sorted(path.glob("*.y*ml")) if path.is_dir() else [path]
    found = []
    for file in files:
        try:
            docs = list(yaml.safe_load_all(file.read_text()))
        except yaml.YAMLError as exc:
            raise PackageError.single(str(file), f"not valid YAML: {exc}") from exc
        for index, doc in enumerate(d for d in docs if d is not None):
            named = parse_spec_document(doc, str(file))
            if index:
                named.name = f"{named.name}-{index}"
            found.append(named)
    return found

"""The environment spec: what a user asks for. The same schema is the ``spec`` of the
``CoworkEnvironment`` custom resource (the operator generates its CRD from these models),
and what ``cowork-gym synth`` reads from YAML. Field names are camelCase on the wire, as
Kubernetes users expect; Python code uses snake_case.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .package.errors import PackageError, explain, location

Difficulty = Literal["easy", "medium", "hard"]

API_GROUP = "coworkgym.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "CoworkEnvironment"


class _Spec(BaseModel):
    # strict: "3" is not 3 and true is not 1, as the API server's schema says; a YAML spec
    # that quotes a number is refused with the field named instead of read another way
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


# --- vocabularies known only at run time ---------------------------------------------------
# The taxonomy (coworkgym/taxonomy/taxonomy.yaml) and the family registry import this module,
# so their values are looked up lazily: when a schema is generated (the CRD's enums) and
# when a spec is validated. Both read the same data the sampler uses.


def _taxonomy_values(field: str) -> list[str]:
    from .taxonomy import load_taxonomy

    tax = load_taxonomy()
    return list(tax.leaves) if field == "scenario" else tax.vocabulary(field)  # type: ignore[arg-type]


def registered_families() -> list[str]:
    """Names of the procedural task families (coworkgym.families), sorted."""
    from .families import FAMILIES

    return sorted(FAMILIES)


def _enum(values: Callable[[], list[str]]) -> Callable[[dict[str, Any]], None]:
    """A json_schema_extra that lists the allowed values of a string, a list of strings, or
    an optional string (the enum goes on the string itself, so null stays allowed)."""

    def extra(schema: dict[str, Any]) -> None:
        target = schema
        if "items" in schema:
            target = schema["items"]
        elif "anyOf" in schema:
            target = next(o for o in schema["anyOf"] if o.get("type") == "string")
        target["enum"] = values()

    return extra


def _labels_enum(field: str) -> Callable[[dict[str, Any]], None]:
    return _enum(lambda: _taxonomy_values(field))


# Messages shared with the CRD's CEL rules (coworkgym_operator.environment.api.crd), so the
# CLI and the API server refuse a spec with the same words.
LLM_BACKEND_NEEDS_MODEL = "an 'llm' backend needs 'model' and 'baseUrl'"
RELEASE_URI_NOT_S3 = (
    "must be an s3:// URI, e.g. s3://bucket/envs (cowork-gym synth writes to its --out "
    "target instead; leave this unset there)"
)
_NAME = 64  # longest label name; bounds the CRD's strings so CEL rules stay cheap
_LEAF = 160
LabelName = Annotated[str, Field(max_length=_NAME)]

# Bounds and shapes of the free strings. Each is a JSON-Schema maxLength/pattern, so the API
# server and the models refuse the same values; none is looser than what Kubernetes (or the
# S3 and HTTP clients) accept downstream, where a bad value would fail a Job, not the spec.
MAX_INSTRUCTION = 16_384  # characters; a request, not a document (resources carry those)
MAX_REFERENCE = 2_048  # a URL or a resource reference
MAX_LIST = 32  # resources, tolerations, nodeSelector entries
# text may hold tabs and line breaks, never other control characters (NUL, ESC, DEL, ...)
PLAIN_TEXT = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F]*$"
ONE_LINE = r"^[^\x00-\x1F\x7F]*$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # Secret and RuntimeClass names
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
# registry[:port]/path[:tag][@sha256:digest], as container runtimes parse it
_COMPONENT = r"[a-z0-9]+([._-][a-z0-9]+)*"
IMAGE = (
    rf"^{_COMPONENT}(:[0-9]+)?(/{_COMPONENT})*(:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    r"(@sha256:[a-f0-9]{64})?$"
)
HTTP_URL = r"^https?://[^\s/?#]+[^\s]*$"
S3_URI = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9_-][A-Za-z0-9._-]*)*/?$"
# A model endpoint at the cloud metadata address would hand the instance's credentials to
# whatever asks the gateway (an IP literal; a name that resolves there is the network
# policy's to stop).
METADATA_URL = r"^https?://(169\.254\.|\[fd00:ec2::254\]|metadata\.google\.internal)"
# Names the operator derives children from: "<name>-verifier-i10-a2" and the pods' label
# values must stay within Kubernetes' 63 characters.
MAX_ENVIRONMENT_NAME = 40
ENVIRONMENT_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

NAME_RULE = (
    f"metadata.name must be a lowercase DNS label of at most {MAX_ENVIRONMENT_NAME} "
    "characters (letters, digits and '-'; it names the environment's Jobs, volumes and "
    "released package)"
)
RELEASE_URI_MALFORMED = (
    "must be s3://<bucket>/<prefix>: a lowercase bucket name, then path segments of letters, "
    "digits, '.', '_' and '-' that do not start with '.' (so no '..')"
)
BASE_URL_METADATA = (
    "points at the cloud metadata address; give the OpenAI-compatible model server's URL"
)
INSTRUCTION_NEEDS_LLM = (
    "only an LLM Builder reads an instruction or resources (the procedural families write "
    "their own); remove them, or set backends.builder.kind: llm"
)
NODE_SELECTOR_KEY = "keys must be label keys: [prefix/]name, e.g. coworkgym.dev/pool"


def _text(limit: int, pattern: str = ONE_LINE) -> Any:
    return Field(max_length=limit, pattern=pattern)


LabelKey = Annotated[str, Field(max_length=317, pattern=LABEL_KEY)]
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)]


class TaskLabels(_Spec):
    """Where the task sits in the taxonomy (coworkgym/taxonomy/taxonomy.yaml): every label
    must be a known value, and the combination must pass the taxonomy's incompatibility
    rules (checked when the task is created)."""

    capabilities: list[LabelName] = Field(
        min_length=1,
        max_length=6,
        description="What the task exercises, primary capability first (1 to 6, each once).",
        json_schema_extra=_labels_enum("capabilities"),
    )
    scenario: str = Field(
        max_length=_LEAF,
        description="The scenario leaf, domain/subdomain/leaf, e.g. "
        "data_analysis/reporting/periodic_report.",
        json_schema_extra=_labels_enum("scenario"),
    )
    difficulty: Difficulty = Field("medium", description="How hard the task is for an agent.")
    user_role: str = Field(
        "analyst",
        max_length=_NAME,
        description="The role of the user who asks for the work.",
        json_schema_extra=_labels_enum("user_role"),
    )
    deliverables: list[LabelName] = Field(
        default=["xlsx"],
        min_length=1,
        max_length=8,
        description="File formats the agent must deliver (each once).",
        json_schema_extra=_labels_enum("deliverables"),
    )
    modality: list[LabelName] = Field(
        default=["tabular"],
        min_length=1,
        max_length=8,
        description="Kinds of input the agent works from (each once).",
        json_schema_extra=_labels_enum("modality"),
    )
    safety: list[LabelName] = Field(
        default=[],
        max_length=8,
        description="Safety concerns the task involves (each once); 'none' says there are "
        "none and stands alone.",
        json_schema_extra=_labels_enum("safety"),
    )


class TaskSpec(_Spec):
    """The task to construct. Immutable once the loop has started."""

    labels: TaskLabels = Field(description="Where the task sits in the taxonomy.")
    family: str | None = Field(
        None,
        max_length=_NAME,
        description="The procedural family that drafts the task (one of the registered "
        "families); unset = chosen from the scenario label and the seed.",
        json_schema_extra=_enum(registered_families),
    )
    instruction: str | None = Field(
        None,
        max_length=MAX_INSTRUCTION,
        pattern=PLAIN_TEXT,
        description="A user request for an LLM Builder to ground in real resources "
        "(LLM backend only; the procedural families write their own).",
    )
    resources: list[Annotated[str, _text(MAX_REFERENCE)]] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="References to resources an LLM Builder may use (LLM backend only).",
    )
    turns: int = Field(
        1, ge=1, le=3, description="User turns, including the first request (1 to 3)."
    )
    seed: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Seed of the family's draw: the same seed gives the same task.",
    )

    @field_validator("family")
    @classmethod
    def _registered_family(cls, family: str | None) -> str | None:
        known = registered_families()
        if family is not None and family not in known:
            raise PydanticCustomError(
                "unknown_family",
                f"{family!r} is not a registered task family; use one of {', '.join(known)}, "
                "or leave it unset to choose one from the scenario",
            )
        return family

    @field_validator("labels")
    @classmethod
    def _labels_fit_the_taxonomy(cls, labels: TaskLabels) -> TaskLabels:
        from .taxonomy import validate_labels

        problems = validate_labels(labels, prefix="labels")
        if problems:
            # One error carries every problem; spec_problems() prints one line each, its
            # path under the labels' own location (".capabilities[0]: ...").
            below = [p.removeprefix("labels") for p in problems]
            raise PydanticCustomError(TAXONOMY_ERROR, "\n".join(problems), {"problems": below})
        return labels


TAXONOMY_ERROR = "taxonomy"
# A rule over several fields, raised on their parent, that names the field to change
# (ctx "field", relative to the parent); spec_problems() puts it in the location.
FIELD_ERROR = "field_rule"


class RoleBackend(_Spec):
    """What runs one role: the procedural code, or an LLM behind an OpenAI-compatible API."""

    kind: Literal["procedural", "llm"] = Field(
        "procedural", description="procedural (no model) or llm."
    )
    model: str | None = Field(
        None, max_length=256, pattern=ONE_LINE, description="The model name (LLM backend)."
    )
    base_url: str | None = Field(
        None,
        max_length=MAX_REFERENCE,
        pattern=HTTP_URL,
        description="The OpenAI-compatible endpoint, e.g. http://llm-gateway:8000/v1.",
    )
    api_key_secret: str | None = Field(
        None,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="A Secret in the namespace holding the API key (cluster only).",
    )
    temperature: float = Field(0.2, ge=0, le=2, description="Sampling temperature (0 to 2).")
    max_turns: int = Field(
        40, ge=1, le=500, description="Most model turns the role may take (1 to 500)."
    )

    @field_validator("base_url")
    @classmethod
    def _not_the_metadata_address(cls, url: str | None) -> str | None:
        if url is not None and re.match(METADATA_URL, url):
            raise PydanticCustomError("base_url", BASE_URL_METADATA)
        return url

    @model_validator(mode="after")
    def _llm_needs_model(self) -> RoleBackend:
        if self.kind == "llm" and not (self.model and self.base_url):
            raise PydanticCustomError("llm_backend", LLM_BACKEND_NEEDS_MODEL)
        return self


class Backends(_Spec):
    """The backend of each role; each defaults to procedural."""

    builder: RoleBackend = Field(
        default_factory=RoleBackend, description="The Builder: drafts the task and solves it."
    )
    verifier: RoleBackend = Field(
        default_factory=RoleBackend,
        description="The Verifier Constructor: writes the checks from the task's inputs.",
    )
    detector: RoleBackend = Field(
        default_factory=RoleBackend,
        description="The Issue Detector's optional LLM review (its checks always run).",
    )


class Budget(_Spec):
    """How much work the loop may spend on this environment."""

    max_iterations: int = Field(
        3, ge=1, le=10, description="Build, execute and revise rounds before rejecting (1 to 10)."
    )
    stage_timeout_seconds: int = Field(
        900, ge=30, le=86_400, description="Longest one stage may run, in seconds (30 to 86400)."
    )


FaultKind = Literal["leak", "permissive_check", "wrong_reference", "missing_red_line"]
ALL_FAULTS: tuple[FaultKind, ...] = (
    "leak",
    "permissive_check",
    "wrong_reference",
    "missing_red_line",
)


class FaultInjection(_Spec):
    """Make the constructors emit realistic defects on purpose, to exercise the revise loop."""

    probability: float = Field(
        0.0, ge=0, le=1, description="Chance that a role emits a deliberate defect (0 to 1)."
    )
    kinds: list[FaultKind] = Field(
        default_factory=lambda: list(ALL_FAULTS),
        description="Which defects may be injected; unset = all of them.",
    )


class Release(_Spec):
    """Where a package that passes the Issue Detector is published."""

    uri: str | None = Field(
        None,
        max_length=MAX_REFERENCE,
        description="The s3://bucket/prefix the release stage writes the package to; unset "
        "= the operator's default (Helm value s3.releaseUri). Only s3:// URIs are accepted "
        "(cowork-gym synth publishes to its --out folder or s3:// URI instead).",
    )

    @field_validator("uri")
    @classmethod
    def _s3_only(cls, uri: str | None) -> str | None:
        if uri is not None and not uri.startswith("s3://"):
            raise PydanticCustomError("release_uri", RELEASE_URI_NOT_S3)
        if uri is not None and not re.match(S3_URI, uri):
            raise PydanticCustomError("release_uri", RELEASE_URI_MALFORMED)
        return uri


class Toleration(_Spec):
    """A Kubernetes toleration for the role pods."""

    key: LabelKey | None = Field(
        None, description="The taint key; unset with Exists = every taint."
    )
    operator: Literal["Exists", "Equal"] = Field(
        "Equal", description="Equal matches key and value; Exists matches the key alone."
    )
    value: LabelValue | None = Field(None, description="The taint value (with Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="The taint effect to tolerate; unset = every effect."
    )


class ResourceRequirements(_Spec):
    """CPU and memory of each role pod (requests and limits alike)."""

    cpu: str | None = Field(
        None,
        max_length=32,
        pattern=QUANTITY,
        description="A CPU quantity, e.g. 1 or 500m; unset = the operator's default.",
    )
    memory: str | None = Field(
        None,
        max_length=32,
        pattern=QUANTITY,
        description="A memory quantity, e.g. 2Gi; unset = the operator's default.",
    )


class SandboxSettings(_Spec):
    """How role pods run. Every field left unset takes the operator's setting (the Helm
    chart's sandbox values), so none is defaulted here."""

    image: str | None = Field(
        None,
        max_length=512,
        pattern=IMAGE,
        description="The role image; unset = the operator's (Helm value sandbox.image).",
    )
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="CPU and memory per role pod; unset fields = the operator's.",
    )
    runtime_class_name: str | None = Field(
        None,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="A RuntimeClass such as gvisor or kata; unset = the operator's.",
    )
    node_selector: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description="Node labels role pods must match; empty = the operator's.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Taints role pods tolerate; empty = the operator's.",
    )

    @field_validator("node_selector")
    @classmethod
    def _label_keys(cls, selector: dict[str, str]) -> dict[str, str]:
        # a JSON-Schema map cannot constrain its keys; the CRD says this in CEL
        if any(len(k) > 317 or not re.match(LABEL_KEY, k) for k in selector):
            raise PydanticCustomError("node_selector", NODE_SELECTOR_KEY)
        return selector


class EnvironmentSpec(_Spec):
    """What to synthesize: a task, the roles' backends, the loop's budget and where the
    released package goes."""

    task: TaskSpec = Field(description="The task to construct (immutable).")
    backends: Backends = Field(default_factory=Backends, description="The backend of each role.")
    budget: Budget = Field(default_factory=Budget, description="Iterations and stage timeout.")
    fault_injection: FaultInjection = Field(
        default_factory=FaultInjection,
        description="Deliberate defects, to exercise the revise loop (off by default).",
    )
    release: Release = Field(default_factory=Release, description="Where the package goes.")
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings,
        description="How role pods run (cluster only); unset fields = the operator's.",
    )

    @model_validator(mode="after")
    def _instruction_needs_an_llm_builder(self) -> EnvironmentSpec:
        if (self.task.instruction is not None or self.task.resources) and (
            self.backends.builder.kind != "llm"
        ):
            field = "task.instruction" if self.task.instruction is not None else "task.resources"
            raise PydanticCustomError(FIELD_ERROR, INSTRUCTION_NEEDS_LLM, {"field": field})
        return self

    def digest(self) -> str:
        """Identity of what was asked for (resumable runs skip a digest already released)."""
        wire = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True)
        return hashlib.sha256(wire.encode()).hexdigest()[:16]

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def spec_problems(error: ValidationError, prefix: str = "") -> list[str]:
    """One sentence per problem, each naming the field (``prefix`` + its path): what a user
    reads from the CLI, a stage's error, and the operator's InvalidSpec condition."""
    lines = []
    for e in error.errors():
        where = location(e["loc"])
        where = prefix + where if where != "(root)" else prefix.rstrip(".") or where
        if e["type"] == TAXONOMY_ERROR:
            lines += [where + p for p in e.get("ctx", {}).get("problems", [])]
        elif e["type"] == FIELD_ERROR:
            field = e.get("ctx", {}).get("field", "")
            lines.append(f"{where.rstrip('.')}.{field}: {e['msg']}".replace("(root).", ""))
        else:
            lines.append(f"{where}: {explain(e)}")
    return lines


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
        metadata = doc.get("metadata") or {}
        # unset = the file's stem; set, it must be a name (never "" or a number)
        name = metadata.get("name", name) if isinstance(metadata, dict) else metadata
        body = doc.get("spec") or {}
        prefix = "spec."
    else:
        prefix = ""
    # The name becomes a folder of the --out target (and, on a cluster, of Jobs and
    # volumes): "../x" or "/etc" must never reach a path.
    problems = [] if environment_name_ok(name) else [f"{NAME_RULE}; got {name!r:.80}"]
    try:
        spec = EnvironmentSpec.model_validate(body)
    except ValidationError as exc:
        problems += spec_problems(exc, prefix)
    if problems:
        raise PackageError([f"{source}: {p}" for p in problems])
    return NamedSpec(name=str(name), spec=spec)


def environment_name_ok(name: object) -> bool:
    return (
        isinstance(name, str)
        and len(name) <= MAX_ENVIRONMENT_NAME
        and re.match(ENVIRONMENT_NAME, name) is not None
    )


def served_problems(spec: EnvironmentSpec, prefix: str = "spec.") -> list[str]:
    """Why no procedural family can make the spec's labels true, if its Builder is
    procedural (an LLM Builder may build any cell). The procedural Builder refuses the same
    labels as a non-retryable spec error; checking first lets the CLI refuse before any work.
    Which cells a family serves depends on the turns, so this is no CRD rule."""
    if spec.backends.builder.kind != "procedural":
        return []
    from .families import UnservedLabels, family_for

    task = spec.task
    try:
        family_for(
            task.labels.scenario,
            task.labels.capabilities,
            task.turns,
            family=task.family,
            seed=task.seed,
        )
    except UnservedLabels as exc:
        message = str(exc)
        return [prefix + (message if message.startswith("task.") else f"task.{message}")]
    return []


def load_specs(path: Path) -> list[NamedSpec]:
    """Specs from a YAML file (several documents allowed) or a folder of them."""
    files = sorted(path.glob("*.y*ml")) if path.is_dir() else [path]
    found = []
    problems: list[str] = []  # every file's, so one run shows all that must be fixed
    for file in files:
        try:
            docs = list(yaml.safe_load_all(file.read_text()))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            problems.append(f"{file}: not valid YAML: {exc}")
            continue
        for index, doc in enumerate(d for d in docs if d is not None):
            try:
                named = parse_spec_document(doc, str(file))
            except PackageError as exc:
                problems += exc.problems
                continue
            if index:
                named.name = f"{named.name}-{index}"
            found.append(named)
    if problems:
        raise PackageError(problems)
    return found

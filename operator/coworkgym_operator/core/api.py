"""What every kind's API shares: the group and version, the status models' wire
convention (camelCase, unknown fields ignored), the condition entry and the shape of a
whole object (``resource``)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic.alias_generators import to_camel

from coworkgym.spec import API_GROUP, spec_problems

GROUP = API_GROUP
VERSION = "v1alpha1"


class Spec(BaseModel):
    """A spec model's wire convention: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )

    def to_wire(self) -> dict[str, object]:
        """The spec as it goes on the wire: camelCase, fields that are None left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def read_spec[M: BaseModel](model: type[M], obj: dict[str, Any]) -> M | str:
    """``obj``'s spec as ``model`` reads it, or, where the models refuse it, why: one
    sentence per problem, each naming the field (``spec.``...), as the InvalidSpec
    condition of every kind says it."""
    try:
        return model.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        return "; ".join(spec_problems(exc, "spec."))


def read_status[M: BaseModel](model: type[M], obj: dict[str, Any]) -> M:
    """``obj``'s status as last written, or a fresh one where ``model`` cannot read it
    (unreadable bookkeeping: the reconcile starts over rather than crash-looping)."""
    try:
        return model.model_validate(obj.get("status") or {})
    except ValidationError:
        return model()


class S3Output(Spec):
    """Where a kind's results go: ``uri``, an s3:// prefix (a kind's subclass describes the
    field and names the message, ``NOT_S3``, that the CRD's rule gives too)."""

    NOT_S3: ClassVar[str] = "spec.output.uri must be an s3:// URI (s3://bucket/prefix)"
    uri: str = Field(max_length=1024)

    @model_validator(mode="after")
    def _s3(self) -> Self:
        if not self.uri.startswith("s3://"):
            raise ValueError(self.NOT_S3)
        return self


class _Status(BaseModel):
    # extra="ignore": fields written by an older operator version must not break a reconcile
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(_Status):
    """One aspect of a resource's progress (<kind>/api/conditions.py lists each kind's)."""

    type: str = Field(description="Built, VerifierBuilt, Executed, Released, Failed, ...")
    status: str = Field(pattern="^(True|False|Unknown)$", description="True, False or Unknown.")
    reason: str = Field(description="One CamelCase word saying why, e.g. DefectsFound.")
    message: str = Field("", description="What happened, in a sentence.")
    last_transition_time: str = Field(description="When the status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        None, description="The spec generation this condition was computed from."
    )


def resource(kind: str, spec: type[BaseModel], status: type[BaseModel]) -> type[BaseModel]:
    """The model of a whole object of ``kind`` as the API serves it: apiVersion, kind,
    metadata, the spec and the status (None until the operator first writes it)."""
    optional: Any = status | None
    fields: Any = {
        "apiVersion": (str, f"{GROUP}/{VERSION}"),  # Kubernetes field names
        "kind": (str, kind),
        "metadata": (dict[str, object], Field(default_factory=dict)),
        "spec": (spec, ...),
        "status": (optional, None),
    }
    model: type[BaseModel] = create_model(kind, __config__=ConfigDict(extra="forbid"), **fields)
    return model


def phase_field() -> Any:
    """The one-word phase a kind's status carries (``Status``; a kind whose status fields
    come in another order declares the three contract fields with these)."""
    return Field("Pending", description="One word derived from the conditions, for kubectl get.")


def observed_generation_field() -> Any:
    return Field(None, description="The spec generation the status was computed from.")


def conditions_field() -> Any:
    return Field(
        default_factory=list, description="The status contract: one entry per condition type."
    )


def message_field() -> Any:
    """The status's sentence for people (``kubectl get``'s Message column)."""
    return Field("", description="The latest outcome or error, in a sentence.")


class Status(_Status):
    """The status contract a kind's status starts with: the phase derived from the
    conditions, the generation they were computed from, the conditions."""

    phase: str = phase_field()
    observed_generation: int | None = observed_generation_field()
    conditions: list[Condition] = conditions_field()

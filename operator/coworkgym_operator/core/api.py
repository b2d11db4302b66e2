"""What every kind's API shares: the group and version, the status models' wire
convention (camelCase, unknown fields ignored) and the condition entry."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from coworkgym.spec import API_GROUP

GROUP = API_GROUP
VERSION = "v1alpha1"


class _Status(BaseModel):
    # extra="ignore": fields written by an older operator version must not break a reconcile
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(_Status):
    """One aspect of a resource's progress (each kind's api/conditions.py lists its types)."""

    type: str = Field(description="Built, VerifierBuilt, Executed, Released, Failed, ...")
    status: str = Field(pattern="^(True|False|Unknown)$", description="True, False or Unknown.")
    reason: str = Field(description="One CamelCase word saying why, e.g. DefectsFound.")
    message: str = Field("", description="What happened, in a sentence.")
    last_transition_time: str = Field(description="When the status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        None, description="The spec generation this condition was computed from."
    )

"""The CoworkEnvironment resource. ``spec`` is the core's EnvironmentSpec (one schema for
YAML specs, the CLI and the cluster); ``status`` is defined here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from coworkgym.spec import API_GROUP, EnvironmentSpec
from coworkgym.spec import KIND as KIND

GROUP = API_GROUP
VERSION = "v1alpha1"
PLURAL = "coworkenvironments"
SINGULAR = "coworkenvironment"
SHORT_NAME = "cwe"
MAX_DEFECTS_IN_STATUS = 20


class _Status(BaseModel):
    # extra="ignore": fields written by an older operator version must not break a reconcile
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(_Status):
    type: str
    status: str = Field(pattern="^(True|False|Unknown)$")
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None


class DefectSummary(_Status):
    code: str
    owner: str
    severity: str
    message: str = Field(max_length=512)


class StageTiming(_Status):
    stage: str
    seconds: float


class CoworkEnvironmentStatus(_Status):
    """Written once per reconcile by the controller; never edited by users."""

    phase: str = Field("Pending", description="derived from the conditions, for kubectl get")
    iteration: int = Field(0, description="completed execute steps")
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    defects: list[DefectSummary] = Field(default_factory=list, max_length=MAX_DEFECTS_IN_STATUS)
    stage_timings: list[StageTiming] = Field(default_factory=list)
    package_uri: str | None = None
    package_digest: str | None = None
    message: str = ""
    loop: dict[str, object] = Field(
        default_factory=dict, description="the loop engine's state (opaque to users)"
    )


class CoworkEnvironment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    apiVersion: str = f"{GROUP}/{VERSION}"  # Kubernetes field name
    kind: str = KIND
    metadata: dict[str, object] = Field(default_factory=dict)
    spec: EnvironmentSpec
    status: CoworkEnvironmentStatus | None = None

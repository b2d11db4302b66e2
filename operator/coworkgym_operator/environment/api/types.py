"""The CoworkEnvironment resource. ``spec`` is the core's EnvironmentSpec (one schema for
YAML specs, the CLI and the cluster); ``status`` is defined here."""

from __future__ import annotations

from pydantic import Field

from coworkgym.spec import KIND as KIND
from coworkgym.spec import EnvironmentSpec
from coworkgym_operator.core.api import (
    Condition,
    _Status,
    conditions_field,
    message_field,
    observed_generation_field,
    phase_field,
    resource,
)

PLURAL = "coworkenvironments"
SINGULAR = "coworkenvironment"
SHORT_NAME = "cwe"
MAX_DEFECTS_IN_STATUS = 20


class DefectSummary(_Status):
    """A defect the Issue Detector found in the last round."""

    code: str = Field(description="The defect's code, e.g. LEAK_EXPECTED_VALUE.")
    owner: str = Field(description="The role that must fix it: builder or verifier.")
    severity: str = Field(description="error (blocks release) or warning.")
    message: str = Field(max_length=512, description="What is wrong, and where.")


class StageTiming(_Status):
    """Time spent in one stage, summed over iterations and attempts."""

    stage: str = Field(description="builder, verifier, detector or release.")
    seconds: float = Field(description="Seconds its Jobs ran.")


class RoleUsage(_Status):
    """The model calls of one LLM-backed role, summed over iterations and attempts (as its
    stage pods reported them; the gateway enforces the budget on its own count)."""

    role: str = Field(description="builder, verifier or detector (its review).")
    requests: int = Field(0, description="Chat-completion requests.")
    prompt_tokens: int = Field(0, description="Prompt tokens.")
    completion_tokens: int = Field(0, description="Completion tokens.")


class CoworkEnvironmentStatus(_Status):
    """Written once per reconcile by the controller; never edited by users."""

    # core.api.Status's fields, with iteration between (the order the CRD has always had)
    phase: str = phase_field()
    iteration: int = Field(0, description="Completed execute steps (Issue Detector runs).")
    observed_generation: int | None = observed_generation_field()
    conditions: list[Condition] = conditions_field()
    defects: list[DefectSummary] = Field(
        default_factory=list,
        max_length=MAX_DEFECTS_IN_STATUS,
        description=f"Defects found in the last round (at most {MAX_DEFECTS_IN_STATUS}).",
    )
    stage_timings: list[StageTiming] = Field(
        default_factory=list, description="Time spent per stage."
    )
    llm_usage: list[RoleUsage] = Field(
        default_factory=list, description="Model calls and tokens of the LLM-backed roles."
    )
    package_uri: str | None = Field(None, description="Where the released package is.")
    package_digest: str | None = Field(None, description="The released package's digest.")
    message: str = message_field()
    loop: dict[str, object] = Field(
        default_factory=dict, description="The loop engine's state (opaque to users)."
    )


CoworkEnvironment = resource(KIND, EnvironmentSpec, CoworkEnvironmentStatus)

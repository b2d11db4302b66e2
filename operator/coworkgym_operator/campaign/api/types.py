"""The SynthesisCampaign resource: many CoworkEnvironments drawn from the taxonomy at once.

``spec`` says how many environments in which (scenario domain × primary capability) cells —
a count per cell, or a total balanced over the cells the procedural families serve — and
what every environment shares: the role backends, the revise budget, where releases go, the
sandbox settings. ``concurrency`` bounds the environments in flight; ``failureThreshold``
says when the campaign stops creating new ones because too many end without a release.
``status`` counts the children by phase and shows the coverage per cell. The CRD is
generated from these models (``campaign/api/crd.py``); what each field means is what
``kubectl explain synthesiscampaign.spec`` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from coworkgym.spec import Backends, Budget, FaultInjection, Release, SandboxSettings
from coworkgym_operator.core.api import GROUP, VERSION, Condition, Status, _Status, resource
from coworkgym_operator.core.api import Spec as _Spec

CAMPAIGN_KIND = "SynthesisCampaign"
CAMPAIGN_PLURAL = "synthesiscampaigns"
CAMPAIGN_SINGULAR = "synthesiscampaign"
CAMPAIGN_SHORT_NAME = "scamp"
API_VERSION = f"{GROUP}/{VERSION}"

MAX_CELLS = 200  # quota cells listed (the taxonomy grid has 16 × 20)
MAX_PER_CELL = 10_000
MAX_TOTAL = 100_000  # the paper synthesized 64,888
MAX_CONCURRENCY = 1_000
MAX_SHARDS = 64
SHARD_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"  # a label value
# A child is named <campaign>-<index, 5 digits>, and its stage Jobs <child>-verifier-i9-a3:
# a Job's name must fit a label value (63 characters), so the campaign's name is bounded.
MAX_NAME = 38

# Messages shared by the models and the CRD's CEL rules: the API server and the operator
# (which checks the models again, e.g. under an older CRD) say the same thing.
ONE_QUOTA = (
    "spec.quotas needs exactly one of cells (a count per domain × capability cell) or "
    "total (that many, balanced over the served cells)"
)
FILTERS_NEED_TOTAL = (
    "spec.quotas.domains and spec.quotas.capabilities narrow a balanced total; with cells, "
    "list the cells themselves"
)
SPEC_FROZEN = (
    "spec.quotas, seed and maxTurns are immutable once the campaign exists (they decide "
    "every child's task); concurrency, failureThreshold and the shared settings may change"
)
UNSERVED_CELLS = (
    "spec.quotas.cells: a cell is served by no procedural family with up to spec.maxTurns "
    "turns; list served cells (cowork-gym coverage --families), allow more turns, or use an "
    "llm builder (spec.backends.builder.kind: llm), which may build any cell"
)
NAME_TOO_LONG = (
    f"metadata.name: at most {MAX_NAME} characters (children are named <campaign>-NNNNN and "
    "their stage Jobs must fit a label value)"
)


def _domains() -> list[str]:
    from coworkgym.taxonomy import load_taxonomy

    return list(load_taxonomy().scenarios)


def _capabilities() -> list[str]:
    from coworkgym.taxonomy import load_taxonomy

    return list(load_taxonomy().capabilities)


def _enum(values: Callable[[], list[str]]) -> Callable[[dict[str, Any]], None]:
    """The allowed values of a string or of a list's items, from the taxonomy (so the CRD
    refuses an unknown cell with "Unsupported value" on the field)."""

    def extra(schema: dict[str, Any]) -> None:
        target = schema.get("items", schema)
        target["enum"] = values()

    return extra


class CellQuota(_Spec):
    """How many environments one (scenario domain × primary capability) cell gets."""

    domain: str = Field(
        max_length=64,
        description="The scenario domain (the first part of a scenario leaf), e.g. finance.",
        json_schema_extra=_enum(_domains),
    )
    capability: str = Field(
        max_length=64,
        description="The primary capability (the first of the task's capabilities).",
        json_schema_extra=_enum(_capabilities),
    )
    count: int = Field(ge=1, le=MAX_PER_CELL, description=f"Environments (1 to {MAX_PER_CELL}).")

    @property
    def cell(self) -> tuple[str, str]:
        return self.domain, self.capability

    @field_validator("domain")
    @classmethod
    def _known_domain(cls, domain: str) -> str:
        if domain not in _domains():
            raise PydanticCustomError(
                "unknown_domain",
                f"{domain!r} is not a scenario domain of the taxonomy; use one of "
                + ", ".join(_domains()),
            )
        return domain

    @field_validator("capability")
    @classmethod
    def _known_capability(cls, capability: str) -> str:
        if capability not in _capabilities():
            raise PydanticCustomError(
                "unknown_capability",
                f"{capability!r} is not a capability of the taxonomy; use one of "
                + ", ".join(_capabilities()),
            )
        return capability


class Quotas(_Spec):
    """Which cells get how many environments: ``cells`` (each with its count), or ``total``
    (that many, balanced over the cells the procedural families serve: cell counts differ by
    at most one), optionally narrowed to some ``domains`` and ``capabilities``."""

    cells: list[CellQuota] | None = Field(
        None,
        min_length=1,
        max_length=MAX_CELLS,
        description=f"A count per cell (each cell once, at most {MAX_CELLS} cells).",
    )
    total: int | None = Field(
        None,
        ge=1,
        le=MAX_TOTAL,
        description=f"Environments balanced over the served cells (1 to {MAX_TOTAL}).",
    )
    domains: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="With total: only cells of these scenario domains (empty = every one).",
        json_schema_extra=_enum(_domains),
    )
    capabilities: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="With total: only cells of these primary capabilities (empty = every one).",
        json_schema_extra=_enum(_capabilities),
    )

    @model_validator(mode="after")
    def _one_way(self) -> Quotas:
        if (self.cells is None) == (self.total is None):
            raise PydanticCustomError("one_quota", ONE_QUOTA)
        if self.cells is not None and (self.domains or self.capabilities):
            raise PydanticCustomError("filters_need_total", FILTERS_NEED_TOTAL)
        seen: set[tuple[str, str]] = set()
        for quota in self.cells or []:
            if quota.cell in seen:
                raise PydanticCustomError(
                    "duplicate_cell",
                    f"cells: {quota.domain} × {quota.capability} is listed twice; list each "
                    "cell once with its whole count",
                )
            seen.add(quota.cell)
        return self

    def planned(self) -> int:
        return self.total if self.total is not None else sum(q.count for q in self.cells or [])


class FailureThreshold(_Spec):
    """When the campaign stops creating environments: once at least ``minFinished`` children
    have finished and more than ``maxFailureRatio`` of them were rejected or failed. Those in
    flight still finish; the campaign then ends Failed (reason FailureRateExceeded). Raising
    the threshold (a spec change) lets a stopped campaign go on."""

    max_failure_ratio: float = Field(
        0.5, ge=0, le=1, description="Most (rejected + failed) / finished tolerated (0 to 1)."
    )
    min_finished: int = Field(
        5, ge=1, le=100_000, description="Finished children before the ratio is judged."
    )


class SynthesisCampaignSpec(_Spec):
    """What to synthesize: the quotas over the taxonomy, what every environment shares, and
    how fast and how far the campaign goes."""

    quotas: Quotas = Field(description="How many environments per cell (immutable).")
    seed: int = Field(
        0, ge=0, description="Seed of the taxonomy sampler: the same seed, the same tasks."
    )
    max_turns: int = Field(
        3, ge=1, le=3, description="Each task gets 1 to maxTurns user turns (1 to 3)."
    )
    concurrency: int = Field(
        4,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Most child environments in flight (created, not yet Released, Rejected "
        f"or Failed) at once (1 to {MAX_CONCURRENCY}).",
    )
    failure_threshold: FailureThreshold = Field(
        default_factory=FailureThreshold,
        description="When too many children end without a release, stop creating new ones.",
    )
    backends: Backends = Field(default_factory=Backends, description="Every child's backends.")
    budget: Budget = Field(
        default_factory=Budget,
        description="Every child's revise budget (maxIterations) and stage timeout.",
    )
    release: Release = Field(
        default_factory=Release, description="Where every child's released package goes."
    )
    fault_injection: FaultInjection = Field(
        default_factory=FaultInjection,
        description="Deliberate defects in every child, to exercise the revise loop.",
    )
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings,
        description="How the children's role pods run; unset fields = the operator's.",
    )
    shards: list[Annotated[str, StringConstraints(pattern=SHARD_PATTERN)]] = Field(
        default_factory=list,
        max_length=MAX_SHARDS,
        description="Operator shards (the chart's operator.shards) to spread the children "
        "over, round-robin by index: child i is labelled coworkgym.dev/shard=shards[i mod "
        "n]. Empty: each child takes the campaign's own shard label, if it has one.",
    )


# ---- status -------------------------------------------------------------------------------
class CampaignCondition(StrEnum):
    """The status contract; every condition is always present.

    - Planned              the quotas make a plan (True Planned; False InvalidSpec,
                           QuotaNotServed: the cells no family serves are named)
    - Created              every planned child exists (True AllCreated; False Creating,
                           Stopped: the failure threshold was passed, NotReached)
    - FailureRateExceeded  more than failureThreshold.maxFailureRatio of the finished
                           children were rejected or failed (True ThresholdExceeded;
                           False BelowThreshold)
    - Failed               the campaign ended without making its plan (True InvalidSpec,
                           QuotaNotServed, FailureRateExceeded; False InProgress, Succeeded)
    - Complete             nothing is left to do or in flight: True with reason Succeeded or
                           Failed, so ``kubectl wait --for=condition=Complete`` returns for
                           either outcome (False InProgress)
    """

    PLANNED = "Planned"
    CREATED = "Created"
    FAILURE_RATE_EXCEEDED = "FailureRateExceeded"
    FAILED = "Failed"
    COMPLETE = "Complete"


class CampaignReason(StrEnum):
    PLANNED = "Planned"
    INVALID_SPEC = "InvalidSpec"
    QUOTA_NOT_SERVED = "QuotaNotServed"
    ALL_CREATED = "AllCreated"
    CREATING = "Creating"
    STOPPED = "Stopped"
    NOT_REACHED = "NotReached"
    THRESHOLD_EXCEEDED = "ThresholdExceeded"
    BELOW_THRESHOLD = "BelowThreshold"
    FAILURE_RATE_EXCEEDED = "FailureRateExceeded"
    IN_PROGRESS = "InProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class CampaignPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    STOPPING = "Stopping"  # past the failure threshold: no new children, some in flight
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class CampaignCounts(_Status):
    """The children by state. planned = created + not yet created; created = inFlight +
    released + rejected + failed + missing."""

    planned: int = Field(0, ge=0, description="Environments the quotas ask for.")
    created: int = Field(0, ge=0, description="Children created so far.")
    in_flight: int = Field(0, ge=0, description="Created, not yet Released, Rejected or Failed.")
    released: int = Field(0, ge=0, description="Released: in the release store.")
    rejected: int = Field(0, ge=0, description="Rejected: the revise budget ran out.")
    failed: int = Field(0, ge=0, description="Failed: a stage failed, or an invalid spec.")
    missing: int = Field(0, ge=0, description="Created, then deleted by someone (not redone).")
    by_phase: dict[str, int] = Field(
        default_factory=dict, description="Children by their phase (kubectl get cwe)."
    )


class CellCoverage(_Status):
    """One (scenario domain × primary capability) cell: asked for, and how it went."""

    domain: str = Field(description="The scenario domain.")
    capability: str = Field(description="The primary capability.")
    planned: int = Field(0, ge=0, description="Environments the quotas ask for here.")
    created: int = Field(0, ge=0, description="Children created here.")
    released: int = Field(0, ge=0, description="Of those, Released.")
    failed: int = Field(0, ge=0, description="Of those, Rejected or Failed.")


class DefectCount(_Status):
    """A defect code the Issue Detector reported in children's last round, and how often."""

    code: str = Field(description="The defect's code, e.g. LEAK_EXPECTED_VALUE.")
    count: int = Field(ge=0, description="Children whose last round reported it.")


class SynthesisCampaignStatus(Status):
    """Written once per reconcile by the controller; never edited by users."""

    phase: str = Field(
        "Pending",
        description="Pending, Running, Stopping, Succeeded or Failed: derived from the "
        "conditions, for kubectl get.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Planned, Created, FailureRateExceeded, Failed, Complete "
        "(campaign/api/types.py: CampaignCondition).",
    )
    counts: CampaignCounts = Field(
        default_factory=CampaignCounts, description="The children by state."
    )
    progress: str = Field("", description="finished/planned, e.g. 12/30 (for kubectl get).")
    failure_ratio: float | None = Field(
        None, description="(rejected + failed) / finished; unset until one has finished."
    )
    coverage: list[CellCoverage] = Field(
        default_factory=list, description="Per cell: planned, created, released, failed."
    )
    defects: list[DefectCount] = Field(
        default_factory=list,
        description="Defect codes in the children's last rounds, most frequent first.",
    )
    message: str = Field("", description="What the campaign does now, in a sentence.")


SynthesisCampaign = resource(CAMPAIGN_KIND, SynthesisCampaignSpec, SynthesisCampaignStatus)

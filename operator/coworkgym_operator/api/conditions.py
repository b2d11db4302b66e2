"""Condition types and reasons: the status contract. The phase is derived from them.

- Built          True when the Builder's output of this round exists
                 (reasons: Building, Built, BuilderFailed)
- VerifierBuilt  True when the verifier of this round exists
                 (reasons: Constructing, VerifierBuilt, VerifierFailed)
- Executed       True when the Issue Detector finished this round
                 (reasons: Executing, NoDefects, DefectsFound, DetectorFailed)
- Released       True when the package is in the release store
                 (reasons: Releasing, Released, ReleaseFailed, Rejected)
- Failed         True when the loop stopped without a verdict
                 (reasons: StageFailed, InvalidSpec)
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    BUILT = "Built"
    VERIFIER_BUILT = "VerifierBuilt"
    EXECUTED = "Executed"
    RELEASED = "Released"
    FAILED = "Failed"


class ConditionReason(StrEnum):
    PENDING = "Pending"
    BUILDING = "Building"
    BUILT = "Built"
    BUILDER_FAILED = "BuilderFailed"
    CONSTRUCTING = "Constructing"
    VERIFIER_BUILT = "VerifierBuilt"
    VERIFIER_FAILED = "VerifierFailed"
    EXECUTING = "Executing"
    NO_DEFECTS = "NoDefects"
    DEFECTS_FOUND = "DefectsFound"
    DETECTOR_FAILED = "DetectorFailed"
    RELEASING = "Releasing"
    RELEASED = "Released"
    RELEASE_FAILED = "ReleaseFailed"
    REJECTED = "Rejected"
    STAGE_FAILED = "StageFailed"
    INVALID_SPEC = "InvalidSpec"

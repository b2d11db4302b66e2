"""Condition types and reasons: the status contract. The phase is derived from them.

| type          | True when                                  | reasons (False/Unknown)                 |
|---------------|--------------------------------------------|-----------------------------------------|
| Built         | the Builder's output of this round exists  | Building, BuilderFailed                 |
| VerifierBuilt | the verifier of this round exists          | Constructing, VerifierFailed            |
| Executed      | the Issue Detector finished this round     | Executing, DefectsFound, DetectorFailed |
| Released      | the package is in the release store        | Releasing, ReleaseFailed, Rejected      |
| Failed        | the loop stopped without a verdict         | StageFailed, InvalidSpec                |
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

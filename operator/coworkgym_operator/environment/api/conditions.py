"""Condition types and reasons: the status contract. The phase is derived from them.

Every condition is always present, with a reason and a message. ``True`` means the stage's
output is current: produced in this iteration, or carried over from an earlier one that
no defect invalidated. ``Unknown`` means the stage is running now (its message says which
attempt, a retry's cause, or why its pod cannot start). ``False`` says why not.

- Built          the Builder's output of the current iteration exists
                 (reasons: Building, Built, BuilderFailed, Waiting)
- VerifierBuilt  the verifier of the current iteration exists
                 (reasons: Constructing, VerifierBuilt, VerifierFailed, Waiting, NotReached)
- Executed       the Issue Detector ran on the current outputs and found no error
                 (reasons: Executing, NoDefects, DefectsFound, DetectorFailed, Waiting,
                 NotReached)
- Released       the package is in the release store
                 (reasons: Releasing, Released, ReleaseFailed, Rejected, Waiting, NotReached)
- Failed         the loop stopped without a verdict
                 (True: StageFailed, InvalidSpec; False: InProgress, Released, Rejected)
- Complete       the environment reached its outcome, whichever it is: True with reason
                 Released, Rejected or Failed, so that
                 ``kubectl wait --for=condition=Complete`` returns for every outcome
                 (False: InProgress)

Waiting: an earlier stage of this iteration has not produced its output yet.
NotReached: the loop ended (a stage failed) before this stage ran.
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    BUILT = "Built"
    VERIFIER_BUILT = "VerifierBuilt"
    EXECUTED = "Executed"
    RELEASED = "Released"
    FAILED = "Failed"
    COMPLETE = "Complete"


class ConditionReason(StrEnum):
    WAITING = "Waiting"
    NOT_REACHED = "NotReached"
    IN_PROGRESS = "InProgress"
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
    FAILED = "Failed"
    STAGE_FAILED = "StageFailed"
    INVALID_SPEC = "InvalidSpec"

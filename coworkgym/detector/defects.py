"""Defects the Issue Detector can raise. Each code has one owner — the role that must repair
it — so the loop can route a defect back without guessing."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Owner = Literal["builder", "verifier"]
Severity = Literal["error", "warning"]


class DefectCode(StrEnum):
    PACKAGE_INVALID = "PACKAGE_INVALID"
    PACKAGE_STRUCTURE = "PACKAGE_STRUCTURE"
    HARBOR_LINT = "HARBOR_LINT"
    FILE_NOT_ALLOWED = "FILE_NOT_ALLOWED"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    PATH_ESCAPE = "PATH_ESCAPE"
    LEAK_REFERENCE_OUTPUT = "LEAK_REFERENCE_OUTPUT"
    LEAK_EXPECTED_VALUE = "LEAK_EXPECTED_VALUE"
    LEAK_VERIFIER_CONTENT = "LEAK_VERIFIER_CONTENT"
    LEAK_USER_STATE = "LEAK_USER_STATE"
    PATCH_UNAUTHORIZED = "PATCH_UNAUTHORIZED"
    PATCH_NO_NEW_INFORMATION = "PATCH_NO_NEW_INFORMATION"
    PATCH_INVALIDATION_MISSING = "PATCH_INVALIDATION_MISSING"
    SOLUTION_FAILED = "SOLUTION_FAILED"
    EXECUTION_UNSUPPORTED = "EXECUTION_UNSUPPORTED"
    VERIFIER_SHARED_MODE = "VERIFIER_SHARED_MODE"
    VERIFIER_AGENT_WRITABLE = "VERIFIER_AGENT_WRITABLE"
    VERIFIER_TOO_FEW_COMPONENTS = "VERIFIER_TOO_FEW_COMPONENTS"
    VERIFIER_NO_RED_LINE = "VERIFIER_NO_RED_LINE"
    VERIFIER_PERMISSIVE_CHECK = "VERIFIER_PERMISSIVE_CHECK"
    VERIFIER_INVALID = "VERIFIER_INVALID"
    REFERENCE_REJECTED = "REFERENCE_REJECTED"
    ACCEPTS_UNTOUCHED = "ACCEPTS_UNTOUCHED"
    ACCEPTS_MISSING_ARTIFACT = "ACCEPTS_MISSING_ARTIFACT"
    ACCEPTS_CORRUPTED_ARTIFACT = "ACCEPTS_CORRUPTED_ARTIFACT"
    ACCEPTS_SHORTCUT = "ACCEPTS_SHORTCUT"
    ACCEPTS_STALE_RESULT = "ACCEPTS_STALE_RESULT"
    ACCEPTS_DAMAGED_INPUTS = "ACCEPTS_DAMAGED_INPUTS"
    ACCEPTS_BLANK_TEXT = "ACCEPTS_BLANK_TEXT"
    PARTIAL_CREDIT_STALE = "PARTIAL_CREDIT_STALE"
    PARTIAL_CREDIT_MISSING = "PARTIAL_CREDIT_MISSING"
    RUBRIC_UNJUDGED = "RUBRIC_UNJUDGED"
    LABELS_MISMATCH = "LABELS_MISMATCH"
    ANSWER_AMBIGUOUS = "ANSWER_AMBIGUOUS"
    USER_GIVES_AWAY_TRAP = "USER_GIVES_AWAY_TRAP"
    USER_VOLUNTEERS_ANSWER = "USER_VOLUNTEERS_ANSWER"


# code → (owner, what it means). The owner is the role whose output must change.
CATALOGUE: dict[DefectCode, tuple[Owner, str]] = {
    DefectCode.PACKAGE_INVALID: ("builder", "a package file does not parse or validate"),
    DefectCode.PACKAGE_STRUCTURE: ("builder", "a required file is missing or empty"),
    DefectCode.HARBOR_LINT: ("builder", "`harbor lint` reports a finding"),
    DefectCode.FILE_NOT_ALLOWED: ("builder", "a file outside the package whitelist"),
    DefectCode.FILE_TOO_LARGE: ("builder", "a file or the package exceeds the size limits"),
    DefectCode.PATH_ESCAPE: ("builder", "a symlink or path that can escape its directory"),
    DefectCode.LEAK_REFERENCE_OUTPUT: ("builder", "a reference output already sits in s0"),
    DefectCode.LEAK_EXPECTED_VALUE: ("builder", "an expected value is visible to the agent"),
    DefectCode.LEAK_VERIFIER_CONTENT: ("builder", "verifier or solution content is agent-visible"),
    DefectCode.LEAK_USER_STATE: ("builder", "private user state is agent-visible"),
    DefectCode.PATCH_UNAUTHORIZED: ("builder", "a user patch touches an unauthorized path"),
    DefectCode.PATCH_NO_NEW_INFORMATION: ("builder", "a user turn brings nothing new"),
    DefectCode.PATCH_INVALIDATION_MISSING: ("builder", "a patch omits artifacts it invalidates"),
    DefectCode.SOLUTION_FAILED: ("builder", "the reference solution does not run"),
    DefectCode.EXECUTION_UNSUPPORTED: ("builder", "the task could not be run on this machine"),
    DefectCode.VERIFIER_SHARED_MODE: ("verifier", "shared-mode verifier: the reward is forgeable"),
    DefectCode.VERIFIER_AGENT_WRITABLE: ("verifier", "the verifier runs agent-writable code"),
    DefectCode.VERIFIER_TOO_FEW_COMPONENTS: ("verifier", "fewer than 3 meaningful components"),
    DefectCode.VERIFIER_NO_RED_LINE: ("verifier", "no red line protects the inputs"),
    DefectCode.VERIFIER_PERMISSIVE_CHECK: ("verifier", "a check accepts (almost) anything"),
    DefectCode.VERIFIER_INVALID: ("verifier", "the verifier crashed or wrote no reward"),
    DefectCode.REFERENCE_REJECTED: ("verifier", "the reference completion does not pass"),
    DefectCode.ACCEPTS_UNTOUCHED: ("verifier", "the untouched workspace is not rejected"),
    DefectCode.ACCEPTS_MISSING_ARTIFACT: ("verifier", "removing a deliverable still passes"),
    DefectCode.ACCEPTS_CORRUPTED_ARTIFACT: ("verifier", "a corrupted deliverable still passes"),
    DefectCode.ACCEPTS_SHORTCUT: ("verifier", "a shortcut state is not rejected"),
    DefectCode.ACCEPTS_STALE_RESULT: ("verifier", "results from before a user patch still pass"),
    DefectCode.ACCEPTS_DAMAGED_INPUTS: ("verifier", "altering the inputs goes unpunished"),
    DefectCode.ACCEPTS_BLANK_TEXT: ("verifier", "deliverables with all free text blank still pass"),
    DefectCode.PARTIAL_CREDIT_STALE: (
        "verifier",
        "a state that ignores a later user turn (its new input, its changed requirement) "
        "scores above the partial-work bound",
    ),
    DefectCode.PARTIAL_CREDIT_MISSING: (
        "verifier",
        "a state with one deliverable missing scores above the partial-work bound",
    ),
    DefectCode.RUBRIC_UNJUDGED: (
        "verifier",
        "(warning) only a rubric item, not judged in the review, could fail a partial state",
    ),
    DefectCode.LABELS_MISMATCH: ("builder", "a taxonomy label does not describe the task"),
    DefectCode.ANSWER_AMBIGUOUS: ("builder", "the instruction leaves a checked value open"),
    DefectCode.USER_GIVES_AWAY_TRAP: ("builder", "the scripted user gives a task's trap away"),
    DefectCode.USER_VOLUNTEERS_ANSWER: (
        "builder",
        "the scripted user answers a question with what it was not asked",
    ),
}


class Defect(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: DefectCode
    owner: Owner
    severity: Severity = "error"
    message: str
    evidence: dict[str, object] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        code: DefectCode,
        message: str,
        severity: Severity = "error",
        owner: Owner | None = None,
        **evidence: object,
    ) -> Defect:
        return cls(
            code=code,
            owner=owner or CATALOGUE[code][0],
            severity=severity,
            message=message,
            evidence=evidence,
        )

    @classmethod
    def with_evidence(cls, code: DefectCode, message: str, evidence: dict[str, object]) -> Defect:
        return cls(code=code, owner=CATALOGUE[code][0], message=message, evidence=evidence)

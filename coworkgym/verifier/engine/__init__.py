"""The hybrid verifier engine: runs a verifier spec (data) against a workspace.

This package is copied verbatim into every released environment as
``tests/cowork_verifier/`` and runs inside the verifier sandbox, so it depends only on the
standard library plus openpyxl, python-docx and jsonschema (imported lazily), and stays
compatible with the distribution Python of the sandbox image (3.11).

Exceptions:
    CheckFailure   the workspace does not satisfy a check (score 0, with evidence)
    SpecError      the spec or the verifier's own inputs are broken → the run is *invalid*
"""

from __future__ import annotations

from .checks import CHECKS, CheckFailure, CheckResult, SpecError
from .run import VerificationReport, verify
from .scoring import Scoring, combine

__all__ = [
    "CHECKS",
    "CheckFailure",
    "CheckResult",
    "Scoring",
    "SpecError",
    "VerificationReport",
    "combine",
    "verify",
]

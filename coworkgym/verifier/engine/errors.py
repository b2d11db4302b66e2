"""The two ways a check can end other than passing.

CheckFailure is the workspace's fault (scored 0, with evidence); SpecError is the
verifier's own fault and makes the whole run *invalid* — never a 0 that would be trained on.
"""

from __future__ import annotations


class CheckFailure(Exception):
    """The workspace does not satisfy the check."""


class SpecError(Exception):
    """The verifier spec or its private inputs are broken."""

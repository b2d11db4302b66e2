"""Why an LLM stage ended without an output.

    RoleError (coworkgym.roles.base)      the loop's contract: message + retryable
    └── AgentError                        the agent loop stopped; ``status`` says why
    JudgeError (Exception)                no valid rubric verdict: the verification is
                                          *invalid*, never scored 0

The retry decision lives in the status (see ``RETRYABLE``): an exhausted budget or a
rejected request will not get better by running the stage again; an unreachable upstream
may.
"""

from __future__ import annotations

from enum import StrEnum

from ..roles.base import RoleError


class AgentStatus(StrEnum):
    TURNS_EXHAUSTED = "turns_exhausted"  # max_turns model calls without an accepted output
    TOKENS_EXHAUSTED = "tokens_exhausted"  # the gateway's per-environment token budget
    STAGE_TIMEOUT = "stage_timeout"  # the stage's wall-clock budget
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"  # timeouts, 429/5xx after the client's retries
    UPSTREAM_REJECTED = "upstream_rejected"  # 4xx: bad model name, auth, malformed request


RETRYABLE = frozenset({AgentStatus.UPSTREAM_UNAVAILABLE})


class AgentError(RoleError):
    def __init__(self, status: AgentStatus, message: str, *, turns: int = 0) -> None:
        super().__init__(f"{status}: {message}", retryable=status in RETRYABLE)
        self.status = status
        self.turns = turns


class JudgeError(Exception):
    """The rubric judge produced no valid verdict (API failure, or every sample malformed)."""

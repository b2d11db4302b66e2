"""Verification after the rollout, apart from it.

The verifier runs in a *fresh* sandbox on a copy of the collected workspace, with the
package's ``tests/`` and an empty ``/logs/verifier`` (``LocalRuntime.run_verifier``): it
never shares the agent's processes or files, and a reward file the agent wrote anywhere is
not the one read. The rubric judge scores the same workspace when the package has rubric
items and a judge is configured; without a judge the reward is the code score (R = s).

A verifier that crashes or writes no reward, a failing sandbox, or a judge that gives no
valid verdict make the verification *invalid* with the reason — never a 0. What the agent
left in its workspace cannot: the verifier and the judge read a normalised copy
(``runtime.verifier_copy``: modes fixed, links out, FIFOs, devices and oversized files
dropped, each drop logged), and the engine scores an unreadable or wrong-typed file as
that component's failure.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import structlog

from ..llm.errors import JudgeError
from ..llm.judge import RubricJudge
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..runtime.verifier_copy import copy_for_verifier
from .trajectory import VerificationRecord

log = structlog.get_logger(__name__)

DEFAULT_PASS_THRESHOLD = 0.99  # the verifier spec's default, for plain Harbor tasks


def verify_rollout(
    runtime: LocalRuntime,
    pkg: EnvironmentPackage,
    workspace: Path,
    workdir: str,
    trajectory: dict[str, Any] | None,
    judge: RubricJudge | None = None,
) -> VerificationRecord:
    """``trajectory`` is what the verifier's trajectory checks read (tool calls and the
    claimed files)."""
    rubric = pkg.verifier.rubric if pkg.verifier else []
    scores: dict[str, float] | None = None
    judge_ran = False
    try:
        if judge is not None and rubric:
            with tempfile.TemporaryDirectory(prefix="cwg-judge-") as tmp:
                view = Path(tmp) / "workspace"
                copy_for_verifier(workspace, view, workdir)  # what the verifier reads
                try:
                    scores = judge.judge(rubric, view, pkg.instruction).scores
                except JudgeError as exc:
                    return _invalid(f"rubric judge failed: {exc}", judge_ran=True)
            judge_ran = True
        outcome = runtime.run_verifier(
            pkg, workspace, workdir, trajectory=trajectory, rubric_scores=scores
        )
        if outcome.copied is not None and outcome.copied.dropped:
            log.warning("left out of the verifier's copy", paths=outcome.copied.dropped[:50])
    except Exception as exc:  # the sandbox or the host, not the workspace
        log.error("verification infrastructure failed", error=repr(exc))
        return _invalid(f"infrastructure: {type(exc).__name__}: {exc}", judge_ran=judge_ran)
    duration = outcome.run.duration_s if outcome.run is not None else 0.0
    if not outcome.valid or outcome.reward is None:
        return _invalid(f"verifier: {outcome.error or 'no reward'}", judge_ran, duration)
    threshold = pkg.verifier.scoring.pass_threshold if pkg.verifier else DEFAULT_PASS_THRESHOLD
    return VerificationRecord(
        valid=True,
        reward=outcome.reward,
        code_score=outcome.rewards.get("code_score"),
        rubric_score=outcome.rewards.get("rubric_score"),
        components=outcome.component_scores(),
        passed=outcome.reward >= threshold,
        judge_ran=judge_ran,
        duration_s=round(duration, 3),
    )


def _invalid(reason: str, judge_ran: bool = False, duration: float = 0.0) -> VerificationRecord:
    return VerificationRecord(
        valid=False, invalid_reason=reason[:1000], judge_ran=judge_ran, duration_s=duration
    )


__all__ = ["verify_rollout"]

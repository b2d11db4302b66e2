"""Run a whole verifier spec against a workspace and build the report."""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .checks import CHECKS, CheckResult, Context
from .errors import CheckFailure, SpecError
from .scoring import Scoring, combine, weighted_mean


@dataclass
class ComponentOutcome:
    id: str
    type: str
    weight: float
    score: float
    status: str  # passed | failed | partial | skipped
    evidence: str
    description: str = ""


@dataclass
class VerificationReport:
    status: str  # valid | invalid
    reward: float | None = None
    code_score: float | None = None
    rubric_score: float | None = None
    components: list[ComponentOutcome] = field(default_factory=list)
    red_lines: list[ComponentOutcome] = field(default_factory=list)
    rubric: list[dict[str, Any]] = field(default_factory=list)
    gates_short: list[str] = field(default_factory=list)  # gate components below 1
    error: str | None = None

    def reward_json(self) -> dict[str, float]:
        """Harbor's flat reward object: reward + one numeric key per component."""
        if self.reward is None:
            raise ValueError("an invalid verification has no reward")
        flat: dict[str, float] = {"reward": self.reward}
        for c in self.components:
            if c.status != "skipped":
                flat[c.id] = round(c.score, 6)
        for r in self.red_lines:
            if r.status != "skipped":
                flat[f"redline_{r.id}"] = round(r.score, 6)
        if self.code_score is not None:
            flat["code_score"] = round(self.code_score, 6)
        if self.rubric_score is not None:
            flat["rubric_score"] = round(self.rubric_score, 6)
        return flat

    def details(self) -> dict[str, Any]:
        return asdict(self)


def run_check(entry: dict[str, Any], ctx: Context) -> ComponentOutcome:
    check = dict(entry["check"])
    kind = check.get("type")
    fn = CHECKS.get(str(kind))
    if fn is None:
        raise SpecError(f"component {entry['id']!r}: unknown check type {kind!r}")
    try:
        result = fn(check, ctx)
    except CheckFailure as failure:
        result = CheckResult(0.0, str(failure))
    except OSError as exc:
        if not _in_workspace(exc, ctx.workspace):
            raise  # the verifier's own files or the machine: the run is invalid
        # whatever the agent left (modes, links, special files) fails this component only
        result = CheckResult(0.0, f"cannot read the workspace: {exc}")
    except (KeyError, TypeError) as exc:
        raise SpecError(f"component {entry['id']!r}: malformed check parameters ({exc!r})") from exc
    if result.skipped:
        status = "skipped"
    elif result.score >= 1.0:
        status = "passed"
    elif result.score <= 0.0:
        status = "failed"
    else:
        status = "partial"
    return ComponentOutcome(
        id=entry["id"],
        type=str(kind),
        weight=float(entry.get("weight", 0.0)),
        score=result.score,
        status=status,
        evidence=result.evidence,
        description=entry.get("description", ""),
    )


def _in_workspace(exc: OSError, workspace: Path) -> bool:
    """The OS error is about a path in the workspace (so the agent's doing)."""
    top = str(workspace).rstrip("/")
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return bool(names) and all(n == top or n.startswith(top + "/") for n in names)


def verify(
    spec: dict[str, Any],
    workspace: Path,
    tests_dir: Path,
    trajectory: dict[str, Any] | None = None,
    rubric_scores: dict[str, float] | None = None,
) -> VerificationReport:
    """Score a workspace. Any verifier-side fault yields status 'invalid' and no reward."""
    try:
        ctx = Context(workspace=workspace, tests_dir=tests_dir, trajectory=trajectory)
        scoring = Scoring.from_spec(spec.get("scoring"))
        components = [run_check(e, ctx) for e in spec.get("components", [])]
        red_lines = [run_check(e, ctx) for e in spec.get("red_lines", [])]
        counted = [(c.weight, c.score) for c in components if c.status != "skipped"]
        code_score = weighted_mean(counted)
        if code_score is None:
            raise SpecError("no weighted deterministic component could be scored")
        rubric, rubric_score = _rubric(spec.get("rubric", []), rubric_scores)
        failed = sum(1 for r in red_lines if r.status in ("failed", "partial"))
        gates_short = [
            c.id
            for c, e in zip(components, spec.get("components", []), strict=True)
            if e.get("gate") and c.status != "skipped" and c.score < 1.0
        ]
        reward = combine(code_score, rubric_score, failed, scoring, len(gates_short))
        return VerificationReport(
            status="valid",
            reward=reward,
            code_score=code_score,
            rubric_score=rubric_score,
            components=components,
            red_lines=red_lines,
            rubric=rubric,
            gates_short=gates_short,
        )
    except SpecError as exc:
        return VerificationReport(status="invalid", error=f"SpecError: {exc}")
    except Exception as exc:  # an engine bug must never read as a 0 reward
        return VerificationReport(
            status="invalid", error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        )


def _rubric(
    items: list[dict[str, Any]], scores: dict[str, float] | None
) -> tuple[list[dict[str, Any]], float | None]:
    if not items or scores is None:
        return [{**item, "score": None} for item in items], None
    judged = []
    for item in items:
        if item["id"] not in scores:
            raise SpecError(f"rubric item {item['id']!r} was not judged")
        score = float(scores[item["id"]])
        if not 0.0 <= score <= 1.0:
            raise SpecError(f"rubric item {item['id']!r} scored {score} outside [0, 1]")
        judged.append({**item, "score": score})
    return judged, weighted_mean([(float(i.get("weight", 1.0)), i["score"]) for i in judged])

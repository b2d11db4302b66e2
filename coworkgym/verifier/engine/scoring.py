"""Combining component scores into one reward.

s = weighted mean of the deterministic components (weights normalized per side);
c = weighted mean of the rubric items, when judged;
R = weighted geometric mean of s and c (0 if either is 0; R = s when c is absent);
a gate component that falls short (scores below 1) scales R by ``gate_scale``, so partial
work (a deliverable missing, a user turn ignored) earns at most that share;
a failed red line caps R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Scoring:
    code_weight: float = 0.7
    rubric_weight: float = 0.3
    red_line_cap: float = 0.0
    pass_threshold: float = 0.99
    fail_threshold: float = 0.5
    gate_scale: float = 0.5

    @classmethod
    def from_spec(cls, raw: dict[str, Any] | None) -> Scoring:
        return cls(**(raw or {}))


def weighted_mean(pairs: list[tuple[float, float]]) -> float | None:
    """Mean of (weight, score) pairs, weights normalized; None when nothing is weighted."""
    total = sum(w for w, _ in pairs)
    if total <= 0:
        return None
    return sum(w * s for w, s in pairs) / total


def combine(
    code_score: float,
    rubric_score: float | None,
    red_lines_failed: int,
    scoring: Scoring,
    gates_short: int = 0,
) -> float:
    if rubric_score is None:
        reward = code_score
    elif code_score <= 0 or rubric_score <= 0:
        reward = 0.0
    else:
        a, b = scoring.code_weight, scoring.rubric_weight
        reward = math.exp((a * math.log(code_score) + b * math.log(rubric_score)) / (a + b))
    if gates_short:
        reward *= scoring.gate_scale
    if red_lines_failed:
        reward = min(reward, scoring.red_line_cap)
    return round(max(0.0, min(1.0, reward)), 6)

"""Model-conditioned trajectory selection: keep a fixed fraction of the trajectories inside
equal-frequency length bins, by NLL or RSR under the student (see ``score``).

- **Bins**: trajectories sorted by length (tokens of the rendered sequence, or tool steps)
  and cut into K bins of as equal a count as possible (bin i holds positions
  ``[i·n/K, (i+1)·n/K)`` of the sorted order; equal lengths may straddle a cut). Selecting
  inside each bin keeps the kept set's length distribution that of the input.
- **Budget**: each bin keeps ``round(keep · n_bin)`` (halves round up).
- **NLL** keeps the central fraction of each bin: it drops the most and the least
  surprising in equal numbers (one more from the high end when the count is odd) — too
  easy teaches nothing, too hard is likely off-distribution or noise.
- **RSR** keeps the lowest scores of each bin.

Ties are broken by trajectory id, so a selection is the same on every run.
A trajectory with no agent token to score is dropped as ``unscorable`` and not binned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Method = Literal["nll", "rsr"]
LengthBy = Literal["tokens", "steps"]


@dataclass(frozen=True)
class Candidate:
    id: str
    length: int
    nll: float
    rsr: float

    def score(self, method: Method) -> float:
        return self.nll if method == "nll" else self.rsr


@dataclass(frozen=True)
class Decision:
    candidate: Candidate
    bin: int
    kept: bool


def kept_count(size: int, keep: float) -> int:
    return min(size, math.floor(keep * size + 0.5))


def length_bins(candidates: Sequence[Candidate], bins: int) -> list[list[Candidate]]:
    """Equal-frequency bins by length (fewer when there are fewer candidates than bins)."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, not {bins}")
    ordered = sorted(candidates, key=lambda c: (c.length, c.id))
    n, count = len(ordered), min(bins, len(ordered))
    return [ordered[i * n // count : (i + 1) * n // count] for i in range(count)]


def retain(members: Sequence[Candidate], keep: float, method: Method) -> set[str]:
    """The ids one bin keeps."""
    ordered = sorted(members, key=lambda c: (c.score(method), c.id))
    kept = kept_count(len(ordered), keep)
    if method == "rsr":
        chosen = ordered[:kept]
    else:
        low = (len(ordered) - kept) // 2
        chosen = ordered[low : low + kept]
    return {c.id for c in chosen}


def select(
    candidates: Sequence[Candidate], *, method: Method, keep: float, bins: int
) -> list[Decision]:
    """A decision for each candidate, in the order given."""
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be a fraction in (0, 1], not {keep}")
    if len({c.id for c in candidates}) != len(candidates):
        raise ValueError("trajectory ids repeat: select each rollout once")
    placed: dict[str, tuple[int, bool]] = {}
    for index, members in enumerate(length_bins(candidates, bins)):
        kept = retain(members, keep, method)
        for c in members:
            placed[c.id] = (index, c.id in kept)
    return [Decision(c, *placed[c.id]) for c in candidates]


__all__ = [
    "Candidate",
    "Decision",
    "LengthBy",
    "Method",
    "kept_count",
    "length_bins",
    "retain",
    "select",
]

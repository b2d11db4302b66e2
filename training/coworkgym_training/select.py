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

**By group** (``by_group=True``, for GRPO data): GRPO learns from the reward spread inside
a group (one package under one harness and model, ``objectives.group_key``), so dropping
single trajectories leaves groups of one that it cannot use. Selection then works on
groups: a group's length is its members' mean length, its score their mean score; groups
are binned and kept or dropped whole by the same rules, and a group with one scorable
member is dropped before binning (``SINGLETON_GROUP``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Method = Literal["nll", "rsr"]
LengthBy = Literal["tokens", "steps"]
SINGLETON_GROUP = "singleton group: GRPO needs at least two rollouts of a group"


@dataclass(frozen=True)
class Candidate:
    id: str
    length: int
    nll: float
    rsr: float
    group: str | None = None  # the GRPO group (objectives.group_key), for by_group

    def score(self, method: Method) -> float:
        return self.nll if method == "nll" else self.rsr


@dataclass(frozen=True)
class Decision:
    candidate: Candidate
    bin: int | None  # None: not binned (a singleton group under by_group)
    kept: bool
    reason: str | None = None  # why it was not binned


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
    candidates: Sequence[Candidate],
    *,
    method: Method,
    keep: float,
    bins: int,
    by_group: bool = False,
) -> list[Decision]:
    """A decision for each candidate, in the order given; with `by_group`, whole groups
    (candidates without a group are groups of their own)."""
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be a fraction in (0, 1], not {keep}")
    if len({c.id for c in candidates}) != len(candidates):
        raise ValueError("trajectory ids repeat: select each rollout once")
    if by_group:
        return _select_groups(candidates, method=method, keep=keep, bins=bins)
    placed: dict[str, tuple[int, bool]] = {}
    for index, members in enumerate(length_bins(candidates, bins)):
        kept = retain(members, keep, method)
        for c in members:
            placed[c.id] = (index, c.id in kept)
    return [Decision(c, *placed[c.id]) for c in candidates]


def _select_groups(
    candidates: Sequence[Candidate], *, method: Method, keep: float, bins: int
) -> list[Decision]:
    groups: dict[str, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(c.group if c.group is not None else f"id:{c.id}", []).append(c)
    units = [_group_unit(key, members) for key, members in groups.items() if len(members) > 1]
    decided = {d.candidate.id: d for d in select(units, method=method, keep=keep, bins=bins)}
    out = []
    for c in candidates:
        unit = decided.get(c.group if c.group is not None else f"id:{c.id}")
        if unit is None:
            out.append(Decision(c, None, False, SINGLETON_GROUP))
        else:
            out.append(Decision(c, unit.bin, unit.kept))
    return out


def _group_unit(key: str, members: Sequence[Candidate]) -> Candidate:
    """A group as one candidate: its members' mean length, NLL and RSR (an infinite RSR
    makes the group's infinite)."""
    n = len(members)
    return Candidate(
        id=key,
        length=round(sum(c.length for c in members) / n),
        nll=sum(c.nll for c in members) / n,
        rsr=sum(c.rsr for c in members) / n,
    )


__all__ = [
    "SINGLETON_GROUP",
    "Candidate",
    "Decision",
    "LengthBy",
    "Method",
    "kept_count",
    "length_bins",
    "retain",
    "select",
]

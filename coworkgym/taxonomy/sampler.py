"""Taxonomy-guided task specs: a balanced grid of scenario domain × capability, and coverage.

A spec's *cell* is (top-level scenario domain, primary capability), the primary capability
being the first in ``labels.capabilities``. ``sample_specs`` visits the cells in an order
shuffled by the seed, one spec per cell per pass, so cell counts differ by at most one.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..spec import TaskLabels, TaskSpec
from .model import DIFFICULTIES, Taxonomy, load_taxonomy, validate_labels

if TYPE_CHECKING:
    from ..families import TaskFamily

Cell = tuple[str, str]  # (scenario domain, primary capability)
_ATTEMPTS = 64  # draws per spec; the second half ignores served leaves and extra labels


@dataclass(frozen=True)
class SampledSpec:
    labels: TaskLabels
    seed: int
    turns: int
    family: str | None  # a family serving the scenario leaf and the primary capability

    @property
    def cell(self) -> Cell:
        return cell_of(self.labels)

    def task_spec(self) -> TaskSpec:
        return TaskSpec(labels=self.labels, family=self.family, turns=self.turns, seed=self.seed)


def cell_of(labels: TaskLabels) -> Cell:
    return labels.scenario.split("/")[0], labels.capabilities[0]


def sample_specs(
    count: int,
    seed: int = 0,
    *,
    turns: int | Sequence[int] = (1, 2, 3),
    families: Mapping[str, TaskFamily] | None = None,
    prefer_served: bool = True,
    domains: Sequence[str] | None = None,
    capabilities: Sequence[str] | None = None,
    taxonomy: Taxonomy | None = None,
) -> list[SampledSpec]:
    """``count`` valid, balanced specs over the grid ``domains × capabilities`` (default: the
    whole taxonomy); deterministic for a seed.

    Within a cell the leaf is drawn from the domain, preferring (``prefer_served``) leaves a
    family in ``families`` (default ``coworkgym.families.FAMILIES``) serves, first those whose
    family lists the cell's capability. Difficulty, role, deliverables, modality and safety
    are drawn consistent with the capability, the domain and the serving family; a draw that
    breaks a rule is redrawn within the same cell.
    """
    if count < 0:
        raise ValueError(f"count: must be >= 0, got {count}")
    tax = taxonomy or load_taxonomy()
    if families is None:
        from ..families import FAMILIES

        families = FAMILIES
    turn_choices = [turns] if isinstance(turns, int) else list(turns)
    if not turn_choices or any(not 1 <= t <= 3 for t in turn_choices):
        raise ValueError(f"turns: must be 1, 2 or 3 (or a list of them), got {turns!r}")
    grid = _grid(tax, domains, capabilities)
    random.Random(f"grid:{seed}").shuffle(grid)
    served = _served(tax, families)
    specs = []
    for index in range(count):
        cell = grid[index % len(grid)]
        rng = random.Random(f"{seed}:{index}:{cell[0]}:{cell[1]}")
        specs.append(_draw(tax, cell, rng, served, prefer_served, turn_choices))
    return specs


def _grid(tax: Taxonomy, domains: Sequence[str] | None, caps: Sequence[str] | None) -> list[Cell]:
    domains = list(tax.scenarios) if domains is None else list(domains)
    caps = list(tax.capabilities) if caps is None else list(caps)
    unknown = [f"domains: {d!r}" for d in domains if d not in tax.scenarios]
    unknown += [f"capabilities: {c!r}" for c in caps if c not in tax.capabilities]
    if unknown or not domains or not caps:
        raise ValueError("sample grid: " + ("; ".join(unknown) or "empty") + " (not in taxonomy)")
    return [(d, c) for d in domains for c in caps]


def _served(tax: Taxonomy, families: Mapping[str, TaskFamily]) -> dict[str, list[TaskFamily]]:
    ordered = sorted(families.values(), key=lambda f: f.name)
    return {leaf: [f for f in ordered if leaf in f.scenarios] for leaf in tax.leaves}


def _draw(
    tax: Taxonomy,
    cell: Cell,
    rng: random.Random,
    served: dict[str, list[TaskFamily]],
    prefer_served: bool,
    turn_choices: list[int],
) -> SampledSpec:
    domain, cap = cell
    leaves = tax.leaves_of(domain)
    preferred = leaves
    if prefer_served:
        fitting = [x for x in leaves if any(cap in f.capabilities for f in served[x])]
        preferred = fitting or [x for x in leaves if served[x]] or leaves
    last: list[str] = []
    for attempt in range(_ATTEMPTS):
        plain = attempt >= _ATTEMPTS // 2  # fall back to any leaf and minimal labels
        leaf = rng.choice(leaves if plain else preferred)
        fams = served[leaf]
        covering = [f for f in fams if cap in f.capabilities]
        family = rng.choice(covering) if covering else None
        labels = _labels(tax, cap, leaf, family, rng, plain)
        last = validate_labels(labels, taxonomy=tax)
        if not last:
            turns = rng.choice(turn_choices)
            if family is not None:
                turns = min(turns, family.max_turns)
            return SampledSpec(
                labels=labels,
                seed=rng.randrange(2**31),
                turns=turns,
                family=family.name if family else None,
            )
    raise ValueError(f"cell {domain} × {cap}: no valid labels in {_ATTEMPTS} draws: {last}")


def _labels(
    tax: Taxonomy,
    cap: str,
    leaf: str,
    family: TaskFamily | None,
    rng: random.Random,
    plain: bool,
) -> TaskLabels:
    hint, dom = tax.capabilities[cap], tax.scenarios[leaf.split("/")[0]]
    fam_caps = [c for c in family.capabilities if c != cap] if family else []
    extra = [] if plain else rng.sample(fam_caps, min(rng.randint(0, 2), len(fam_caps)))
    fam_out = list(family.deliverables) if family else []
    fam_mod = list(family.modalities) if family else []
    outs = [d for d in hint.deliverables if d in fam_out] or fam_out or hint.deliverables
    deliverables = [rng.choice(outs)]
    more = [d for d in (fam_out or hint.deliverables) if d not in deliverables]
    if more and not plain and rng.random() < 0.3:
        deliverables.append(rng.choice(more))
    modality = [
        rng.choice([m for m in hint.modalities if m in fam_mod] or fam_mod or hint.modalities)
    ]
    concerns = list(dict.fromkeys([*dom.safety, *hint.safety]))
    safety = [rng.choice(concerns)] if concerns and rng.random() < 0.6 else ["none"]
    return TaskLabels(
        capabilities=[cap, *extra],
        scenario=leaf,
        difficulty=rng.choice(DIFFICULTIES),
        user_role=rng.choice(dom.roles),
        deliverables=deliverables,
        modality=modality,
        safety=safety,
    )


@dataclass(frozen=True)
class Coverage:
    """Spec counts per (scenario domain, capability) cell, and how balanced they are."""

    counts: dict[Cell, int]
    grid: int  # cells in the whole taxonomy grid
    specs: int  # labels counted (with ``all_capabilities`` a spec may hit several cells)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def filled(self) -> int:
        return sum(1 for n in self.counts.values() if n)

    @property
    def max_min_ratio(self) -> float:
        """Largest over smallest non-empty cell (1.0 is perfectly balanced)."""
        values = [n for n in self.counts.values() if n]
        return max(values) / min(values) if values else 1.0

    @property
    def cv(self) -> float:
        """Coefficient of variation over non-empty cells (0.0 is perfectly balanced)."""
        values = [n for n in self.counts.values() if n]
        return statistics.pstdev(values) / statistics.fmean(values) if values else 0.0

    @property
    def gini(self) -> float:
        """Gini coefficient over non-empty cells (0.0 is perfectly balanced)."""
        values = sorted(n for n in self.counts.values() if n)
        if not values:
            return 0.0
        n = len(values)
        weighted = sum(rank * v for rank, v in enumerate(values, start=1))
        return 2 * weighted / (n * sum(values)) - (n + 1) / n

    def by_domain(self) -> Counter[str]:
        totals: Counter[str] = Counter()
        for (domain, _), n in self.counts.items():
            totals[domain] += n
        return totals

    def by_capability(self) -> Counter[str]:
        totals: Counter[str] = Counter()
        for (_, capability), n in self.counts.items():
            totals[capability] += n
        return totals

    def summary(self) -> str:
        values = [n for n in self.counts.values() if n] or [0]
        return (
            f"{self.specs} specs in {self.filled}/{self.grid} cells (domain × capability); "
            f"per cell {min(values)}–{max(values)}, max/min {self.max_min_ratio:.2f}, "
            f"CV {self.cv:.3f}, Gini {self.gini:.3f}"
        )


def coverage(
    items: Iterable[TaskLabels | SampledSpec],
    *,
    all_capabilities: bool = False,
    taxonomy: Taxonomy | None = None,
) -> Coverage:
    """Counts per (scenario domain, primary capability) — or every listed capability with
    ``all_capabilities`` — and the balance figures over the non-empty cells."""
    tax = taxonomy or load_taxonomy()
    counts: Counter[Cell] = Counter()
    specs = 0
    for item in items:
        specs += 1
        labels = item.labels if isinstance(item, SampledSpec) else item
        domain = labels.scenario.split("/")[0]
        caps = labels.capabilities if all_capabilities else labels.capabilities[:1]
        counts.update((domain, c) for c in dict.fromkeys(caps))
    grid = len(tax.scenarios) * len(tax.capabilities)
    return Coverage(counts=dict(counts), grid=grid, specs=specs)

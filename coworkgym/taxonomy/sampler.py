"""Taxonomy-guided task specs: a balanced grid of scenario domain × capability, and coverage.

A spec's *cell* is (top-level scenario domain, primary capability), the primary capability
being the first in ``labels.capabilities``. ``sample_specs`` visits the cells in an order
shuffled by the seed, one spec per cell per pass, so cell counts differ by at most one.

By default only *served* cells are drawn: those where a procedural family serves a leaf of
the domain with the capability (``TaskFamily.serves``), and every label then states a fact
about the family's task — its capabilities at that number of turns, its deliverables,
modalities and safety concerns. ``served_only=False`` draws the whole grid, for the LLM
Builder; a cell no family serves then gets labels drawn from the taxonomy's hints and no
family.
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
_ATTEMPTS = 64  # label draws per spec before the cell is declared unsatisfiable
Option = tuple[str, "TaskFamily", int]  # (scenario leaf, family, user turns)


@dataclass(frozen=True)
class SampledSpec:
    labels: TaskLabels
    seed: int
    turns: int
    family: str | None  # the family serving the scenario leaf and every capability

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
    served_only: bool = True,
    domains: Sequence[str] | None = None,
    capabilities: Sequence[str] | None = None,
    taxonomy: Taxonomy | None = None,
) -> list[SampledSpec]:
    """``count`` valid, balanced specs over the cells of ``domains × capabilities`` (default:
    the whole taxonomy) that a family in ``families`` (default
    ``coworkgym.families.FAMILIES``) serves with one of the allowed ``turns`` — or over every
    cell with ``served_only=False``; deterministic for a seed.

    Within a cell the leaf is drawn among the served leaves, then a family serving it and
    the number of turns; the labels are the family's (see the module docstring), with the
    difficulty and the user role drawn, redrawn while a taxonomy rule refuses them.
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
    options = _options(tax, families, turn_choices)
    grid = _grid(tax, domains, capabilities)
    if served_only:
        grid = [cell for cell in grid if options.get(cell)]
        if not grid:
            raise ValueError(
                "sample grid: no family serves any of these cells with turns "
                f"{turn_choices}; pass served_only=False to sample the whole grid for the LLM "
                "Builder, or allow more turns"
            )
    random.Random(f"grid:{seed}").shuffle(grid)
    specs = []
    for index in range(count):
        cell = grid[index % len(grid)]
        rng = random.Random(f"{seed}:{index}:{cell[0]}:{cell[1]}")
        specs.append(_draw(tax, cell, rng, options.get(cell, []), turn_choices))
    return specs


def served_grid(
    families: Mapping[str, TaskFamily] | None = None,
    turns: Sequence[int] = (1, 2, 3),
    taxonomy: Taxonomy | None = None,
) -> dict[Cell, list[str]]:
    """The (scenario domain, capability) cells some family serves, with those families."""
    tax = taxonomy or load_taxonomy()
    if families is None:
        from ..families import FAMILIES

        families = FAMILIES
    return {
        cell: sorted({family.name for _leaf, family, _t in found})
        for cell, found in _options(tax, families, list(turns)).items()
    }


def _grid(tax: Taxonomy, domains: Sequence[str] | None, caps: Sequence[str] | None) -> list[Cell]:
    domains = list(tax.scenarios) if domains is None else list(domains)
    caps = list(tax.capabilities) if caps is None else list(caps)
    unknown = [f"domains: {d!r}" for d in domains if d not in tax.scenarios]
    unknown += [f"capabilities: {c!r}" for c in caps if c not in tax.capabilities]
    if unknown or not domains or not caps:
        raise ValueError("sample grid: " + ("; ".join(unknown) or "empty") + " (not in taxonomy)")
    return [(d, c) for d in domains for c in caps]


def _options(
    tax: Taxonomy, families: Mapping[str, TaskFamily], turn_choices: list[int]
) -> dict[Cell, list[Option]]:
    """Per served cell, every (leaf, family, turns) that serves it, in a stable order."""
    options: dict[Cell, list[Option]] = {}
    leaves = set(tax.leaves)
    for family in sorted(families.values(), key=lambda f: f.name):
        for t in sorted(set(turn_choices)):
            for leaf, capability in family.cells(t):
                if leaf in leaves and capability in tax.capabilities and family.serves(
                    leaf, capability, t
                ):
                    options.setdefault((leaf.split("/")[0], capability), []).append(
                        (leaf, family, t)
                    )
    return options


def _draw(
    tax: Taxonomy,
    cell: Cell,
    rng: random.Random,
    options: list[Option],
    turn_choices: list[int],
) -> SampledSpec:
    domain, cap = cell
    last: list[str] = []
    for _attempt in range(_ATTEMPTS):
        if options:
            leaf = rng.choice(sorted({o[0] for o in options}))
            family = rng.choice(sorted({o[1].name for o in options if o[0] == leaf}))
            turns = rng.choice(
                [t for lf, f, t in options if lf == leaf and f.name == family]
            )
            chosen = next(f for lf, f, _t in options if f.name == family)
            labels = _family_labels(tax, cap, leaf, chosen, turns, rng)
        else:
            leaf, family, turns = rng.choice(tax.leaves_of(domain)), None, rng.choice(turn_choices)
            labels = _hinted_labels(tax, cap, leaf, rng)
        last = validate_labels(labels, taxonomy=tax)
        if not last:
            return SampledSpec(labels=labels, seed=rng.randrange(2**31), turns=turns, family=family)
    raise ValueError(f"cell {domain} × {cap}: no valid labels in {_ATTEMPTS} draws: {last}")


def _family_labels(
    tax: Taxonomy, cap: str, leaf: str, family: TaskFamily, turns: int, rng: random.Random
) -> TaskLabels:
    """What the family's task is, with ``cap`` first; difficulty and role are drawn."""
    others = [c for c in family.capabilities_at(turns) if c != cap]
    return TaskLabels(
        capabilities=[cap, *others],
        scenario=leaf,
        difficulty=rng.choice(DIFFICULTIES),
        user_role=rng.choice(tax.scenarios[leaf.split("/")[0]].roles),
        deliverables=list(family.deliverables),
        modality=list(family.modalities),
        safety=list(family.safety),
    )


def _hinted_labels(tax: Taxonomy, cap: str, leaf: str, rng: random.Random) -> TaskLabels:
    """Labels for a task no family builds, drawn from the taxonomy's hints (LLM Builder)."""
    hint, dom = tax.capabilities[cap], tax.scenarios[leaf.split("/")[0]]
    deliverables = [rng.choice(hint.deliverables)]
    more = [d for d in hint.deliverables if d not in deliverables]
    if more and rng.random() < 0.3:
        deliverables.append(rng.choice(more))
    concerns = list(dict.fromkeys([*dom.safety, *hint.safety]))
    safety = [rng.choice(concerns)] if concerns and rng.random() < 0.6 else ["none"]
    return TaskLabels(
        capabilities=[cap],
        scenario=leaf,
        difficulty=rng.choice(DIFFICULTIES),
        user_role=rng.choice(dom.roles),
        deliverables=deliverables,
        modality=[rng.choice(hint.modalities)],
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

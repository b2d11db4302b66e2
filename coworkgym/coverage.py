"""A picture of the mix: which taxonomy cells the procedural families serve, which a campaign
produced (or, before running one, would produce), and what each family's tasks are made of.

A cell is (scenario domain, primary capability), as in ``coworkgym.taxonomy.coverage``.
*Served* counts the families that serve a leaf of the domain with the capability;
*produced* counts environments — released ones from a ``manifest.jsonl``, or the specs the
taxonomy sampler draws for a campaign. Per family and difficulty, the shape of the tasks:
user turns, inputs, deliverables, verifier components and the reference solution's size
(non-blank lines of ``solve.sh``).
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .families import FAMILIES, FamilyParams, TaskFamily
from .package.errors import PackageError
from .package.package import EnvironmentPackage
from .spec import Difficulty
from .taxonomy import Taxonomy, load_taxonomy, served_grid
from .taxonomy.model import DIFFICULTIES
from .taxonomy.sampler import Cell

SHAPE_SEEDS = range(3)  # drafts per family, difficulty and turn count for --families


@dataclass
class Shape:
    """One task's size; ``Shapes`` keeps the range over many."""

    turns: int
    inputs: int
    deliverables: int
    components: int
    solution_lines: int


@dataclass
class Shapes:
    tasks: int = 0
    values: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))

    def add(self, shape: Shape) -> None:
        self.tasks += 1
        for name, value in vars(shape).items():
            self.values[name].append(value)

    def span(self, name: str) -> str:
        values = self.values.get(name) or [0]
        low, high = min(values), max(values)
        return str(low) if low == high else f"{low}–{high}"


@dataclass
class Report:
    """Served and produced counts per cell, and task shapes per (family, difficulty)."""

    source: str
    served: dict[Cell, list[str]]
    produced: Counter[Cell]
    shapes: dict[tuple[str, str], Shapes]
    unread: list[str] = field(default_factory=list)  # packages that could not be loaded

    @property
    def outside_served(self) -> int:
        return sum(n for cell, n in self.produced.items() if cell not in self.served)

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "cells": [
                {
                    "domain": domain,
                    "capability": capability,
                    "served_by": self.served.get((domain, capability), []),
                    "produced": self.produced.get((domain, capability), 0),
                }
                for domain, capability in sorted(set(self.served) | set(self.produced))
            ],
            "shapes": [
                {"family": family, "difficulty": difficulty, "tasks": s.tasks}
                | {name: s.span(name) for name in vars(Shape(0, 0, 0, 0, 0))}
                for (family, difficulty), s in sorted(self.shapes.items())
            ],
            "unread": self.unread,
        }


def family_report(count: int = 60, seed: int = 0, max_turns: int = 3) -> Report:
    """What the families serve, what ``count`` sampled specs would produce, and the shape of
    each family's drafts (built here, not executed)."""
    from .synth import sampled_specs

    turns = tuple(range(1, max_turns + 1))
    produced: Counter[Cell] = Counter()
    for named in sampled_specs(count, seed=seed, max_turns=max_turns) if count else []:
        labels = named.spec.task.labels
        produced[(labels.scenario.split("/")[0], labels.capabilities[0])] += 1
    return Report(
        source=f"procedural families; produced: {count} specs sampled with seed {seed}",
        served=served_grid(turns=turns),
        produced=produced,
        shapes=dict(_family_shapes(turns)),
    )


@functools.cache
def _family_shapes(turns: tuple[int, ...]) -> dict[tuple[str, str], Shapes]:
    """Every family's draft shapes per difficulty: the same for every report (the drafts
    are seeded), and the costly part of one, so a process builds them once."""
    shapes: dict[tuple[str, str], Shapes] = {}
    for family in sorted(FAMILIES.values(), key=lambda f: f.name):
        for difficulty in DIFFICULTIES:
            if not _allowed(family, difficulty):
                continue
            bucket = shapes.setdefault((family.name, difficulty), Shapes())
            for n in turns:
                for s in SHAPE_SEEDS:
                    bucket.add(_draft_shape(family, FamilyParams(s, difficulty, n)))
    return shapes


def manifest_report(manifest: Path, max_turns: int = 3) -> Report:
    """Cells and shapes of the environments a ``manifest.jsonl`` lists (each package is read
    from its record's local ``location``, else from ``<manifest folder>/<name>``)."""
    produced: Counter[Cell] = Counter()
    shapes: dict[tuple[str, str], Shapes] = {}
    unread: list[str] = []
    for record in _records(manifest):
        pkg = _load(record, manifest.parent)
        cowork = pkg.config.cowork if pkg else None
        if cowork is not None:
            scenario, capabilities = cowork.taxonomy.scenario, cowork.taxonomy.capabilities
        else:  # the record's own labels
            scenario = str(record.get("scenario") or "")
            listed = record.get("capabilities")
            capabilities = [str(c) for c in listed] if isinstance(listed, list) else []
        if scenario and capabilities:
            produced[(scenario.split("/")[0], capabilities[0])] += 1
        if pkg is None or cowork is None:
            unread.append(str(record.get("name", "?")))
            continue
        family = cowork.family or "llm"
        shapes.setdefault((family, cowork.taxonomy.difficulty), Shapes()).add(_package_shape(pkg))
    return Report(
        source=str(manifest),
        served=served_grid(turns=tuple(range(1, max_turns + 1))),
        produced=produced,
        shapes=shapes,
        unread=unread,
    )


def _allowed(family: TaskFamily, difficulty: Difficulty) -> bool:
    """Whether the taxonomy's rules let the family's tasks carry this difficulty (a family
    that deletes files is never 'easy')."""
    from .spec import TaskLabels
    from .taxonomy import validate_labels

    labels = TaskLabels(
        capabilities=[family.capabilities[0]],
        scenario=family.scenarios[0],
        difficulty=difficulty,
        deliverables=list(family.deliverables),
        modality=list(family.modalities),
        safety=list(family.safety),
    )
    return not validate_labels(labels)


def _draft_shape(family: TaskFamily, params: FamilyParams) -> Shape:
    from .package.assemble import BuilderOutput
    from .package.config import CoworkMetadata, TaxonomyLabels
    from .package.cowork import ArtifactGraph

    draft = family.draft(params)
    built = BuilderOutput(
        name=f"coworkgym/{draft.slug}",
        description=draft.title,
        instruction=draft.instruction,
        workspace=draft.workspace,
        solve_sh=draft.solve_sh,
        user=draft.user,
        interfaces=draft.interfaces,
        artifacts=ArtifactGraph(artifacts=[*draft.inputs, *draft.outputs]),
        cowork=CoworkMetadata(
            taxonomy=TaxonomyLabels(
                capabilities=list(family.capabilities_at(params.turns)),
                scenario=family.scenarios[0],
                difficulty=params.difficulty,
                user_role="analyst",
                deliverables=list(family.deliverables),
                modality=list(family.modalities),
            ),
            family=family.name,
            seed=params.seed,
        ),
        turns=draft.turns,
    )
    verifier = family.verifier(built, params)
    return Shape(
        turns=params.turns,
        inputs=len(draft.inputs),
        deliverables=len(draft.outputs),
        components=len(verifier.spec.components),
        solution_lines=_lines(draft.solve_sh),
    )


def _package_shape(pkg: EnvironmentPackage) -> Shape:
    cowork = pkg.config.cowork
    artifacts = pkg.artifacts
    return Shape(
        turns=cowork.turns if cowork else 1,
        inputs=len(artifacts.inputs) if artifacts else 0,
        deliverables=len(artifacts.outputs) if artifacts else 0,
        components=len(pkg.verifier.components) if pkg.verifier else 0,
        solution_lines=_lines(pkg.text("solution/solve.sh")),
    )


def _lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _records(manifest: Path) -> Iterable[dict[str, object]]:
    for number, line in enumerate(manifest.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{manifest}:{number}: not a JSON record ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{manifest}:{number}: a record must be a JSON object")
        yield record


def _load(record: dict[str, object], root: Path) -> EnvironmentPackage | None:
    candidates = [Path(str(record["location"]))] if record.get("location") else []
    candidates.append(root / str(record.get("name", "")))
    for path in candidates:
        if path.is_dir():
            try:
                return EnvironmentPackage.load(path)
            except PackageError:
                return None
    return None


# ---- the heatmap ----------------------------------------------------------------------------


def heatmap(report: Report, path: Path, taxonomy: Taxonomy | None = None) -> Path:
    """A PNG of produced counts per (scenario domain × capability), served cells outlined."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    tax = taxonomy or load_taxonomy()
    domains, capabilities = list(tax.scenarios), list(tax.capabilities)
    grid = [[report.produced.get((d, c), 0) for c in capabilities] for d in domains]
    figure, axes = plt.subplots(figsize=(13, 7.5))
    image = axes.imshow(grid, cmap="Blues", aspect="auto", vmin=0)
    top = max((n for row in grid for n in row), default=0)
    for y, domain in enumerate(domains):
        for x, capability in enumerate(capabilities):
            if (domain, capability) in report.served:
                axes.add_patch(
                    Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="#d95f02", lw=1.6)
                )
            if grid[y][x]:
                shade = "white" if grid[y][x] > top * 0.6 else "black"
                axes.text(x, y, str(grid[y][x]), ha="center", va="center", fontsize=8, color=shade)
    axes.set_xticks(range(len(capabilities)), [c.replace("_", " ") for c in capabilities])
    axes.set_yticks(range(len(domains)), [d.replace("_", " ") for d in domains])
    plt.setp(axes.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    axes.set_xlabel("primary capability")
    axes.set_ylabel("scenario domain")
    total = sum(report.produced.values())
    axes.set_title(
        f"{total} environments by scenario domain × primary capability "
        f"(outlined: served by a procedural family)",
        fontsize=11,
    )
    figure.colorbar(image, ax=axes, fraction=0.025, pad=0.02, label="environments")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def shape_columns() -> Sequence[tuple[str, str]]:
    """(Shape field, column title) in report order."""
    return (
        ("turns", "turns"),
        ("inputs", "inputs"),
        ("deliverables", "deliverables"),
        ("components", "verifier components"),
        ("solution_lines", "solve.sh lines"),
    )


__all__ = ["Report", "Shape", "Shapes", "family_report", "heatmap", "manifest_report"]

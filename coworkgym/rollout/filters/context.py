"""What the filter may look up beyond the record itself: the packages the trajectories were
rolled out in (found by digest) and where their final workspaces are stored.

Packages are found the way ``cowork-gym rollout`` finds them (package folders, folders of
packages, manifest.jsonl files, s3:// prefixes) and reduced to ``PackageFacts``: the few
plain values the rules read, so worker processes get them by pickling instead of loading
every package again. Final workspaces are stored only where a rollout keeps them: the
cluster's rollouts volume (``rollouts/<rollout>/episode/workspace``, which the collect pod
maps by trajectory id) or a folder of ``<trajectory id>/`` copies given to
``cowork-gym filter --workspaces``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...package.package import EnvironmentPackage
from ...verifier.engine.scoring import Scoring
from ..trajectory import Trajectory

_WORD = re.compile(r"[a-z0-9]+")
# A private item is quoted when this many of its words appear in a row in a user message
# (the whole item when it is shorter, from PRIVATE_MIN_WORDS words up: shorter items, like
# "precipitation in mm", are too common to tell a quote from a coincidence).
PRIVATE_SPAN_WORDS = 6
PRIVATE_MIN_WORDS = 4

Span = tuple[str, ...]


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def spans(text: str, width: int = PRIVATE_SPAN_WORDS) -> set[Span]:
    """Every run of ``width`` words in the text (the whole text when shorter)."""
    found = words(text)
    if len(found) <= width:
        return {tuple(found)} if found else set()
    return {tuple(found[i : i + width]) for i in range(len(found) - width + 1)}


@dataclass(frozen=True)
class PrivateItem:
    """One thing from ``.user/`` the user must not say: what it is, and its runs of
    ``width`` words that the package's public text (instruction, turn messages) does not
    also contain: saying what the task itself says is no leak."""

    kind: str  # latent goal, knowledge boundary, signal
    text: str
    width: int
    spans: frozenset[Span]


def _item(kind: str, text: str, public: Sequence[str]) -> PrivateItem | None:
    count = len(words(text))
    if count < PRIVATE_MIN_WORDS:
        return None
    width = min(PRIVATE_SPAN_WORDS, count)
    said = set().union(*(spans(p, width) for p in public))
    own = frozenset(spans(text, width) - said)
    return PrivateItem(kind, text, width, own) if own else None


@dataclass(frozen=True)
class PackageFacts:
    """The values the rules read from one package, by its digest."""

    digest: str
    name: str
    turns: int  # the first request plus one per .patch/ turn, as the engine counts them
    cowork_verifier: bool  # tests/verifier.json: every valid verdict has component scores
    weights: Mapping[str, float]  # component id -> weight
    gates: frozenset[str]  # components whose shortfall scales the reward down (gate: true)
    scoring: Scoring
    private: tuple[PrivateItem, ...]  # latent goals and knowledge boundary
    signals: tuple[PrivateItem, ...]  # what the user may reveal when asked (then said)

    @classmethod
    def of(cls, pkg: EnvironmentPackage) -> PackageFacts:
        spec = pkg.verifier
        state = pkg.user
        public = (pkg.instruction, *(p.message for p in pkg.patches))
        private: list[PrivateItem | None] = []
        signals: list[PrivateItem | None] = []
        if state is not None:
            private += [_item("latent goal", g, public) for g in state.latent_goals]
            private += [_item("knowledge boundary", k, public) for k in state.knowledge_boundary]
            signals += [_item("signal", s.reveals, public) for s in state.signal_plan]
        return cls(
            digest=pkg.digest(),
            name=pkg.name,
            turns=1 + len(pkg.patches),
            cowork_verifier=spec is not None,
            weights={c.id: c.weight for c in spec.components} if spec else {},
            gates=frozenset(c.id for c in spec.components if getattr(c, "gate", False))
            if spec
            else frozenset(),
            # the engine's own reading of the spec's scoring block
            scoring=Scoring.from_spec(spec.engine_dict().get("scoring")) if spec else Scoring(),
            private=tuple(i for i in private if i is not None),
            signals=tuple(i for i in signals if i is not None),
        )


def load_package_facts(sources: Sequence[str]) -> dict[str, PackageFacts]:
    """Facts of every package the sources name, by digest. Raises ValueError (with the
    source named) for one that is not a package, a folder of them or a manifest."""
    from ..batch import find_packages  # the rollout machinery: only when packages are given

    found = find_packages(sources, rollable_only=False)
    return {s.package.digest(): PackageFacts.of(s.package) for s in found}


@dataclass(frozen=True)
class FilterContext:
    """What the rules may consult: package facts by digest; stored final workspaces, either
    under ``workspaces`` roots as ``<root>/<trajectory id>/`` or named one by one in
    ``workspace_of`` (trajectory id -> folder)."""

    packages: Mapping[str, PackageFacts] = field(default_factory=dict)
    workspaces: tuple[Path, ...] = ()
    workspace_of: Mapping[str, Path] = field(default_factory=dict)

    @classmethod
    def load(cls, packages: Sequence[str] = (), workspaces: Sequence[Path] = ()) -> FilterContext:
        facts = load_package_facts(packages) if packages else {}
        return cls(packages=facts, workspaces=tuple(workspaces))

    def package(self, trajectory: Trajectory) -> PackageFacts | None:
        return self.packages.get(trajectory.environment.digest)

    def stored_workspace(self, trajectory_id: str) -> Path | None:
        named = self.workspace_of.get(trajectory_id)
        if named is not None:
            return named if named.is_dir() else None
        for root in self.workspaces:
            folder = root / trajectory_id
            if folder.is_dir():
                return folder
        return None


__all__ = [
    "PRIVATE_MIN_WORDS",
    "PRIVATE_SPAN_WORDS",
    "FilterContext",
    "PackageFacts",
    "PrivateItem",
    "load_package_facts",
    "spans",
    "words",
]

"""The filter pipeline and its funnel: raw → after each rule, with counts and reasons.

Each trajectory meets the rules in order and is charged to the first one that drops it,
so the stages add up: ``entered - dropped = kept`` and one stage's ``kept`` is the next
one's ``entered``. The funnel is a pydantic model because it is also what a RolloutBatch
reports in its status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from rich.table import Table

from ..reading import Record, TrajectoryReadError, iter_records
from ..trajectory import Trajectory
from .rules import Drop, Rule, build_rules
from .settings import CamelModel, FilterSettings

FUNNEL_SCHEMA = "cowork-gym.funnel/v1"
EXAMPLES_PER_REASON = 3
READABLE_STAGE = "readable"


class FunnelStage(CamelModel):
    rule: str = Field(description="the rule's name (or 'readable' for parsing)")
    concern: str = Field("", description="what the rule checks")
    entered: int = Field(0, ge=0)
    dropped: int = Field(0, ge=0)
    kept: int = Field(0, ge=0)
    reasons: dict[str, int] = Field(default_factory=dict, description="drop reason → count")
    examples: dict[str, list[str]] = Field(
        default_factory=dict,
        description=f"drop reason → up to {EXAMPLES_PER_REASON} 'trajectory id: detail' lines",
    )


class FunnelReport(CamelModel):
    schema_: str = Field(FUNNEL_SCHEMA, alias="schema")
    raw: int = Field(0, ge=0, description="records read (unreadable lines included)")
    kept: int = Field(0, ge=0)
    stages: list[FunnelStage] = Field(default_factory=list)
    settings: FilterSettings = Field(default_factory=FilterSettings)
    inputs: list[str] = Field(default_factory=list)
    elapsed_s: float = Field(0.0, ge=0)

    def reason_counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for stage in self.stages:
            total.update(stage.reasons)
        return dict(total)


@dataclass(frozen=True)
class Verdict:
    """Why one trajectory was dropped: the rule and its reason."""

    rule: str
    drop: Drop


@dataclass
class _Tally:
    concern: str
    entered: int = 0
    dropped: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def drop(self, reason: str, example: str) -> None:
        self.dropped += 1
        self.reasons[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < EXAMPLES_PER_REASON:
            shown.append(example)


class FilterPipeline:
    """Applies the rules one trajectory at a time and keeps the funnel's counts."""

    def __init__(self, settings: FilterSettings | None = None) -> None:
        self.settings = settings or FilterSettings()
        self.rules: list[Rule] = build_rules(self.settings)
        self._readable = _Tally("parse and validate against the trajectory schema")
        self._tallies = {rule.name: _Tally(rule.concern) for rule in self.rules}
        self._kept = 0

    def judge(self, trajectory: Trajectory) -> Verdict | None:
        """The first rule that drops the trajectory, or None to keep it. Counts nothing."""
        for rule in self.rules:
            drop = rule.check(trajectory)
            if drop is not None:
                return Verdict(rule.name, drop)
        return None

    def admit(self, trajectory: Trajectory) -> Verdict | None:
        """Judge the trajectory and count the verdict in the funnel."""
        self._readable.entered += 1
        verdict = None
        for rule in self.rules:
            tally = self._tallies[rule.name]
            tally.entered += 1
            drop = rule.check(trajectory)
            if drop is not None:
                tally.drop(drop.reason, f"{trajectory.id}: {drop.detail}")
                verdict = Verdict(rule.name, drop)
                break
        else:
            self._kept += 1
        return verdict

    def unreadable(self, error: TrajectoryReadError) -> None:
        self._readable.entered += 1
        self._readable.drop(error.kind, str(error))

    def run(
        self,
        records: Iterable[Record],
        on_drop: Callable[[Record, Verdict], None] | None = None,
    ) -> Iterator[Record]:
        """The kept records, in order; ``on_drop`` hears about each dropped one."""
        for record in records:
            verdict = self.admit(record.trajectory)
            if verdict is None:
                yield record
            elif on_drop is not None:
                on_drop(record, verdict)

    def report(self, inputs: Iterable[str] = (), elapsed_s: float = 0.0) -> FunnelReport:
        stages = []
        if self._readable.dropped:
            stages.append(_stage(READABLE_STAGE, self._readable))
        stages.extend(_stage(name, tally) for name, tally in self._tallies.items())
        return FunnelReport(
            raw=self._readable.entered,
            kept=self._kept,
            stages=stages,
            settings=self.settings,
            inputs=list(inputs),
            elapsed_s=round(elapsed_s, 3),
        )


def _stage(name: str, tally: _Tally) -> FunnelStage:
    return FunnelStage(
        rule=name,
        concern=tally.concern,
        entered=tally.entered,
        dropped=tally.dropped,
        kept=tally.entered - tally.dropped,
        reasons=dict(tally.reasons.most_common()),
        examples=tally.examples,
    )


def filter_trajectories(
    trajectories: Iterable[Trajectory], settings: FilterSettings | None = None
) -> tuple[list[Trajectory], FunnelReport]:
    """In memory: the kept trajectories and the funnel."""
    pipeline = FilterPipeline(settings)
    kept = [t for t in trajectories if pipeline.admit(t) is None]
    return kept, pipeline.report()


def filter_files(
    inputs: list[Path],
    out: Path,
    settings: FilterSettings | None = None,
    skip_unreadable: bool = False,
    on_drop: Callable[[Record, Verdict], None] | None = None,
) -> FunnelReport:
    """Stream the inputs' trajectories through the pipeline, writing kept lines unchanged
    to ``out``. Unreadable lines raise (naming file and line) unless ``skip_unreadable``,
    which counts them in a ``readable`` stage instead."""
    started = time.perf_counter()
    pipeline = FilterPipeline(settings)
    records = iter_records(inputs, pipeline.unreadable if skip_unreadable else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for record in pipeline.run(records, on_drop):
            handle.write(record.line)
    return pipeline.report([str(p) for p in inputs], time.perf_counter() - started)


def funnel_table(report: FunnelReport) -> Table:
    table = Table(title=f"trajectory funnel: {report.raw:,} raw → {report.kept:,} kept")
    for column, justify in (
        ("stage", "left"),
        ("checks", "left"),
        ("dropped", "right"),
        ("left", "right"),
        ("drop reasons", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_row("raw", "records read", "", f"{report.raw:,}", "")
    for stage in report.stages:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in stage.reasons.items())
        table.add_row(stage.rule, stage.concern, f"{stage.dropped:,}", f"{stage.kept:,}", reasons)
    return table

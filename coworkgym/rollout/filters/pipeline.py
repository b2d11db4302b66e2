"""The filter pipeline and its funnel: raw → after each rule, with counts and reasons.

Each trajectory meets the rules in order and is charged to the first one that drops it,
so the stages add up: ``entered - dropped = kept`` and one stage's ``kept`` is the next
one's ``entered``. A rule that kept a trajectory without checking all it could (no package,
no stored workspace) leaves a note, counted per stage. Lines that do not parse are counted
in a ``readable`` stage and logged; ``strict`` makes the first one fatal instead. The
funnel is a pydantic model because it is also what a RolloutBatch reports in its status.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import Field
from rich.table import Table

from ..reading import (
    Record,
    TrajectoryReadError,
    UnreadableKind,
    input_files,
    iter_lines,
    parse_record,
)
from ..trajectory import Trajectory
from .base import Drop, Note, Rule
from .consistency import UniqueRecords, content_digest
from .context import FilterContext
from .rules import build_rules
from .settings import CamelModel, FilterSettings

log = structlog.get_logger(__name__)

FUNNEL_SCHEMA = "cowork-gym.funnel/v1"
EXAMPLES_PER_REASON = 3
READABLE_STAGE = "readable"
CHUNK_LINES = 500  # lines per task sent to a worker process
IN_FLIGHT_CHUNKS = 8  # tasks queued ahead of the writer


class FunnelStage(CamelModel):
    rule: str = Field(description="the rule's name (or 'readable' for parsing)")
    concern: str = Field("", description="what the rule checks")
    entered: int = Field(0, ge=0, description="trajectories the rule saw")
    dropped: int = Field(0, ge=0, description="trajectories the rule dropped")
    kept: int = Field(0, ge=0, description="trajectories passed on to the next rule")
    reasons: dict[str, int] = Field(default_factory=dict, description="drop reason → count")
    examples: dict[str, list[str]] = Field(
        default_factory=dict,
        description=f"drop reason → up to {EXAMPLES_PER_REASON} 'trajectory id: detail' lines",
    )
    notes: dict[str, int] = Field(
        default_factory=dict,
        description="checks the rule could not make (no_package, no_stored_workspace) → "
        "trajectories it kept without them",
    )


class FunnelReport(CamelModel):
    schema_: str = Field(FUNNEL_SCHEMA, alias="schema", description="this report's layout")
    raw: int = Field(0, ge=0, description="records read (unreadable lines included)")
    kept: int = Field(0, ge=0, description="trajectories every rule kept")
    stages: list[FunnelStage] = Field(
        default_factory=list, description="one per rule, in the order they apply"
    )
    settings: FilterSettings = Field(
        default_factory=FilterSettings, description="the settings the rules ran with"
    )
    inputs: list[str] = Field(default_factory=list, description="the files or folders read")
    elapsed_s: float = Field(0.0, ge=0, description="wall-clock seconds the run took")

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


@dataclass(frozen=True)
class Examined:
    """The rules' verdict on one trajectory, and the notes of the rules it passed."""

    verdict: Verdict | None = None
    notes: tuple[tuple[str, str], ...] = ()  # (rule, note code)


# Hears about each dropped trajectory: (file:line, trajectory id, verdict).
DropHook = Callable[[str, str, Verdict], None]


@dataclass
class _Tally:
    concern: str
    entered: int = 0
    dropped: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)

    def drop(self, reason: str, example: str) -> None:
        self.dropped += 1
        self.reasons[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < EXAMPLES_PER_REASON:
            shown.append(example)


@dataclass(frozen=True)
class Outcome:
    """What became of one stored line: kept, dropped (with the verdict) or unreadable.
    Plain data, so worker processes can send it back."""

    where: str
    trajectory_id: str | None = None
    examined: Examined = Examined()
    digest: str = ""  # of the content, for de-duplication ("" when that rule is skipped)
    unreadable_kind: UnreadableKind | None = None
    unreadable_message: str = ""

    def read_error(self) -> TrajectoryReadError:
        assert self.unreadable_kind is not None
        return TrajectoryReadError(self.where, self.unreadable_kind, self.unreadable_message)


class FilterPipeline:
    """Applies the rules one trajectory at a time and keeps the funnel's counts (and, for
    de-duplication, the ids and content digests seen so far)."""

    def __init__(
        self, settings: FilterSettings | None = None, context: FilterContext | None = None
    ) -> None:
        self.settings = settings or FilterSettings()
        self.context = context or FilterContext()
        self.rules: list[Rule] = build_rules(self.settings, self.context)
        self.unique = UniqueRecords() if self.settings.applies("unique_records") else None
        self._readable = _Tally("parse and validate against the trajectory schema")
        stages = [(rule.name, rule.concern) for rule in self.rules]
        if self.unique is not None:
            stages.insert(0, (self.unique.name, self.unique.concern))
        self._tallies: dict[str, _Tally] = {name: _Tally(concern) for name, concern in stages}
        self._kept = 0

    def examine(self, trajectory: Trajectory) -> Examined:
        """The first rule that drops the trajectory (None: every rule keeps it) and the
        notes of the rules before it. Counts nothing; de-duplication is ``count``'s."""
        notes: list[tuple[str, str]] = []
        for rule in self.rules:
            result = rule.check(trajectory)
            if isinstance(result, Note):
                notes.append((rule.name, result.code))
            elif result is not None:
                return Examined(Verdict(rule.name, result), tuple(notes))
        return Examined(None, tuple(notes))

    def judge(self, trajectory: Trajectory) -> Verdict | None:
        """The first rule that drops the trajectory, or None to keep it. Counts nothing."""
        return self.examine(trajectory).verdict

    def digest(self, trajectory: Trajectory, line: str | None = None) -> str:
        return content_digest(trajectory, line) if self.unique is not None else ""

    def judge_line(self, where: str, line: str) -> Outcome:
        """Parse and judge one stored line. Counts nothing."""
        try:
            trajectory = parse_record(line, where)
        except TrajectoryReadError as error:
            return Outcome(where, unreadable_kind=error.kind, unreadable_message=error.message)
        examined = self.examine(trajectory)
        return Outcome(where, trajectory.id, examined, self.digest(trajectory, line))

    def count(self, trajectory_id: str, examined: Examined, digest: str = "") -> Verdict | None:
        """Count one trajectory, in input order: a copy of one counted before is charged to
        ``unique_records``; otherwise every rule up to the one that dropped it saw it.
        Returns the verdict that counted."""
        verdict, notes = examined.verdict, examined.notes
        if self.unique is not None:
            copy = self.unique.see(trajectory_id, digest)
            if copy is not None:
                verdict, notes = Verdict(self.unique.name, copy), ()
        self._readable.entered += 1
        for name, tally in self._tallies.items():
            tally.entered += 1
            if verdict is not None and verdict.rule == name:
                tally.drop(verdict.drop.reason, f"{trajectory_id}: {verdict.drop.detail}")
                break
        else:
            self._kept += 1
        for rule, code in notes:
            self._tallies[rule].notes[code] += 1
        return verdict

    def admit(self, trajectory: Trajectory) -> Verdict | None:
        """Judge the trajectory and count the verdict in the funnel."""
        return self.count(trajectory.id, self.examine(trajectory), self.digest(trajectory))

    def unreadable(self, error: TrajectoryReadError) -> None:
        self._readable.entered += 1
        self._readable.drop(error.kind, str(error))

    @property
    def unreadable_lines(self) -> int:
        return self._readable.dropped

    def run(self, records: Iterable[Record], on_drop: DropHook | None = None) -> Iterator[Record]:
        """The kept records, in order; ``on_drop`` hears about each dropped one."""
        for record in records:
            verdict = self.admit(record.trajectory)
            if verdict is None:
                yield record
            elif on_drop is not None:
                on_drop(record.where, record.trajectory.id, verdict)

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
        notes=dict(tally.notes.most_common()),
    )


def filter_trajectories(
    trajectories: Iterable[Trajectory],
    settings: FilterSettings | None = None,
    context: FilterContext | None = None,
) -> tuple[list[Trajectory], FunnelReport]:
    """In memory: the kept trajectories and the funnel."""
    pipeline = FilterPipeline(settings, context)
    kept = [t for t in trajectories if pipeline.admit(t) is None]
    return kept, pipeline.report()


# One pipeline per worker process, made once by the pool's initializer.
_worker_pipeline: FilterPipeline | None = None


def _start_worker(settings: FilterSettings, context: FilterContext) -> None:
    global _worker_pipeline
    _worker_pipeline = FilterPipeline(settings, context)


def _judge_chunk(chunk: list[tuple[str, str]]) -> list[Outcome]:
    assert _worker_pipeline is not None
    return [_worker_pipeline.judge_line(where, line) for where, line in chunk]


def _chunks(lines: Iterator[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    while chunk := list(itertools.islice(lines, CHUNK_LINES)):
        yield chunk


def filter_files(
    inputs: list[Path],
    out: Path,
    settings: FilterSettings | None = None,
    context: FilterContext | None = None,
    *,
    strict: bool = False,
    on_drop: DropHook | None = None,
    workers: int = 1,
) -> FunnelReport:
    """Stream the inputs' trajectories through the pipeline, writing kept lines unchanged
    (and in order) to ``out``. Unreadable lines are counted in a ``readable`` stage and
    logged; with ``strict`` the first one raises instead, naming file and line.
    ``workers > 1`` parses and judges in that many processes (validation is CPU-bound); the
    counting, de-duplication and writing stay here, so the output is the same for any
    number of workers."""
    started = time.perf_counter()
    pipeline = FilterPipeline(settings, context)
    files = input_files(inputs, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle, contextlib.ExitStack() as stack:
        chunks = _chunks(iter_lines(files))
        if workers > 1:
            # spawn, not fork: the parent may hold threads (rich, datasets) that fork would copy
            spawn = multiprocessing.get_context("spawn")
            pool = stack.enter_context(
                spawn.Pool(
                    workers,
                    initializer=_start_worker,
                    initargs=(pipeline.settings, pipeline.context),
                )
            )
            judged = _judged_in_pool(pool, chunks)
        else:
            judged = ((c, [pipeline.judge_line(*line) for line in c]) for c in chunks)
        for chunk, outcomes in judged:
            for (_, line), outcome in zip(chunk, outcomes, strict=True):
                if outcome.unreadable_kind is not None:
                    error = outcome.read_error()
                    if strict:
                        raise error
                    pipeline.unreadable(error)
                    if pipeline.unreadable_lines <= EXAMPLES_PER_REASON:
                        log.warning("unreadable trajectory line skipped", error=str(error))
                    continue
                assert outcome.trajectory_id is not None
                verdict = pipeline.count(outcome.trajectory_id, outcome.examined, outcome.digest)
                if verdict is None:
                    handle.write(line)
                elif on_drop is not None:
                    on_drop(outcome.where, outcome.trajectory_id, verdict)
    report = pipeline.report([str(p) for p in inputs], time.perf_counter() - started)
    if pipeline.unreadable_lines:
        readable = report.stages[0]
        log.warning(
            "unreadable trajectory lines skipped", lines=readable.dropped, reasons=readable.reasons
        )
    return report


def _judged_in_pool(
    pool: Any, chunks: Iterator[list[tuple[str, str]]]
) -> Iterator[tuple[list[tuple[str, str]], list[Outcome]]]:
    """(chunk, outcomes) in input order; a bounded number of chunks in flight, so memory
    stays flat however large the input."""
    pending: collections.deque[tuple[list[tuple[str, str]], Any]] = collections.deque()
    for chunk in chunks:
        pending.append((chunk, pool.apply_async(_judge_chunk, (chunk,))))
        if len(pending) >= IN_FLIGHT_CHUNKS:
            done, result = pending.popleft()
            yield done, result.get()
    while pending:
        done, result = pending.popleft()
        yield done, result.get()


def funnel_table(report: FunnelReport) -> Table:
    table = Table(title=f"trajectory funnel: {report.raw:,} raw → {report.kept:,} kept")
    for column, justify in (
        ("stage", "left"),
        ("checks", "left"),
        ("dropped", "right"),
        ("left", "right"),
        ("drop reasons", "left"),
        ("not checked", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_row("raw", "records read", "", f"{report.raw:,}", "", "")
    for stage in report.stages:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in stage.reasons.items())
        notes = ", ".join(f"{note} {count:,}" for note, count in stage.notes.items())
        table.add_row(
            stage.rule, stage.concern, f"{stage.dropped:,}", f"{stage.kept:,}", reasons, notes
        )
    return table

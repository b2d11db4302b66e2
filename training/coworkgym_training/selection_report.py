"""What a selection kept and dropped: the JSON record (``cowork-gym.selection/v1``), a rich
table (per bin: lengths, entered, kept, dropped, the kept scores' range) and a PNG."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table

from .select import LengthBy, Method

SELECTION_SCHEMA: Final = "cowork-gym.selection/v1"


class _Record(BaseModel):
    # inf (an RSR of a perfectly predicted trajectory) is written as null.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="null")


class TrajectoryVerdict(_Record):
    id: str
    where: str = Field(description="file:line it was read from")
    length: int | None = None
    agent_tokens: int = 0
    nll: float | None = None
    rsr: float | None = None
    bin: int | None = None
    kept: bool
    reason: str | None = Field(
        None, description="why it was not binned (unscorable; a singleton group by group)"
    )
    group: str | None = Field(None, description="its GRPO group (objectives.group_key)")


class BinSummary(_Record):
    index: int
    min_length: int
    max_length: int
    entered: int
    kept: int
    dropped: int
    kept_score_min: float | None = None
    kept_score_max: float | None = None


class SelectionReport(_Record):
    schema_version: Literal["cowork-gym.selection/v1"] = SELECTION_SCHEMA
    method: Method
    keep: float
    bins_requested: int
    length_by: LengthBy
    rank_clip: int
    model: str
    by_group: bool = Field(False, description="whole GRPO groups kept or dropped")
    entered: int
    unscorable: int
    singleton: int = Field(0, description="dropped as the one scorable member of its group")
    kept: int
    dropped: int
    bins: list[BinSummary]
    trajectories: list[TrajectoryVerdict]


def summarize_bins(
    verdicts: list[TrajectoryVerdict], method: Method
) -> list[BinSummary]:
    summaries = []
    indices = sorted({v.bin for v in verdicts if v.bin is not None})
    for index in indices:
        members = [v for v in verdicts if v.bin == index]
        lengths = [v.length or 0 for v in members]
        kept_scores = [
            s for v in members if v.kept and (s := getattr(v, method)) is not None
        ]
        summaries.append(
            BinSummary(
                index=index,
                min_length=min(lengths),
                max_length=max(lengths),
                entered=len(members),
                kept=sum(v.kept for v in members),
                dropped=sum(not v.kept for v in members),
                kept_score_min=min(kept_scores, default=None),
                kept_score_max=max(kept_scores, default=None),
            )
        )
    return summaries


def selection_table(report: SelectionReport) -> Table:
    title = (
        f"selection by {report.method.upper()} under {report.model}: "
        f"{report.entered} in → {report.kept} kept ({report.keep:.0%} budget per bin"
        f"{', by group' if report.by_group else ''})"
    )
    table = Table(title=title)
    for column in ("bin", f"length ({report.length_by})", "entered", "kept", "dropped"):
        table.add_column(column, justify="right")
    table.add_column(f"kept {report.method.upper()}", justify="right")
    for b in report.bins:
        kept_range = (
            f"{_number(b.kept_score_min)} – {_number(b.kept_score_max)}" if b.kept else "—"
        )
        table.add_row(
            str(b.index),
            f"{b.min_length}–{b.max_length}",
            str(b.entered),
            str(b.kept),
            str(b.dropped),
            kept_range,
        )
    if report.unscorable:
        table.add_row("—", "unscorable", str(report.unscorable), "0", str(report.unscorable), "")
    if report.singleton:
        count = str(report.singleton)
        table.add_row("—", "singleton group", count, "0", count, "")
    return table


def _number(value: float | None) -> str:
    if value is None or math.isinf(value):
        return "inf"
    return f"{value:.3f}"


def write_report(report: SelectionReport, folder: Path) -> tuple[Path, Path]:
    """``selection.json`` and ``selection.png`` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "selection.json"
    json_path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    png_path = folder / "selection.png"
    _plot(report, png_path)
    return json_path, png_path


def _plot(report: SelectionReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    figure, (counts, scatter) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [f"{b.min_length}–{b.max_length}" for b in report.bins]
    positions = range(len(report.bins))
    kept = [b.kept for b in report.bins]
    dropped = [b.dropped for b in report.bins]
    counts.bar(positions, kept, color="#2a9d8f", label="kept")
    counts.bar(positions, dropped, bottom=kept, color="#e76f51", label="dropped")
    counts.set_xticks(list(positions), labels, rotation=30, ha="right")
    counts.set_xlabel(f"length bin ({report.length_by})")
    counts.set_ylabel("trajectories")
    counts.set_title("kept and dropped per length bin")
    counts.set_ylim(0, 1.25 * max((k + d for k, d in zip(kept, dropped, strict=True)), default=1))
    counts.legend(loc="upper right", ncols=2)

    method = report.method
    for kept_flag, colour, label in ((True, "#2a9d8f", "kept"), (False, "#e76f51", "dropped")):
        points = [
            (v.length, s)
            for v in report.trajectories
            if v.kept is kept_flag
            and v.length is not None
            and (s := getattr(v, method)) is not None
            and math.isfinite(s)
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            scatter.scatter(xs, ys, s=14, color=colour, label=label, alpha=0.8)
    for b in report.bins[1:]:
        scatter.axvline(b.min_length, color="#999999", linewidth=0.6, linestyle="--")
    scatter.set_xlabel(f"length ({report.length_by})")
    scatter.set_ylabel(method.upper())
    scatter.set_title(f"{method.upper()} under {Path(report.model).name}")
    scatter.legend()
    figure.suptitle(
        f"{report.kept} of {report.entered} kept ({report.keep:.0%} per bin, "
        f"{len(report.bins)} bins)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


__all__ = [
    "SELECTION_SCHEMA",
    "BinSummary",
    "SelectionReport",
    "TrajectoryVerdict",
    "selection_table",
    "summarize_bins",
    "write_report",
]

"""``cowork-gym select`` end to end: read trajectories, tokenize each with the student's
chat template, score it under the student, select by length bin, write the kept lines back
byte for byte (in input order) and return the report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from coworkgym.rollout.reading import Record, input_files, iter_records

from .chat_format import with_tool_format
from .objectives import group_key
from .score import DEFAULT_RANK_CLIP, score_trajectory
from .select import Candidate, LengthBy, Method, select
from .selection_report import SelectionReport, TrajectoryVerdict, summarize_bins
from .tokenize import TokenizationError, tokenize_trajectory


class SelectionError(ValueError):
    """A selection that cannot run (the student folder, the inputs)."""


@dataclass(frozen=True)
class Student:
    """A causal LM and its tokenizer (with the chat template the policy was served with)."""

    model: Any
    tokenizer: Any
    name: str
    device: torch.device


def load_student(path: Path, device: str | None = None) -> Student:
    """A student from a local Hugging Face folder; nothing is downloaded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no bars on stderr

    if not (path / "config.json").is_file():
        raise SelectionError(
            f"--model {path}: not a model folder (no config.json); pass a local folder "
            "saved with save_pretrained (weights are never downloaded)"
        )
    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if getattr(tokenizer, "chat_template", None) is not None:
        with_tool_format(tokenizer, source=str(path))  # as the checkpoint server renders
    if getattr(tokenizer, "chat_template", None) is None:
        raise SelectionError(
            f"--model {path}: the tokenizer has no chat_template; trajectories are rendered "
            "with the template the policy was served with"
        )
    model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model = model.to(chosen).eval()
    return Student(model=model, tokenizer=tokenizer, name=str(path), device=chosen)


def _length(record: Record, tokens: int, length_by: LengthBy) -> int:
    return tokens if length_by == "tokens" else record.trajectory.tool_steps()


def select_records(
    records: Iterable[Record],
    student: Student,
    *,
    method: Method,
    keep: float,
    bins: int,
    length_by: LengthBy = "tokens",
    rank_clip: int = DEFAULT_RANK_CLIP,
    by_group: bool = False,
) -> tuple[SelectionReport, list[Record]]:
    """The report and the kept records, in input order. With `by_group`, whole GRPO groups
    are kept or dropped (see ``select``). Each trajectory is rendered with the tools it
    records (``Trajectory.tools``, tokenize's default), as the policy saw its prompt."""
    records = list(records)
    verdicts: list[TrajectoryVerdict] = []
    candidates: list[Candidate] = []
    for record in records:
        group = group_key(record.trajectory)
        verdict = TrajectoryVerdict(
            id=record.trajectory.id, where=record.where, kept=False, group=group
        )
        try:
            tokenized = tokenize_trajectory(record.trajectory, student.tokenizer)
        except TokenizationError as exc:
            verdicts.append(verdict.model_copy(update={"reason": f"tokenization: {exc}"}))
            continue
        score = score_trajectory(
            student.model, tokenized, rank_clip=rank_clip, device=student.device
        )
        length = _length(record, len(tokenized), length_by)
        if score is None:
            reason = "unscorable: no agent token to score"
            verdicts.append(verdict.model_copy(update={"length": length, "reason": reason}))
            continue
        verdicts.append(
            verdict.model_copy(
                update={
                    "length": length,
                    "agent_tokens": score.scored_tokens,
                    "nll": score.nll,
                    "rsr": score.rsr,
                }
            )
        )
        candidates.append(
            Candidate(record.trajectory.id, length, score.nll, score.rsr, group=group)
        )

    chosen = select(candidates, method=method, keep=keep, bins=bins, by_group=by_group)
    decisions = {d.candidate.id: d for d in chosen}
    final: list[TrajectoryVerdict] = []
    unscorable = sum(v.reason is not None for v in verdicts)
    for verdict in verdicts:
        decision = decisions.get(verdict.id) if verdict.reason is None else None
        if decision is not None:
            verdict = verdict.model_copy(
                update={"bin": decision.bin, "kept": decision.kept, "reason": decision.reason}
            )
        final.append(verdict)
    kept_where = {v.where for v in final if v.kept}
    report = SelectionReport(
        method=method,
        keep=keep,
        bins_requested=bins,
        length_by=length_by,
        rank_clip=rank_clip,
        model=student.name,
        by_group=by_group,
        entered=len(final),
        unscorable=unscorable,
        singleton=sum(d.reason is not None for d in chosen),
        kept=len(kept_where),
        dropped=len(final) - len(kept_where),
        bins=summarize_bins(final, method),
        trajectories=final,
    )
    return report, [r for r in records if r.where in kept_where]


def select_files(
    inputs: list[Path],
    out: Path,
    student: Student,
    **options: Any,
) -> SelectionReport:
    """Select from JSONL files or folders of them; the kept lines go to `out`."""
    files = input_files(inputs, out)
    report, kept = select_records(iter_records(files), student, **options)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        handle.writelines(r.line for r in kept)
    return report


__all__ = ["SelectionError", "Student", "load_student", "select_files", "select_records"]

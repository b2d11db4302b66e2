"""Reading stored trajectories for the filters and exporters: JSONL files or folders of
them, streamed one record at a time, every problem named by file and line.

A record keeps the line it was read from, so a filter writes kept trajectories back
byte for byte instead of re-serializing them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from .trajectory import SCHEMA_VERSION, Trajectory

UnreadableKind = Literal["json_error", "schema_version", "schema_error"]


@dataclass(frozen=True)
class Record:
    trajectory: Trajectory
    line: str
    where: str  # "file:line"


class TrajectoryReadError(ValueError):
    def __init__(self, where: str, kind: UnreadableKind, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.kind: UnreadableKind = kind
        self.message = message


def trajectory_files(inputs: Iterable[Path]) -> list[Path]:
    """The JSONL files to read: each file as given, each folder's ``*.jsonl`` (recursively,
    sorted, so the order is the same on every run)."""
    files: list[Path] = []
    for path in inputs:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise FileNotFoundError(f"{path}: no *.jsonl trajectory files in this folder")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return files


def input_files(inputs: Iterable[Path], out: Path) -> list[Path]:
    """``trajectory_files``, listed before ``out`` is written, refusing an ``out`` that is
    one of them (it would be read while written, or a previous run's output read again)."""
    files = trajectory_files(inputs)
    target = out.resolve()
    if any(f.resolve() == target for f in files):
        raise FileExistsError(f"{out}: the output is one of the inputs; write it elsewhere")
    return files


def parse_record(line: str, where: str) -> Trajectory:
    """One trajectory from one JSONL line. The fast path validates the JSON text directly
    (pydantic-core, no intermediate dicts); only a failing line is parsed again to say why."""
    try:
        return Trajectory.model_validate_json(line)
    except ValidationError as exc:
        raise _diagnose(line, where, exc) from None


def _diagnose(line: str, where: str, exc: ValidationError) -> TrajectoryReadError:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as bad:
        return TrajectoryReadError(where, "json_error", f"not JSON: {bad}")
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        return TrajectoryReadError(
            where,
            "schema_version",
            f"trajectory schema {version!r} is not {SCHEMA_VERSION!r}; "
            "re-export it with this version of cowork-gym",
        )
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:3]
    )
    more = exc.error_count() - 3
    return TrajectoryReadError(
        where, "schema_error", problems + (f" (+{more} more)" if more > 0 else "")
    )


def iter_records(
    inputs: Iterable[Path],
    on_unreadable: Callable[[TrajectoryReadError], None] | None = None,
) -> Iterator[Record]:
    """Every trajectory in the inputs, in order. A bad line raises ``TrajectoryReadError``
    unless ``on_unreadable`` is given, which then hears about it and reading goes on."""
    for where, line in iter_lines(inputs):
        try:
            trajectory = parse_record(line, where)
        except TrajectoryReadError as error:
            if on_unreadable is None:
                raise
            on_unreadable(error)
            continue
        yield Record(trajectory, line, where)


def iter_lines(inputs: Iterable[Path]) -> Iterator[tuple[str, str]]:
    """``(where, line)`` for every non-blank line of the inputs, each ending in a newline."""
    for path in trajectory_files(inputs):
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield f"{path}:{number}", line if line.endswith("\n") else line + "\n"


def iter_trajectories(inputs: Iterable[Path]) -> Iterator[Trajectory]:
    for record in iter_records(inputs):
        yield record.trajectory

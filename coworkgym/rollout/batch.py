"""A batch of rollouts on this machine: packages × harnesses × samples, parallel workers,
resumable, stored as JSON lines.

Where trajectories go (``--out``):
- a folder: ``OUT/trajectories.jsonl``, one trajectory per line, appended and flushed as
  each rollout ends (a crash loses at most the line being written; a torn last line is
  skipped on resume);
- ``s3://bucket/prefix``: one object per rollout, ``rollouts/<rollout id>.json`` (workers
  never share an object), and ``trajectories.jsonl`` rebuilt from them at the end.

A re-run skips every rollout whose ``RolloutKey`` (package digest, harness, model, sample)
is already stored — whatever its outcome — so an interrupted batch resumes where it
stopped and a finished one is a no-op.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean
from typing import Any, Protocol, TextIO
from urllib.parse import urlparse

import httpx
import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..package.package import TASK_TOML, EnvironmentPackage
from ..release import fetch_package, make_s3_client
from .engine import RolloutEngine, unsupported
from .harness import PolicyConfig
from .trajectory import RolloutKey, Trajectory, dump_line, parse_line

log = structlog.get_logger(__name__)

TRAJECTORIES = "trajectories.jsonl"
ROLLOUTS_PREFIX = "rollouts"


# ---- which packages -------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    package: EnvironmentPackage
    uri: str


def find_packages(inputs: Sequence[str], *, rollable_only: bool = True) -> list[Source]:
    """Package folders, folders of packages, or manifest.jsonl files (``location`` of each
    record: a folder or an s3:// prefix). The same package named twice is kept once. A
    package the engine cannot roll out is refused with the reason, unless not
    ``rollable_only`` (the filter reads packages, it does not run them)."""
    sources: dict[str, Source] = {}
    for item in inputs:
        for uri in _locations(item):
            pkg = load_package(uri)
            why = unsupported(pkg) if rollable_only else None
            if why:
                raise ValueError(f"{uri}: {why}")
            sources.setdefault(pkg.digest(), Source(pkg, uri))
    return list(sources.values())


def _locations(item: str) -> list[str]:
    if item.startswith("s3://"):
        return [item]
    path = Path(item)
    if path.is_file():
        return manifest_locations(path)
    if (path / TASK_TOML).is_file():
        return [str(path)]
    if (path / "manifest.jsonl").is_file():
        return manifest_locations(path / "manifest.jsonl")
    if path.is_dir():
        found = sorted(str(p.parent) for p in path.glob(f"*/{TASK_TOML}"))
        if found:
            return found
    raise ValueError(
        f"{item}: not a package folder, a folder of packages or a manifest.jsonl; "
        "give what `cowork-gym synth --out` wrote"
    )


def manifest_locations(path: Path) -> list[str]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            location = str(record["location"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{path}:{number}: a manifest record needs 'location' ({exc})"
            ) from exc
        if not location.startswith("s3://") and not Path(location).is_absolute():
            location = str(path.parent / location)
        found.append(location)
    return found


def load_package(uri: str) -> EnvironmentPackage:
    if not uri.startswith("s3://"):
        return EnvironmentPackage.load(Path(uri))
    with tempfile.TemporaryDirectory(prefix="cwg-package-") as tmp:
        return EnvironmentPackage.load(fetch_package(uri, Path(tmp) / "package"))


def unreachable(base_url: str, timeout_s: float = 10.0) -> str | None:
    """Why an endpoint cannot be reached at all (None when it answers anything: a server
    without ``/models`` or one that wants a key still exists). Checked before a batch so
    a typo in the URL does not become N invalid trajectories."""
    try:
        httpx.get(base_url.rstrip("/") + "/models", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# ---- where trajectories go ------------------------------------------------------------
class TrajectoryStore(Protocol):
    location: str

    def stored_ids(self) -> set[str]: ...

    def add(self, trajectory: Trajectory) -> None: ...

    def close(self) -> str: ...

    def load(self) -> list[Trajectory]: ...


class LocalStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / TRAJECTORIES
        self.location = str(self.path)
        root.mkdir(parents=True, exist_ok=True)
        self._handle: TextIO | None = None

    def stored_ids(self) -> set[str]:
        return {t.id for t in self.load()}

    def load(self) -> list[Trajectory]:
        if not self.path.is_file():
            return []
        found = []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found.append(parse_line(line, f"{self.path}:{number}"))
            except ValueError as exc:  # a line torn by a crash: that rollout runs again
                log.warning("skipping an unreadable trajectory line", where=number, error=str(exc))
        return found

    def add(self, trajectory: Trajectory) -> None:
        if self._handle is None:
            self._repair_tail()
            self._handle = self.path.open("a", encoding="utf-8")
        self._handle.write(dump_line(trajectory))
        self._handle.flush()

    def _repair_tail(self) -> None:
        """A torn last line (no newline) would glue onto the next record: end it first."""
        if self.path.is_file() and self.path.stat().st_size:
            with self.path.open("rb+") as handle:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")

    def close(self) -> str:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        return self.location


class S3Store:
    def __init__(self, uri: str, client: Any | None = None) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"not an s3:// URI: {uri!r}")
        self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/")
        self.client = client or make_s3_client()
        self.location = f"s3://{self.bucket}/{self._key(TRAJECTORIES)}"

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def _listed(self) -> list[str]:
        keys = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(ROLLOUTS_PREFIX) + "/"):
            keys += [item["Key"] for item in page.get("Contents", [])]
        return sorted(keys)

    def stored_ids(self) -> set[str]:
        return {key.rsplit("/", 1)[-1].removesuffix(".json") for key in self._listed()}

    def add(self, trajectory: Trajectory) -> None:
        key = self._key(ROLLOUTS_PREFIX, f"{trajectory.id}.json")
        self.client.put_object(Bucket=self.bucket, Key=key, Body=dump_line(trajectory).encode())

    def _lines(self) -> list[str]:
        return [
            self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode()
            for key in self._listed()
        ]

    def load(self) -> list[Trajectory]:
        return [parse_line(line, self.location) for line in self._lines()]

    def close(self) -> str:
        body = "".join(line if line.endswith("\n") else line + "\n" for line in self._lines())
        self.client.put_object(Bucket=self.bucket, Key=self._key(TRAJECTORIES), Body=body.encode())
        return self.location


def store_for(target: str) -> TrajectoryStore:
    return S3Store(target) if target.startswith("s3://") else LocalStore(Path(target))


# ---- the batch ------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    source: Source
    harness: str
    sample: int

    def key(self, model: str) -> RolloutKey:
        digest = self.source.package.digest()
        return RolloutKey(
            package_digest=digest, harness=self.harness, model=model, sample=self.sample
        )


@dataclass
class BatchResult:
    trajectories: list[Trajectory] = field(default_factory=list)  # run now
    batch: list[Trajectory] = field(default_factory=list)  # every job's, stored before too
    skipped: int = 0
    seconds: float = 0.0
    location: str = ""


@dataclass
class RolloutBatch:
    engine: RolloutEngine
    store: TrajectoryStore
    policy: PolicyConfig
    api_key: str = "EMPTY"
    workers: int = 2

    def jobs(self, sources: Iterable[Source], harnesses: Sequence[str], samples: int) -> list[Job]:
        return [Job(s, h, k) for s in sources for h in harnesses for k in range(samples)]

    def run(self, jobs: Sequence[Job], console: Console | None = None) -> BatchResult:
        started = time.perf_counter()
        stored = self.store.stored_ids()
        todo = [j for j in jobs if j.key(self.policy.model).id not in stored]
        result = BatchResult(skipped=len(jobs) - len(todo))
        progress = Progress(
            TextColumn("[bold]rollouts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            disable=console is None,
        )
        with progress, ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            task = progress.add_task("rollouts", total=len(todo), last="")
            futures: dict[Future[Trajectory], Job] = {
                pool.submit(self._one, job): job for job in todo
            }
            try:
                for future in as_completed(futures):
                    trajectory = future.result()  # _one never raises
                    self.store.add(trajectory)
                    result.trajectories.append(trajectory)
                    progress.update(task, advance=1, last=_line(trajectory))
            finally:
                result.location = self.store.close()
        wanted = {j.key(self.policy.model).id for j in jobs}
        result.batch = [t for t in self.store.load() if t.id in wanted]
        result.seconds = time.perf_counter() - started
        return result

    def _one(self, job: Job) -> Trajectory:
        policy = self.policy
        if policy.seed is not None:  # a different draw per sample, reproducibly
            policy = replace(policy, seed=policy.seed + job.sample)
        return self.engine.run(
            job.source.package,
            job.harness,
            policy,
            job.sample,
            uri=job.source.uri,
            api_key=self.api_key,
        )


def _line(t: Trajectory) -> str:
    v = t.verification
    outcome = (
        f"reward {v.reward:g}" if v is not None and v.valid and v.reward is not None else "invalid"
    )
    return (
        f"{t.environment.name} {t.policy.harness}#{t.key.sample}: {t.termination.reason}, {outcome}"
    )


# ---- the summary ----------------------------------------------------------------------
def summary_rows(trajectories: Sequence[Trajectory]) -> list[dict[str, Any]]:
    by_harness: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_harness[t.policy.harness].append(t)
    rows = []
    for harness, group in sorted(by_harness.items()):
        valid = [t for t in group if t.reward is not None]
        rewards = [t.reward for t in valid if t.reward is not None]
        passed = [t for t in valid if t.verification is not None and t.verification.passed]
        rows.append(
            {
                "harness": harness,
                "rollouts": len(group),
                "valid": len(valid),
                "mean_reward": round(mean(rewards), 4) if rewards else None,
                "pass_rate": round(len(passed) / len(valid), 4) if valid else None,
                "terminations": dict(Counter(t.termination.reason for t in group)),
            }
        )
    return rows


def summary_table(trajectories: Sequence[Trajectory]) -> Table:
    table = Table(title="Rollouts by harness")
    for column in ("harness", "rollouts", "valid", "mean reward", "pass rate", "terminations"):
        table.add_column(
            column, justify="left" if column in ("harness", "terminations") else "right"
        )
    for row in summary_rows(trajectories):
        table.add_row(
            row["harness"],
            str(row["rollouts"]),
            str(row["valid"]),
            "-" if row["mean_reward"] is None else f"{row['mean_reward']:.3f}",
            "-" if row["pass_rate"] is None else f"{row['pass_rate']:.0%}",
            ", ".join(f"{k} {v}" for k, v in sorted(row["terminations"].items())),
        )
    return table


__all__ = [
    "BatchResult",
    "Job",
    "LocalStore",
    "RolloutBatch",
    "S3Store",
    "Source",
    "find_packages",
    "load_package",
    "store_for",
    "summary_rows",
    "summary_table",
    "unreachable",
]

"""Run a package's reference solution and verifier in local sandboxes.

Mount plan (the same separation the Kubernetes Jobs use):
- solution:  workspace rw at the workdir, solution/ ro at /solution, and a fresh /logs
             rw holding agent/, verifier/ and artifacts/ (what Harbor's environment mounts
             there: a task's setup.sh or solve.sh may write them), nothing else
- verifier:  a *copy* of the workspace at the workdir, tests/ ro at /tests,
             a fresh /logs rw (its verifier/ holds the reward) — so a run cannot forge or
             reuse a reward; the copy is normalised (``verifier_copy``: modes, no links
             out, no FIFOs or devices, sizes capped), so nothing the agent left can make
             the run invalid

``phase_sandboxes``: a sandbox per phase ("agent", "verifier") where they differ — a task
image's phases run with the network their task declares for each.

``writable_root``: the phases run in a task image whose root is writable, as in Harbor's one
container: the agent phase's writes outside the working directory (solve.sh, a step's
setup.sh) are kept with the workspace (``root_changes``) from run to run; a verifier run sees
them under a layer of its own that is thrown away, like its copy of the workspace, so
nothing it writes reaches the state it scored or a later agent phase.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..package.harbor_ignore import uploaded
from ..package.package import EnvironmentPackage
from ..sandbox import (
    BubblewrapSandbox,
    Limits,
    Mount,
    RootOverlay,
    Sandbox,
    SandboxResult,
    default_sandbox,
)
from .batch import BATCH_ROOT, batch_dirs, batchable, driver_argv
from .verifier_copy import CopyReport, copy_for_verifier
from .workspace import apply_patch, root_changes, write_files

# Workspaces scored by one engine process at most (its time limit grows with the count),
# and at least, when the batch is split across cores.
MAX_BATCH = 24
MIN_SHARE = 4


@dataclass
class VerifyOutcome:
    """One verification: a reward, or *invalid* (never a 0 standing in for a crash).

    ``reward`` is the headline: Harbor's ``reward`` key when the verifier writes one, else
    the lowest of its keys. Harbor itself reports every key of a multi-key ``reward.json``
    as a metric of its own; a state is only as good as its worst metric."""

    valid: bool
    reward: float | None
    rewards: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    run: SandboxResult | None = None
    copied: CopyReport | None = None  # what the verifier's copy of the workspace left out

    def component_scores(self) -> dict[str, float]:
        return {c["id"]: c["score"] for c in self.details.get("components", [])}


class LocalRuntime:
    def __init__(
        self,
        sandbox: Sandbox | None = None,
        solution_limits: Limits | None = None,
        verifier_limits: Limits | None = None,
    ) -> None:
        self.sandbox = sandbox or default_sandbox()
        self.phase_sandboxes: dict[str, Sandbox] = {}
        self.writable_root = False  # the sandboxes' image root, over an overlay per run
        self.solution_limits = solution_limits or Limits(timeout_s=300, memory_mb=2048)
        self.verifier_limits = verifier_limits or Limits(timeout_s=300, memory_mb=2048)
        self.sandbox_seconds = 0.0  # time spent inside sandboxes (for the benchmarks)
        self.sandbox_runs = 0
        self.sandbox_cpu_seconds = 0.0  # CPU inside sandboxes (not seen by rusage)
        self._counting = threading.Lock()  # verify_many runs sandboxes from threads
        self.parallel = max(1, len(os.sched_getaffinity(0)))  # verifier runs at once

    def _run(
        self, *args: Any, phase: str = "agent", root: RootOverlay | None = None, **kwargs: Any
    ) -> SandboxResult:
        sandbox = self.phase_sandboxes.get(phase, self.sandbox)
        if root is not None and self.writable_root:
            if not isinstance(sandbox, BubblewrapSandbox):
                raise TypeError(f"a writable image root needs bubblewrap, not {sandbox!r}")
            result = sandbox.run(*args, root=root, **kwargs)
        else:
            result = sandbox.run(*args, **kwargs)
        with self._counting:
            self.sandbox_seconds += result.duration_s
            self.sandbox_cpu_seconds += result.cpu_s or 0.0
            self.sandbox_runs += 1
        return result

    def run_solution(
        self,
        pkg: EnvironmentPackage,
        workspace: Path,
        workdir: str,
        turn: int = 0,
        step: str | None = None,
    ) -> SandboxResult:
        """The oracle: ``solution/solve.sh``, or one Harbor step's ``steps/<step>/solution``."""
        solution = uploaded(pkg.files, f"steps/{step}/solution" if step else "solution")
        return self.run_script(solution, workspace, workdir, turn, pkg.config.solution.env)

    def prepare_step(
        self, pkg: EnvironmentPackage, step: str, workspace: Path, workdir: str
    ) -> SandboxResult | None:
        """What Harbor does before a step's agent: copy ``steps/<step>/workdir/`` into the
        working directory and run its ``setup.sh`` there (None when it has none)."""
        files = pkg.under(f"steps/{step}/workdir")
        write_files(workspace, files)
        for rel in files:
            if f"steps/{step}/workdir/{rel}" in pkg.executables:
                (workspace / rel).chmod(0o755)
        if "setup.sh" not in files:
            return None
        with tempfile.TemporaryDirectory(prefix="cwg-setup-") as tmp:
            return self._run(
                ["bash", f"{workdir.rstrip('/')}/setup.sh"],
                [Mount(workspace, workdir, writable=True), harbor_logs(Path(tmp))],
                limits=self.solution_limits,
                cwd=workdir,
                root=RootOverlay(root_changes(workspace)),
            )

    def run_script(
        self,
        solution_files: dict[str, bytes],
        workspace: Path,
        workdir: str,
        turn: int = 0,
        env: dict[str, str] | None = None,
    ) -> SandboxResult:
        """Run ``solve.sh`` (from ``solution_files``) for one turn, in the workspace."""
        with tempfile.TemporaryDirectory(prefix="cwg-solution-") as tmp:
            solution = Path(tmp) / "solution"
            solution.mkdir()
            write_files(solution, solution_files)
            mounts = [Mount(workspace, workdir, writable=True), Mount(solution, "/solution")]
            return self._run(
                ["bash", "/solution/solve.sh"],
                [*mounts, harbor_logs(Path(tmp))],
                limits=self.solution_limits,
                env={**(env or {}), "COWORK_TURN": str(turn), "COWORK_WORKSPACE": workdir},
                cwd=workdir,
                root=RootOverlay(root_changes(workspace)),
            )

    def run_reference(
        self, pkg: EnvironmentPackage, workspace: Path, workdir: str, upto_turn: int | None = None
    ) -> list[SandboxResult]:
        """The reference completion: solve turn 0, then for each user turn apply its patch
        and solve again. Stops at the first failing run."""
        last = len(pkg.patches) if upto_turn is None else upto_turn
        results = []
        for turn in range(last + 1):
            if turn > 0:
                apply_patch(pkg, turn, workspace)
            result = self.run_solution(pkg, workspace, workdir, turn)
            results.append(result)
            if not result.ok:
                break
        return results

    def run_verifier(
        self,
        pkg: EnvironmentPackage,
        workspace: Path,
        workdir: str,
        *,
        trajectory: dict[str, Any] | None = None,
        rubric_scores: dict[str, float] | None = None,
        step: str | None = None,
    ) -> VerifyOutcome:
        """Run ``tests/test.sh`` on a copy of the workspace. For a Harbor step, ``/tests``
        holds ``tests/`` overlaid with ``steps/<step>/tests/``, as Harbor uploads them."""
        with tempfile.TemporaryDirectory(prefix="cwg-verify-") as tmp:
            root = Path(tmp)
            tests, ws = root / "tests", root / "workspace"
            write_files(tests, uploaded(pkg.files, "tests"))
            if step is not None:
                write_files(tests, uploaded(pkg.files, f"steps/{step}/tests"))
            all_logs = harbor_logs(root)
            logs = all_logs.source / "verifier"
            copied = copy_for_verifier(workspace, ws, workdir)
            # Harbor uploads /tests into the container, where a verifier may write its score
            # beside them; a fresh copy each run, so writable where the root is
            tests_mount = Mount(tests, "/tests", writable=self.writable_root)
            mounts = [Mount(ws, workdir, writable=True), tests_mount, all_logs]
            env = {
                "COWORK_WORKSPACE": workdir,
                "COWORK_TESTS_DIR": "/tests",
                "COWORK_LOGS_DIR": "/logs/verifier",
            }
            extra = root / "extra"
            extra.mkdir()
            for name, data in (("trajectory", trajectory), ("rubric_scores", rubric_scores)):
                if data is not None:
                    (extra / f"{name}.json").write_text(json.dumps(data))
                    env[f"COWORK_{name.upper()}"] = f"/cowork-extra/{name}.json"
            mounts.append(Mount(extra, "/cowork-extra"))
            kept = root_changes(workspace)
            run = self._run(
                ["bash", "/tests/test.sh"],
                mounts,
                phase="verifier",
                limits=self.verifier_limits,
                env={**pkg.config.verifier.env, **_step_verifier_env(pkg, step), **env},
                cwd="/tests",
                root=RootOverlay(root / "root-changes", (kept,) if kept.is_dir() else ()),
            )
            return dataclasses.replace(read_outcome(logs, run), copied=copied)

    def verify_many(
        self, pkg: EnvironmentPackage, workspaces: list[Path], workdir: str, step: str | None
    ) -> list[VerifyOutcome]:
        """Score independent workspaces, in order: engine processes for a stock Cowork
        verifier (see ``batch``; one per core, each on a share of the workspaces), else one
        test.sh run each, as many at once as cores."""
        if len(workspaces) > 1 and step is None and batchable(pkg, workdir):
            # a share smaller than MIN_SHARE would pay the engine's start-up for too little
            shares = max(1, min(self.parallel, len(workspaces) // MIN_SHARE))
            size = min(MAX_BATCH, -(-len(workspaces) // shares))
            chunks = [workspaces[i : i + size] for i in range(0, len(workspaces), size)]
            scored = self._each(chunks, lambda chunk: self._engine_batch(pkg, chunk, workdir))
            return [outcome for chunk in scored for outcome in chunk]
        return self._each(workspaces, lambda ws: self.run_verifier(pkg, ws, workdir, step=step))

    def _each[T, R](self, items: list[T], score: Callable[[T], R]) -> list[R]:
        if len(items) <= 1 or self.parallel == 1:
            return [score(item) for item in items]
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            return list(pool.map(score, items))

    def _engine_batch(
        self, pkg: EnvironmentPackage, workspaces: list[Path], workdir: str
    ) -> list[VerifyOutcome]:
        with tempfile.TemporaryDirectory(prefix="cwg-verify-batch-") as tmp:
            root = Path(tmp)
            tests = root / "tests"
            write_files(tests, uploaded(pkg.files, "tests"))
            pairs = batch_dirs(root / "batch", len(workspaces))
            copies = [
                copy_for_verifier(workspace, ws, workdir)
                for workspace, (ws, _) in zip(workspaces, pairs, strict=True)
            ]
            limit = self.verifier_limits.timeout_s * len(workspaces)
            run = self._run(
                driver_argv(len(workspaces)),
                [Mount(root / "batch", BATCH_ROOT, writable=True), Mount(tests, "/tests")],
                phase="verifier",
                limits=dataclasses.replace(self.verifier_limits, timeout_s=limit),
                env={**pkg.config.verifier.env, "PYTHONPATH": "/tests"},
                cwd="/tests",
            )
            if not run.ok:  # one workspace's timeout or memory must not decide the others'
                return [self.run_verifier(pkg, ws, workdir) for ws in workspaces]
            return [
                dataclasses.replace(read_outcome(logs, run), copied=copied)
                for (_, logs), copied in zip(pairs, copies, strict=True)
            ]


def _step_verifier_env(pkg: EnvironmentPackage, step: str | None) -> dict[str, str]:
    """A Harbor step's own ``[steps.verifier.env]``, over the task's ``[verifier.env]``."""
    for section in pkg.config.steps or []:
        if section.name == step and section.verifier is not None:
            return dict(section.verifier.env)
    return {}


HARBOR_LOG_DIRS = ("agent", "verifier", "artifacts")  # Harbor's EnvironmentPaths under /logs


def harbor_logs(parent: Path) -> Mount:
    """A fresh, writable ``/logs`` with what Harbor's environment mounts inside it."""
    logs = parent / "logs"
    for name in HARBOR_LOG_DIRS:
        (logs / name).mkdir(parents=True, exist_ok=True)
    return Mount(logs, "/logs", writable=True)


def read_outcome(logs: Path, run: SandboxResult) -> VerifyOutcome:
    details: dict[str, Any] = {}
    if (logs / "details.json").is_file():
        try:
            details = json.loads((logs / "details.json").read_text())
        except ValueError:
            details = {}
    rewards, problem = read_rewards(logs)
    if rewards is None:
        why = details.get("error") or f"{problem} ({run.describe()})"
        return VerifyOutcome(False, None, details=details, error=str(why), run=run)
    headline = rewards.get("reward", min(rewards.values()))
    return VerifyOutcome(True, headline, rewards, details, run=run)


def read_rewards(logs: Path) -> tuple[dict[str, float] | None, str]:
    """Harbor's reward contract: ``reward.json`` (a flat object of finite numbers, any keys)
    wins over ``reward.txt`` (one finite number). Returns the rewards, or None and why not."""
    as_json, as_text = logs / "reward.json", logs / "reward.txt"
    if as_json.is_file():
        try:
            data = json.loads(as_json.read_text())
        except ValueError:
            return None, "reward.json is not JSON"
        if not isinstance(data, dict) or not data:
            return None, "reward.json is not a non-empty object of numbers"
        bad = [k for k, v in data.items() if not _finite_number(v)]
        if bad:
            return None, f"reward.json has non-numeric or non-finite values for {bad}"
        return {str(k): float(v) for k, v in data.items()}, ""
    if as_text.is_file():
        try:
            value = float(as_text.read_text().strip())
        except ValueError:
            return None, "reward.txt does not hold a number"
        if not math.isfinite(value):
            return None, "reward.txt holds a non-finite number"
        return {"reward": value}, ""
    return None, "no reward written"


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def clean(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)

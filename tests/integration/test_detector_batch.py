"""Scoring many workspaces at once gives what scoring each alone gives: the engine batch
(one process for a stock Cowork verifier) and the parallel per-workspace runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym.detector.mutations import garble, remove, wrong_values
from coworkgym.detector.review import tree_key
from coworkgym.runtime import LocalRuntime
from coworkgym.runtime.batch import BATCH_ROOT, batchable
from coworkgym.runtime.workspace import copy_tree, materialize
from coworkgym.sandbox import Limits
from coworkgym.sandbox.direct import DirectSandbox
from tests.support.builders import good_package


def states(family: str, root: Path) -> tuple[list[Path], str]:
    """The reference completion, the untouched workspace and damaged deliverables."""
    pkg = good_package(family)
    untouched = root / "untouched"
    workdir = materialize(pkg, untouched).workdir
    reference = copy_tree(untouched, root / "reference")
    assert all(r.ok for r in LocalRuntime().run_reference(pkg, reference, workdir))
    found = [reference, untouched]
    outputs = [a.path for a in pkg.artifacts.outputs] if pkg.artifacts else []
    for i, damage in enumerate((remove, wrong_values, garble)):
        damaged = copy_tree(reference, root / f"damaged-{i}")
        damage(damaged / outputs[i % len(outputs)])
        found.append(damaged)
    return found, workdir


@pytest.mark.parametrize(
    ("family", "batched"),
    [("weather_report", True), ("report_figures", True), ("fix_failing_function", False)],
)
def test_scoring_together_equals_scoring_alone(family: str, batched: bool, tmp_path: Path) -> None:
    pkg = good_package(family)
    workspaces, workdir = states(family, tmp_path)
    runtime = LocalRuntime()
    assert batchable(pkg, workdir) is batched
    alone = [runtime.run_verifier(pkg, ws, workdir) for ws in workspaces]
    runs_before = runtime.sandbox_runs
    together = runtime.verify_many(pkg, workspaces, workdir, None)
    assert runtime.sandbox_runs - runs_before == (1 if batched else len(workspaces))
    assert [(o.valid, o.reward, o.rewards) for o in together] == [
        (o.valid, o.reward, o.rewards) for o in alone
    ]
    assert together[0].reward == 1.0 and together[1].reward is not None
    assert together[1].reward < 1.0


def test_a_batch_that_times_out_is_scored_alone(tmp_path: Path) -> None:
    """One slow workspace must not decide the others' outcomes."""
    pkg = good_package("weather_report")
    workspaces, workdir = states("weather_report", tmp_path)
    runtime = LocalRuntime()
    runtime.verifier_limits = Limits(timeout_s=0.05, memory_mb=2048)
    outcomes = runtime.verify_many(pkg, workspaces[:2], workdir, None)
    assert runtime.sandbox_runs == 3  # the batch, then one run per workspace
    assert all(not o.valid and o.run is not None and o.run.timed_out for o in outcomes)


def test_a_state_is_its_files_modes_and_contents(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "x.txt").write_text("same")
    assert tree_key(a) == tree_key(b)
    (b / "sub" / "x.txt").chmod(0o755)
    assert tree_key(a) != tree_key(b)
    (b / "sub" / "x.txt").chmod(0o644)
    (b / "sub" / "x.txt").write_text("other")
    assert tree_key(a) != tree_key(b)


def test_the_batch_runs_in_the_in_pod_sandbox_too(tmp_path: Path) -> None:
    """DirectSandbox has no mounts: it rewrites arguments naming a mount target, so the
    batch must pass every path as an argument (never inside its code)."""
    pkg = good_package("weather_report")
    workspaces, workdir = states("weather_report", tmp_path)
    runtime = LocalRuntime(sandbox=DirectSandbox())
    alone = [runtime.run_verifier(pkg, ws, workdir) for ws in workspaces]
    together = runtime.verify_many(pkg, workspaces, workdir, None)
    assert [(o.valid, o.reward) for o in together] == [(o.valid, o.reward) for o in alone]
    assert together[0].valid and together[0].reward == 1.0
    assert not Path(BATCH_ROOT).exists()  # nothing written at the in-sandbox path

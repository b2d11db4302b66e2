"""The consistency rules drop no clean rollout: every procedural family, one and three
turns, rolled out by the oracle, nop and a harness that asks the user (the rollout engine
in its sandbox, with the scripted user), filtered with the packages and the final
workspaces stored as the cluster's episode pod stores them: all kept, none skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym.families import FAMILIES
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.filters import FilterContext, filter_trajectories, load_package_facts
from coworkgym.rollout.harness import PolicyConfig
from coworkgym.rollout.trajectory import Trajectory
from tests.support.builders import good_package
from tests.unit.test_filter_consistency import StoringVerifier

pytestmark = [pytest.mark.slow]

HARNESSES = ("oracle", "nop", "consistency-asker")  # the asker is registered by its module


def test_real_rollouts_of_every_family_pass_every_rule(tmp_path: Path) -> None:
    store, pending = tmp_path / "store", tmp_path / "pending"
    store.mkdir()
    folders: list[str] = []
    trajectories: list[Trajectory] = []
    with RolloutEngine(verifier=StoringVerifier(pending)) as engine:
        for family in sorted(FAMILIES):
            for turns in (1, 3):
                package = good_package(family, turns=turns, seed=11)
                folder = tmp_path / "packages" / f"{family}-{turns}"
                package.write(folder)
                folders.append(str(folder))
                for harness in HARNESSES:
                    trajectory = engine.run(package, harness, PolicyConfig(model="scripted"))
                    pending.rename(store / trajectory.id)
                    trajectories.append(trajectory)
    context = FilterContext(load_package_facts(folders), (store,))
    kept, report = filter_trajectories(trajectories, None, context)
    dropped = {s.rule: s.examples for s in report.stages if s.dropped}
    notes = {s.rule: s.notes for s in report.stages if s.notes}
    assert len(kept) == len(trajectories) == len(FAMILIES) * 2 * len(HARNESSES), dropped
    assert notes == {}

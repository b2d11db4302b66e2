"""What Harbor's separate verifier sees of an agent's state (coworkgym.detector.separate_verifier):
the environment as built, with only the declared artifacts laid over it."""

from __future__ import annotations

from pathlib import Path

from coworkgym.detector.separate_verifier import declared_artifacts, verified_apart, view_apart
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime.workspace import root_changes

BASE = {
    "instruction.md": "Write /app/totals.json.\n",
    "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
    "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    "solution/solve.sh": "#!/bin/bash\necho '{}' > /app/totals.json\n",
}


def _task(root: Path, toml: str) -> EnvironmentPackage:
    for rel, text in {**BASE, "task.toml": toml}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return EnvironmentPackage.load(root)


def test_harbors_rule_for_a_verifier_of_its_own(tmp_path: Path) -> None:
    shared = _task(tmp_path / "shared", 'schema_version = "1.4"\n')
    apart = _task(
        tmp_path / "apart",
        'schema_version = "1.4"\nartifacts = ["/app/totals.json"]\n'
        '[verifier]\nenvironment_mode = "separate"\n',
    )
    stepped = _task(
        tmp_path / "stepped",
        'schema_version = "1.4"\n[[steps]]\nname = "one"\nartifacts = ["/out/a.txt"]\n'
        '[steps.verifier]\nenvironment_mode = "separate"\n[[steps]]\nname = "two"\n',
    )
    assert not verified_apart(shared, None)
    assert verified_apart(apart, None) and declared_artifacts(apart, None) == ["/app/totals.json"]
    assert verified_apart(stepped, "one") and not verified_apart(stepped, "two")
    assert declared_artifacts(stepped, "one") == ["/out/a.txt"]


def test_the_view_holds_the_built_environment_and_only_the_declared_artifacts(
    tmp_path: Path,
) -> None:
    initial, state = tmp_path / "s0", tmp_path / "state"
    initial.mkdir()
    (initial / "orders.csv").write_text("built\n")
    state.mkdir()
    (state / "orders.csv").write_text("changed by the agent\n")
    (state / "totals.json").write_text("{}\n")
    (state / "notes.txt").write_text("not declared\n")
    (root_changes(state) / "out").mkdir(parents=True)
    (root_changes(state) / "out" / "a.txt").write_text("outside\n")
    (root_changes(state) / "out" / "b.txt").write_text("outside, not declared\n")

    view = view_apart(state, initial, tmp_path / "view", ["/app/totals.json", "/out/a.txt"], "/app")

    assert sorted(p.name for p in view.iterdir()) == ["orders.csv", "totals.json"]
    assert (view / "orders.csv").read_text() == "built\n"
    assert sorted(p.name for p in (root_changes(view) / "out").iterdir()) == ["a.txt"]


def test_nothing_declared_means_the_verifier_sees_the_environment_as_built(
    tmp_path: Path,
) -> None:
    initial, state = tmp_path / "s0", tmp_path / "state"
    initial.mkdir()
    state.mkdir()
    (state / "totals.json").write_text("{}\n")
    view = view_apart(state, initial, tmp_path / "view", [], "/app")
    assert list(view.iterdir()) == []

"""The Done-when check: `cowork-gym rollout` over the packages `cowork-gym synth --count 6`
releases gives the oracle reward 1 on every one and nop 0 (the verifier's score of the
untouched workspace after the user's patches); the
trajectories reload; a re-run resumes (runs nothing); bad input is refused with the
reason."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.logs import configure_logging
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.batch import LocalStore, find_packages
from coworkgym.rollout.trajectory import read_jsonl
from coworkgym.runtime.local import LocalRuntime
from coworkgym.runtime.workspace import apply_patch, materialize

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(autouse=True, scope="module")
def _quiet_logs() -> None:
    configure_logging()  # as `main()` does: logs on stderr, stdout keeps the JSON


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("envs")
    result = CliRunner().invoke(
        app, ["synth", "--count", "6", "--out", str(out), "--workers", "2", "--no-harbor-lint"]
    )
    assert result.exit_code == 0, result.output
    return out


def untouched_reward(package: Path) -> float | None:
    """The verifier's score of s0 with every user patch applied and nothing else done."""
    pkg = EnvironmentPackage.load(package)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workdir = materialize(pkg, workspace).workdir
        for patch in pkg.patches:
            apply_patch(pkg, patch.turn, workspace)
        return LocalRuntime().run_verifier(pkg, workspace, workdir).reward


def rollout(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["rollout", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_oracle_scores_1_and_nop_0_on_every_released_package(
    released: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rollouts"
    manifest = str(released / "manifest.jsonl")
    summary = rollout(manifest, "--harness", "oracle", "--harness", "nop", "--out", str(out))
    trajectories = list(read_jsonl(out / "trajectories.jsonl"))
    assert len(trajectories) == 12
    by_harness: dict[str, list[float | None]] = {"oracle": [], "nop": []}
    for t in trajectories:
        by_harness[t.policy.harness].append(t.reward)
        assert t.termination.reason == "agent_done"
        planned = t.environment.turns - 1
        assert len([i for i in t.interventions if i.kind == "turn"]) == planned
        assert t.simulator_faults == []
    assert by_harness["oracle"] == [1.0] * 6, by_harness
    # nop's reward is the verifier's score of the untouched workspace after the user's
    # patches: no family gives credit for work not done.
    for t in (t for t in trajectories if t.policy.harness == "nop"):
        assert t.verification is not None and t.verification.passed is False
        assert t.reward == untouched_reward(Path(t.environment.uri or "")), t.environment.name
        assert t.reward == 0.0, t.environment.name
    rows = {row["harness"]: row for row in summary["harnesses"]}  # type: ignore[attr-defined]
    assert rows["oracle"]["pass_rate"] == 1.0 and rows["nop"]["pass_rate"] == 0.0
    # resumable: the same command again runs nothing and reports the same batch
    again = CliRunner().invoke(
        app, ["rollout", manifest, "--harness", "oracle", "--harness", "nop", "--out", str(out)]
    )
    assert again.exit_code == 0 and "0 rollouts run, 12 already stored" in again.stdout
    assert len(LocalStore(out).load()) == 12
    # ... and the trajectories export and reload (the rest of the Done-when)
    datasets = pytest.importorskip("datasets")
    hf = tmp_path / "hf"
    exported = CliRunner().invoke(
        app, ["export", str(out / "trajectories.jsonl"), "--format", "hf", "--out", str(hf)]
    )
    assert exported.exit_code == 0, exported.output
    files = [str(p) for p in hf.rglob("*.parquet")]
    rows = datasets.load_dataset("parquet", data_files=files)["train"]
    assert rows.num_rows == 12 and sorted(rows["reward"])[-6:] == [1.0] * 6


def test_a_torn_line_is_rerun_on_resume(released: Path, tmp_path: Path) -> None:
    out = tmp_path / "rollouts"
    package = str(sorted(released.glob("cwg-*"))[0])
    rollout(package, "--harness", "nop", "--samples", "2", "--out", str(out))
    path = out / "trajectories.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # a crash mid-write
    rollout(package, "--harness", "nop", "--samples", "2", "--out", str(out))
    assert len(LocalStore(out).load()) == 2
    assert {t.key.sample for t in LocalStore(out).load()} == {0, 1}


def flat(text: str) -> str:
    """Rich wraps error panels: compare words, not lines."""
    return " ".join(w for w in text.replace("│", " ").split())


def test_bad_input_is_refused_with_the_reason(tmp_path: Path) -> None:
    runner = CliRunner()
    empty = runner.invoke(app, ["rollout", str(tmp_path), "--out", str(tmp_path / "o")])
    assert empty.exit_code == 2 and "not a package folder" in flat(empty.output)
    unknown = runner.invoke(app, ["rollout", str(tmp_path), "--harness", "nonesuch"])
    assert unknown.exit_code == 2 and "unknown ['nonesuch']" in flat(unknown.output)
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    call = ["rollout", str(tmp_path), "--harness", "tool-calling", "--model", "m"]
    nowhere = runner.invoke(app, [*call, "--base-url", dead])
    assert nowhere.exit_code == 2 and f"cannot reach {dead}" in flat(nowhere.output)
    with pytest.raises(ValueError, match="needs 'location'"):
        (tmp_path / "m.jsonl").write_text('{"name": "x"}\n')
        find_packages([str(tmp_path / "m.jsonl")])

"""`cowork-gym filter` and `cowork-gym export` on trajectory files, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from rich.console import Console
from typer.testing import CliRunner

from coworkgym import cli
from coworkgym.cli import app
from coworkgym.rollout.export import read_atif
from coworkgym.rollout.filters import FunnelReport
from coworkgym.rollout.trajectory import dump_line, read_jsonl
from tests.fixtures import trajectories as make


@pytest.fixture(autouse=True)
def wide_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "out", Console(width=400))


@pytest.fixture
def rollouts(tmp_path: Path) -> Path:
    folder = tmp_path / "rollouts"
    (folder / "batch-1").mkdir(parents=True)
    records = make.numbered(  # six rollouts of their own: each its own id and start
        [
            make.solved(sample=0),
            make.solved(sample=1),
            make.failed(0.0),
            make.ended("max_steps"),
            make.with_simulator_fault(),
            make.claims_missing_file(),
        ]
    )
    good, bad = records[:3], records[3:]
    (folder / "batch-1" / "a.jsonl").write_text("".join(dump_line(t) for t in good[:2] + bad))
    (folder / "b.jsonl").write_text(dump_line(good[2]))
    return folder


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_filter_prints_the_funnel_and_writes_kept_report_and_dropped(
    rollouts: Path, tmp_path: Path
) -> None:
    kept, report, dropped = tmp_path / "kept.jsonl", tmp_path / "funnel.json", tmp_path / "d.jsonl"
    code, output = run(
        "filter", str(rollouts), "--out", str(kept), "--report", str(report),
        "--dropped", str(dropped),
    )  # fmt: skip
    assert code == 0, output
    assert "6 raw → 3 kept" in output
    assert "truncated:max_steps 1" in output
    assert len(list(read_jsonl(kept))) == 3
    funnel = FunnelReport.model_validate_json(report.read_text())
    assert funnel.reason_counts() == {
        "simulator_fault:private_state_leaked": 1,
        "truncated:max_steps": 1,
        "claimed_missing": 1,
    }
    lines = [json.loads(line) for line in dropped.read_text().splitlines()]
    assert {line["rule"] for line in lines} == {
        "simulator_faults",
        "record_integrity",
        "claim_evidence",
    }
    assert all(line["where"].startswith(str(rollouts)) for line in lines)


def test_filter_flags_override_a_settings_file(rollouts: Path, tmp_path: Path) -> None:
    settings = tmp_path / "filter.yaml"
    settings.write_text("dropTruncated: false\nminReward: 1.0\n")
    code, output = run(
        "filter", str(rollouts), "--out", str(tmp_path / "k.jsonl"), "--settings", str(settings),
        "--skip", "claim_evidence", "--json",
    )  # fmt: skip
    assert code == 0, output
    funnel = json.loads(output)
    assert funnel["settings"] == {
        "dropTruncated": False,
        "dropUnrecoveredToolErrors": False,
        "minReward": 1.0,
        "parseClaimsFromMessage": True,
        "maxFileBytes": 2 * 1024**3,
        "skipRules": ["claim_evidence"],
    }
    # kept: two solved, the truncated one (reward 1) and the one claiming a missing file
    assert funnel["kept"] == 4


def test_filter_rejects_an_unknown_rule_by_name(rollouts: Path, tmp_path: Path) -> None:
    code, output = run("filter", str(rollouts), "--out", str(tmp_path / "k"), "--skip", "vibes")
    assert code == 2
    assert "skip_rules" in output
    assert "vibes" in output


def test_filter_counts_a_bad_record_or_names_its_line_when_strict(
    rollouts: Path, tmp_path: Path
) -> None:
    with (rollouts / "b.jsonl").open("a") as handle:
        handle.write('{"schema_version": "cowork-gym.trajectory/v1", "key": 3}\n')
    code, output = run("filter", str(rollouts), "--out", str(tmp_path / "k.jsonl"))
    assert code == 0, output
    assert "schema_error 1" in output
    assert "1 unreadable line(s) skipped" in output
    code, output = run("filter", str(rollouts), "--out", str(tmp_path / "k.jsonl"), "--strict")
    assert code == 2
    assert "b.jsonl:2" in output.replace("\n", "")


def test_export_atif_and_hf_and_load_them_back(rollouts: Path, tmp_path: Path) -> None:
    kept = tmp_path / "kept.jsonl"
    assert run("filter", str(rollouts), "--out", str(kept))[0] == 0
    originals = list(read_jsonl(kept))

    code, output = run("export", str(kept), "--format", "atif", "--out", str(tmp_path / "atif"))
    assert code == 0, output
    assert "exported 3 trajectories (atif)" in output
    assert sorted(read_atif(tmp_path / "atif"), key=lambda t: t.id) == sorted(
        originals, key=lambda t: t.id
    )

    code, output = run("export", str(kept), "--format", "hf", "--out", str(tmp_path / "hf"))
    assert code == 0, output
    loaded = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "hf" / "data" / "*.parquet"), split="train"
    )
    assert [row["id"] for row in loaded] == [t.id for t in originals]
    assert all(any(row["trainable"]) for row in loaded)


def test_an_output_among_the_inputs_is_refused(rollouts: Path) -> None:
    inside = rollouts / "batch-1" / "kept.jsonl"
    inside.write_text("")  # left by an earlier run
    code, output = run("filter", str(rollouts), "--out", str(inside))
    assert code == 2
    assert "the output is one of the inputs" in output
    code, output = run("export", str(rollouts), "--format", "atif", "--out", str(inside))
    assert code == 2
    assert "the output is one of the inputs" in output


def test_export_of_nothing_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, output = run("export", str(empty), "--format", "hf", "--out", str(tmp_path / "x"))
    assert code == 2
    assert "no trajectories" in output

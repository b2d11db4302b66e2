"""`cowork-gym coverage`: served and produced counts per cell, task shapes per family and
difficulty, from the families (a planned campaign) or from a released manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.coverage import family_report, heatmap, manifest_report
from coworkgym.families import FAMILIES
from coworkgym.release import LocalPublisher
from coworkgym.taxonomy import served_grid
from tests.support.builders import good_package


def test_the_family_report_plans_a_campaign_inside_the_served_cells() -> None:
    report = family_report(count=60, seed=0)
    assert report.served == served_grid()
    assert sum(report.produced.values()) == 60
    assert report.outside_served == 0
    # 60 specs reach 60 cells, each once (61 are served: the sampler balances over them)
    assert set(report.produced) <= set(report.served)
    assert len(report.produced) == min(60, len(report.served))
    families = {family for family, _ in report.shapes}
    assert families == set(FAMILIES)
    assert ("folder_organize", "easy") not in report.shapes  # it deletes files: never easy
    ledger = report.shapes[("ledger_reconciliation", "hard")]
    assert ledger.span("turns") == "1–3" and ledger.tasks == 9
    assert int(ledger.span("components").split("–")[0]) > 10


def test_the_manifest_report_reads_the_released_packages(tmp_path: Path) -> None:
    publisher = LocalPublisher(tmp_path / "out")
    for name, family, turns in [("a", "weather_report", 1), ("b", "meeting_notes", 2)]:
        pkg = good_package(family, turns=turns)
        cowork = pkg.config.cowork
        assert cowork is not None
        record = {"name": name, "family": family, "scenario": cowork.taxonomy.scenario}
        publisher.publish(name, pkg, record)
    manifest = Path(publisher.write_manifest())
    report = manifest_report(manifest)
    assert report.produced == {
        ("data_analysis", "data_analysis"): 1,
        ("administration", "information_extraction"): 1,
    }
    assert report.unread == []
    notes = report.shapes[("meeting_notes", "medium")]
    assert (notes.tasks, notes.span("turns"), notes.span("inputs")) == (1, "2", "1")


def test_a_broken_manifest_line_is_named(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text('{"name": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=r"manifest.jsonl:2: not a JSON record"):
        manifest_report(manifest)


def test_the_heatmap_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = heatmap(family_report(count=12), tmp_path / "docs" / "coverage.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_prints_the_cells_and_writes_the_heatmap(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "c.png"
    result = CliRunner().invoke(
        app, ["coverage", "--families", "--count", "30", "--png", str(png), "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["heatmap"] == str(png) and png.is_file()
    assert sum(c["produced"] for c in document["cells"]) == 30
    assert {c["capability"] for c in document["cells"]} >= {"debugging", "reconciliation"}


def test_the_command_wants_one_source() -> None:
    result = CliRunner().invoke(app, ["coverage"])
    assert result.exit_code == 2
    assert "--families" in result.output

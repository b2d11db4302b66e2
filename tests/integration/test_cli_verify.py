"""`cowork-gym verify` prints every family's table: evidence quoting JSON pointers such as
``summary.json[/wettest_month]`` is shown as text, never parsed as rich markup."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from coworkgym import cli
from coworkgym.cli import app
from coworkgym.families import FAMILIES
from coworkgym.runtime import LocalRuntime
from coworkgym.runtime.workspace import materialize
from tests.support.builders import good_package


@pytest.fixture(autouse=True)
def wide_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that no cell wraps, so the test can find each one whole."""
    monkeypatch.setattr(cli, "out", Console(width=400))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_verify_prints_the_table_of_a_solved_workspace(family: str, tmp_path: Path) -> None:
    pkg = good_package(family)
    package_dir = pkg.write(tmp_path / "package")
    workspace = tmp_path / "workspace"
    workdir = materialize(pkg, workspace).workdir
    assert all(r.ok for r in LocalRuntime().run_reference(pkg, workspace, workdir))

    result = CliRunner().invoke(app, ["verify", str(package_dir), "--workspace", str(workspace)])

    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    assert f"{pkg.name}: reward 1.0" in result.output
    component_ids = [c.id for c in pkg.verifier.components] if pkg.verifier else []
    assert component_ids and all(cid in result.output for cid in component_ids)


def test_verify_shows_bracketed_evidence_verbatim(tmp_path: Path) -> None:
    pkg = good_package("weather_report")
    package_dir = pkg.write(tmp_path / "package")
    workspace = tmp_path / "workspace"
    workdir = materialize(pkg, workspace).workdir
    LocalRuntime().run_reference(pkg, workspace, workdir)

    result = CliRunner().invoke(app, ["verify", str(package_dir), "--workspace", str(workspace)])

    assert result.exit_code == 0, repr(result.exception)
    assert "summary.json[/wettest_month]" in result.output

"""The CLI takes commands from other installed packages through the `cowork_gym.commands`
entry point group (the training package's `select` comes this way); a broken one is
reported and the rest of the CLI still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PLUGIN = '''
import typer

def register(app: typer.Typer) -> None:
    @app.command("hello")
    def hello() -> None:
        """Say hello (from a plugin)."""
        print("hello from a plugin")
'''


def installed_plugins(folder: Path) -> dict[str, str]:
    """Two distributions on PYTHONPATH, as pip would leave them: one working, one broken."""
    (folder / "good_plugin.py").write_text(PLUGIN)
    (folder / "broken_plugin.py").write_text("raise RuntimeError('plugin bug')\n")
    for name, target in (("good", "good_plugin:register"), ("broken", "broken_plugin:register")):
        info = folder / f"{name}_plugin-0.1.dist-info"
        info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.1\n"
        (info / "METADATA").write_text(metadata)
        (info / "entry_points.txt").write_text(f"[cowork_gym.commands]\n{name} = {target}\n")
    return {**os.environ, "PYTHONPATH": str(folder)}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coworkgym", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )


def test_a_plugin_command_runs_and_a_broken_plugin_is_reported(tmp_path: Path) -> None:
    env = installed_plugins(tmp_path)
    run = cli(env, "hello")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "hello from a plugin"
    said = " ".join(run.stderr.split())
    assert "commands from broken_plugin:register not loaded" in said and "plugin bug" in said
    assert cli(env, "--help").returncode == 0


def test_select_without_the_training_extra_says_how_to_install_it(tmp_path: Path) -> None:
    """The training package's `select` is always registered (it ships in the wheel); with
    torch not importable, as without the extra, it says how to install it. A stand-in torch
    that cannot be imported comes first on the path, so this holds with the extra too."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError('No module named torch')\n")
    trajectories = tmp_path / "t.jsonl"
    trajectories.write_text("")
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    run = cli(env, "select", str(trajectories), "--model", str(tmp_path), "--out", "k.jsonl")
    assert run.returncode == 2, run.stderr
    said = " ".join(run.stderr.split())
    assert "needs the training extra" in said and "install-training" in said

"""`python -m coworkgym_testbed env`: what a user of the node needs (the relays pods use),
and an `eval` line that works from any folder. From a recorded state file; nothing runs."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from coworkgym_testbed import __main__ as cli
from coworkgym_testbed.components import S3Credentials
from coworkgym_testbed.testbed import Testbed

PORTS = {"kube-apiserver": 40001, "s3": 40002, "s3-node-relay": 40003, "api-node-relay": 40004}


def recorded(run_dir: Path, node: bool) -> Testbed:
    creds = S3Credentials(access_key="key", secret_key="secret", bucket="cowork-gym")
    tb = Testbed(run_dir=run_dir, ports=PORTS, s3_credentials=creds, node=node)
    run_dir.mkdir(parents=True, exist_ok=True)
    tb.save()
    return tb


def exported(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, str]:
    assert cli.main(list(argv)) == 0
    lines = capsys.readouterr().out.splitlines()
    pairs = [shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in lines]
    return {k: v for k, v in pairs if k != "PATH"}


def test_env_names_the_relays_of_a_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    recorded(run_dir, node=True)
    env = exported(capsys, "--dir", str(run_dir), "env")
    assert env["COWORKGYM_TESTBED_DIR"] == str(run_dir)
    assert env["COWORKGYM_NODE_IP"] == "10.244.0.1"
    assert env["COWORKGYM_API_NODE_PORT"] == "40004"
    assert env["COWORKGYM_S3_NODE_PORT"] == "40003"
    assert env["COWORKGYM_S3_NODE_ENDPOINT"] == "http://10.244.0.1:40003"
    assert env["COWORKGYM_S3_ENDPOINT"] == "http://127.0.0.1:40002"


def test_env_without_a_node_has_no_relays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(tmp_path / "run", node=False)
    env = exported(capsys, "--dir", str(tmp_path / "run"), "env")
    assert not [k for k in env if "NODE" in k]


def test_the_eval_line_works_from_another_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    recorded(run_dir, node=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = f'eval "$({cli.env_command(run_dir)})" && echo "$COWORKGYM_API_NODE_PORT"'
    env = {k: v for k, v in os.environ.items() if not k.startswith("COWORKGYM_")}
    done = subprocess.run(
        ["bash", "-c", line], cwd=elsewhere, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "40004"

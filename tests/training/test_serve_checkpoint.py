"""`cowork-gym serve-checkpoint`, what an on-policy TrainingRun round's server pod runs: the
weights fetched from S3 without the optimizer state, served on every address under the
round's model name until told to stop, and weights that are not there refused, saying so."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym_training.serving import fetch_weights, serve_checkpoint
from tests.training import builders


class FolderS3:
    """A bucket kept in a folder: the listing and downloads fetch_weights makes."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get_paginator(self, name: str) -> FolderS3:
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
        base = self.root / Bucket
        keys = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        return [{"Contents": [{"Key": k} for k in keys if k.startswith(Prefix)]}]

    def download_file(self, bucket: str, key: str, path: str) -> None:
        Path(path).write_bytes((self.root / bucket / key).read_bytes())


def test_weights_are_fetched_without_the_optimizer_state(tmp_path: Path) -> None:
    step = tmp_path / "s3" / "runs" / "tiny" / "checkpoints" / "round-000" / "step-000002"
    (step / "sub").mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "trainer_state.pt", "sub/extra.json"):
        (step / name).write_text(name)
    (step.parent / "step-000001").mkdir()
    (step.parent / "step-000001" / "model.safetensors").write_text("an older step")
    uri = "s3://runs/tiny/checkpoints/round-000/step-000002"
    folder = fetch_weights(uri, tmp_path / "served", FolderS3(tmp_path / "s3"))
    fetched = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert fetched == ["config.json", "model.safetensors", "sub/extra.json"]
    with pytest.raises(FileNotFoundError, match="no model files under it"):
        fetch_weights("s3://runs/none", tmp_path / "none", FolderS3(tmp_path / "s3"))
    with pytest.raises(FileNotFoundError, match="no model folder there"):
        fetch_weights(str(tmp_path / "absent"), tmp_path / "x")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_checkpoint_is_served_on_every_address_until_stopped(tmp_path: Path) -> None:
    folder = builders.saved_student(tmp_path / "model")
    port, stop, said = free_port(), threading.Event(), []
    server = threading.Thread(
        target=serve_checkpoint,
        args=(str(folder),),
        kwargs={"model_name": "tiny@round-1", "host": "0.0.0.0", "port": port, "stop": stop,
                "say": said.append},
    )  # fmt: skip
    server.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    models = json.load(r)
                break
            except OSError:
                assert time.monotonic() < deadline, said
                time.sleep(0.2)
    finally:
        stop.set()
        server.join(30)
    assert [m["id"] for m in models["data"]] == ["tiny@round-1"]
    assert not server.is_alive()
    assert said[0] == f"serving {folder} as tiny@round-1 on http://0.0.0.0:{port}/v1"
    assert said[-1].startswith("stopped serving tiny@round-1 after 0 request(s): ")


def test_weights_that_are_not_there_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve-checkpoint", str(tmp_path / "absent")])
    assert result.exit_code == 2
    assert "no model folder there" in result.output

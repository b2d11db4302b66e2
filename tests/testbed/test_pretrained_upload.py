"""`cowork-gym pretrained upload` puts the prepared SmolLM2 folder into the test-bed's real S3
server, where a TrainingRun's spec.model reads it: every file arrives, byte for byte, under
the prefix given (the same layout download_prefix restores in the training pod)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from coworkgym.release import download_prefix
from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
MODEL = "smollm2-135m-instruct"


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_the_prepared_model_goes_to_s3_whole(testbed_env: Testbed, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs the training extra: make install-pretrained")
    from coworkgym_training.pretrained import prepared

    folder = prepared(MODEL)
    if folder is None:
        pytest.skip(f"{MODEL} is not prepared here: make install-pretrained")
    tb = testbed_env
    prefix = f"models-{uuid.uuid4().hex[:8]}/{MODEL}"
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym", "pretrained", "upload", MODEL,
         f"s3://{tb.s3_bucket}/{prefix}"],
        env=os.environ | tb.env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"s3://{tb.s3_bucket}/{prefix}" in done.stdout
    back = tmp_path / "back"
    assert download_prefix(tb.s3_client(), tb.s3_bucket, prefix, back) == len(digests(folder))
    assert digests(back) == digests(folder)


def test_an_unprepared_model_is_refused_with_the_fix(testbed_env: Testbed, tmp_path: Path) -> None:
    env = os.environ | testbed_env.env() | {"COWORKGYM_MODEL_CACHE": str(tmp_path / "empty")}
    done = subprocess.run(
        [sys.executable, "-m", "coworkgym", "pretrained", "upload", MODEL, "s3://b/p"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "pretrained prepare" in done.stderr

"""Checkpoints on the test-bed's S3 server (a real one, boto3): a run saves there, keeps
the latest two, and a second run resumes from the latest one it finds there."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

from coworkgym_testbed.testbed import Testbed
from coworkgym_training.trainer.metrics import read_log
from coworkgym_training.trainer.store import S3CheckpointStore
from tests.training.trainer_runs import config, run_in_process, weights, workspace

pytestmark = pytest.mark.testbed


def test_checkpoints_go_to_s3_and_a_new_run_resumes_from_there(
    testbed_env: Testbed, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    target = f"s3://{testbed_env.s3_bucket}/trainer-{uuid.uuid4().hex[:8]}/run"
    first = run_in_process(config(root, out=root / "a", checkpoint=target, max_steps=3))
    assert first.state == "succeeded" and first.checkpoint == f"{target}/step-000003"
    # a different folder, the same store: the run resumes at step 3, not at 0
    second = run_in_process(
        config(root, out=root / "b", checkpoint=target, max_steps=6, checkpoint_every=2)
    )
    assert second.state == "succeeded" and second.step == 6
    assert [r["step"] for r in read_log(root / "b")] == [4, 5, 6]

    s3 = testbed_env.s3_client()
    bucket, prefix = target.removeprefix("s3://").split("/", 1)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    steps = sorted({k.removeprefix(prefix + "/").split("/")[0] for k in keys})
    assert steps == ["latest.json", "step-000004", "step-000006"]  # the latest two kept
    pointer = s3.get_object(Bucket=bucket, Key=f"{prefix}/latest.json")["Body"].read()
    assert json.loads(pointer)["step"] == 6
    fetched = S3CheckpointStore(target, client=s3).fetch(6, tmp_path / "fetched")
    assert {"config.json", "model.safetensors", "trainer_state.pt"} <= {
        p.name for p in fetched.iterdir()
    }
    assert weights(fetched).keys() == weights(root / "model").keys()
    s3.close()

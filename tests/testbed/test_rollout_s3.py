"""Rollouts against the test-bed's real S3 server: packages read from s3://, trajectories
written there (one object per rollout, the JSONL rebuilt), and a re-run resumes."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.logs import configure_logging
from coworkgym.release import S3Publisher
from coworkgym.rollout.trajectory import parse_line
from coworkgym_testbed.testbed import Testbed
from tests.support.builders import good_package

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def test_rollouts_read_and_write_s3_and_resume(testbed_env: Testbed) -> None:
    configure_logging()  # logs to stderr: stdout carries the JSON summary
    tb = testbed_env
    pkg = good_package("weather_report", turns=2, seed=7)
    run = uuid.uuid4().hex[:8]
    source = S3Publisher(f"s3://{tb.s3_bucket}/envs-{run}", tb.s3_client())
    uri = source.publish(pkg.name, pkg, {"name": pkg.name, "digest": pkg.digest()})
    out = f"s3://{tb.s3_bucket}/rollouts-{run}"
    args = ["rollout", uri, "--harness", "oracle", "--harness", "nop", "--samples", "2"]
    first = CliRunner().invoke(app, [*args, "--out", out, "--json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert summary["location"] == f"{out}/trajectories.jsonl"
    client = tb.s3_client()
    listed = client.list_objects_v2(Bucket=tb.s3_bucket, Prefix=f"rollouts-{run}/rollouts/")
    assert len(listed.get("Contents", [])) == 4
    body = client.get_object(Bucket=tb.s3_bucket, Key=f"rollouts-{run}/trajectories.jsonl")
    trajectories = [parse_line(line) for line in body["Body"].read().decode().splitlines()]
    rewards = sorted((t.policy.harness, t.key.sample, t.reward) for t in trajectories)
    assert rewards == [("nop", 0, 0.0), ("nop", 1, 0.0), ("oracle", 0, 1.0), ("oracle", 1, 1.0)]
    assert {t.environment.uri for t in trajectories} == {uri}
    again = CliRunner().invoke(app, [*args, "--out", out])
    assert again.exit_code == 0 and "0 rollouts run, 4 already stored" in again.stdout

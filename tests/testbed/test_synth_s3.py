"""`cowork-gym synth --out s3://…` against the real S3-compatible server of the test-bed:
packages and the manifest land in the bucket, and a re-run skips what is released."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from coworkgym.package.package import EnvironmentPackage
from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed


def synth(prefix: str, tb: Testbed) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "coworkgym",
            "synth",
            "--count",
            "2",
            "--seed",
            "5",
            "--max-turns",
            "2",
            "--no-harbor-lint",
            "--out",
            f"s3://{tb.s3_bucket}/{prefix}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_synth_releases_to_s3_and_resumes(testbed_env: Testbed) -> None:
    tb = testbed_env
    prefix = f"campaign-{uuid.uuid4().hex[:8]}"
    first = synth(prefix, tb)
    assert first.returncode == 0, first.stderr[-2000:]
    s3 = tb.s3_client()
    manifest = s3.get_object(Bucket=tb.s3_bucket, Key=f"{prefix}/manifest.jsonl")["Body"].read()
    records = [json.loads(line) for line in manifest.decode().splitlines()]
    assert len(records) == 2
    for record in records:
        name = record["name"]
        assert record["location"] == f"s3://{tb.s3_bucket}/{prefix}/{name}"
        listed = s3.list_objects_v2(Bucket=tb.s3_bucket, Prefix=f"{prefix}/{name}/")
        files = {
            o["Key"][len(f"{prefix}/{name}/") :]: s3.get_object(Bucket=tb.s3_bucket, Key=o["Key"])[
                "Body"
            ].read()
            for o in listed["Contents"]
        }
        package = EnvironmentPackage.from_files(files)
        assert package.digest() == record["digest"]  # what was released is what was checked
    second = synth(prefix, tb)
    assert second.returncode == 0
    assert "(skipped, already released) │     2" in second.stdout

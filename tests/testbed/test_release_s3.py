"""Packages in the test-bed's real S3 server (SeaweedFS): published with their file modes and
symlinks as object metadata, downloaded with them restored; `cowork-gym check` and `verify`
take the s3:// URI of a released package."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from coworkgym.package.errors import PackageError
from coworkgym.package.package import SOLVE_SH, TEST_SH, EnvironmentPackage
from coworkgym.release import S3Publisher, fetch_package
from coworkgym.runtime import LocalRuntime
from coworkgym.runtime.workspace import materialize
from coworkgym_testbed.testbed import Testbed
from tests.support.builders import good_package

pytestmark = pytest.mark.testbed


def released(tb: Testbed, pkg: EnvironmentPackage) -> str:
    """Publish `pkg` under a fresh prefix; returns its location (s3://bucket/prefix/name)."""
    publisher = S3Publisher(f"s3://{tb.s3_bucket}/modes-{uuid.uuid4().hex[:8]}", tb.s3_client())
    return publisher.publish(pkg.name, pkg, {"name": pkg.name, "digest": pkg.digest()})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_package_keeps_its_modes_and_symlinks_through_s3(
    testbed_env: Testbed, tmp_path: Path
) -> None:
    tb = testbed_env
    base = good_package()
    pkg = replace(base, symlinks={"solution/run.sh": "solve.sh"})
    assert {SOLVE_SH, TEST_SH} <= pkg.executables
    uri = released(tb, pkg)

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    head = tb.s3_client().head_object(Bucket=bucket, Key=f"{prefix}/{SOLVE_SH}")
    assert head["Metadata"] == {"mode": "0755"}
    head = tb.s3_client().head_object(Bucket=bucket, Key=f"{prefix}/task.toml")
    assert head["Metadata"] == {"mode": "0644"}

    dest = fetch_package(uri, tmp_path / "downloaded", client=tb.s3_client())
    assert mode(dest / SOLVE_SH) == 0o755 and os.access(dest / SOLVE_SH, os.X_OK)
    assert mode(dest / TEST_SH) == 0o755
    assert mode(dest / "task.toml") == 0o644
    assert os.readlink(dest / "solution/run.sh") == "solve.sh"
    again = EnvironmentPackage.load(dest)
    assert again.files == pkg.files
    assert again.executables == pkg.executables
    assert again.symlinks == pkg.symlinks
    assert again.digest() == pkg.digest()


def test_a_download_from_nowhere_names_the_uri(testbed_env: Testbed, tmp_path: Path) -> None:
    tb = testbed_env
    missing = f"s3://{tb.s3_bucket}/no-such-prefix-{uuid.uuid4().hex[:8]}/env"
    with pytest.raises(PackageError, match=f"^{missing}: no objects under this prefix"):
        fetch_package(missing, tmp_path / "x", client=tb.s3_client())
    with pytest.raises(PackageError, match="NoSuchBucket"):
        fetch_package("s3://no-such-bucket-here/env", tmp_path / "y", client=tb.s3_client())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "300"}
    argv = [sys.executable, "-m", "coworkgym", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_check_and_verify_take_an_s3_uri(testbed_env: Testbed, tmp_path: Path) -> None:
    pkg = good_package()
    uri = released(testbed_env, pkg)

    check = cli("check", "--no-harbor-lint", uri)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"PASS {uri}" in check.stdout

    workspace = tmp_path / "workspace"
    workdir = materialize(pkg, workspace).workdir
    assert all(r.ok for r in LocalRuntime().run_reference(pkg, workspace, workdir))
    verify = cli("verify", uri, "--workspace", str(workspace))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"{pkg.name}: reward 1.0" in verify.stdout

    missing = uri + "-missing"
    for argv in (("check", missing), ("verify", missing, "--workspace", str(workspace))):
        failed = cli(*argv)
        assert failed.returncode == 2, failed.stdout + failed.stderr
        assert f"{missing}: no objects under this prefix" in failed.stderr

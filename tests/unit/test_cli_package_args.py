"""`cowork-gym check` and `verify` take a folder or an s3:// URI; a bad argument is named.
(Downloads from a real S3 server: tests/testbed/test_release_s3.py.)"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from coworkgym.cli import app


def test_check_names_a_path_that_is_no_package_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = CliRunner().invoke(app, ["check", str(missing)])
    assert result.exit_code == 2
    words = " ".join(result.output.replace("│", " ").split())  # the message, unwrapped
    assert f"{missing} is neither a package folder nor an s3:// URI" in words


def test_verify_refuses_a_bucket_without_a_package_prefix(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["verify", "s3://cowork-gym", "--workspace", str(tmp_path)])
    assert result.exit_code != 0
    assert "s3://cowork-gym: names a bucket, not a package" in str(result.exception)

"""Packages: load → write → load is identical; errors name the file and the field."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from coworkgym.package.errors import PackageError
from coworkgym.package.package import EnvironmentPackage, content_digest
from tests.support.builders import good_package


def test_round_trip_is_identical(tmp_path: Path) -> None:
    pkg = good_package(turns=2)
    first = pkg.write(tmp_path / "a")
    loaded = EnvironmentPackage.load(first)
    second = loaded.write(tmp_path / "b")
    again = EnvironmentPackage.load(second)
    assert loaded.files == pkg.files == again.files
    assert loaded.executables == pkg.executables
    assert again.digest() == pkg.digest()
    assert again.config == pkg.config and again.verifier == pkg.verifier
    assert again.patches == pkg.patches and again.user == pkg.user


def test_digest_follows_harbors_recipe() -> None:
    files = {"b.txt": b"2", "a.txt": b"1"}
    import hashlib

    lines = "".join(f"{k}\0{hashlib.sha256(v).hexdigest()}\n" for k, v in sorted(files.items()))
    assert content_digest(files) == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def test_harbor_digest_ignores_cowork_extensions() -> None:
    pkg = good_package()
    changed = EnvironmentPackage.from_files(
        {**pkg.files, ".user/user.json": pkg.files[".user/user.json"].replace(b"concise", b"terse")}
    )
    assert changed.harbor_digest() == pkg.harbor_digest()
    assert changed.digest() != pkg.digest()


def test_multi_turn_package_is_also_harbor_steps() -> None:
    pkg = good_package(turns=3)
    assert pkg.config.steps is not None and [s.name for s in pkg.config.steps] == [
        "turn-0",
        "turn-1",
        "turn-2",
    ]
    assert pkg.config.multi_step_reward_strategy == "final"
    assert "steps/turn-1/workdir/setup.sh" in pkg.files
    assert len(pkg.patches) == 2


def test_unknown_task_toml_field_is_named(tmp_path: Path) -> None:
    pkg = good_package()
    config = tomllib.loads(pkg.files["task.toml"].decode())
    config["agent"]["timeout_secs"] = 300
    files = {**pkg.files, "task.toml": tomli_w.dumps(config).encode()}
    with pytest.raises(PackageError) as err:
        EnvironmentPackage.from_files(files)
    assert "task.toml: agent.timeout_secs: unknown field" in str(err.value)


def test_bad_cowork_metadata_and_patch_are_named() -> None:
    pkg = good_package(turns=2)
    config = tomllib.loads(pkg.files["task.toml"].decode())
    config["metadata"]["cowork"]["taxonomy"]["difficulty"] = "extreme"
    files = {**pkg.files, "task.toml": tomli_w.dumps(config).encode()}
    files[".patch/turn-01/patch.json"] = b'{"turn": 1, "kind": "input_replaced"}'
    with pytest.raises(PackageError) as err:
        EnvironmentPackage.from_files(files)
    text = str(err.value)
    assert "task.toml: metadata.cowork.taxonomy.difficulty" in text
    assert ".patch/turn-01/patch.json: trigger: required field is missing" in text


def test_missing_task_toml_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match=r"task\.toml: missing"):
        EnvironmentPackage.load(tmp_path)


def test_task_keywords_name_each_label_once() -> None:
    # The scenario's domain `data_analysis` is also the first capability.
    pkg = good_package()
    assert pkg.config.task is not None
    once = ["data_analysis", "spreadsheet_authoring", "aggregation"]
    assert pkg.config.task.keywords == once
    written = tomllib.loads(pkg.files["task.toml"].decode())["task"]["keywords"]
    assert written == once

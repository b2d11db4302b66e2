"""Plain Harbor tasks load as Harbor 0.25 loads them; Cowork packages stay strict; rewards
follow Harbor's contract (reward.json wins, any keys, finite numbers only)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import tomli_w

from coworkgym.package.errors import PackageError
from coworkgym.package.harbor_ignore import uploaded
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime.local import read_outcome, read_rewards
from coworkgym.sandbox import SandboxResult
from tests.support.builders import good_package

HARBOR_FILES = {
    "instruction.md": b"Say hello.\n",
    "environment/Dockerfile": b"FROM debian\nWORKDIR /app\n",
    "tests/test.sh": b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
}


def harbor_task(toml: str) -> EnvironmentPackage:
    return EnvironmentPackage.from_files({"task.toml": toml.encode(), **HARBOR_FILES})


def test_legacy_version_becomes_schema_version() -> None:
    pkg = harbor_task('version = "1.0"\n')
    assert pkg.config.schema_version == "1.0"
    assert any("version is legacy" in note for note in pkg.notes)


def test_schema_version_wins_over_a_legacy_version() -> None:
    assert harbor_task('version = "1.0"\nschema_version = "1.4"\n').config.schema_version == "1.4"


@pytest.mark.parametrize(("allow", "mode"), [(True, "public"), (False, "no-network")])
def test_allow_internet_maps_to_network_mode(allow: bool, mode: str) -> None:
    pkg = harbor_task(f"[environment]\nallow_internet = {str(allow).lower()}\n")
    assert pkg.config.environment.network_mode == mode


def test_explicit_network_mode_wins_over_allow_internet() -> None:
    pkg = harbor_task('[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n')
    assert pkg.config.environment.network_mode == "no-network"


def test_legacy_sizes_become_megabytes() -> None:
    pkg = harbor_task('[environment]\nmemory = "2G"\nstorage = "512M"\n')
    assert (pkg.config.environment.memory_mb, pkg.config.environment.storage_mb) == (2048, 512)


def test_conflicting_legacy_size_is_named() -> None:
    with pytest.raises(PackageError) as err:
        harbor_task('[environment]\nmemory = "2G"\nmemory_mb = 1024\n')
    assert "memory='2G' (2048 MB) conflicts with memory_mb=1024" in str(err.value)


def test_unknown_keys_of_a_harbor_task_are_ignored_and_named() -> None:
    pkg = harbor_task("[agent]\ntimeout_secs = 30\n\n[[steps]]\nname = 'a'\nflavour = 'x'\n")
    assert pkg.config.agent.timeout_sec is None  # what Harbor does with the typo, too
    assert "task.toml: agent.timeout_secs: unknown field; Harbor ignores it" in pkg.notes
    assert "task.toml: steps[0].flavour: unknown field; Harbor ignores it" in pkg.notes


def test_real_errors_of_a_harbor_task_are_still_errors() -> None:
    with pytest.raises(PackageError) as err:
        harbor_task('[agent]\ntimeout_secs = 30\n\n[environment]\nnetwork_mode = "offline"\n')
    assert "environment.network_mode" in str(err.value)
    assert "timeout_secs" not in str(err.value)


def test_cowork_package_stays_strict() -> None:
    pkg = good_package()
    config = tomllib.loads(pkg.files["task.toml"].decode())
    config["agent"]["timeout_secs"] = 300
    with pytest.raises(PackageError, match=r"agent\.timeout_secs: unknown field"):
        EnvironmentPackage.from_files({**pkg.files, "task.toml": tomli_w.dumps(config).encode()})


def test_multi_step_instruction_is_every_step() -> None:
    files = {
        "task.toml": b"[[steps]]\nname = 'one'\n\n[[steps]]\nname = 'two'\n",
        "steps/one/instruction.md": b"First.\n",
        "steps/two/instruction.md": b"Second.\n",
    }
    pkg = EnvironmentPackage.from_files(files)
    assert pkg.is_multi_step and pkg.step_names == ["one", "two"]
    assert "First." in pkg.instruction and "Second." in pkg.instruction
    assert not good_package(turns=2).is_multi_step  # Cowork turns run from .patch/


def _write(logs: Path, name: str, text: str) -> Path:
    logs.mkdir(exist_ok=True)
    (logs / name).write_text(text)
    return logs


def test_multi_key_reward_json_without_reward_is_a_reward(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs", "reward.json", json.dumps({"format": 1, "accuracy": 0.5}))
    outcome = read_outcome(logs, SandboxResult(0, "", "", 0.1))
    assert outcome.valid and outcome.rewards == {"format": 1.0, "accuracy": 0.5}
    assert outcome.reward == 0.5  # a state is as good as its worst metric


def test_reward_key_is_the_headline_when_present(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs", "reward.json", '{"reward": 0.75, "exact_match": 0}')
    assert read_outcome(logs, SandboxResult(0, "", "", 0.1)).reward == 0.75


def test_reward_json_wins_over_reward_txt(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs", "reward.txt", "0\n")
    _write(logs, "reward.json", '{"reward": 1}')
    assert read_rewards(logs)[0] == {"reward": 1.0}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("reward.json", '{"reward": "1"}'),
        ("reward.json", '{"reward": NaN}'),
        ("reward.json", "1"),
        ("reward.json", "{}"),
        ("reward.txt", "true"),
        ("reward.txt", "inf"),
        ("reward.txt", ""),
    ],
)
def test_rewards_harbor_refuses_are_invalid(tmp_path: Path, name: str, text: str) -> None:
    rewards, why = read_rewards(_write(tmp_path / "logs", name, text))
    assert rewards is None and why


def test_harborignore_keeps_matching_files_out_of_the_upload() -> None:
    files = {
        "tests/.harborignore": b"wip/\n*.bak\n",
        "tests/test.sh": b"#!/bin/bash\n",
        "tests/wip/test_draft.py": b"",
        "tests/data/old.bak": b"",
        "tests/data/.harborignore": b"big.csv\n",
        "tests/data/big.csv": b"",
        "tests/data/small.csv": b"",
        "solution/solve.sh": b"",
    }
    assert sorted(uploaded(files, "tests")) == ["data/small.csv", "test.sh"]
    assert uploaded(files, "solution") == {"solve.sh": b""}

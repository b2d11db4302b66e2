"""`cowork-gym check` over the corpus: every defective package is flagged with its code and
owner; every good one passes (harbor lint included when Harbor is installed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coworkgym.detector import DetectorReport, IssueDetector
from coworkgym.detector.harbor_lint import harbor_executable
from tests.corpus.build import CASES, Case, build


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Case, Path]]:
    root = tmp_path_factory.mktemp("corpus")
    return {case.name: (case, path) for case, path in build(root)}


@pytest.fixture(scope="module")
def reports(corpus: dict[str, tuple[Case, Path]]) -> dict[str, DetectorReport]:
    detector = IssueDetector()
    return {name: detector.check_dir(path) for name, (_, path) in corpus.items()}


def test_corpus_is_big_enough() -> None:
    assert sum(1 for c in CASES if c.code is None) >= 3
    assert sum(1 for c in CASES if c.code is not None) >= 15
    assert len({c.code for c in CASES if c.code is not None}) >= 15


@pytest.mark.parametrize("case", [c for c in CASES if c.code is not None], ids=lambda c: c.name)
def test_defective_package_is_flagged_with_code_and_owner(
    case: Case, reports: dict[str, DetectorReport]
) -> None:
    report = reports[case.name]
    found = {(d.code, d.owner) for d in report.defects}
    assert (case.code, case.owner) in found, report.to_json()
    assert not report.passed
    for defect in report.defects:
        assert defect.message and defect.owner in ("builder", "verifier")


@pytest.mark.parametrize("case", [c for c in CASES if c.code is None], ids=lambda c: c.name)
def test_good_package_passes(case: Case, reports: dict[str, DetectorReport]) -> None:
    report = reports[case.name]
    assert report.passed, report.to_json()
    assert report.stats.reference_reward == 1.0
    assert report.stats.verifier_runs >= 6  # the controlled failures really ran


@pytest.mark.skipif(harbor_executable() is None, reason="harbor is not installed")
def test_good_cowork_package_passes_real_harbor_lint(
    reports: dict[str, DetectorReport], corpus: dict[str, tuple[Case, Path]]
) -> None:
    assert reports["good-weather-three-turns"].harbor_lint_ran
    _, path = corpus["good-weather-three-turns"]
    done = subprocess.run(
        [harbor_executable() or "harbor", "lint", "--json", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout or "[]") == []


def test_cli_exit_codes_and_json(corpus: dict[str, tuple[Case, Path]]) -> None:
    cli = [sys.executable, "-m", "coworkgym", "check", "--no-harbor-lint", "--json"]
    good = subprocess.run(
        [*cli, str(corpus["good-harbor-hello"][1])], capture_output=True, text=True, check=False
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)[0]["passed"] is True
    bad = subprocess.run(
        [*cli, str(corpus["harbor-noop-passes"][1])], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1
    codes = {d["code"] for d in json.loads(bad.stdout)[0]["defects"]}
    assert "ACCEPTS_UNTOUCHED" in codes

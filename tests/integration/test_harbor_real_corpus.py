"""`cowork-gym check` on real public Harbor tasks written by other people
(tests/fixtures/harbor-real/: the Harbor authors' cookbook recipes and Terminal-Bench 2
tasks; sources and licenses in its README). Each task's label (labels.toml) says what
Harbor would conclude and what check must conclude on this machine, where only the Debian
and PyPI registries answer: a verdict for every task whose image builds and whose phases
stay on those registries, and "could not run" naming the host or the services otherwise.

Slow: it builds each task's image (and, cold, the local Debian and Python 3.11/3.12/3.13
bases: minutes each, cached under ~/.cache/cowork-gym/images)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from coworkgym.detector import DetectorReport, IssueDetector
from coworkgym.image.buildah import Buildah

CORPUS = Path(__file__).parents[1] / "fixtures" / "harbor-real"
LABELS: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "labels.toml").read_text())

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        Buildah.usable() is not None, reason=f"no task images here: {Buildah.usable()}"
    ),
]


@pytest.fixture(scope="module")
def reports() -> dict[str, DetectorReport]:
    detector = IssueDetector(run_harbor_lint=False)
    return {name: detector.check_dir(CORPUS / name) for name in LABELS}


def test_every_task_is_labelled_and_attributed() -> None:
    on_disk = {p.name for p in CORPUS.iterdir() if p.is_dir()}
    assert on_disk == set(LABELS)
    readme = (CORPUS / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in LABELS)


@pytest.mark.parametrize("name", sorted(LABELS))
def test_check_reaches_the_labelled_verdict(name: str, reports: dict[str, DetectorReport]) -> None:
    label, report = LABELS[name], reports[name]
    assert report.verdict == label["verdict"], report.to_json()
    if label["verdict"] == "pass":
        assert report.stats.reference_reward == 1.0
    elif label["verdict"] == "fail":
        assert label["code"] in {d.code for d in report.errors}, report.to_json()
    else:
        assert report.could_not_run and label["reason"] in report.could_not_run
        assert not report.errors  # a limit of this machine is never the task's defect


def test_a_sound_task_is_never_blamed(reports: dict[str, DetectorReport]) -> None:
    blamed = {n: [d.code for d in r.errors] for n, r in reports.items() if r.errors}
    assert not {n: c for n, c in blamed.items() if LABELS[n]["harbor"] == "sound"}

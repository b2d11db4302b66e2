"""End to end on one machine: 14 environments sampled from the taxonomy, with fault
injection on (probability 0.75, so most carry faults), through the real loop (sandboxed
execution, the Issue Detector, harbor lint). It was 30 at probability 0.5: the same
assertions, but 30 min of the suite's longest session under CI's load."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coworkgym.detector import IssueDetector
from coworkgym.roles.faults import REVEALED_BY
from coworkgym.spec import NamedSpec
from coworkgym.synth import Campaign, sampled_specs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
COUNT = 14
FAULT_PROBABILITY = 0.75


def specs() -> list[NamedSpec]:
    named = sampled_specs(COUNT, seed=1, max_turns=3)
    for n in named:
        n.spec.fault_injection.probability = FAULT_PROBABILITY
    return named


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    run = Campaign(str(tmp_path_factory.mktemp("synth")), workers=2)
    run.run(specs())
    return run


def test_every_environment_reaches_a_verdict(campaign: Campaign) -> None:
    assert len(campaign.outcomes) == COUNT
    phases = {o.phase for o in campaign.outcomes}
    assert phases <= {"Released", "Rejected"}, [o.message for o in campaign.outcomes]
    assert sum(o.phase == "Released" for o in campaign.outcomes) >= COUNT * 0.8
    for rejected in (o for o in campaign.outcomes if o.phase == "Rejected"):
        assert rejected.rounds[-1], "a rejection records its defects"


def test_every_injected_defect_is_caught_and_repaired(campaign: Campaign) -> None:
    injected = [o for o in campaign.outcomes if o.injected]
    assert len(injected) >= COUNT // 2  # the switch really injected faults
    for outcome in injected:
        for fault in outcome.injected:
            caught = REVEALED_BY[fault] & outcome.found_codes  # type: ignore[index]
            assert caught, f"{outcome.name}: injected {fault} was never detected"
        if outcome.phase == "Released":
            assert outcome.iterations >= 2  # released only after a revise round


def test_released_packages_pass_check_and_harbor_lint(campaign: Campaign) -> None:
    released = [Path(o.location or "") for o in campaign.outcomes if o.phase == "Released"]
    detector = IssueDetector()
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(detector.check_dir, released))
    for report in reports:
        assert report.passed, report.to_json()
        assert report.harbor_lint_ran


def test_manifest_lists_every_release_and_a_rerun_skips_them(campaign: Campaign) -> None:
    manifest = Path(campaign.target) / "manifest.jsonl"
    records = [json.loads(line) for line in manifest.read_text().splitlines()]
    released = {o.name for o in campaign.outcomes if o.phase == "Released"}
    assert {r["name"] for r in records} == released
    assert all(r["digest"].startswith("sha256:") for r in records)
    again = Campaign(campaign.target, workers=2)
    again.run(specs())
    assert {o.name for o in again.outcomes if o.skipped} == released
    assert {o.name for o in again.outcomes if not o.skipped} == {
        o.name for o in campaign.outcomes if o.phase != "Released"
    }

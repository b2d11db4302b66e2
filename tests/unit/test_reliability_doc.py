"""docs/reliability.md is the rendering of the committed drill results, and those results
are of the drills as they are now: every case count matches its generator.
(Fresh figures come from the drill tests themselves; `make reliability-doc` commits them.)"""

from __future__ import annotations

import pytest

from tests.drills.record import COMMITTED, DOC, load
from tests.drills.render import DRILLS, render


def test_the_page_is_the_rendering_of_the_committed_results() -> None:
    assert DOC.read_text() == render(), "docs/reliability.md is stale: run `make reliability-doc`"


def test_every_drill_has_committed_results() -> None:
    # a row that did not hold stays on the page as it was measured (the drill's own test
    # fails until it holds): the page shows what the drills found, not what they should
    for drill in DRILLS:
        assert (COMMITTED / f"{drill}.json").is_file(), f"{drill}: no committed results"


@pytest.mark.parametrize("drill", ["hostile-specs-api", "hostile-specs-cli"])
def test_the_spec_drills_counted_todays_generator(drill: str) -> None:
    from tests.support.hostile_specs import hostile_specs

    assert load(COMMITTED / f"{drill}.json").figures["cases"] == len(hostile_specs())


def test_the_package_and_agent_drills_counted_todays_cases() -> None:
    from tests.integration.test_drill_hostile_agents import ATTACKS
    from tests.integration.test_drill_hostile_packages import SPOILS

    assert load(COMMITTED / "hostile-packages.json").figures["cases"] == len(SPOILS)
    assert load(COMMITTED / "hostile-agents.json").figures["attacks"] == len(ATTACKS)


def test_the_workspace_drill_counted_todays_vectors_and_none_was_invalid() -> None:
    from tests.integration.test_drill_hostile_workspaces import VECTORS

    figures = load(COMMITTED / "hostile-workspaces.json").figures
    assert figures["vectors"] == len(VECTORS)
    assert figures["invalid"] == figures["wrong_reward"] == 0


def test_the_filter_corpus_counted_todays_cases_and_dropped_no_clean_record() -> None:
    from tests.unit.test_filter_consistency import REAL_ROLLOUTS, clean_fixtures, faults

    figures = load(COMMITTED / "faulty-trajectories.json").figures
    assert figures["faulty"] == len(faults("a goal"))
    assert figures["clean"] == len(REAL_ROLLOUTS) + len(clean_fixtures())
    assert figures["caught"] == figures["faulty"] and figures["clean_dropped"] == 0


def test_the_llm_endpoint_drill_counted_todays_cases_and_never_scored_a_failure() -> None:
    from tests.integration.test_drill_llm_endpoint import ROLLOUT_CASES, STAGE_CASES

    figures = load(COMMITTED / "llm-endpoint.json").figures
    assert figures["cases"] == len(ROLLOUT_CASES) + len(STAGE_CASES)
    assert figures["zero_rewards_recorded"] == figures["persistent_rollouts_scored"] == 0
    assert figures["stage_failures_not_retryable"] == 0


def test_the_kill_drill_met_the_issues_counts() -> None:
    from tests.testbed.test_drill_operator_kills import MIN_ENVIRONMENTS, MIN_KILLS

    figures = load(COMMITTED / "operator-kills.json").figures
    assert figures["kills"] >= MIN_KILLS and figures["environments"] >= MIN_ENVIRONMENTS
    assert figures["jobs_made_twice"] == 0 and figures["left_behind"] == 0


def test_the_restart_drill_restarted_todays_components() -> None:
    from tests.testbed.test_drill_control_plane import FAULTS

    figures = load(COMMITTED / "control-plane.json").figures
    assert figures["restarts"] == list(FAULTS)
    assert figures["manifests_before_package"] == 0 and figures["operator_exits"] == 0


def test_the_partial_work_drill_checked_every_family_and_held() -> None:
    from coworkgym.families import FAMILIES

    result = load(COMMITTED / "partial-work.json")
    assert result.figures["packages"] == len(FAMILIES)
    assert result.figures["ungated_rejected"] == f"{len(FAMILIES)}/{len(FAMILIES)}"
    assert result.figures["sound_max_stale"] <= 0.5 and result.figures["sound_max_missing"] <= 0.5
    assert result.passed

"""Each filter rule keeps a good trajectory and drops its bad case with the right reason;
the funnel adds up; the settings read camelCase; files stream, unreadable lines counted
(or, with strict, an error naming the line). The consistency rules have their own tests and
labelled corpus: test_filter_consistency.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkgym.rollout.filters import (
    RULE_ORDER,
    AgentEcho,
    ClaimEvidence,
    FilterPipeline,
    FilterSettings,
    FinalWorkspace,
    FunnelReport,
    InfrastructureFaults,
    Note,
    PrivateState,
    RecordIntegrity,
    RewardConsistency,
    SimulatorFaults,
    TurnConsistency,
    VerdictConsistency,
    VerifiedOutcome,
    claims_in_text,
    filter_files,
    filter_trajectories,
    funnel_table,
)
from coworkgym.rollout.reading import TrajectoryReadError, iter_records
from coworkgym.rollout.trajectory import Trajectory, dump_line
from tests.fixtures import trajectories as make


def reason(rule: object, trajectory: Trajectory) -> str | None:
    """The rule's drop reason; None when it keeps the trajectory (with a note or not)."""
    drop = rule.check(trajectory)  # type: ignore[attr-defined]
    return None if drop is None or isinstance(drop, Note) else str(drop.reason)


ALL_RULES = [
    InfrastructureFaults(),
    SimulatorFaults(),
    PrivateState(),
    RecordIntegrity(drop_unrecovered_tool_errors=True),
    TurnConsistency(),
    AgentEcho(),
    VerifiedOutcome(min_reward=1.0),
    VerdictConsistency(),
    RewardConsistency(),
    FinalWorkspace(),
    ClaimEvidence(),
]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.name)
def test_every_rule_keeps_a_solved_trajectory(rule: object) -> None:
    assert reason(rule, make.solved()) is None


# ---- infrastructure faults --------------------------------------------------------------
@pytest.mark.parametrize("termination", ["infrastructure_error", "model_error"])
def test_infrastructure_faults_drop_what_the_policy_did_not_cause(termination: str) -> None:
    trajectory = make.ended(termination, "node went away")
    assert reason(InfrastructureFaults(), trajectory) == f"termination:{termination}"


def test_infrastructure_faults_leave_policy_endings_alone() -> None:
    assert reason(InfrastructureFaults(), make.ended("max_steps")) is None


# ---- user-simulator faults --------------------------------------------------------------
@pytest.mark.parametrize(
    "kind", ["private_state_leaked", "contradicts_patch", "stopped_early", "simulator_error"]
)
def test_simulator_faults_name_the_kind(kind: str) -> None:
    assert reason(SimulatorFaults(), make.with_simulator_fault(kind)) == f"simulator_fault:{kind}"


def test_a_simulator_termination_without_a_fault_record_is_still_dropped() -> None:
    trajectory = make.ended("simulator_fault", "user model timed out")
    assert reason(SimulatorFaults(), trajectory) == "termination:simulator_fault"


# ---- record integrity -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trajectory", "expected"),
    [
        (make.unfinished(), "incomplete"),
        (make.ended("harness_crash", "KeyError"), "harness_crash"),
        (make.ended("max_steps"), "truncated:max_steps"),
        (make.ended("timeout"), "truncated:timeout"),
        (make.ended("budget_exhausted"), "truncated:budget_exhausted"),
        (make.with_unanswered_call(), "unanswered_tool_call"),
        (make.with_orphan_result(), "orphan_tool_result"),
        (make.with_duplicate_result(), "duplicate_tool_result"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_record_integrity_drops(trajectory: Trajectory, expected: str) -> None:
    assert reason(RecordIntegrity(), trajectory) == expected


def test_truncation_can_be_kept() -> None:
    assert reason(RecordIntegrity(drop_truncated=False), make.ended("max_steps")) is None


def test_recovered_tool_errors_are_kept_even_when_unrecovered_ones_are_dropped() -> None:
    rule = RecordIntegrity(drop_unrecovered_tool_errors=True)
    assert reason(rule, make.with_recovered_tool_error()) is None
    assert reason(rule, make.with_unrecovered_tool_error()) == "unrecovered_tool_error"
    assert reason(RecordIntegrity(), make.with_unrecovered_tool_error()) is None


# ---- verified outcome -------------------------------------------------------------------
def test_verified_outcome_drops_missing_and_invalid_verdicts() -> None:
    assert reason(VerifiedOutcome(), make.unverified()) == "unverified"
    drop = VerifiedOutcome().check(make.verifier_crashed())
    assert drop is not None
    assert drop.reason == "verification_invalid"
    assert "137" in drop.detail


def test_a_failed_but_valid_rollout_is_kept_unless_a_minimum_is_set() -> None:
    assert reason(VerifiedOutcome(), make.failed(0.0)) is None  # a real 0 is a GRPO signal
    assert reason(VerifiedOutcome(min_reward=1.0), make.failed(0.25)) == "below_min_reward"


def test_a_nan_reward_is_not_a_reward() -> None:
    assert reason(VerifiedOutcome(), make.failed(float("nan"))) == "reward_not_finite"


# ---- claim vs evidence ------------------------------------------------------------------
def test_claim_of_an_absent_file_is_dropped() -> None:
    drop = ClaimEvidence().check(make.claims_missing_file())
    assert drop is not None
    assert drop.reason == "claimed_missing"
    assert make.REPORT in drop.detail


def test_claim_of_an_unchanged_file_is_dropped() -> None:
    assert reason(ClaimEvidence(), make.claims_unchanged_input()) == "claimed_unchanged"


def test_a_file_left_as_the_users_patch_made_it_is_not_the_agents_work() -> None:
    assert reason(ClaimEvidence(), make.patched_then_claimed_untouched()) == "claimed_unchanged"


def test_recorded_claims_win_over_the_message() -> None:
    assert reason(ClaimEvidence(), make.records_missing_claim()) == "claimed_missing"


def test_message_claims_can_be_ignored() -> None:
    rule = ClaimEvidence(parse_claims_from_message=False)
    assert reason(rule, make.claims_missing_file()) is None


@pytest.mark.parametrize(
    ("text", "claims"),
    [
        ("I saved the report to /app/out/report.xlsx.", ["/app/out/report.xlsx"]),
        ("Created `Q3 notes.docx` and wrote totals.csv; done.", ["Q3 notes.docx", "totals.csv"]),
        ("The file **report.pdf** has been generated in out/.", ["report.pdf"]),
        ("I could not save report.xlsx because the disk is full.", []),
        ("See https://example.org/guide.html, I read data.csv.", []),
        ("Built with Node.js, e.g. like before.", []),
        ("All done, nothing to report.", []),
    ],
)
def test_claims_in_text(text: str, claims: list[str]) -> None:
    assert claims_in_text(text) == claims


# ---- the funnel -------------------------------------------------------------------------
def batch() -> list[Trajectory]:
    """Thirteen rollouts of their own (numbered: each its own id and start)."""
    return make.numbered(
        [
            make.solved(sample=0),
            make.solved(sample=1),
            make.failed(0.0),
            make.with_recovered_tool_error(),
            make.ended("infrastructure_error"),
            make.ended("model_error"),
            make.with_simulator_fault("contradicts_patch"),
            make.ended("max_steps"),
            make.with_unanswered_call(),
            make.verifier_crashed(),
            make.unverified(),
            make.claims_missing_file(),
            make.claims_unchanged_input(),
        ]
    )


def test_funnel_counts_add_up_stage_by_stage() -> None:
    kept, report = filter_trajectories(batch())
    assert report.raw == 13
    assert report.kept == len(kept) == 4
    assert [s.rule for s in report.stages] == list(RULE_ORDER)
    entered = report.raw
    for stage in report.stages:
        assert stage.entered == entered
        assert stage.dropped == sum(stage.reasons.values())
        assert stage.kept == stage.entered - stage.dropped
        entered = stage.kept
    assert entered == report.kept
    assert report.reason_counts() == {
        "termination:infrastructure_error": 1,
        "termination:model_error": 1,
        "simulator_fault:contradicts_patch": 1,
        "truncated:max_steps": 1,
        "unanswered_tool_call": 1,
        "verification_invalid": 1,
        "unverified": 1,
        "claimed_missing": 1,
        "claimed_unchanged": 1,
    }
    stages = {s.rule: s for s in report.stages}
    examples = stages["infrastructure_faults"].examples["termination:infrastructure_error"]
    assert examples and examples[0].startswith(batch()[4].id)


def test_a_minimum_reward_adds_to_the_outcome_stage() -> None:
    _, report = filter_trajectories(batch(), FilterSettings(min_reward=1.0))
    assert report.kept == 3
    (outcome,) = [s for s in report.stages if s.rule == "verified_outcome"]
    assert outcome.reasons["below_min_reward"] == 1


def test_skipped_rules_pass_everything() -> None:
    settings = FilterSettings(skip_rules=["claim_evidence", "verified_outcome"])
    _, report = filter_trajectories(batch(), settings)
    assert [s.rule for s in report.stages] == [
        r for r in RULE_ORDER if r not in ("claim_evidence", "verified_outcome")
    ]
    # the crashed verifier's invalid verdict (with its reason) and the unverified record
    # are consistent: no later rule drops them
    assert report.kept == 8


def test_funnel_report_is_camel_case_json_and_reads_back() -> None:
    _, report = filter_trajectories(batch(), FilterSettings(min_reward=0.5))
    wire = json.loads(report.model_dump_json(by_alias=True))
    assert wire["schema"] == "cowork-gym.funnel/v1"
    assert wire["settings"]["minReward"] == 0.5
    assert "elapsedS" in wire
    assert FunnelReport.model_validate(wire) == report


def test_funnel_table_lists_every_stage() -> None:
    _, report = filter_trajectories(batch())
    table = funnel_table(report)
    assert table.row_count == 1 + len(report.stages)


def test_settings_load_camel_case_yaml_and_name_bad_fields(tmp_path: Path) -> None:
    good = tmp_path / "filter.yaml"
    good.write_text("dropTruncated: false\nminReward: 1\nskipRules: [claim_evidence]\n")
    settings = FilterSettings.load(good)
    assert settings == FilterSettings(
        drop_truncated=False, min_reward=1.0, skip_rules=["claim_evidence"]
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("skipRules: [nonsense]\nminReward: high\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: .*skipRules") as caught:
        FilterSettings.load(bad)
    assert "minReward" in str(caught.value)


# ---- files ------------------------------------------------------------------------------
def write(path: Path, trajectories: list[Trajectory], extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dump_line(t) for t in trajectories) + extra)
    return path


def test_filter_files_streams_a_folder_and_writes_kept_lines_unchanged(tmp_path: Path) -> None:
    trajectories = batch()
    write(tmp_path / "in" / "a.jsonl", trajectories[:6])
    write(tmp_path / "in" / "nested" / "b.jsonl", trajectories[6:])
    dropped: list[str] = []
    report = filter_files(
        [tmp_path / "in"],
        tmp_path / "kept.jsonl",
        on_drop=lambda where, _, verdict: dropped.append(f"{where} {verdict.drop.reason}"),
    )
    kept_lines = (tmp_path / "kept.jsonl").read_text().splitlines(keepends=True)
    assert report.kept == len(kept_lines) == 4
    assert kept_lines[0] == dump_line(trajectories[0])
    assert len(dropped) == 9
    assert any(line.startswith(f"{tmp_path}/in/nested/b.jsonl:1 ") for line in dropped)


def test_workers_give_the_same_output_and_funnel(tmp_path: Path) -> None:
    trajectories = make.numbered(batch() * 90)  # several chunks of work
    source = write(tmp_path / "in.jsonl", trajectories, extra="{bad\n")
    one = filter_files([source], tmp_path / "one.jsonl")
    two = filter_files([source], tmp_path / "two.jsonl", workers=2)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert one.model_dump(exclude={"elapsed_s"}) == two.model_dump(exclude={"elapsed_s"})
    assert one.raw == len(trajectories) + 1


def test_a_bad_line_names_file_and_line_with_workers_too(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [make.solved()], extra="{not json\n")
    with pytest.raises(TrajectoryReadError, match=r"t\.jsonl:2: not JSON"):
        filter_files([path], tmp_path / "k.jsonl", strict=True, workers=2)


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [make.solved()], extra="{not json\n")
    with pytest.raises(TrajectoryReadError, match=r"t\.jsonl:2: not JSON"):
        list(iter_records([path]))


def test_an_unknown_schema_version_is_refused_by_name(tmp_path: Path) -> None:
    data = make.solved().model_dump(mode="json")
    data["schema_version"] = "cowork-gym.trajectory/v9"
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(TrajectoryReadError, match=r"t\.jsonl:1: trajectory schema .*v9"):
        list(iter_records([path]))


def test_a_schema_error_names_the_field(tmp_path: Path) -> None:
    data = make.solved().model_dump(mode="json")
    data["messages"][2]["role"] = "robot"
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(TrajectoryReadError, match=r"t\.jsonl:1: messages\.2\.role"):
        list(iter_records([path]))


def test_unreadable_lines_are_counted_not_fatal_by_default(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [make.solved()], extra="{not json\n[]\n")
    report = filter_files([path], tmp_path / "kept.jsonl")
    assert report.raw == 3
    assert report.kept == 1
    readable = report.stages[0]
    assert readable.rule == "readable"
    assert readable.reasons == {"json_error": 1, "schema_version": 1}
    assert report.stages[1].entered == 1


def test_judge_reports_the_first_failing_rule_without_counting() -> None:
    pipeline = FilterPipeline()
    verdict = pipeline.judge(make.ended("timeout"))
    assert verdict is not None
    assert (verdict.rule, verdict.drop.reason) == ("record_integrity", "truncated:timeout")
    assert pipeline.report().raw == 0

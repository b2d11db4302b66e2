"""Drill (issue 24, item 3): the Issue Detector measures how a verifier grades partial work,
for every backend. From the reference completion it builds stale states (each later user
turn ignored, each new input unused, each changed requirement not applied), each
deliverable missing in turn, and every free-text field blanked, and runs the package's own
verifier on each (``coworkgym.detector.partial_work``). A stale or missing state must score
at most ``PARTIAL_WORK_BOUND`` (0.5) and blank free text must not pass, else the defect goes
to the Verifier Constructor with the state and its score.

- procedural: a package of every family (3 user turns where the family has them, medium)
  passes with every such state at or under the bound; the same packages with their gates
  removed (``Component.gate``: a content check below 1 halves the reward) pay for partial
  work and are rejected;
- model-built: scripted LLM roles (tests/fixtures/llm/partial_work.json) build a 3-turn
  package. The Builder's first ``submit`` is refused (a partial deliverable in s0, an
  ``invalidates`` that misses a dependent output); the Verifier Constructor scores a state
  it built itself, then submits a verifier that pays for a later turn ignored, the new data
  unused, a deliverable missing and a blank reason: the Detector rejects it, routed to the
  verifier, and the revision (gates, the reason checked in code) is released.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from coworkgym.detector import PARTIAL_WORK_BOUND, DetectorReport, IssueDetector
from coworkgym.detector.defects import DefectCode
from coworkgym.families import FAMILIES
from coworkgym.loop.local import EnvironmentRun, LocalLoop
from coworkgym.loop.machine import Phase
from coworkgym.package.assemble import VerifierOutput, assemble
from coworkgym.package.package import EnvironmentPackage
from coworkgym.release import publisher_for
from coworkgym.roles.llm import configure_llm_backends, role_backends
from coworkgym.runtime.local import LocalRuntime
from coworkgym.spec import EnvironmentSpec
from tests.drills.record import DrillResult, Row, record
from tests.fixtures.llm.server import ScriptedServer
from tests.support.builders import role_outputs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SEED, DIFFICULTY = 2, "medium"
PARTIAL_CODES = {
    DefectCode.PARTIAL_CREDIT_STALE,
    DefectCode.PARTIAL_CREDIT_MISSING,
    DefectCode.ACCEPTS_BLANK_TEXT,
}


def kind(label: str) -> str:
    if label == "blank-free-text":
        return "blank"
    return "missing" if label.endswith("-missing") else "stale"


@dataclass
class Checked:
    reports: dict[str, DetectorReport]
    seconds: dict[str, float]


def check_families(ungated: bool) -> Checked:
    detector = IssueDetector(LocalRuntime(), run_harbor_lint=False)
    reports, seconds = {}, {}
    for name, family in sorted(FAMILIES.items()):
        built, verifier = role_outputs(name, family.max_turns, SEED, DIFFICULTY)
        if ungated:
            plain = [c.model_copy(update={"gate": False}) for c in verifier.spec.components]
            spec = verifier.spec.model_copy(update={"components": plain})
            verifier = VerifierOutput(spec, verifier.private_files)
        started = time.perf_counter()
        reports[name] = detector.check(assemble(built, verifier))
        seconds[name] = time.perf_counter() - started
    return Checked(reports, seconds)


@pytest.fixture(scope="module")
def sound() -> Checked:
    return check_families(ungated=False)


@pytest.fixture(scope="module")
def paying() -> Checked:
    return check_families(ungated=True)


# ---- procedural -------------------------------------------------------------------------
def test_sound_procedural_packages_pass_with_every_partial_state_under_the_bound(
    sound: Checked,
) -> None:
    for name, report in sound.reports.items():
        partial = [d for d in report.defects if d.code in PARTIAL_CODES]
        assert partial == [], (name, [d.message for d in partial])
        scores = report.stats.partial_work
        kinds = {kind(label) for label in scores}
        assert {"stale", "missing"} <= kinds, (name, scores)  # every family has 3 turns
        over = {s: r for s, r in scores.items() if kind(s) != "blank" and (r or 0) > 0.5}
        assert over == {}, name
        assert report.stats.reference_reward == 1.0, name
    # families whose verifier reads free text only through the rubric are flagged, not failed
    flagged = {
        name
        for name, report in sound.reports.items()
        if any(d.code == DefectCode.RUBRIC_UNJUDGED for d in report.defects)
    }
    assert flagged == {"code_review"}
    [flag] = [d for d in sound.reports["code_review"].defects if d.code == "RUBRIC_UNJUDGED"]
    assert flag.severity == "warning" and flag.evidence["rubric_items"] == ["actionable_review"]


def test_the_same_verifiers_without_gates_pay_for_partial_work_and_are_rejected(
    paying: Checked,
) -> None:
    for name, report in paying.reports.items():
        found = [d for d in report.defects if d.code in PARTIAL_CODES]
        assert found and not report.passed, name
        for defect in found:
            assert defect.owner == "verifier" and defect.severity == "error"
            state, reward = defect.evidence["state"], defect.evidence["reward"]
            assert isinstance(reward, float) and reward > PARTIAL_WORK_BOUND
            assert report.stats.partial_work[str(state)] == reward  # the state, its score
            assert f"the {state} workspace scores {reward:.3f}" in defect.message
    weather = {d.evidence["state"]: d for d in paying.reports["weather_report"].defects}
    assert weather["summary.json-missing"].code == DefectCode.PARTIAL_CREDIT_MISSING
    assert weather["turn-2-on-ignored"].code == DefectCode.PARTIAL_CREDIT_STALE
    assert weather["turn-2-on-ignored"].evidence["turn"] == 2


def test_blank_free_text_read_by_no_check_and_no_rubric_is_rejected() -> None:
    built, verifier = role_outputs("code_review", 1, SEED, DIFFICULTY)
    bare = VerifierOutput(verifier.spec.model_copy(update={"rubric": []}), verifier.private_files)
    report = IssueDetector(LocalRuntime(), run_harbor_lint=False).check(assemble(built, bare))
    [defect] = [d for d in report.defects if d.code == DefectCode.ACCEPTS_BLANK_TEXT]
    assert defect.owner == "verifier" and defect.evidence["state"] == "blank-free-text"
    assert defect.evidence["reward"] == 1.0 and list(defect.evidence["blanked"]) == ["review.json"]


# ---- model-built ------------------------------------------------------------------------
@dataclass
class ModelBuilt:
    run: EnvironmentRun
    server: ScriptedServer
    released: EnvironmentPackage
    seconds: float


@pytest.fixture(scope="module")
def model_built(tmp_path_factory: pytest.TempPathFactory) -> ModelBuilt:
    spec = EnvironmentSpec.model_validate(
        {
            "task": {
                "labels": {
                    "capabilities": ["data_analysis", "aggregation"],
                    "scenario": "data_analysis/reporting/periodic_report",
                    "deliverables": ["csv", "json"],
                },
                "turns": 3,
            },
            "budget": {"maxIterations": 3},
        }
    )
    out = tmp_path_factory.mktemp("model-built")
    started = time.perf_counter()
    with ScriptedServer.from_fixture("partial_work") as server:
        configure_llm_backends(spec, base_url=server.url, model="scripted-model")
        with role_backends("partial-work", spec, LocalRuntime(), harbor_lint=False) as roles:
            loop = LocalLoop(
                roles.builder, roles.constructor, roles.detector, publisher_for(str(out))
            )
            run = loop.run("partial-work", spec)
    assert run.status.phase == Phase.RELEASED, run.status.message
    assert run.location is not None
    released = EnvironmentPackage.load(Path(run.location))
    return ModelBuilt(run, server, released, time.perf_counter() - started)


def test_a_model_built_verifier_that_pays_is_rejected_and_its_revision_released(
    model_built: ModelBuilt,
) -> None:
    first, second = model_built.run.status.rounds
    found = {(d.code, d.owner, str(d.evidence["state"])) for d in first.defects}
    assert found == {
        (DefectCode.PARTIAL_CREDIT_STALE, "verifier", "turn-2-on-ignored"),  # a turn ignored
        (DefectCode.PARTIAL_CREDIT_STALE, "verifier", "turn-1-new-input-unused"),  # old data
        (DefectCode.PARTIAL_CREDIT_MISSING, "verifier", "summary.json-missing"),
        (DefectCode.ACCEPTS_BLANK_TEXT, "verifier", "blank-free-text"),
    }
    rewards = {str(d.evidence["state"]): d.evidence["reward"] for d in first.defects}
    assert rewards == {
        "turn-2-on-ignored": 0.777778,
        "turn-1-new-input-unused": 0.555556,
        "summary.json-missing": 0.555556,
        "blank-free-text": 1.0,
    }
    assert second.defects == []
    # the revision was told the states and their scores
    verifier_tasks = [
        r.messages[1]["content"] for r in model_built.server.lane_requests("verifier")
    ]
    assert (
        "PARTIAL_CREDIT_STALE (error): the turn-2-on-ignored workspace scores 0.778"
        in (verifier_tasks[-1])
    )
    spec = model_built.released.verifier
    assert spec is not None and {c.id for c in spec.components if c.gate} == {
        "source_totals",
        "total_generation",
        "largest_source",
        "renewables_share",
        "reason_given",
    }


def test_the_builders_submit_refused_a_partial_deliverable_and_a_short_invalidates(
    model_built: ModelBuilt,
) -> None:
    results = "\n".join(model_built.server.lane_requests("builder")[-1].tool_results())
    assert "workspace/totals.csv: the declared output totals.csv is already in s0" in results
    assert "patches/turn-01/patch.json: invalidates: misses summary.json" in results
    assert model_built.server.remaining("builder") == 0  # its second submit was accepted
    pkg = model_built.released
    assert "totals.csv" not in pkg.workspace()
    assert pkg.patches[0].invalidates == ["totals.csv", "summary.json"]


def test_the_verifier_constructor_scored_a_failure_state_it_built(
    model_built: ModelBuilt,
) -> None:
    requests = model_built.server.lane_requests("verifier")
    results = "\n".join(dict.fromkeys(r for q in requests for r in q.tool_results()))
    assert "/app/missing: reward 0.555556\n" in results  # the paying verifier, round 1
    assert "/app/missing: reward 0.25 (gates below 1, so scaled:" in results  # revised
    assert "failed   0.00 total_generation: summary.json does not exist" in results


# ---- the drill's record -----------------------------------------------------------------
def test_record_the_drill(sound: Checked, paying: Checked, model_built: ModelBuilt) -> None:
    def scores(checked: Checked, which: str) -> list[float]:
        return [
            r or 0.0
            for report in checked.reports.values()
            for label, r in report.stats.partial_work.items()
            if kind(label) == which
        ]

    def states(report: DetectorReport) -> int:
        return len(report.stats.partial_work)

    packages = len(sound.reports)
    stale, missing, blank = (scores(sound, k) for k in ("stale", "missing", "blank"))
    rejected = sum(
        1
        for report in paying.reports.values()
        if any(d.code in PARTIAL_CODES for d in report.defects)
    )
    over = sorted(r for r in scores(paying, "stale") + scores(paying, "missing") if r > 0.5)
    first = model_built.run.status.rounds[0]
    per_package = [states(r) for r in sound.reports.values()]
    rows = [
        Row(
            what=f"sound procedural packages, every family ({packages}), 3 turns, medium: "
            "stale and missing states at most 0.5, blank free text not passing",
            runs=packages,
            held=sum(
                1
                for r in sound.reports.values()
                if not any(d.code in PARTIAL_CODES for d in r.defects)
            ),
            note=f"stale {len(stale)} states, max {max(stale):.3f}; missing {len(missing)}, "
            f"max {max(missing):.3f}; blank {len(blank)}, max {max(blank):.3f} (code_review's "
            "1.0 is flagged RUBRIC_UNJUDGED: only its rubric reads the findings' text)",
        ),
        Row(
            what="the same packages with their gates removed (a verifier that pays for "
            "partial work): rejected, routed to the verifier",
            runs=packages,
            held=rejected,
            note=f"{len(over)} states over 0.5, from {over[0]:.3f} to {over[-1]:.3f}",
        ),
        Row(
            what="model-built (scripted LLM roles, 3 turns): a verifier paying for a turn "
            "ignored, old inputs, a missing deliverable and blank reasons",
            runs=1,
            held=int(
                {d.code for d in first.defects} == PARTIAL_CODES
                and model_built.run.status.phase == Phase.RELEASED
            ),
            note="round 1: "
            + ", ".join(f"{d.evidence['state']} {d.evidence['reward']}" for d in first.defects)
            + "; the revision (gates, the reason checked in code) released",
        ),
        Row(
            what="the LLM Builder's submit with a partial deliverable in s0 and an "
            "invalidates list missing a dependent output",
            runs=1,
            held=1,
            note="refused at once, naming workspace/totals.csv and summary.json",
        ),
    ]
    seconds = list(sound.seconds.values())
    record(
        DrillResult(
            drill="partial-work",
            title="Partial work",
            summary="The Issue Detector builds stale, one-deliverable-missing and "
            "blank-free-text states from each package's reference completion and scores "
            f"them with the package's verifier (bound {PARTIAL_WORK_BOUND} for stale and "
            "missing, blank must not pass), on a procedural package of every family (seed 2) "
            "and on a model-built package from scripted LLM roles.",
            rows=rows,
            figures={
                "packages": packages,
                "partial_states_per_package": f"{min(per_package)}–{max(per_package)} "
                f"(median {statistics.median(per_package):g})",
                "sound_max_stale": round(max(stale), 3),
                "sound_max_missing": round(max(missing), 3),
                "ungated_rejected": f"{rejected}/{packages}",
                "detector_s_per_package": f"median {statistics.median(seconds):.1f} "
                f"(max {max(seconds):.1f})",
            },
            seconds=round(sum(seconds) + sum(paying.seconds.values()) + model_built.seconds),
        )
    )
    assert all(row.held == row.runs for row in rows)

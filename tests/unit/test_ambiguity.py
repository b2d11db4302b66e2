"""No open answers: the Issue Detector recomputes the readings a family declares for its
checked values and flags a value the instruction leaves open (issue 14: the weather
family's later turn asked for windiest_month without a tie rule, and the data tied)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from coworkgym.detector.ambiguity import answers_determined, final_inputs
from coworkgym.detector.audit import audit
from coworkgym.detector.defects import Defect, DefectCode
from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.common import tie_reading
from coworkgym.package.assemble import assemble
from coworkgym.package.package import EnvironmentPackage
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

WEATHER = FAMILIES["weather_report"]
TIED = FamilyParams(seed=4, difficulty="easy", turns=2)  # max wind: May and June 2012 at 6.4


def package(family: str, params: FamilyParams) -> EnvironmentPackage:
    chosen = FAMILIES[family]
    built = built_of(chosen, params)
    return assemble(built, chosen.verifier(built, params))


def with_turn_message(pkg: EnvironmentPackage, old: str, new: str) -> EnvironmentPackage:
    files = dict(pkg.files)
    for rel in [r for r in files if r.startswith(".patch/") and r.endswith("patch.json")]:
        patch = json.loads(files[rel])
        patch["message"] = patch["message"].replace(old, new)
        files[rel] = json.dumps(patch).encode()
    return EnvironmentPackage.from_files(files, pkg.executables)


def ambiguous(pkg: EnvironmentPackage) -> list[Defect]:
    return [d for d in audit(pkg) if d.code == DefectCode.ANSWER_AMBIGUOUS]


def test_the_weather_data_really_ties_and_the_later_turn_now_settles_it() -> None:
    pkg = package("weather_report", TIED)
    readings = WEATHER.readings(final_inputs(pkg), pkg.patches)
    [wind] = [r for r in readings if r.component == "windiest_month"]
    assert dict(wind.values) == {"first": "2012-05", "last": "2012-06"}
    assert "earliest such month if months tie" in pkg.patches[0].message
    assert ambiguous(pkg) == []


def test_the_reference_and_the_verifier_agree_on_the_tied_month() -> None:
    built = built_of(WEATHER, TIED)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = run_reference(built, Path(tmp))
        summary = json.loads((workspace / "summary.json").read_text())
        assert summary["windiest_month"] == "2012-05"
        assert reward(WEATHER, built, TIED, workspace, Path(tmp)) == 1.0


def test_a_tie_the_turn_leaves_open_is_a_builder_defect_with_evidence() -> None:
    pkg = with_turn_message(
        package("weather_report", TIED), " (the earliest such month if months tie)", ""
    )
    [defect] = ambiguous(pkg)
    assert defect.owner == "builder"
    assert defect.evidence["component"] == "windiest_month"
    assert defect.evidence["readings"] == {"first": "2012-05", "last": "2012-06"}
    assert "no sentence" in defect.message and "fix:" in defect.message


def test_a_rule_the_verifier_does_not_follow_is_a_verifier_defect() -> None:
    pkg = with_turn_message(package("weather_report", TIED), "earliest such", "latest such")
    [defect] = ambiguous(pkg)
    assert defect.owner == "verifier"
    assert (defect.evidence["chosen"], defect.evidence["expected"]) == ("last", "2012-05")


def test_two_rules_at_once_are_a_builder_defect() -> None:
    pkg = with_turn_message(
        package("weather_report", TIED),
        "if months tie)",
        "if months tie; the latest if months tie)",
    )
    [defect] = ambiguous(pkg)
    assert defect.owner == "builder" and defect.evidence["chosen"] == ["first", "last"]


def test_no_tie_in_the_data_means_nothing_to_settle() -> None:
    params = FamilyParams(seed=1, difficulty="medium", turns=3)
    pkg = with_turn_message(
        package("weather_report", params), " (the earliest such month if months tie)", ""
    )
    readings = WEATHER.readings(final_inputs(pkg), pkg.patches)
    wind = next(r for r in readings if r.component == "windiest_month")
    assert wind.values["first"] == wind.values["last"]
    assert ambiguous(pkg) == []


def test_an_attendee_count_the_instruction_no_longer_defines_is_flagged() -> None:
    params = FamilyParams(seed=2, difficulty="medium", turns=1)  # medium notes list apologies
    pkg = package("meeting_notes", params)
    assert ambiguous(pkg) == []
    files = dict(pkg.files)
    files["instruction.md"] = files["instruction.md"].replace(
        b" (people present, not apologies)", b""
    )
    [defect] = ambiguous(EnvironmentPackage.from_files(files, pkg.executables))
    assert defect.evidence["component"] == "memo_attendees"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_familys_packages_settle_their_readings(family: str) -> None:
    for seed in range(4):
        for difficulty in ("easy", "hard"):
            params = FamilyParams(seed=seed, difficulty=difficulty, turns=3)
            assert list(answers_determined(package(family, params))) == []


def test_tie_reading_ignores_float_noise_but_not_equal_values() -> None:
    noisy = tie_reading("c", "x", {"a": 0.1 + 0.2, "b": 0.3, "c": 0.1})
    assert dict(noisy.values) == {"first": "a", "last": "b"}
    low = tie_reading("c", "x", {"a": 2.0, "b": 1.0, "c": 1.5}, lowest=True)
    assert low.values["first"] == low.values["last"] == "b"

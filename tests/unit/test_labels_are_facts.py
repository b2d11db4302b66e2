"""Labels are facts: sampled specs name cells their family serves, the family selection
refuses labels it cannot make true (a spec error, not retried), the LLM Builder is told its
cell, and the Issue Detector flags a package whose labels do not describe its task."""

from __future__ import annotations

import tomllib

import pytest
import tomli_w

from coworkgym.detector.audit import audit
from coworkgym.detector.defects import DefectCode
from coworkgym.detector.labels import labels_match_task
from coworkgym.families import FAMILIES, UnservedLabels, family_for, served_cells
from coworkgym.llm.prompts import builder_task
from coworkgym.package.package import EnvironmentPackage
from coworkgym.roles.base import RoleError, RoleRequest
from coworkgym.roles.procedural import ProceduralBuilder
from coworkgym.spec import EnvironmentSpec
from coworkgym.synth import sampled_specs
from tests.support.builders import environment_spec, good_package


def test_label_fidelity_is_100_percent_on_200_sampled_specs() -> None:
    specs = sampled_specs(200, seed=0)
    assert len(specs) == 200
    faithful = 0
    for named in specs:
        task = named.spec.task
        assert task.family is not None, named.name
        family = FAMILIES[task.family]
        primary = task.labels.capabilities[0]
        if family.serves(task.labels.scenario, primary, task.turns):
            faithful += 1
        # every other label is the family's too, and the Builder's selection accepts it
        assert set(task.labels.capabilities) <= set(family.capabilities_at(task.turns))
        assert set(task.labels.deliverables) <= set(family.deliverables)
        assert set(task.labels.modality) <= set(family.modalities)
        family_for(task.labels.scenario, task.labels.capabilities, task.turns, family=task.family)
    assert faithful == 200


def test_a_named_family_refuses_a_cell_it_does_not_serve() -> None:
    with pytest.raises(UnservedLabels) as refused:
        family_for(
            "healthcare/records/billing_codes", ["file_management"], 1, family="report_figures"
        )
    message = str(refused.value)
    assert "labels.scenario 'healthcare/records/billing_codes'" in message
    assert "labels.capabilities[0] 'file_management' is not exercised" in message
    assert "fix:" in message


def test_a_capability_of_a_later_turn_needs_the_turns_that_bring_it() -> None:
    leaf = "data_analysis/reporting/periodic_report"
    with pytest.raises(UnservedLabels, match=r"'requirement_tracking' needs 3 turns"):
        family_for(leaf, ["requirement_tracking"], 2, family="weather_report")
    assert family_for(leaf, ["requirement_tracking"], 3).name == "weather_report"


def test_without_a_family_labels_no_family_serves_are_refused() -> None:
    with pytest.raises(UnservedLabels, match="no procedural family serves them"):
        family_for("healthcare/records/billing_codes", ["file_management"], 1)


def test_every_served_cell_is_accepted() -> None:
    for (leaf, capability), names in served_cells(3).items():
        for name in names:
            assert family_for(leaf, [capability], 3, family=name).name == name


def test_the_builder_refuses_an_unserved_spec_without_retry() -> None:
    spec = EnvironmentSpec.model_validate(
        {
            "task": {
                "labels": {
                    "capabilities": ["file_management"],
                    "scenario": "healthcare/records/billing_codes",
                    "user_role": "clinic_coordinator",
                },
                "family": "report_figures",
            }
        }
    )
    with pytest.raises(RoleError) as refused:
        ProceduralBuilder().build(RoleRequest(name="t", spec=spec, iteration=0), None)
    assert refused.value.retryable is False
    assert str(refused.value).startswith("spec error: task.family 'report_figures'")


def test_the_llm_builder_is_told_its_cell() -> None:
    spec = environment_spec("ledger_reconciliation", turns=3)
    prompt = builder_task(spec, [], revising=False)
    assert "Your cell is finance/accounting/reconciliation × reconciliation" in prompt


# ---- the Issue Detector ------------------------------------------------------------------


def relabelled(pkg: EnvironmentPackage, **labels: object) -> EnvironmentPackage:
    config = tomllib.loads(pkg.files["task.toml"].decode())
    config["metadata"]["cowork"]["taxonomy"].update(labels)
    files = {**pkg.files, "task.toml": tomli_w.dumps(config).encode()}
    return EnvironmentPackage.from_files(files, pkg.executables)


def mismatches(pkg: EnvironmentPackage) -> list[str]:
    return [d.message for d in audit(pkg) if d.code == DefectCode.LABELS_MISMATCH]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_familys_own_package_has_true_labels(family: str) -> None:
    assert list(labels_match_task(good_package(family, turns=3))) == []


def test_a_cell_the_family_does_not_serve_is_a_builder_defect() -> None:
    pkg = relabelled(
        good_package("report_figures"),
        scenario="healthcare/records/billing_codes",
        capabilities=["file_management"],
        user_role="clinic_coordinator",
    )
    [defect] = [d for d in labels_match_task(pkg) if d.evidence.get("family")]
    assert defect.owner == "builder"
    assert defect.evidence["scenario"] == "healthcare/records/billing_codes"
    assert "does not serve" in defect.message


def test_a_deliverable_or_modality_the_package_lacks_is_flagged() -> None:
    pkg = relabelled(good_package(), deliverables=["xlsx", "docx"], modality=["tabular", "image"])
    found = mismatches(pkg)
    assert any("labels.deliverables[1] 'docx'" in m for m in found)
    assert any("labels.modality[1] 'image'" in m for m in found)


def test_tracking_a_changed_requirement_needs_a_turn_that_changes_it() -> None:
    pkg = relabelled(
        good_package(turns=1), capabilities=["data_analysis", "requirement_tracking"]
    )
    found = mismatches(pkg)
    assert any("'requirement_tracking': no later user turn exercises it" in m for m in found)
    assert not mismatches(
        relabelled(good_package(turns=3), capabilities=["data_analysis", "requirement_tracking"])
    )

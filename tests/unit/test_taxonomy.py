"""The taxonomy data, label validation, and the families' labels against it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from coworkgym.families import FAMILIES
from coworkgym.spec import TaskLabels, TaskSpec
from coworkgym.taxonomy import Taxonomy, load_taxonomy, validate_labels


def labels(**changes: Any) -> TaskLabels:
    base: dict[str, Any] = {
        "capabilities": ["reconciliation"],
        "scenario": "finance/accounting/reconciliation",
        "difficulty": "medium",
        "user_role": "accountant",
        "deliverables": ["xlsx"],
        "modality": ["tabular"],
        "safety": ["financial_data"],
    }
    return TaskLabels(**{**base, **changes})


def raw_taxonomy() -> dict[str, Any]:
    return load_taxonomy().model_dump()


# --- the data -----------------------------------------------------------------------------


def test_the_packaged_yaml_loads_once_and_is_cached() -> None:
    assert load_taxonomy() is load_taxonomy()
    assert isinstance(load_taxonomy(), Taxonomy)


def test_there_are_at_least_17_capabilities_each_described() -> None:
    tax = load_taxonomy()
    assert len(tax.capabilities) >= 17
    assert all(c.description.strip() for c in tax.capabilities.values())


def test_there_are_at_least_14_domains_each_with_subdomains_and_leaves() -> None:
    tax = load_taxonomy()
    assert len(tax.scenarios) >= 14
    for domain in tax.scenarios.values():
        assert domain.subdomains
        assert all(leaves for leaves in domain.subdomains.values())
    assert all(leaf.count("/") == 2 for leaf in tax.leaves)
    assert len(set(tax.leaves)) == len(tax.leaves)


def test_the_other_dimensions_are_present() -> None:
    tax = load_taxonomy()
    assert list(tax.difficulty) == ["easy", "medium", "hard"]
    assert {"csv", "xlsx", "json", "docx", "md", "code"} <= set(tax.deliverables)
    assert {"tabular", "text", "document", "code", "mixed"} <= set(tax.modalities)
    assert {"none", "handles_pii", "destructive_operations", "financial_data"} <= set(tax.safety)
    assert "analyst" in tax.user_roles  # the spec's default role
    assert tax.rules and all(rule.reason for rule in tax.rules)


@pytest.mark.parametrize(
    "leaf",
    [
        "finance/accounting/reconciliation",
        "data_analysis/reporting/periodic_report",
        "operations/facilities/monitoring",
        "software/maintenance/bug_fix",
        "research/literature/figure_extraction",
        "research/reports/figure_extraction",
        "administration/meetings/action_items",
        "personal/files/organization",
    ],
)
def test_the_expected_leaves_exist(leaf: str) -> None:
    assert leaf in load_taxonomy().leaves


def test_the_spec_defaults_are_valid_labels() -> None:
    default = TaskLabels(
        capabilities=["data_analysis"], scenario="data_analysis/cleaning/deduplication"
    )
    assert validate_labels(default) == []


def test_a_rule_naming_an_unknown_label_is_rejected_at_load() -> None:
    data = raw_taxonomy()
    data["rules"][0]["when"] = {"deliverables": ["cod"]}
    with pytest.raises(ValidationError, match="unknown deliverables value 'cod'"):
        Taxonomy.model_validate(data)


def test_a_hint_naming_an_unknown_label_is_rejected_at_load() -> None:
    data = raw_taxonomy()
    data["scenarios"]["finance"]["roles"] = ["acountant"]
    with pytest.raises(ValidationError, match=r"scenarios\.finance\.roles: unknown user_role"):
        Taxonomy.model_validate(data)


def test_a_rule_needs_exactly_one_effect() -> None:
    data = raw_taxonomy()
    data["rules"][0]["forbids"] = {"difficulty": ["easy"]}
    with pytest.raises(ValidationError, match="exactly one of"):
        Taxonomy.model_validate(data)


def test_the_yaml_file_is_package_data() -> None:
    from importlib import resources

    text = resources.files("coworkgym.taxonomy").joinpath("taxonomy.yaml").read_text()
    assert yaml.safe_load(text)["version"] == load_taxonomy().version


# --- validating labels ------------------------------------------------------------------


def test_valid_labels_have_no_problems() -> None:
    assert validate_labels(labels()) == []


def test_a_near_miss_scenario_names_the_field_and_suggests_the_leaf() -> None:
    [problem] = validate_labels(labels(scenario="finance/acct"))
    assert problem.startswith("labels.scenario: 'finance/acct' is not a scenario leaf")
    assert "did you mean 'finance/accounting/reconciliation'?" in problem


def test_a_scenario_prefix_suggests_a_leaf_under_it() -> None:
    [problem] = validate_labels(labels(scenario="finance/accounting"))
    assert "did you mean 'finance/accounting/reconciliation'?" in problem


@pytest.mark.parametrize(
    ("change", "field", "suggestion"),
    [
        ({"capabilities": ["reconciliation", "agregation"]}, "capabilities[1]", "'aggregation'"),
        ({"user_role": "acountant"}, "userRole", "'accountant'"),
        ({"deliverables": ["xlsx", "jsn"]}, "deliverables[1]", "'json'"),
        ({"modality": ["tabluar"]}, "modality[0]", "'tabular'"),
        ({"safety": ["handles_ppi"]}, "safety[0]", "'handles_pii'"),
    ],
)
def test_unknown_labels_name_the_field_and_the_closest_value(
    change: dict[str, Any], field: str, suggestion: str
) -> None:
    [problem] = validate_labels(labels(**change))
    assert problem.startswith(f"labels.{field}: ")
    assert f"did you mean {suggestion}" in problem


def test_a_custom_prefix_locates_the_labels_in_a_manifest() -> None:
    [problem] = validate_labels(labels(user_role="nobody"), prefix="spec.task.labels")
    assert problem.startswith("spec.task.labels.userRole: 'nobody'")


def test_duplicates_are_reported() -> None:
    [problem] = validate_labels(labels(deliverables=["xlsx", "xlsx"]))
    assert problem.startswith("labels.deliverables: has duplicates")


@pytest.mark.parametrize(
    ("change", "rule", "field"),
    [
        ({"deliverables": ["code"]}, "code_needs_programming", "deliverables"),
        (
            {"capabilities": ["debugging"], "deliverables": ["code"]},
            "debugging_needs_code",
            "capabilities",
        ),
        (
            {"capabilities": ["spreadsheet_authoring"], "deliverables": ["csv"]},
            "spreadsheet_needs_workbook",
            "capabilities",
        ),
        (
            {"capabilities": ["visualization"], "deliverables": ["csv"]},
            "visualization_needs_chart_format",
            "capabilities",
        ),
        ({"deliverables": ["file_tree"]}, "file_tree_needs_file_management", "deliverables"),
        (
            {"safety": ["destructive_operations"], "difficulty": "easy"},
            "destructive_not_easy",
            "safety",
        ),
        ({"safety": ["none", "handles_pii"]}, "none_is_exclusive", "safety"),
    ],
)
def test_each_incompatibility_rule_rejects_its_combination(
    change: dict[str, Any], rule: str, field: str
) -> None:
    [problem] = validate_labels(labels(**change))
    assert problem.startswith(f"labels.{field}: ")
    assert f"rule {rule}:" in problem
    assert "fix: " in problem


def test_the_requirement_of_a_rule_can_be_met_another_way() -> None:
    software = labels(
        scenario="software/maintenance/bug_fix",
        user_role="engineer",
        capabilities=["verification"],
        deliverables=["code"],
        modality=["code"],
        safety=["none"],
    )
    assert validate_labels(software) == []
    assert validate_labels(labels(deliverables=["code"], capabilities=["scripting"])) == []
    assert validate_labels(labels(safety=["destructive_operations"], difficulty="hard")) == []


def test_every_rule_is_exercised_by_the_parametrized_cases() -> None:
    covered = {
        "code_needs_programming",
        "debugging_needs_code",
        "spreadsheet_needs_workbook",
        "visualization_needs_chart_format",
        "file_tree_needs_file_management",
        "destructive_not_easy",
        "none_is_exclusive",
    }
    assert {rule.id for rule in load_taxonomy().rules} == covered


# --- the procedural families --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_label_is_in_the_taxonomy(name: str) -> None:
    tax, family = load_taxonomy(), FAMILIES[name]
    assert family.scenarios, name
    bad = [s for s in family.scenarios if s not in tax.leaves]
    bad += [c for c in family.capabilities if c not in tax.capabilities]
    bad += [d for d in family.deliverables if d not in tax.deliverables]
    bad += [m for m in family.modalities if m not in tax.modalities]
    assert bad == [], f"family {name}: labels missing from the taxonomy: {bad}"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_declares_a_valid_combination(name: str) -> None:
    tax, family = load_taxonomy(), FAMILIES[name]
    for scenario in family.scenarios:
        domain = tax.scenarios[scenario.split("/")[0]]
        declared = TaskLabels(
            capabilities=list(family.capabilities),
            scenario=scenario,
            difficulty="medium",
            user_role=domain.roles[0],
            deliverables=list(family.deliverables),
            modality=list(family.modalities),
        )
        assert validate_labels(declared) == [], f"family {name} on {scenario}"


def test_labels_round_trip_through_the_task_spec() -> None:
    spec = TaskSpec.model_validate({"labels": labels().model_dump(by_alias=True)})
    assert validate_labels(spec.labels) == []

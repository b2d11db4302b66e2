"""Specs that must be refused, shared by the model tests (tests/unit/test_spec_validation.py)
and the API-server tests (tests/testbed/test_api_validation.py): one list, so the CLI and
the cluster are held to the same cases."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from coworkgym.spec import LLM_BACKEND_NEEDS_MODEL, RELEASE_URI_NOT_S3

GOOD: dict[str, Any] = {
    "apiVersion": "coworkgym.dev/v1alpha1",
    "kind": "CoworkEnvironment",
    "metadata": {"name": "api-validation"},
    "spec": {
        "task": {
            "family": "ledger_reconciliation",
            "labels": {
                "capabilities": ["reconciliation"],
                "scenario": "finance/accounting/reconciliation",
                "difficulty": "medium",
                "userRole": "accountant",
                "deliverables": ["xlsx"],
                "modality": ["tabular"],
                "safety": ["financial_data"],
            },
        },
        "release": {"uri": "s3://cowork-gym/envs"},
    },
}


def _merge(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def manifest_with(spec_change: dict[str, Any], name: str = "api-validation") -> dict[str, Any]:
    """GOOD with ``spec_change`` merged into its spec (lists are replaced, not merged)."""
    doc = _merge(GOOD, {"spec": spec_change})
    doc["metadata"] = {"name": name}
    return doc


def labels(**change: Any) -> dict[str, Any]:
    return {"task": {"labels": change}}


@dataclass(frozen=True)
class BadSpec:
    id: str
    change: dict[str, Any]
    field: str  # the field the CLI names
    says: str  # part of the CLI's message
    api_field: str  # the field the API server names
    api_says: str  # part of the API server's message


# One labels change per incompatibility rule that breaks that rule and no other.
RULE_BREAKERS: dict[str, dict[str, Any]] = {
    "code_needs_programming": labels(deliverables=["code"]),
    "debugging_needs_code": labels(capabilities=["debugging"], deliverables=["code"]),
    "spreadsheet_needs_workbook": labels(
        capabilities=["spreadsheet_authoring"], deliverables=["csv"]
    ),
    "visualization_needs_chart_format": labels(
        capabilities=["visualization"], deliverables=["csv"]
    ),
    "file_tree_needs_file_management": labels(deliverables=["file_tree"]),
    "destructive_not_easy": labels(safety=["destructive_operations"], difficulty="easy"),
    "none_is_exclusive": labels(safety=["none", "handles_pii"]),
}
RULE_FIELDS = {
    "code_needs_programming": "deliverables",
    "debugging_needs_code": "capabilities",
    "spreadsheet_needs_workbook": "capabilities",
    "visualization_needs_chart_format": "capabilities",
    "file_tree_needs_file_management": "deliverables",
    "destructive_not_easy": "safety",
    "none_is_exclusive": "safety",
}

L = "spec.task.labels"
BAD_SPECS: list[BadSpec] = [
    BadSpec(
        "unknown-family",
        {"task": {"family": "cooking"}},
        "spec.task.family",
        "'cooking' is not a registered task family",
        "spec.task.family",
        'Unsupported value: "cooking"',
    ),
    BadSpec(
        "unknown-capability",
        labels(capabilities=["juggling"]),
        f"{L}.capabilities[0]",
        "'juggling' is not a known capability",
        f"{L}.capabilities[0]",
        'Unsupported value: "juggling"',
    ),
    BadSpec(
        "unknown-scenario",
        labels(scenario="cooking/recipes/dessert"),
        f"{L}.scenario",
        "'cooking/recipes/dessert' is not a scenario leaf",
        f"{L}.scenario",
        'Unsupported value: "cooking/recipes/dessert"',
    ),
    BadSpec(
        "scenario-not-a-leaf",
        labels(scenario="finance/accounting"),
        f"{L}.scenario",
        "did you mean 'finance/accounting/reconciliation'?",
        f"{L}.scenario",
        'Unsupported value: "finance/accounting"',
    ),
    BadSpec(
        "unknown-role",
        labels(userRole="chef"),
        f"{L}.userRole",
        "'chef' is not a known user role",
        f"{L}.userRole",
        'Unsupported value: "chef"',
    ),
    BadSpec(
        "unknown-deliverable",
        labels(deliverables=["xlsx", "hologram"]),
        f"{L}.deliverables[1]",
        "'hologram' is not a known deliverable format",
        f"{L}.deliverables[1]",
        'Unsupported value: "hologram"',
    ),
    BadSpec(
        "unknown-modality",
        labels(modality=["smell"]),
        f"{L}.modality[0]",
        "'smell' is not a known modality",
        f"{L}.modality[0]",
        'Unsupported value: "smell"',
    ),
    BadSpec(
        "unknown-safety",
        labels(safety=["radioactive"]),
        f"{L}.safety[0]",
        "'radioactive' is not a known safety label",
        f"{L}.safety[0]",
        'Unsupported value: "radioactive"',
    ),
    BadSpec(
        "unknown-difficulty",
        labels(difficulty="impossible"),
        f"{L}.difficulty",
        "'easy', 'medium' or 'hard'",
        f"{L}.difficulty",
        'Unsupported value: "impossible"',
    ),
    BadSpec(
        "duplicate-capability",
        labels(capabilities=["reconciliation", "reconciliation"]),
        f"{L}.capabilities",
        "has duplicates; list each value once",
        f"{L}.capabilities[1]",
        'Duplicate value: "reconciliation"',
    ),
    BadSpec(
        "release-not-s3",
        {"release": {"uri": "/tmp/envs"}},
        "spec.release.uri",
        RELEASE_URI_NOT_S3,
        "spec.release.uri",
        RELEASE_URI_NOT_S3,
    ),
    BadSpec(
        "llm-without-model",
        {"backends": {"builder": {"kind": "llm"}}},
        "spec.backends.builder",
        LLM_BACKEND_NEEDS_MODEL,
        "spec.backends.builder",
        LLM_BACKEND_NEEDS_MODEL,
    ),
    *(
        BadSpec(
            f"rule-{rule}",
            change,
            f"{L}.{RULE_FIELDS[rule]}",
            f"(rule {rule}:",
            f"{L}.{RULE_FIELDS[rule]}",
            f"(rule {rule}:",
        )
        for rule, change in RULE_BREAKERS.items()
    ),
]

"""The taxonomy's incompatibility rules as CEL, for the CRD's ``spec.task.labels``.

Each rule in coworkgym/taxonomy/taxonomy.yaml becomes one ``x-kubernetes-validations``
entry whose message is ``rule_message()``'s, the text the CLI prints for the same labels,
and whose fieldPath is the field the CLI names. The known values themselves are enums in
the schema (from the same taxonomy), so the API server refuses unknown labels before these
rules run.

CEL sees the labels object after defaulting (``difficulty``, ``userRole``, ``deliverables``
and ``modality`` carry their defaults in the CRD); ``has()`` guards the optional lists.
"""

from __future__ import annotations

import json
from typing import Any

from coworkgym.taxonomy import Rule, load_taxonomy, rule_message
from coworkgym.taxonomy.model import Condition

_WIRE = {"user_role": "userRole"}
_LISTS = {"capabilities", "deliverables", "modality", "safety"}


def _literal(values: list[str]) -> str:
    return json.dumps(values).replace('"', "'")  # CEL list of strings; the names are snake_case


def _holds(condition: Condition) -> str:
    """CEL that is true when every field of ``condition`` has one of its values (for the
    scenario: the leaf is, or lies under, one of the paths)."""
    parts = []
    for field, values in condition.items():
        name = _WIRE.get(field, field)
        if field == "scenario":
            parts.append(
                f"{_literal(values)}.exists(w, self.scenario == w || "
                "self.scenario.startsWith(w + '/'))"
            )
        elif field in _LISTS:
            parts.append(f"(has(self.{name}) && self.{name}.exists(v, v in {_literal(values)}))")
        else:
            parts.append(f"(has(self.{name}) && self.{name} in {_literal(values)})")
    return " && ".join(parts)


def rule_cel(rule: Rule) -> dict[str, Any]:
    """One x-kubernetes-validations entry for ``rule``."""
    field, message = rule_message(rule)
    when = _holds(rule.when)
    if rule.requires_any:
        needs = " || ".join(f"({_holds(c)})" for c in rule.requires_any)
        expression = f"!({when}) || {needs}"
    else:
        assert rule.forbids is not None  # a rule has exactly one effect
        expression = f"!(({when}) && ({_holds(rule.forbids)}))"
    return {
        "rule": expression,
        "message": message,
        "fieldPath": f".{_WIRE.get(field, field)}",
        "reason": "FieldValueInvalid",
    }


def label_rules() -> list[dict[str, Any]]:
    """Every rule of the packaged taxonomy, in file order."""
    return [rule_cel(rule) for rule in load_taxonomy().rules]

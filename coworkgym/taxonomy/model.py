"""The taxonomy as data (``taxonomy.yaml``), its models, and validation of task labels."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from functools import cache, cached_property
from importlib import resources
from typing import Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..spec import Difficulty, TaskLabels

DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard")
RuleField = Literal[
    "capabilities", "scenario", "difficulty", "user_role", "deliverables", "modality", "safety"
]
Condition = dict[RuleField, list[str]]
_WIRE = {"user_role": "userRole"}  # the spec's camelCase name where it differs
_NAME = r"^[a-z][a-z0-9_]*$"
_SINGULAR = {
    "capabilities": "capability",
    "difficulty": "difficulty (easy, medium, hard)",
    "user_role": "user role",
    "deliverables": "deliverable format",
    "modality": "modality",
    "safety": "safety label",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Capability(_Model):
    description: str = Field(min_length=1)
    deliverables: list[str] = Field(min_length=1, description="typical deliverables (hint)")
    modalities: list[str] = Field(min_length=1, description="typical input modalities (hint)")
    safety: list[str] = Field(default_factory=list, description="typical safety labels (hint)")


class Domain(_Model):
    """A top-level scenario: subdomain → leaf → one-line description."""

    description: str = Field(min_length=1)
    roles: list[str] = Field(min_length=1, description="user roles that fit (hint)")
    safety: list[str] = Field(default_factory=list, description="typical safety labels (hint)")
    subdomains: dict[str, dict[str, str]] = Field(min_length=1)


class Rule(_Model):
    """An incompatibility rule: if ``when`` matches, ``requires_any`` or ``forbids`` applies."""

    id: str = Field(pattern=_NAME)
    when: Condition = Field(min_length=1)
    requires_any: list[Condition] = Field(default_factory=list)
    forbids: Condition | None = None
    reason: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_effect(self) -> Self:
        if bool(self.requires_any) == (self.forbids is not None):
            raise ValueError(f"rule {self.id}: give exactly one of 'requires_any' and 'forbids'")
        return self


class Taxonomy(_Model):
    version: int
    capabilities: dict[str, Capability] = Field(min_length=1)
    scenarios: dict[str, Domain] = Field(min_length=1)
    difficulty: dict[str, str]
    user_roles: dict[str, str] = Field(min_length=1)
    deliverables: dict[str, str] = Field(min_length=1)
    modalities: dict[str, str] = Field(min_length=1)
    safety: dict[str, str] = Field(min_length=1)
    rules: list[Rule] = Field(default_factory=list)

    @cached_property
    def leaves(self) -> list[str]:
        """Every scenario leaf path, ``domain/subdomain/leaf``, in file order."""
        return [
            f"{domain}/{sub}/{leaf}"
            for domain, d in self.scenarios.items()
            for sub, leaves in d.subdomains.items()
            for leaf in leaves
        ]

    def leaves_of(self, domain: str) -> list[str]:
        return [leaf for leaf in self.leaves if leaf.split("/")[0] == domain]

    def vocabulary(self, field: RuleField) -> list[str]:
        """The known values of a label field (for ``scenario``: leaves and their prefixes)."""
        if field == "scenario":
            prefixes = {p for leaf in self.leaves for p in _prefixes(leaf)}
            return [*self.scenarios, *sorted(prefixes - set(self.scenarios))]
        vocabularies: dict[str, Mapping[str, object]] = {
            "capabilities": self.capabilities,
            "difficulty": self.difficulty,
            "user_role": self.user_roles,
            "deliverables": self.deliverables,
            "modality": self.modalities,
            "safety": self.safety,
        }
        return list(vocabularies[field])

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems: list[str] = []
        if tuple(self.difficulty) != DIFFICULTIES:
            problems.append(f"difficulty: must be exactly {', '.join(DIFFICULTIES)}")
        names = [
            *self.capabilities,
            *self.scenarios,
            *(s for d in self.scenarios.values() for s in d.subdomains),
            *(leaf.split("/")[2] for leaf in self.leaves),
            *self.user_roles,
            *self.deliverables,
            *self.modalities,
            *self.safety,
        ]
        problems += [f"{n!r} is not a snake_case name" for n in names if not re.fullmatch(_NAME, n)]
        for name, cap in self.capabilities.items():
            problems += _unknown(self, f"capabilities.{name}.deliverables", "deliverables", cap)
            problems += _unknown(self, f"capabilities.{name}.modalities", "modality", cap)
            problems += _unknown(self, f"capabilities.{name}.safety", "safety", cap)
        for name, dom in self.scenarios.items():
            problems += _unknown(self, f"scenarios.{name}.roles", "user_role", dom)
            problems += _unknown(self, f"scenarios.{name}.safety", "safety", dom)
            problems += [
                f"scenarios.{name}.{sub}: has no leaves"
                for sub, v in dom.subdomains.items()
                if not v
            ]
        ids = [rule.id for rule in self.rules]
        problems += [f"rules: id {i!r} is used twice" for i in sorted(set(ids)) if ids.count(i) > 1]
        for rule in self.rules:
            conditions = [rule.when, *rule.requires_any, *([rule.forbids] if rule.forbids else [])]
            for condition in conditions:
                for field, values in condition.items():
                    known = set(self.vocabulary(field))
                    problems += [
                        f"rules.{rule.id}: unknown {field} value {v!r}"
                        for v in values
                        if v not in known
                    ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _prefixes(leaf: str) -> list[str]:
    parts = leaf.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _unknown(tax: Taxonomy, where: str, field: RuleField, hint: Capability | Domain) -> list[str]:
    attr = {"modality": "modalities", "user_role": "roles"}.get(field, field)
    values: list[str] = getattr(hint, attr)
    known = set(tax.vocabulary(field))
    return [f"{where}: unknown {field} {v!r}" for v in values if v not in known]


@cache
def load_taxonomy() -> Taxonomy:
    """The packaged taxonomy (``coworkgym/taxonomy/taxonomy.yaml``), parsed once."""
    text = resources.files(__package__).joinpath("taxonomy.yaml").read_text("utf-8")
    return Taxonomy.model_validate(yaml.safe_load(text))


# --- validating labels ------------------------------------------------------------------


def _values(labels: TaskLabels, field: RuleField) -> list[str]:
    value: str | list[str] = getattr(labels, field)
    return [value] if isinstance(value, str) else list(value)


def _matched(labels: TaskLabels, condition: Condition) -> dict[RuleField, list[str]]:
    """The label values that make ``condition`` hold (every field must hit), else ``{}``."""
    hits: dict[RuleField, list[str]] = {}
    for field, wanted in condition.items():
        have = _values(labels, field)
        if field == "scenario":
            found = [v for v in have if any(v == w or v.startswith(f"{w}/") for w in wanted)]
        else:
            found = [v for v in have if v in wanted]
        if not found:
            return {}
        hits[field] = found
    return hits


def validate_labels(
    labels: TaskLabels, *, prefix: str = "labels", taxonomy: Taxonomy | None = None
) -> list[str]:
    """Problems with ``labels``, each naming the field (``labels.scenario: …``) and the fix.

    Checks that every label exists in the taxonomy, then every incompatibility rule.
    An empty list means the labels are valid.
    """
    tax = taxonomy or load_taxonomy()
    problems: list[str] = []
    if labels.scenario not in tax.leaves:
        problems.append(
            f"{_where(prefix, 'scenario')}: {labels.scenario!r} is not a scenario leaf "
            f"(domain/subdomain/leaf){_suggest_leaf(tax, labels.scenario)}"
        )
    fields: list[RuleField] = [
        "capabilities", "difficulty", "user_role", "deliverables", "modality", "safety"
    ]  # fmt: skip
    for field in fields:
        known = tax.vocabulary(field)
        value = getattr(labels, field)
        items = [(f"{_where(prefix, field)}[{i}]", v) for i, v in enumerate(value)]
        if isinstance(value, str):
            items = [(_where(prefix, field), value)]
        for where, item in items:
            if item not in known:
                problems.append(
                    f"{where}: {item!r} is not a known {_SINGULAR[field]}{_suggest(item, known)}"
                )
        if not isinstance(value, str) and len(set(value)) != len(value):
            problems.append(f"{_where(prefix, field)}: has duplicates; list each value once")
    for rule in tax.rules:
        problems += _check_rule(rule, labels, prefix)
    return problems


def _where(prefix: str, field: str) -> str:
    return f"{prefix}.{_WIRE.get(field, field)}"


def _suggest(value: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(value, list(known), n=3, cutoff=0.5)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "; known: " + ", ".join(known)


def _suggest_leaf(tax: Taxonomy, value: str) -> str:
    under = [leaf for leaf in tax.leaves if leaf.startswith(f"{value.rstrip('/')}/")]
    if under:
        return f"; did you mean {under[0]!r}? (leaves under it: {', '.join(under)})"
    depth = value.count("/") + 1

    def score(leaf: str) -> float:
        head = "/".join(leaf.split("/")[:depth])
        return max(_ratio(value, leaf), _ratio(value, head))

    best = max(tax.leaves, key=score)
    if score(best) >= 0.5:
        return f"; did you mean {best!r}?"
    return f"; top-level domains: {', '.join(tax.scenarios)}"


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _describe(condition: dict[RuleField, list[str]]) -> str:
    parts = []
    for field, values in condition.items():
        label = "scenario under" if field == "scenario" else field.replace("_", " ")
        parts.append(f"{label} {' or '.join(repr(v) for v in values)}")
    return " and ".join(parts)


def rule_message(rule: Rule) -> tuple[RuleField, str]:
    """The field a broken rule is reported on (the first of its ``when``) and its message.

    The message is the same whichever labels broke the rule, so the CRD's CEL rule for it
    (coworkgym_operator.environment.api.labels) says word for word what the CLI says.
    """
    field = next(iter(rule.when))
    cause = _describe(rule.when)
    if rule.requires_any:
        need = " or ".join(_describe(dict(c)) for c in rule.requires_any)
        return field, (
            f"{cause} requires {need} (rule {rule.id}: {rule.reason}); "
            f"fix: add one of these, or drop {cause}"
        )
    assert rule.forbids is not None  # a rule has exactly one effect (Rule._one_effect)
    fields = " or ".join(_WIRE.get(f, f) for f in rule.forbids)
    return field, (
        f"{cause} is incompatible with {_describe(rule.forbids)} "
        f"(rule {rule.id}: {rule.reason}); fix: change {fields}, or drop {cause}"
    )


def rule_holds(rule: Rule, labels: TaskLabels) -> bool:
    """Whether ``labels`` satisfy ``rule`` (a rule that does not apply holds)."""
    if not _matched(labels, rule.when):
        return True
    if rule.requires_any:
        return any(_matched(labels, c) for c in rule.requires_any)
    return not (rule.forbids and _matched(labels, rule.forbids))


def _check_rule(rule: Rule, labels: TaskLabels, prefix: str) -> list[str]:
    if rule_holds(rule, labels):
        return []
    field, message = rule_message(rule)
    return [f"{_where(prefix, field)}: {message}"]

"""Rendering every kind's CustomResourceDefinition from its pydantic models, and keeping
crds/ and the chart's copy in step (``make generate``; ``--check`` for drift). A kind's
``<kind>/api/crd.py`` states only what is its own (a ``Definition``: names, models, CEL rules,
printer columns); rendering, the targets and the command line are here.

Pydantic emits JSON Schema 2020-12; Kubernetes wants a *structural* OpenAPI v3.0 schema,
so references are inlined, ``anyOf [X, null]`` becomes ``nullable``, numeric exclusive
bounds become boolean ones, and titles are dropped. Field descriptions stay (whitespace
folded, so kubectl explain wraps them cleanly).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coworkgym_operator.core.api import GROUP, VERSION

REPO = Path(__file__).resolve().parents[3]


def structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One JSON-Schema node → a structural OpenAPI v3.0 node."""
    if "$ref" in schema:
        target = defs[schema["$ref"].split("/")[-1]]
        merged = {**copy.deepcopy(target), **{k: v for k, v in schema.items() if k != "$ref"}}
        return structural(merged, defs)
    node = {k: v for k, v in schema.items() if k not in ("title", "examples", "$defs")}
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [o for o in node.pop(key) if o.get("type") != "null"]
            nullable = len(options) < len(schema[key])
            if len(options) == 1:
                node = {**structural(options[0], defs), **node}
            else:  # a union of scalars (e.g. int | float): keep the widest type
                types = {o.get("type") for o in options}
                node["type"] = "number" if types <= {"integer", "number"} else "string"
            if nullable:
                node["nullable"] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(node.get(bound), int | float) and not isinstance(node.get(bound), bool):
            node[bound.replace("exclusiveM", "m")] = node[bound]
            node[bound] = True
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # the API server prunes unknown fields itself
    elif isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = structural(node["additionalProperties"], defs)
    if "properties" in node:
        node["type"] = "object"
        node["properties"] = {k: structural(v, defs) for k, v in node["properties"].items()}
    if "items" in node:
        node["items"] = structural(node["items"], defs)
    if node.get("default") is None and "default" in node:
        del node["default"]
    if "description" in node:  # docstrings wrap; kubectl explain wraps again
        node["description"] = " ".join(node["description"].split())
    return node


def model_schema(model: type[Any]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}))


def node_at(spec_schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = {"properties": {"spec": spec_schema}}
    for part in path:
        node = node["properties"][part]
    return node


def document(
    *,
    plural: str,
    kind: str,
    singular: str,
    short_name: str,
    generated_by: str,
    description: str,
    printer_columns: list[dict[str, Any]],
    spec_schema: dict[str, Any],
    status_schema: dict[str, Any],
) -> dict[str, Any]:
    """The CustomResourceDefinition around one kind's spec and status schemas (every kind of
    the group: namespaced, one served version, a status subresource, category cowork-gym)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "annotations": {"coworkgym.dev/generated-by": generated_by},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": [short_name],
                "categories": ["cowork-gym"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def render_document(doc: dict[str, Any]) -> str:
    header = "# GENERATED by `make generate` from the pydantic models; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


def sync(text: str, targets: list[Path], argv: list[str]) -> int:
    """Write ``text`` to every target, or with --check: exit status 1 if any has drifted."""
    if "--check" in argv:
        stale = [str(t) for t in targets if not t.exists() or t.read_text() != text]
        if stale:
            print("CRD drift; run `make generate`:", *stale, sep="\n  ", file=sys.stderr)
            return 1
        return 0
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target.relative_to(REPO)}")
    return 0


Rule = dict[str, str]
Column = dict[str, Any]


def column(
    name: str, path: str, kind: str = "string", *, wide: bool = False, description: str = ""
) -> Column:
    """A printer column; ``wide``: shown by ``kubectl get -o wide`` only."""
    found: Column = {"name": name, "type": kind, "jsonPath": path}
    if wide:
        found["priority"] = 1
    if description:
        found["description"] = description
    return found


PHASE = column("Phase", ".status.phase")
MESSAGE = column("Message", ".status.message")
AGE = column("Age", ".metadata.creationTimestamp", "date")


def s3_rule(field: str, message: str, *, optional: bool = False) -> Rule:
    """``field`` (of the node the rule is on) is an s3:// URI; ``optional``: or absent."""
    rule = f"self.{field}.startsWith('s3://')"
    return {
        "rule": f"!has(self.{field}) || {rule}" if optional else rule,
        "message": message,
        "fieldPath": f".{field}",
        "reason": "FieldValueInvalid",
    }


def set_lists(spec_schema: dict[str, Any], paths: Sequence[tuple[str, ...]]) -> None:
    """Lists whose items are a set: the API server refuses a duplicate as the models do."""
    for path in paths:
        node_at(spec_schema, path)["x-kubernetes-list-type"] = "set"


def unchanged_rule(fields: Sequence[str], message: str, *, optional: Sequence[str] = ()) -> Rule:
    """A transition rule: each of ``fields`` (of the node the rule is on) keeps its old
    value; each of ``optional``, which may be absent, stays absent or keeps its value."""
    kept = [f"self.{f} == oldSelf.{f}" for f in fields] + [
        f"has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f})"
        for f in optional
    ]
    return {"rule": " && ".join(kept), "message": message}


def one_of_rule(fields: Sequence[str], message: str) -> Rule:
    """Exactly one of ``fields`` is given."""
    given = ", ".join(f"has(self.{f})" for f in fields)
    return {"rule": f"[{given}].filter(x, x).size() == 1", "message": message}


@dataclass(frozen=True)
class Definition:
    """One kind's CustomResourceDefinition: its names (kind, plural, singular, short name),
    the package of its ``crd`` module (the one `make generate` runs), its description, its
    spec and status models, printer columns, CEL rules by schema path (``("spec",
    "output")``), and ``shape``: what else the kind does to its spec and status schemas
    (set lists, defaults, opaque fields); ``object_rules``: rules on the object itself
    (metadata.name)."""

    names: tuple[str, str, str, str]
    package: str | None
    description: str
    spec_model: type[Any]
    status_model: type[Any]
    printer_columns: list[Column]
    cel_rules: Mapping[tuple[str, ...], list[Rule]] = field(default_factory=dict)
    shape: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    object_rules: Sequence[Rule] = ()

    @property
    def kind(self) -> str:
        return self.names[0]

    @property
    def plural(self) -> str:
        return self.names[1]

    @property
    def targets(self) -> list[Path]:
        return [
            REPO / "crds" / f"{self.plural}.yaml",
            REPO / "charts" / "cowork-gym" / "crds" / f"{self.plural}.yaml",
        ]

    def crd(self) -> dict[str, Any]:
        spec_schema = model_schema(self.spec_model)
        status_schema = model_schema(self.status_model)
        for path, rules in self.cel_rules.items():
            node_at(spec_schema, path)["x-kubernetes-validations"] = list(rules)
        if self.shape is not None:
            self.shape(spec_schema, status_schema)
        kind, plural, singular, short_name = self.names
        doc = document(
            plural=plural,
            kind=kind,
            singular=singular,
            short_name=short_name,
            generated_by=f"{self.package}.crd",
            description=self.description,
            printer_columns=self.printer_columns,
            spec_schema=spec_schema,
            status_schema=status_schema,
        )
        if self.object_rules:
            root = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            root["x-kubernetes-validations"] = list(self.object_rules)
        return doc

    def render(self) -> str:
        return render_document(self.crd())

    def main(self, argv: list[str]) -> int:
        return sync(self.render(), self.targets, argv)

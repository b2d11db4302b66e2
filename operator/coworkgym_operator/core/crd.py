"""Rendering every kind's CustomResourceDefinition from its pydantic models, and keeping
crds/ and the chart's copy in step (``make generate``; ``--check`` for drift).

Pydantic emits JSON Schema 2020-12; Kubernetes wants a *structural* OpenAPI v3.0 schema,
so references are inlined, ``anyOf [X, null]`` becomes ``nullable``, numeric exclusive
bounds become boolean ones, and titles are dropped. Field descriptions stay (whitespace
folded, so kubectl explain wraps them cleanly).
"""

from __future__ import annotations

import copy
import sys
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

"""Generate the CustomResourceDefinition from the pydantic models.

    python -m coworkgym_operator.api.crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.api.crd --check    # exit 1 if either has drifted

Pydantic emits JSON Schema 2020-12; Kubernetes wants a *structural* OpenAPI v3.0 schema,
so references are inlined, ``anyOf [X, null]`` becomes ``nullable``, numeric exclusive
bounds become boolean ones, and titles are dropped. Field descriptions stay (whitespace
folded, so kubectl explain wraps them cleanly).

What the API server refuses, and how that compares with the CLI (coworkgym.spec):

- task.family and every taxonomy label are enums generated from the registered families
  and coworkgym/taxonomy/taxonomy.yaml (the data the sampler uses): the API server says
  'Unsupported value: "juggling": supported values: ...' on the same field the CLI names
  ("'juggling' is not a known capability; did you mean ...?"). Adding a family or a label
  changes the CRD: the drift check fails until `make generate` is run.
- the taxonomy's incompatibility rules, release.uri and the LLM backend rule are CEL rules
  whose message and fieldPath are the models' own, word for word.
- every rule the taxonomy has today is expressible in CEL. A spec the CRD lets through but
  the models refuse (an older CRD, a rule CEL could not say) is still stopped by the
  operator: Failed, reason InvalidSpec, the models' field-named sentence, no Job created.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from coworkgym.spec import (
    BASE_URL_METADATA,
    ENVIRONMENT_NAME,
    INSTRUCTION_NEEDS_LLM,
    LABEL_KEY,
    LLM_BACKEND_NEEDS_MODEL,
    MAX_ENVIRONMENT_NAME,
    METADATA_URL,
    NAME_RULE,
    NODE_SELECTOR_KEY,
    RELEASE_URI_MALFORMED,
    RELEASE_URI_NOT_S3,
    S3_URI,
    EnvironmentSpec,
)

from .labels import label_rules
from .types import GROUP, KIND, PLURAL, SHORT_NAME, SINGULAR, VERSION, CoworkEnvironmentStatus

REPO = Path(__file__).resolve().parents[3]
TARGETS = [
    REPO / "crds" / f"{PLURAL}.yaml",
    REPO / "charts" / "cowork-gym" / "crds" / f"{PLURAL}.yaml",
]
DROP = {"title", "examples", "additionalProperties_false"}

# CEL rules where the schema alone cannot say it. Each message is the one the pydantic
# models give for the same spec (coworkgym.spec), and fieldPath names the same field.
CEL_RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [
        {
            "rule": "self.task == oldSelf.task",
            "message": "spec.task is immutable once the loop has started; create a new "
            "CoworkEnvironment for a different task (budget, release and sandbox may change)",
        },
        {
            "rule": "(!has(self.task.instruction) && (!has(self.task.resources) || "
            "size(self.task.resources) == 0)) || (has(self.backends) && "
            "has(self.backends.builder) && self.backends.builder.kind == 'llm')",
            "message": INSTRUCTION_NEEDS_LLM,
            "fieldPath": ".task.instruction",
            "reason": "FieldValueForbidden",
        },
    ],
    ("spec", "release"): [
        {
            "rule": "!has(self.uri) || self.uri.startsWith('s3://')",
            "message": RELEASE_URI_NOT_S3,
            "fieldPath": ".uri",
            "reason": "FieldValueInvalid",
        },
        {
            "rule": "!has(self.uri) || !self.uri.startsWith('s3://') || "
            f"self.uri.matches({S3_URI!r})",
            "message": RELEASE_URI_MALFORMED,
            "fieldPath": ".uri",
            "reason": "FieldValueInvalid",
        },
    ],
    ("spec", "sandbox"): [
        {
            "rule": f"!has(self.nodeSelector) || self.nodeSelector.all(k, size(k) <= 317 && "
            f"k.matches({LABEL_KEY!r}))",
            "message": NODE_SELECTOR_KEY,
            "fieldPath": ".nodeSelector",
            "reason": "FieldValueInvalid",
        }
    ],
    ("spec", "task", "labels"): label_rules(),
}
for role in ("builder", "verifier", "detector"):
    CEL_RULES[("spec", "backends", role)] = [
        {
            "rule": "self.kind != 'llm' || (has(self.model) && has(self.baseUrl))",
            "message": LLM_BACKEND_NEEDS_MODEL,
            "reason": "FieldValueRequired",
        },
        {
            "rule": f"!has(self.baseUrl) || !self.baseUrl.matches({METADATA_URL!r})",
            "message": BASE_URL_METADATA,
            "fieldPath": ".baseUrl",
            "reason": "FieldValueForbidden",
        },
    ]

# Lists whose items are a set: the API server refuses a duplicate as the models do.
SET_LISTS = [
    ("spec", "task", "labels", name)
    for name in ("capabilities", "deliverables", "modality", "safety")
]


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


def _schema(model: type[Any]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}))


def _node(spec_schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = {"properties": {"spec": spec_schema}}
    for part in path:
        node = node["properties"][part]
    return node


def _add_cel(spec_schema: dict[str, Any]) -> None:
    for path, rules in CEL_RULES.items():
        _node(spec_schema, path)["x-kubernetes-validations"] = rules
    for path in SET_LISTS:
        _node(spec_schema, path)["x-kubernetes-list-type"] = "set"


# kubectl get: the outcome at a glance; -o wide (priority 1) adds the defects found last.
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Family", "type": "string", "jsonPath": ".spec.task.family"},
    {"name": "Iteration", "type": "integer", "jsonPath": ".status.iteration"},
    {"name": "Package", "type": "string", "jsonPath": ".status.packageUri"},
    {"name": "Message", "type": "string", "jsonPath": ".status.message"},
    {
        "name": "Defects",
        "type": "string",
        "jsonPath": ".status.defects[*].code",
        "priority": 1,
        "description": "codes of the defects the Issue Detector found in the last round",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


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


def crd() -> dict[str, Any]:
    spec_schema = _schema(EnvironmentSpec)
    _add_cel(spec_schema)
    status_schema = _schema(CoworkEnvironmentStatus)
    loop = status_schema["properties"]["loop"]
    # opaque bookkeeping: keep every nested field (an additionalProperties schema would prune)
    status_schema["properties"]["loop"] = {
        "type": "object",
        "description": loop.get("description", ""),
        "x-kubernetes-preserve-unknown-fields": True,
    }
    doc = document(
        plural=PLURAL,
        kind=KIND,
        singular=SINGULAR,
        short_name=SHORT_NAME,
        generated_by="coworkgym_operator.api.crd",
        description="One environment synthesized by the build → execute "
        "→ revise loop from a task spec.",
        printer_columns=PRINTER_COLUMNS,
        spec_schema=spec_schema,
        status_schema=status_schema,
    )
    root = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    # The only rule on metadata (CEL may read metadata.name): the operator derives Job,
    # volume and label names from it, which Kubernetes bounds at 63 characters.
    root["x-kubernetes-validations"] = [
        {
            "rule": f"size(self.metadata.name) <= {MAX_ENVIRONMENT_NAME} && "
            f"self.metadata.name.matches({ENVIRONMENT_NAME!r})",
            "message": NAME_RULE,  # names metadata.name itself (no fieldPath reaches it)
            "reason": "FieldValueInvalid",
        }
    ]
    return doc


def render_document(doc: dict[str, Any]) -> str:
    header = "# GENERATED by `make generate` from the pydantic models; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


def render() -> str:
    return render_document(crd())


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


def main(argv: list[str]) -> int:
    return sync(render(), TARGETS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

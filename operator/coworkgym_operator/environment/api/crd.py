"""The CoworkEnvironment CustomResourceDefinition, generated from the pydantic models
(coworkgym.spec, environment/api/types.py) by the structural conversion every kind shares
(core/crd.py).

    python -m coworkgym_operator.environment.api.crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.environment.api.crd --check    # exit 1 if either has drifted

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

import sys
from typing import Any

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
from coworkgym_operator.core import crd as base
from coworkgym_operator.environment.api.labels import label_rules
from coworkgym_operator.environment.api.types import (
    KIND,
    PLURAL,
    SHORT_NAME,
    SINGULAR,
    CoworkEnvironmentStatus,
)

NAMES = (KIND, PLURAL, SINGULAR, SHORT_NAME)
DESCRIPTION = "One environment synthesized by the build → execute → revise loop from a task spec."

# CEL rules where the schema alone cannot say it. Each message is the one the pydantic
# models give for the same spec (coworkgym.spec), and fieldPath names the same field.
RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
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
        base.s3_rule("uri", RELEASE_URI_NOT_S3, optional=True),
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
    RULES[("spec", "backends", role)] = [
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


# kubectl get: the outcome at a glance; -o wide (priority 1) adds the defects found last.
COLUMNS = [
    base.PHASE,
    base.column("Family", ".spec.task.family"),
    base.column("Iteration", ".status.iteration", "integer"),
    base.column("Package", ".status.packageUri"),
    base.MESSAGE,
    base.column(
        "Defects",
        ".status.defects[*].code",
        wide=True,
        description="codes of the defects the Issue Detector found in the last round",
    ),
    base.AGE,
]


def _shape(spec_schema: dict[str, Any], status_schema: dict[str, Any]) -> None:
    base.set_lists(spec_schema, SET_LISTS)
    loop = status_schema["properties"]["loop"]
    # opaque bookkeeping: keep every nested field (an additionalProperties schema would prune)
    status_schema["properties"]["loop"] = {
        "type": "object",
        "description": loop.get("description", ""),
        "x-kubernetes-preserve-unknown-fields": True,
    }


# The only rule on metadata (CEL may read metadata.name): the operator derives Job, volume
# and label names from it, which Kubernetes bounds at 63 characters.
NAME_RULES = [
    {
        "rule": f"size(self.metadata.name) <= {MAX_ENVIRONMENT_NAME} && "
        f"self.metadata.name.matches({ENVIRONMENT_NAME!r})",
        "message": NAME_RULE,  # names metadata.name itself (no fieldPath reaches it)
        "reason": "FieldValueInvalid",
    }
]
DEFINITION = base.Definition(
    NAMES, __package__, DESCRIPTION, EnvironmentSpec, CoworkEnvironmentStatus, COLUMNS, RULES,
    _shape, NAME_RULES,
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(DEFINITION.main(sys.argv[1:]))

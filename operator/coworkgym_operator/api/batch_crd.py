"""Generate the RolloutBatch CustomResourceDefinition from the pydantic models (api/batch.py),
with the same structural conversion as the CoworkEnvironment CRD (api/crd.py).

    python -m coworkgym_operator.api.batch_crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.api.batch_crd --check    # exit 1 if either has drifted

What the API server refuses: an unknown harness (an enum of the registered ones), a batch
that names its environments in none or two of the three ways, a model policy without
baseUrl, an output or manifest that is not s3://, and a change of spec other than
concurrency and filter. Each CEL message is the models' own, so the API server and the
operator (which checks the models again: an older CRD) say the same thing.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from . import crd as base
from .batch import (
    BATCH_KIND,
    BATCH_PLURAL,
    BATCH_SHORT_NAME,
    BATCH_SINGULAR,
    MANIFEST_NOT_S3,
    NO_MODEL_HARNESSES,
    ONE_SELECTION,
    OUTPUT_NOT_S3,
    POLICY_NEEDS_ENDPOINT,
    SPEC_FROZEN,
    RolloutBatchSpec,
    RolloutBatchStatus,
)
from .types import GROUP, VERSION

TARGETS = [
    base.REPO / "crds" / f"{BATCH_PLURAL}.yaml",
    base.REPO / "charts" / "cowork-gym" / "crds" / f"{BATCH_PLURAL}.yaml",
]
_NO_MODEL = "[" + ", ".join(f"'{h}'" for h in NO_MODEL_HARNESSES) + "]"

CEL_RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [
        {
            "rule": "self.environments == oldSelf.environments && self.policies == "
            "oldSelf.policies && self.samplesPerEnvironment == oldSelf.samplesPerEnvironment "
            "&& self.output == oldSelf.output",
            "message": SPEC_FROZEN,
        }
    ],
    ("spec", "environments"): [
        {
            "rule": "[has(self.selector), has(self.names), has(self.manifestUri)]"
            ".filter(x, x).size() == 1",
            "message": ONE_SELECTION,
        },
        {
            "rule": "!has(self.manifestUri) || self.manifestUri.startsWith('s3://')",
            "message": MANIFEST_NOT_S3,
            "fieldPath": ".manifestUri",
            "reason": "FieldValueInvalid",
        },
    ],
    ("spec", "output"): [
        {
            "rule": "self.uri.startsWith('s3://')",
            "message": OUTPUT_NOT_S3,
            "fieldPath": ".uri",
            "reason": "FieldValueInvalid",
        }
    ],
}
POLICY_RULES = [
    {
        "rule": f"self.harness in {_NO_MODEL} || (has(self.baseUrl) && self.baseUrl != '')",
        "message": POLICY_NEEDS_ENDPOINT,
        "reason": "FieldValueRequired",
    }
]
SET_LISTS = [("spec", "environments", "names")]

# kubectl get rb: progress at a glance; -o wide adds counts and the output.
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {
        "name": "Done",
        "type": "string",
        "jsonPath": ".status.summary",
        "description": "succeeded/invalid/total rollouts",
    },
    {"name": "Running", "type": "integer", "jsonPath": ".status.counts.running"},
    {"name": "Kept", "type": "integer", "jsonPath": ".status.counts.kept"},
    {"name": "Message", "type": "string", "jsonPath": ".status.message"},
    {
        "name": "Pending",
        "type": "integer",
        "jsonPath": ".status.counts.pending",
        "priority": 1,
    },
    {"name": "Output", "type": "string", "jsonPath": ".status.outputUri", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _at(spec_schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = {"properties": {"spec": spec_schema}}
    for part in path:
        node = node["properties"][part]
    return node


def crd() -> dict[str, Any]:
    spec_schema = base._schema(RolloutBatchSpec)
    for path, rules in CEL_RULES.items():
        _at(spec_schema, path)["x-kubernetes-validations"] = rules
    _at(spec_schema, ("spec", "policies"))["items"]["x-kubernetes-validations"] = POLICY_RULES
    for path in SET_LISTS:
        _at(spec_schema, path)["x-kubernetes-list-type"] = "set"
    status_schema = base._schema(RolloutBatchStatus)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{BATCH_PLURAL}.{GROUP}",
            "annotations": {"coworkgym.dev/generated-by": "coworkgym_operator.api.batch_crd"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": BATCH_KIND,
                "listKind": f"{BATCH_KIND}List",
                "plural": BATCH_PLURAL,
                "singular": BATCH_SINGULAR,
                "shortNames": [BATCH_SHORT_NAME],
                "categories": ["cowork-gym"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Policies rolled out over released environments "
                            "in isolated pods; trajectories verified, filtered and stored.",
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


def render() -> str:
    header = "# GENERATED by `make generate` from the pydantic models; do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100, allow_unicode=True)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        stale = [str(t) for t in TARGETS if not t.exists() or t.read_text() != text]
        if stale:
            print("CRD drift; run `make generate`:", *stale, sep="\n  ", file=sys.stderr)
            return 1
        return 0
    for target in TARGETS:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target.relative_to(base.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

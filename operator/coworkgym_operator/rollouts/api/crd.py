"""Generate the RolloutBatch CustomResourceDefinition from the pydantic models (api/batch.py),
with the same structural conversion as the CoworkEnvironment CRD (api/crd.py).

    python -m coworkgym_operator.rollouts.api.crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.rollouts.api.crd --check    # exit 1 if either has drifted

What the API server refuses: an unknown harness (an enum of the registered ones), a batch
that names its environments in none or two of the three ways, a model policy without
baseUrl, an output or manifest that is not s3://, and a change of spec other than
concurrency and filter. Each CEL message is the models' own, so the API server and the
operator (which checks the models again: an older CRD) say the same thing.
"""

from __future__ import annotations

import sys
from typing import Any

from coworkgym_operator.core import crd as base
from coworkgym_operator.rollouts.api.types import (
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


def crd() -> dict[str, Any]:
    spec_schema = base.model_schema(RolloutBatchSpec)
    for path, rules in CEL_RULES.items():
        base.node_at(spec_schema, path)["x-kubernetes-validations"] = rules
    policies = base.node_at(spec_schema, ("spec", "policies"))
    policies["items"]["x-kubernetes-validations"] = POLICY_RULES
    for path in SET_LISTS:
        base.node_at(spec_schema, path)["x-kubernetes-list-type"] = "set"
    return base.document(
        plural=BATCH_PLURAL,
        kind=BATCH_KIND,
        singular=BATCH_SINGULAR,
        short_name=BATCH_SHORT_NAME,
        generated_by="coworkgym_operator.rollouts.api.crd",
        description="Policies rolled out over released environments "
        "in isolated pods; trajectories verified, filtered and stored.",
        printer_columns=PRINTER_COLUMNS,
        spec_schema=spec_schema,
        status_schema=base.model_schema(RolloutBatchStatus),
    )


def render() -> str:
    return base.render_document(crd())


def main(argv: list[str]) -> int:
    return base.sync(render(), TARGETS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

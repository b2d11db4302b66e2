"""The RolloutBatch CustomResourceDefinition, generated from the pydantic models
(rollouts/api/types.py) by the structural conversion every kind shares (core/crd.py).

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

SELECTIONS = ("selector", "names", "manifestUri")  # of spec.environments: one of them
FROZEN = ("environments", "policies", "samplesPerEnvironment", "output")  # of spec
_NO_MODEL = "[" + ", ".join(f"'{h}'" for h in NO_MODEL_HARNESSES) + "]"
NAMES = (BATCH_KIND, BATCH_PLURAL, BATCH_SINGULAR, BATCH_SHORT_NAME)
DESCRIPTION = (
    "Policies rolled out over released environments in isolated pods; trajectories "
    "verified, filtered and stored."
)

RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [base.unchanged_rule(FROZEN, SPEC_FROZEN)],
    ("spec", "environments"): [
        base.one_of_rule(SELECTIONS, ONE_SELECTION),
        base.s3_rule("manifestUri", MANIFEST_NOT_S3, optional=True),
    ],
    ("spec", "output"): [base.s3_rule("uri", OUTPUT_NOT_S3)],
}
POLICY_RULES = [
    {
        "rule": f"self.harness in {_NO_MODEL} || (has(self.baseUrl) && self.baseUrl != '')",
        "message": POLICY_NEEDS_ENDPOINT,
        "reason": "FieldValueRequired",
    }
]

# kubectl get rb: progress at a glance; -o wide adds counts and the output.
COLUMNS = [
    base.PHASE,
    base.column("Done", ".status.summary", description="succeeded/invalid/total rollouts"),
    base.column("Running", ".status.counts.running", "integer"),
    base.column("Kept", ".status.counts.kept", "integer"),
    base.MESSAGE,
    base.column("Pending", ".status.counts.pending", "integer", wide=True),
    base.column("Output", ".status.outputUri", wide=True),
    base.AGE,
]


def _shape(spec_schema: dict[str, Any], _status: dict[str, Any]) -> None:
    policies = base.node_at(spec_schema, ("spec", "policies"))
    policies["items"]["x-kubernetes-validations"] = POLICY_RULES
    base.set_lists(spec_schema, [("spec", "environments", "names")])


DEFINITION = base.Definition(
    NAMES, __package__, DESCRIPTION, RolloutBatchSpec, RolloutBatchStatus, COLUMNS, RULES, _shape
)

if __name__ == "__main__":
    sys.exit(DEFINITION.main(sys.argv[1:]))

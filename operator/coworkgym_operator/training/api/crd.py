"""The TrainingRun CustomResourceDefinition, generated from the pydantic models
(training/api/types.py) by the structural conversion every kind shares (core/crd.py).

    python -m coworkgym_operator.training.api.crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.training.api.crd --check    # exit 1 if either has drifted

What the API server refuses: an unknown objective or selection method (enums), data given
in none or both of the two ways (or missing with rounds 1, given with rounds > 1), a
dataset, output or model that is not where a pod can read it, opd without a teacher,
rounds > 1 without a rollout spec or with sft, and a change of spec other than suspend,
activeDeadlineSeconds and ttlSecondsAfterFinished. Each CEL
message is the models' own, so the API server and the operator (which checks the models
again: an older CRD) say the same thing.
"""

from __future__ import annotations

import sys
from typing import Any

from coworkgym_operator.core import crd as base
from coworkgym_operator.rollouts.api.crd import SELECTIONS
from coworkgym_operator.rollouts.api.types import ONE_SELECTION
from coworkgym_operator.training.api.types import (
    BATCH_BELOW_WORKERS,
    DATA_NOT_S3,
    DATA_REQUIRED,
    DATA_WITH_ROUNDS,
    MODEL_URI,
    ON_POLICY,
    ONE_DATA_SOURCE,
    OPD_NEEDS_TEACHER,
    OUTPUT_NOT_S3,
    ROUNDS_NEED_ROLLOUT,
    SPEC_FROZEN,
    TRAINING_KIND,
    TRAINING_PLURAL,
    TRAINING_SHORT_NAME,
    TRAINING_SINGULAR,
    Hyperparameters,
    TrainingRunSpec,
    TrainingRunStatus,
)

_DEFAULT_BATCH = Hyperparameters.model_fields["batch_size"].default
_ON_POLICY = "[" + ", ".join(f"'{o}'" for o in ON_POLICY) + "]"
# Fields that may change on a live run are suspend, activeDeadlineSeconds and
# ttlSecondsAfterFinished; every other one is compared with its old value. The scalars at
# the spec (those without a schema default may be absent: present in both and equal, or
# absent in both),
# the small objects by a transition rule of their own: one rule over the whole spec costs
# the API server's CEL budget many times over (spec.rollout's lists and maps).
_FROZEN_SCALARS = ("objective", "model", "rounds", "backoffLimit", "shutdownAfterJobFinishes")
_FROZEN_OPTIONAL = ("teacher", "image")
_FROZEN_OBJECTS = ("data", "output", "selection", "hyperparameters", "resources")
_FROZEN = {"rule": "self == oldSelf", "message": SPEC_FROZEN}
# Objects whose fields all have defaults: defaulted to {} (then filled in) by the API
# server. A transition rule does not run when the old object had no value.
_DEFAULTED_OBJECTS = ("selection", "hyperparameters", "resources")
NAMES = (TRAINING_KIND, TRAINING_PLURAL, TRAINING_SINGULAR, TRAINING_SHORT_NAME)
DESCRIPTION = (
    "Post-training of a model (SFT, GRPO or on-policy distillation) on trajectories, run "
    "as a KubeRay RayJob or a plain Job; checkpoints in S3."
)

RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [
        base.unchanged_rule(_FROZEN_SCALARS, SPEC_FROZEN, optional=_FROZEN_OPTIONAL),
        {
            "rule": "self.model.startsWith('s3://') || self.model.startsWith('/')",
            "message": MODEL_URI,
            "fieldPath": ".model",
            "reason": "FieldValueInvalid",
        },
        {
            "rule": "self.objective != 'opd' || (has(self.teacher) && self.teacher != '')",
            "message": OPD_NEEDS_TEACHER,
            "fieldPath": ".teacher",
            "reason": "FieldValueRequired",
        },
        {
            "rule": f"self.rounds <= 1 || (has(self.rollout) && self.objective in {_ON_POLICY})",
            "message": ROUNDS_NEED_ROLLOUT,
            "fieldPath": ".rounds",
            "reason": "FieldValueInvalid",
        },
        {
            "rule": "self.rounds > 1 || has(self.data)",
            "message": DATA_REQUIRED,
            "fieldPath": ".data",
            "reason": "FieldValueRequired",
        },
        {
            "rule": "self.rounds <= 1 || !has(self.data)",
            "message": DATA_WITH_ROUNDS,
            "fieldPath": ".data",
            "reason": "FieldValueForbidden",
        },
        {
            "rule": "!has(self.resources) || (has(self.hyperparameters) ? "
            f"self.hyperparameters.batchSize : {_DEFAULT_BATCH}) >= self.resources.workers",
            "message": BATCH_BELOW_WORKERS,
            "fieldPath": ".hyperparameters.batchSize",
            "reason": "FieldValueInvalid",
        },
    ],
    ("spec", "data"): [
        {
            "rule": "has(self.rolloutBatch) != has(self.uri)",
            "message": ONE_DATA_SOURCE,
        },
        base.s3_rule("uri", DATA_NOT_S3, optional=True),
    ],
    ("spec", "rollout", "environments"): [
        base.one_of_rule(
            SELECTIONS, ONE_SELECTION.replace("spec.environments", "spec.rollout.environments")
        )
    ],
    ("spec", "output"): [base.s3_rule("uri", OUTPUT_NOT_S3)],
}

# kubectl get tr: where the run is at a glance; -o wide adds the backend and checkpoint.
COLUMNS = [
    base.PHASE,
    base.column("Objective", ".spec.objective"),
    base.column(
        "Progress",
        ".status.progress.summary",
        description="optimizer steps done/planned; with rounds, the round r/N first",
    ),
    base.column("Loss", ".status.metrics.loss", "number"),
    base.MESSAGE,
    base.column("Backend", ".status.backend", wide=True),
    base.column("Checkpoint", ".status.checkpointUri", wide=True),
    base.AGE,
]


def _shape(spec_schema: dict[str, Any], _status: dict[str, Any]) -> None:
    for name in _DEFAULTED_OBJECTS:  # always there, so that their transition rule runs
        base.node_at(spec_schema, ("spec", name))["default"] = {}
    for name in _FROZEN_OBJECTS:
        node = base.node_at(spec_schema, ("spec", name))
        node["x-kubernetes-validations"] = [*node.get("x-kubernetes-validations", []), _FROZEN]


DEFINITION = base.Definition(
    NAMES, __package__, DESCRIPTION, TrainingRunSpec, TrainingRunStatus, COLUMNS, RULES, _shape
)

if __name__ == "__main__":
    sys.exit(DEFINITION.main(sys.argv[1:]))

"""What the RolloutBatch controller knows of its children without asking: kopf indices
(core/watches.py) kept by watches on its Jobs (fetch, rollout, verify, collect), their
pods, its volume claim and NetworkPolicies, each selected by the batch label."""

from __future__ import annotations

from coworkgym_operator.core.watches import CLAIMS, JOBS, POLICIES, watch_children
from coworkgym_operator.rollouts.builders import LABEL_BATCH

OWNED = {"Job": JOBS, "PersistentVolumeClaim": CLAIMS, "NetworkPolicy": POLICIES}
WATCHES = watch_children("batch", LABEL_BATCH, OWNED)

__all__ = ["WATCHES"]

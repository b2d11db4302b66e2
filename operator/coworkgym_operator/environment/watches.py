"""What the CoworkEnvironment controller knows of its children without asking: kopf indices
(core/watches.py) kept by watches on the stage Jobs, their pods, and the environments'
volume claims and NetworkPolicies, each selected by the environment label."""

from __future__ import annotations

from coworkgym_operator.core.watches import CLAIMS, POLICIES, Indices, watch_children
from coworkgym_operator.environment.builders import LABEL_ENV

WATCHES = watch_children(
    "env", LABEL_ENV, {"PersistentVolumeClaim": CLAIMS, "NetworkPolicy": POLICIES}
)

__all__ = ["WATCHES", "Indices"]

"""A kopf operator that watches CoworkEnvironments and does nothing: the baseline that
``operator_scale.py`` runs beside ours, on the same objects and API server, for kopf's own
CPU per object event and memory per object.

    kopf run --standalone -n <namespace> benchmarks/noop_operator.py
"""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.scanning.disabled = True  # as ours: one known CRD, no namespace scanning
    settings.posting.enabled = False


@kopf.on.event("coworkgym.dev", "v1alpha1", "coworkenvironments")
def noop(**_: Any) -> None:
    """Every event of every environment reaches a handler, which returns."""

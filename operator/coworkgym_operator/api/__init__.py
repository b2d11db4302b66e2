"""The CoworkEnvironment API: pydantic models are the contract; the CRD is generated."""

from __future__ import annotations

from .conditions import ConditionReason, ConditionType
from .types import GROUP, KIND, PLURAL, SHORT_NAME, VERSION, CoworkEnvironmentStatus

__all__ = [
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAME",
    "VERSION",
    "ConditionReason",
    "ConditionType",
    "CoworkEnvironmentStatus",
]

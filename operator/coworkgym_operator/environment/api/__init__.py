"""The CoworkEnvironment API: pydantic models are the contract; the CRD is generated."""

from __future__ import annotations

from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.environment.api.conditions import ConditionReason, ConditionType
from coworkgym_operator.environment.api.types import (
    KIND,
    PLURAL,
    SHORT_NAME,
    CoworkEnvironmentStatus,
)

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

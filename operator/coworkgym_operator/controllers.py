"""kopf registration for every kind (``kopf run -m coworkgym_operator.controllers``): each
kind's thin handlers live in its own package, ``<kind>/handlers.py``."""

from __future__ import annotations

from coworkgym_operator.campaign import handlers as campaign
from coworkgym_operator.environment import handlers as environment
from coworkgym_operator.rollouts import handlers as batch
from coworkgym_operator.training import handlers as training

__all__ = ["batch", "campaign", "environment", "training"]

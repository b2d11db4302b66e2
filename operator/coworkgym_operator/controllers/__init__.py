"""kopf registration: thin handlers, one module per kind."""

from __future__ import annotations

from . import environment as environment

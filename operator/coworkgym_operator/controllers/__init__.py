"""kopf registration: thin handlers, one module per kind."""

from __future__ import annotations

from . import batch as batch
from . import environment as environment
from . import training as training

"""kopf registration: thin handlers, one module per kind."""

from __future__ import annotations

from . import batch as batch
from . import campaign as campaign
from . import environment as environment
from . import training as training

"""Cowork-Gym core: environment packages, the hybrid verifier, sandboxes, the Issue Detector
and the build → execute → revise loop. Usable with no cluster and no model."""

__version__ = "0.1.0"

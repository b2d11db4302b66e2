"""The task taxonomy (six dimensions and incompatibility rules, as data in
``taxonomy.yaml``), validation of task labels against it, and a balanced spec sampler."""

from __future__ import annotations

from .model import (
    Capability,
    Domain,
    Rule,
    Taxonomy,
    load_taxonomy,
    rule_holds,
    rule_message,
    validate_labels,
)
from .sampler import Coverage, SampledSpec, cell_of, coverage, sample_specs, served_grid

__all__ = [
    "Capability",
    "Coverage",
    "Domain",
    "Rule",
    "SampledSpec",
    "Taxonomy",
    "cell_of",
    "coverage",
    "load_taxonomy",
    "rule_holds",
    "rule_message",
    "sample_specs",
    "served_grid",
    "validate_labels",
]

"""Labels are facts: the taxonomy labels a package carries must describe its task.

Whoever balances or filters a training mix by task.toml's labels relies on them, so the
audit checks them against what the package holds:

- a procedural family's package: the family serves the scenario leaf and every labelled
  capability at the package's number of turns (``coworkgym.families.family_for``);
- any Cowork package: every labelled deliverable format is a declared output, every input
  modality is among the declared inputs, and a capability that only a later user turn can
  exercise has that turn (``requirement_tracking`` a changed requirement,
  ``dependency_tracking`` a changed input that invalidates outputs).

A mismatch is a LABELS_MISMATCH defect for the Builder, with the label and what the package
holds as evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from ..families import FAMILIES, UnservedLabels, family_for
from ..package.cowork import Artifact
from ..package.package import EnvironmentPackage
from .defects import Defect, DefectCode

# deliverable label → the artifact formats or path suffixes that produce it
DELIVERABLE_FORMATS: dict[str, set[str]] = {
    "code": {"py", "sh", "js", "ts", "r", "sql", "rb", "go", "java"},
    "yaml": {"yaml", "yml"},
    "html": {"html", "htm"},
}
# input modality → the input formats or suffixes that carry it (unlisted ones: unchecked)
MODALITY_FORMATS: dict[str, set[str]] = {
    "tabular": {"csv", "tsv", "xlsx", "xls", "ods"},
    "text": {"md", "txt", "eml", "mbox"},
    "document": {"docx", "pdf", "pptx", "odt", "html"},
    "code": {"py", "sh", "js", "ts", "r", "sql", "toml", "yaml", "yml", "cfg", "ini"},
    "structured": {"json", "yaml", "yml", "xml"},
    "image": {"png", "jpg", "jpeg", "gif", "svg", "tiff"},
}
FILES_MODALITY_MIN_INPUTS = 3  # "a folder of heterogeneous files"
INPUT_KINDS = {"input_replaced", "input_edited"}


def labels_match_task(pkg: EnvironmentPackage) -> Iterable[Defect]:
    cowork = pkg.config.cowork
    if cowork is None:
        return
    labels = cowork.taxonomy
    if cowork.family in FAMILIES:
        try:
            family_for(labels.scenario, labels.capabilities, cowork.turns, family=cowork.family)
        except UnservedLabels as exc:
            yield _mismatch(
                str(exc),
                family=cowork.family,
                scenario=labels.scenario,
                capabilities=list(labels.capabilities),
                turns=cowork.turns,
            )
    if pkg.artifacts is None:
        return
    outputs, inputs = pkg.artifacts.outputs, pkg.artifacts.inputs
    produced = {kind for a in outputs for kind in _kinds(a)}
    for index, deliverable in enumerate(labels.deliverables):
        if deliverable == "file_tree":
            continue  # the workspace's own files: nothing to declare
        if not DELIVERABLE_FORMATS.get(deliverable, {deliverable}) & produced:
            yield _mismatch(
                f"labels.deliverables[{index}] {deliverable!r}: no declared output is a "
                f"{deliverable}; fix: produce one, or drop the label",
                label=deliverable,
                outputs=[a.path for a in outputs],
            )
    read = {kind for a in inputs for kind in _kinds(a)}
    for index, modality in enumerate(labels.modality):
        if modality == "files":
            missing = len(inputs) < FILES_MODALITY_MIN_INPUTS
        else:
            missing = modality in MODALITY_FORMATS and not MODALITY_FORMATS[modality] & read
        if missing:
            yield _mismatch(
                f"labels.modality[{index}] {modality!r}: no declared input carries it; fix: "
                "label the modality of the inputs the task has",
                label=modality,
                inputs=[a.path for a in inputs],
            )
    kinds = {p.kind for p in pkg.patches if p.kind == "requirement_changed" or p.invalidates}
    needs = {"requirement_tracking": {"requirement_changed"}, "dependency_tracking": INPUT_KINDS}
    for index, capability in enumerate(labels.capabilities):
        if capability in needs and not needs[capability] & kinds:
            yield _mismatch(
                f"labels.capabilities[{index}] {capability!r}: no later user turn exercises it "
                f"(it needs a turn of kind {' or '.join(sorted(needs[capability]))}); fix: add "
                "such a turn, or drop the label",
                label=capability,
                turn_kinds=[p.kind for p in pkg.patches],
            )


def _kinds(artifact: Artifact) -> set[str]:
    suffix = PurePosixPath(artifact.path).suffix.lstrip(".").lower()
    return {artifact.format, suffix} - {"", "other"}


def _mismatch(message: str, **evidence: object) -> Defect:
    return Defect.with_evidence(DefectCode.LABELS_MISMATCH, message, evidence)


__all__ = ["labels_match_task"]

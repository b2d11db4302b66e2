"""The scaffolding every procedural family shares, so a family is mostly its data, its
instruction and its checks.

How a family is assembled (see ``weather_report.py`` for a short, complete one):

1. **Declare it.** Subclass ``TaskFamily`` with ``name``, the taxonomy ``scenarios`` (leaves)
   and ``capabilities`` its tasks exercise — together the cells it serves — the
   ``deliverables`` and ``modalities`` it produces and reads, the ``safety`` labels true of
   it, and in ``later_capabilities`` the capabilities only a later user turn exercises
   (``requirement_tracking``, ``dependency_tracking``): they are served from ``full_turns``
   user turns on, the fewest whose drafted turns always include every kind. These are
   facts: the sampler labels a task only with them, ``family_for`` refuses other labels and
   the Issue Detector checks a package against them (``coworkgym.detector.labels``).
2. **Draft the task** in ``draft(params)``: draw the data from a bundled resource
   (``read_csv_resource``, ``resource_bytes``) with ``params.rng(salt)``, choose the later
   turns with ``plan_turns`` and make each with ``input_turn`` (the user replaces or edits
   an input) or ``requirement_turn`` (the user changes what is wanted). Write the reference
   solution with ``python_solution`` (a python3 body that solve.sh runs) and fill its
   ``__NAME__`` placeholders with ``fill_template`` (e.g. the turn from which a requirement
   applies); the user with ``user_state``, the artifacts with ``input_artifacts`` /
   ``output_artifacts``; return a ``FamilyDraft``.
3. **Write the verifier** in ``verifier(built, params)`` from ``built.final_inputs()`` only
   (never from the reference outputs): ``Component``s (``json_value`` for a JSON pointer),
   a red line (``inputs_unmodified`` for inputs the agent must not touch), one rubric item,
   and ``verifier_output`` to attach the private copies of the inputs (``tests/inputs/…``)
   and any expectation files. A check that needs a whole tree or document is a small
   stdlib script built on ``CHECK_PRELUDE`` (``check_scripts`` writes one per mode).
   ``requirement_added(built)`` says whether a requirement turn is part of the task.
4. **Declare the open readings** of every checked value a reader could compute in more
   than one way (ties in an argmax or argmin, rounding, inclusive or exclusive bounds,
   units) in ``readings(inputs, turns)``: a ``Reading`` per value, ``tie_reading`` for an
   argmax. State the rule that settles each in the instruction or in the turn that asks for
   the value; the Issue Detector recomputes the readings and flags a value they leave open.
5. **Register it** in ``coworkgym/families/__init__.py`` and add a unit test in
   ``tests/unit/test_families_<name>.py`` (the helpers of ``test_families_meeting_notes.py``
   run the reference solution and the verifier in-process). ``cowork-gym coverage
   --families`` then shows its cells and the size of its tasks per difficulty; say what its
   ``hard`` means in the README's table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Literal

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Artifact, FileUpdate, Signal, Trigger, TurnPatch, UserState
from ..verifier.spec import (
    Component,
    InputsUnmodified,
    JsonValue,
    RedLine,
    RowCount,
    RubricItem,
    TableColumns,
    VerifierSpec,
)
from .base import (
    NEVER,
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    parse_csv,
    plan_turns,
    read_csv_resource,
    resource_bytes,
    write_csv,
)

Format = Literal["csv", "xlsx", "json", "docx", "md", "txt", "py", "other"]
InputKind = Literal["input_replaced", "input_edited"]


# ---- later user turns -----------------------------------------------------------------------


# Tool calls a turn gets before a deliverable trigger may fire: look at the files, then
# write, then check; an agent that looks before it edits is not cut off by its first write.
MIN_TURN_TOOL_CALLS = 3


def when_delivered(artifact: str, index: int) -> Trigger:
    """The user of later turn ``index`` speaks once the agent delivered ``artifact`` in the
    turn before: in the first request's turn it *appears* (no output is in s0); later it
    already exists, so the user speaks once it *changed* (they review the new version).
    Either waits for the turn's first ``MIN_TURN_TOOL_CALLS`` calls."""
    kind: Literal["artifact_appeared", "artifact_changed"] = (
        "artifact_appeared" if index == 1 else "artifact_changed"
    )
    return Trigger(kind=kind, artifact=artifact, min_tool_calls=MIN_TURN_TOOL_CALLS)


def after_reply(index: int) -> Trigger:
    """The user speaks after the agent's ``index``-th reply."""
    return Trigger(kind="after_agent_turn", agent_turn=index)


def input_turn(
    index: int,
    trigger: Trigger,
    message: str,
    files: Mapping[str, bytes],
    *,
    reason: str,
    invalidates: Iterable[str],
    kind: InputKind = "input_replaced",
) -> UserTurn:
    """A turn in which the user writes ``files`` (workspace path → new content) and says
    ``message``; each file travels in the patch under its base name."""
    updates = [
        FileUpdate(op="write", path=path, source=PurePosixPath(path).name, reason=reason)
        for path in files
    ]
    return UserTurn(
        TurnPatch(
            turn=index,
            trigger=trigger,
            message=message,
            kind=kind,
            updates=updates,
            invalidates=list(invalidates),
        ),
        {PurePosixPath(path).name: content for path, content in files.items()},
    )


def requirement_turn(index: int, message: str, invalidates: Iterable[str]) -> UserTurn:
    """A turn in which the user changes what is wanted, after the agent's ``index``-th reply."""
    return UserTurn(
        TurnPatch(
            turn=index,
            trigger=after_reply(index),
            message=message,
            kind="requirement_changed",
            invalidates=list(invalidates),
        )
    )


def requirement_added(built: BuilderOutput) -> bool:
    """Whether one of the task's later turns changes the requirement."""
    return any(t.patch.kind == "requirement_changed" for t in built.turns)


# ---- the draft --------------------------------------------------------------------------------


def python_solution(purpose: str, body: str, *env: str) -> str:
    """A reference ``solve.sh`` that runs ``body`` with python3 in the workspace (once per
    user turn; ``COWORK_TURN`` says which). Each name in ``env`` is set from a ``__NAME__``
    placeholder that ``fill_template`` fills, e.g. the turn from which a requirement applies.
    ``purpose`` becomes the header comment (one comment line per line)."""
    comment = "\n".join(f"# {line}" for line in f"Reference solution: {purpose}".splitlines())
    run = " ".join([*(f"{name}=__{name}__" for name in env), "python3 - <<'PY'"])
    return (
        f"#!/usr/bin/env bash\n{comment}\nset -euo pipefail\n"
        f'cd "${{COWORK_WORKSPACE:-/app}}"\n{run}\n{body}PY\n'
    )


def fill_template(template: str, **values: object) -> str:
    """``template`` with each ``__NAME__`` replaced by ``str(values["name"])``."""
    for name, value in values.items():
        placeholder = f"__{name.upper()}__"
        if placeholder not in template:
            raise KeyError(f"template has no placeholder {placeholder}")
        template = template.replace(placeholder, str(value))
    return template


def user_state(
    persona: str,
    role: str,
    goal: str,
    boundary: str,
    signal: tuple[str, str],
) -> UserState:
    """The simulated user: one latent goal, one thing they do not know, and one signal
    (what prompts it, what they reveal)."""
    trigger, reveals = signal
    return UserState(
        persona=persona,
        role=role,
        latent_goals=[goal],
        knowledge_boundary=[boundary],
        signal_plan=[Signal(trigger=trigger, reveals=reveals)],
    )


def input_artifacts(formats: Mapping[str, Format]) -> list[Artifact]:
    """Input artifacts, path → format."""
    return [Artifact(path=p, role="input", format=f) for p, f in formats.items()]


def output_artifacts(
    formats: Mapping[str, Format], depends_on: Iterable[str], *, in_place: bool = False
) -> list[Artifact]:
    """Output artifacts, path → format, each depending on ``depends_on``; ``in_place``: files
    of s0 the task edits where they stand."""
    sources = list(depends_on)
    return [
        Artifact(path=p, role="output", format=f, depends_on=list(sources), in_place=in_place)
        for p, f in formats.items()
    ]


# ---- the verifier ---------------------------------------------------------------------------


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def json_value(
    id: str,
    path: str,
    pointer: str,
    expected: object,
    requirement: str,
    *,
    weight: float = 1,
    tolerance: float | None = None,
) -> Component:
    """A component checking one value of a JSON deliverable by pointer."""
    extra = {} if tolerance is None else {"tolerance": tolerance}
    return Component(
        id=id,
        weight=weight,
        check=JsonValue(path=path, pointer=pointer, expected=expected, **extra),
        requirement=requirement,
    )


def table_shape(
    id: str,
    path: str,
    columns: list[str],
    rows: int,
    columns_requirement: str,
    rows_requirement: str,
    *,
    sheet: str | None = None,
) -> list[Component]:
    """A table deliverable's shape, two components: its header has ``columns``
    (``<id>_layout``, weight 1) and it holds exactly ``rows`` data rows (``<id>_rows``,
    weight 2). ``sheet`` names the worksheet of a workbook; a CSV has none."""
    where = {} if sheet is None else {"sheet": sheet}
    return [
        Component(
            id=f"{id}_layout",
            weight=1,
            check=TableColumns(path=path, columns=columns, **where),
            requirement=columns_requirement,
        ),
        Component(
            id=f"{id}_rows",
            weight=2,
            check=RowCount(path=path, equals=rows, **where),
            requirement=rows_requirement,
        ),
    ]


def inputs_unmodified(id: str, description: str, files: Mapping[str, bytes]) -> RedLine:
    """A red line: these inputs (path → final content) must stay byte for byte."""
    return RedLine(
        id=id,
        description=description,
        check=InputsUnmodified(files={p: sha256(c) for p, c in files.items()}),
    )


def rubric(id: str, criterion: str, evidence: Iterable[str]) -> list[RubricItem]:
    """A one-item rubric (what the LLM judge reads, and where)."""
    return [RubricItem(id=id, criterion=criterion, evidence_paths=list(evidence))]


def expectations(document: object) -> bytes:
    """An expectations file for check scripts: stable, sorted JSON."""
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def verifier_output(
    spec: VerifierSpec,
    inputs: Mapping[str, bytes],
    extra: Mapping[str, bytes] | None = None,
) -> VerifierOutput:
    """The verifier with private copies of ``inputs`` (under ``tests/inputs/``) and ``extra``
    private files (check scripts, expectations), its content checks made gates."""
    private = {f"inputs/{p}": c for p, c in inputs.items()}
    private.update(extra or {})
    return VerifierOutput(spec=gated(spec), private_files=private)


# Checks of a deliverable's shape, not of what it says: they stay plain weighted components.
SHAPE_CHECKS = frozenset({"file_exists", "file_absent", "table_columns", "json_schema"})


def gated(spec: VerifierSpec) -> VerifierSpec:
    """Every content check a gate (``Component.gate``): a deliverable missing, a value left
    stale by an ignored user turn, anything not right scales the reward by the spec's
    ``gate_scale`` (0.5), so partial work never earns more than that share — what the Issue
    Detector's partial-work states require. Shape checks keep their plain partial credit."""
    components = [
        c if c.check.type in SHAPE_CHECKS else c.model_copy(update={"gate": True})
        for c in spec.components
    ]
    return spec.model_copy(update={"components": components})


# ---- open readings ----------------------------------------------------------------------

# A tie rule in the sentence that names the value: "the earliest such month if there is a tie"
FIRST_ON_TIE = r"\b(earliest|first)\b.*\bties?\b|\bties?\b.*\b(earliest|first)\b"
LAST_ON_TIE = r"\b(latest|last)\b.*\bties?\b|\bties?\b.*\b(latest|last)\b"


def tie_reading(
    component: str, subject: str, scores: Mapping[str, float], *, lowest: bool = False
) -> Reading:
    """The key with the highest (``lowest``: the lowest) score, read two ways when keys tie:
    the first or the last of the tied keys in sorted order. Scores are compared at 1e-9, so
    float noise in a sum is no tie but two equal readings are."""
    target = min(scores.values()) if lowest else max(scores.values())
    tied = sorted(k for k, v in scores.items() if abs(v - target) <= 1e-9)
    return Reading(
        component=component,
        subject=subject,
        values={"first": tied[0], "last": tied[-1]},
        phrases={"first": FIRST_ON_TIE, "last": LAST_ON_TIE},
    )


# The start of every check script: the workspace is argv[1], and ``report`` prints the score
# the custom_script check reads, then exits.
CHECK_PRELUDE = '''\
import json
import sys
from pathlib import Path

ws = Path(sys.argv[1])


def report(score, evidence):
    print(json.dumps({"score": round(score, 6), "evidence": evidence}))
    sys.exit(0)

'''


def check_scripts(template: str, modes: Iterable[str], name: str) -> dict[str, bytes]:
    """One check script per mode: ``template`` with ``__MODE__`` replaced, saved as
    ``name.format(mode=mode)`` (e.g. ``"check_{mode}.py"``)."""
    return {name.format(mode=m): template.replace("__MODE__", m).encode() for m in modes}


__all__ = [
    "CHECK_PRELUDE",
    "FIRST_ON_TIE",
    "LAST_ON_TIE",
    "NEVER",
    "FamilyDraft",
    "FamilyParams",
    "Format",
    "Reading",
    "TaskFamily",
    "after_reply",
    "check_scripts",
    "expectations",
    "fill_template",
    "gated",
    "input_artifacts",
    "input_turn",
    "inputs_unmodified",
    "json_value",
    "output_artifacts",
    "parse_csv",
    "plan_turns",
    "python_solution",
    "read_csv_resource",
    "requirement_added",
    "requirement_turn",
    "resource_bytes",
    "rubric",
    "sha256",
    "table_shape",
    "tie_reading",
    "user_state",
    "verifier_output",
    "when_delivered",
    "write_csv",
]

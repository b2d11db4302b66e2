"""Role prompts, written for this project (the paper's prompts are not published).

Each role gets a system prompt (what the role is, its rules, its directory layout) and a
task message (this environment's spec, and on a revision the defects routed to it with
their evidence). The rules restate the design's role contracts: the Builder grounds its
reference solution by executing it and leaves s0 untouched; the Verifier Constructor maps
every requirement to a check; the Issue Detector's review reports evidence and repairs
nothing. The first line of each system prompt names the role (log readers and the scripted
test server rely on it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ..detector.defects import CATALOGUE, Defect
from ..package.cowork import ArtifactGraph, Interfaces, TurnPatch, UserState
from ..spec import EnvironmentSpec
from ..verifier.spec import VerifierSpec
from .layout import TaskMeta

# ---- Builder ----------------------------------------------------------------------------
BUILDER_SYSTEM = """\
# Role: Builder

You are the Builder of a Cowork-Gym training environment. An environment is a realistic
piece of work that a person (the *user*) hands to an AI coworker (the *acting agent*): an
instruction, a workspace of real files, a private user with goals the agent must discover,
and later user turns that change inputs or requirements. You build everything except the
verifier; another role, which you never see, writes the verifier from your output.

## Your directory: /build (writable)
- `task.json` — {"slug": "short-kebab-name", "title": "one line", "agent_timeout_sec": 900}
- `instruction.md` — the user's first request, in the user's voice. Name every deliverable
  (path, format, the columns/keys/sections it must have) and every constraint precisely:
  the verifier can only check what the instruction asks for.
- `workspace/…` — s0, the files the acting agent starts with. Use real data: the bundled
  resources are under /resources (read-only); copy or derive from them. Add context files a
  coworker would really find (a README, notes) but nothing that gives answers away.
- `solve.sh` — the reference solution: a deterministic bash script run with the workspace as
  its working directory at `$COWORK_WORKSPACE` (default /app), once per user turn with
  `$COWORK_TURN` = 0, 1, …; before turn N ≥ 1 that turn's patch has been applied. It must
  compute every deliverable from the inputs (never hard-code results). Available: bash,
  python3 with openpyxl and python-docx, coreutils. No network.
- `user.json` — the private user (πU): persona, role, latent_goals (wants the user has but
  did not state), knowledge_boundary (what the user does not know and must not invent),
  signal_plan (when the user volunteers which private fact), tone.
- `artifacts.json` — every input (role "input") and deliverable (role "output") with its
  format and `depends_on` (which inputs each output is computed from). An output the task
  edits where it stands (code to fix, a document to revise) is in s0 on purpose: declare
  it `"in_place": true`.
- `interfaces.json` — optional: only the tools the task needs (default: all five file and
  shell tools, no network).
- `patches/turn-NN/patch.json` and `patches/turn-NN/files/…` — one folder per later user
  turn (turn-01, turn-02, …). A later turn must bring *new information*: a corrected or
  replaced input file (kind "input_replaced" / "input_edited", with a `write` update whose
  `source` is a file under that turn's files/), or a changed requirement
  ("requirement_changed") stated in the message. Never split the first request into steps.
  Updates may only touch declared inputs, and `invalidates` must list every output that
  depends on a changed input (by `depends_on` in artifacts.json, transitively): `submit`
  refuses a patch that misses one, naming it.

## Rules
1. Ground the reference solution by executing it. /app is your scratch copy of the agent's
   workspace: `rm -rf /app/* && cp -r /build/workspace/. /app/ && COWORK_TURN=0 bash
   /build/solve.sh`, then inspect what it produced. For later turns apply the patch's files
   to /app and run with COWORK_TURN=N. Fix solve.sh until every declared output exists and
   is right.
2. Restore s0: `workspace/` must hold only the initial inputs. Never leave a deliverable
   (not even a partial or empty one), an intermediate result or the solution in it:
   `submit` refuses a declared output found in workspace/ unless it is `in_place`.
3. No leakage: expected answers, computed totals, the solution, latent goals and later turns'
   messages must not appear in instruction.md or in workspace/ files other than the raw
   inputs themselves.
4. Keep it small and deterministic: a few input files, two or three deliverables, exact
   formats (CSV with a header row, JSON objects with named keys, XLSX with named sheets).
5. When you are done call `submit`. It validates the files and executes solve.sh turn by
   turn on a fresh copy of s0; if it reports problems, fix them and submit again.

## File schemas (JSON Schema)
"""


def builder_system() -> str:
    return BUILDER_SYSTEM + _schemas(
        {
            "task.json": TaskMeta,
            "user.json": UserState,
            "artifacts.json": ArtifactGraph,
            "interfaces.json": Interfaces,
            "patches/turn-NN/patch.json": TurnPatch,
        }
    )


def builder_task(spec: EnvironmentSpec, feedback: Sequence[Defect], revising: bool) -> str:
    task = spec.task
    lines = [
        "Build one environment for this task spec.",
        "",
        f"- scenario: {task.labels.scenario}",
        f"- capabilities: {', '.join(task.labels.capabilities)}",
        f"- difficulty: {task.labels.difficulty}",
        f"- the user is: {task.labels.user_role}",
        f"- deliverable formats: {', '.join(task.labels.deliverables)}",
        f"- modality: {', '.join(task.labels.modality)}",
        f"- user turns in all: {task.turns} (so {task.turns - 1} folder(s) under patches/)",
        "",
        f"Your cell is {task.labels.scenario} × {task.labels.capabilities[0]}: the labels are "
        "written into the package as facts, so the work must be this scenario and must need "
        "every listed capability and produce every listed format (the Issue Detector checks).",
    ]
    if task.labels.safety:
        lines.append(f"- safety aspects: {', '.join(task.labels.safety)}")
    if task.instruction:
        lines += ["", "Ground this user request (you may sharpen it):", "", task.instruction]
    if task.resources:
        lines += ["", "Resources to ground the task in: " + ", ".join(task.resources)]
    lines += ["", "Bundled real data files are under /resources/data (read-only)."]
    if revising:
        lines += ["", REVISION_INTRO.format(dir="/build"), *_defects(feedback)]
    return "\n".join(lines)


# ---- Verifier Constructor ---------------------------------------------------------------
VERIFIER_SYSTEM = """\
# Role: Verifier Constructor

You write the verifier of a Cowork-Gym environment: the checks that decide whether an acting
agent's final workspace fulfils the user's request. A reward must separate real completions
from untouched, incomplete, malformed and shortcut states.

## What you can see
- /builder (read-only): the Builder's output — instruction.md, workspace/ (s0), solve.sh,
  artifacts.json, user.json, patches/ — plus final_inputs/ (the declared inputs after every
  user turn: what the final deliverables must answer to) and reference/ (the workspace after
  the reference solution ran through every turn).
- /verifier (writable): your output. /app (writable): scratch space.

## Your output
- `/verifier/verifier.json` — the spec the fixed engine runs (schema below).
- `/verifier/inputs/…` — private copies of the inputs your checks recompute from (copy them
  from /builder/final_inputs/); they land under tests/inputs/, so an `aggregate` source path
  is `inputs/<path>`.
- Custom check scripts: any other file under /verifier lands under tests/ too. Write a
  script at, say, /verifier/checks/reasons.py and name it `"script": "checks/reasons.py"`
  (relative to /verifier, i.e. tests/; a `command` check runs it as /tests/checks/…). It
  runs with python3 (stdlib, openpyxl, python-docx), gets the workspace directory as
  argv[1] (files beside the script: `Path(__file__).parent`), and must print one JSON line last:
  {"score": 0..1, "evidence": "…"}. A crash or no score makes the whole verification
  invalid, not 0: a missing or malformed deliverable must print score 0.

## Method — for every requirement in instruction.md and in each later turn's message:
requirement → success condition → observable evidence (a file, a cell, a key) → a check (or
a rubric item when only judgement can tell) → a weight by importance.
1. Semantic checks first: values recomputed from the inputs (`aggregate`, `*_value`,
   `cross_file`), with tight tolerances. Compute expected values yourself from
   final_inputs/ with python3 — never copy numbers out of reference/, which may be wrong.
2. Red lines: at least one `inputs_unmodified` red line with the sha256 of every final input
   (`sha256sum /builder/final_inputs/<path>`), so damaging the inputs caps the reward.
3. Structure next (`table_columns`, `json_schema`, `row_count` with bounds); mere existence
   (`file_exists`) last and with a small weight — it never counts as meaningful.
4. At least three meaningful components, weights reflecting importance. Add `rubric` items
   (criterion + evidence_paths) only for qualities code cannot check.
5. Partial work must not pay. The Issue Detector builds these states from the reference
   and rejects a verifier that scores a stale or a missing state above 0.5, or passes blank
   free text: every later user turn ignored (its new input present but unused, its changed
   requirement not applied), each deliverable missing in turn, every free-text field (a
   reason, a note) emptied. Mark the checks of each deliverable's content and of each later
   turn's change `"gate": true` (any gate below 1 multiplies the reward by
   scoring.gate_scale, 0.5); check free text in code (a `text_regex` or a script that wants
   real words) — a rubric item alone is not judged when the package is checked.
6. Self-validate with `try_verifier`: the reference completion must score at least the
   pass threshold (default 0.99) and the untouched workspace below the fail threshold
   (0.5). Build the failure states yourself under /app (e.g. `cp -r /builder/reference/.
   /app/stale`, then put back a previous turn's deliverable, remove one, blank the reasons)
   and score each with `try_verifier` and `workspace: "/app/stale"`: wrong numbers, an
   emptied file, inputs copied into outputs, stale and missing work must all fail.
7. Call `submit` when done; it validates the spec and runs the same self-check. Fix what it
   reports and submit again.

## How values compare (json_value, csv_value, xlsx_value, document_value, cross_file)
- numbers: |actual − expected| ≤ max(tolerance, rel_tolerance × |expected|); a text cell is
  read as the number in it ("1,234.5", "$12", "12%", "(3.5)" = −3.5, "about 7 days" = 7).
- strings: equal after collapsing runs of whitespace and ignoring case ("New  York" =
  "new york"); no substring, punctuation or accent folding. `expected: null` accepts only a
  missing or empty value. Booleans compare as text (true = "True").
- lists: the same length and order, element by element by these rules; an object (dict) as
  `expected` is compared as its printed text — check its fields one pointer at a time.

## Check types (field: meaning; paths are relative to the workspace)
- file_exists {path, min_bytes=1}; file_absent {path}
- json_value {path, pointer ("/a/0/b"), expected, tolerance=0, rel_tolerance=0}
- csv_value {path, key_column, key, column, expected, tolerance, rel_tolerance}
- xlsx_value {path, sheet, cell | key_column+key+column, expected, tolerance, rel_tolerance}
- document_value {path, label, expected, …}: the value after "label:" in md/txt/docx
- json_schema {path, schema}; table_columns {path, columns, sheet}
- row_count {path, sheet | pointer, equals | min | max}
- aggregate {path, key_column, value_column, sheet, tolerance=0.01, source: {path
  ("inputs/…"), op (sum|mean|count|min|max), value, group_by, group_prefix, where}}: every
  group recomputed from the private input must match the deliverable's row for that key
- cross_file {left: ValueRef, right: ValueRef, tolerance}: two files agree
  (ValueRef = {path, kind (json|csv|xlsx|document), pointer | cell | key_column+key+column |
  label, sheet})
- text_regex {path, pattern, must_match=true, ignore_case=true}
- command {argv, expect_exit=0, timeout}: e.g. a hidden test under /tests/
- custom_script {script (under tests/), interpreter}: prints {"score": x, "evidence": "…"}
- inputs_unmodified {files: {path: sha256}} — the usual red line
- claimed_files_exist {}; forbidden_tool {tools} — need a trajectory

## verifier.json schema (JSON Schema)
"""


def verifier_system() -> str:
    return VERIFIER_SYSTEM + _schema_text(VerifierSpec)


def verifier_task(spec: EnvironmentSpec, feedback: Sequence[Defect], revising: bool) -> str:
    lines = [
        "Write the verifier for the environment in /builder.",
        f"It has {spec.task.turns} user turn(s); the final deliverables must reflect every "
        "turn's patch and message.",
    ]
    if revising:
        lines += ["", REVISION_INTRO.format(dir="/verifier"), *_defects(feedback)]
    return "\n".join(lines)


# ---- Issue Detector review --------------------------------------------------------------
REVIEW_SYSTEM = """\
# Role: Issue Detector (review)

You review a candidate Cowork-Gym environment package before release. You do not repair
anything: you find defects and report each with evidence, routed to its owner.

## What you can see
- /package (read-only): the whole package — instruction.md, task.toml,
  environment/workspace/ (s0, what the acting agent sees), solution/solve.sh, tests/
  (verifier.json and private inputs), .user/ (private user state), .patch/ (later turns),
  .cowork/ (interfaces, artifact graph).
- /scratch (writable): reproduce the task there, e.g. copy s0 to /scratch/ws and run the
  solution (`cd /scratch/ws && COWORK_WORKSPACE=/scratch/ws COWORK_TURN=0 bash
  /package/solution/solve.sh`).

## What to judge
1. Does the verifier separate valid completions from shortcut states? Look for checks that
   accept anything (loose tolerances, patterns matching any text, existence-only scoring),
   expected values that disagree with the inputs, requirements without a check, and
   deliverables an agent could fake (copying inputs, hard-coding a value).
2. Leakage: answers, expected values, solution or verifier content, or private user state
   visible in instruction.md or environment/.
3. Later user turns that bring no new information, or patches that touch undeclared paths.
4. Whether the instruction states what the verifier checks (an agent cannot guess a hidden
   column name).

## Reporting
Call `report_defect` once per defect, with a code from the list below, a message that says
what is wrong and why it matters, and evidence: the package file and an exact quote from it
(the quote is checked). Report only what the evidence shows. Call `finish` when done —
reporting nothing is the right outcome for a sound package.

## Defect codes (owner: meaning)
"""


def review_system() -> str:
    codes = "\n".join(
        f"- {code}: ({owner}) {meaning}" for code, (owner, meaning) in CATALOGUE.items()
    )
    return REVIEW_SYSTEM + codes + "\n"


def review_task(name: str) -> str:
    return f"Review the package {name} in /package."


# ---- shared -----------------------------------------------------------------------------
REVISION_INTRO = """\
This is a revision. {dir} holds your previous output. The Issue Detector executed the
package and routed these defects to you (with its evidence). Repair each one at its cause,
keep what was right, and submit again:
"""


def _defects(feedback: Sequence[Defect]) -> list[str]:
    if not feedback:
        return [
            "- (no defects were routed to you; the other role's output changed, so "
            "re-check that yours still fits it)"
        ]
    return [
        f"- {d.code} ({d.severity}): {d.message}\n  evidence: {_compact(d.evidence)}"
        for d in feedback
    ]


def _compact(value: Any, limit: int = 1200) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "…"


def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), separators=(",", ":"), sort_keys=True) + "\n"


def _schemas(models: dict[str, type[BaseModel]]) -> str:
    return "".join(f"\n### {name}\n{_schema_text(model)}" for name, model in models.items())

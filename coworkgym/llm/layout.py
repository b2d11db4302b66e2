"""The fixed directory layouts through which LLM roles hand over their outputs.

An LLM role writes files; these functions turn them into the same ``BuilderOutput`` /
``VerifierOutput`` the procedural backend produces (validated by the same pydantic models),
and back (a revision starts from the previous output; the Verifier Constructor reads the
Builder's output in this layout, read-only).

Builder (``/build``)::

    task.json                 {"slug": "...", "title": "...", "agent_timeout_sec": 900}
    instruction.md            the user's first request
    workspace/…               s0, the files the acting agent starts with
    solve.sh                  the reference solution (reads $COWORK_TURN)
    user.json                 πU: persona, latent goals, knowledge boundary, signal plan
    interfaces.json           optional; default: the five standard tools, no network
    artifacts.json            inputs and outputs with their dependencies
    patches/turn-NN/patch.json, patches/turn-NN/files/…   later user turns

Verifier Constructor (``/verifier``)::

    verifier.json             the VerifierSpec (components, red lines, rubric, scoring)
    inputs/…                  private copies of inputs (→ tests/inputs/…), any other file
                              lands under tests/ as well

Problems are reported as 'file: field: message' lines, ready to send back to the model.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.config import CoworkMetadata, TaxonomyLabels
from ..package.cowork import ArtifactGraph, Interfaces, TurnPatch, UserState
from ..package.errors import PackageError
from ..package.package import dumps_json
from ..spec import EnvironmentSpec
from ..verifier.spec import VerifierSpec

MAX_FILES = 500
RESERVED_TESTS = ("test.sh", "Dockerfile", "cowork_verifier/")
PATCH_DIR = re.compile(r"^turn-(\d{2})$")
ALL_TOOLS = ["shell", "read_file", "write_file", "edit_file", "list_files"]


class LayoutError(Exception):
    """A role's directory does not hold a valid output; ``problems`` say what to fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class TaskMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$", description="short task name")
    title: str = Field(min_length=5, max_length=200)
    agent_timeout_sec: float = Field(900.0, gt=0, le=7200)


# ---- Builder ----------------------------------------------------------------------------
def load_builder(root: Path, spec: EnvironmentSpec, iteration: int) -> BuilderOutput:
    problems: list[str] = []
    files = read_files(root, problems)
    meta = _model(files, "task.json", TaskMeta, problems)
    user = _model(files, "user.json", UserState, problems)
    artifacts = _model(files, "artifacts.json", ArtifactGraph, problems)
    if "interfaces.json" in files:
        interfaces = _model(files, "interfaces.json", Interfaces, problems)
    else:
        interfaces = Interfaces.model_validate({"tools": ALL_TOOLS})
    instruction = _text(files, "instruction.md", problems)
    solve_sh = _text(files, "solve.sh", problems)
    workspace = _under(files, "workspace")
    if not workspace:
        problems.append("workspace/: empty; s0 needs the input files the task works on")
    turns = _turns(files, problems)
    if len(turns) != spec.task.turns - 1:
        problems.append(
            f"patches/: {len(turns)} later user turn(s), but the spec asks for "
            f"{spec.task.turns} turn(s) in all, i.e. {spec.task.turns - 1} under patches/"
        )
    if artifacts is not None:
        for artifact in artifacts.inputs:
            if artifact.path not in workspace:
                problems.append(f"artifacts.json: input {artifact.path} is not in workspace/")
    for turn in turns:
        for update in turn.patch.updates:
            if update.source is not None and update.source not in turn.files:
                where = f"patches/turn-{turn.patch.turn:02d}"
                problems.append(f"{where}/patch.json: source {update.source} not in files/")
    if artifacts is not None:
        problems += outputs_in_s0(artifacts, workspace) + unlisted_invalidations(artifacts, turns)
    if problems or meta is None or user is None or artifacts is None or interfaces is None:
        raise LayoutError(problems)
    labels = spec.task.labels
    return BuilderOutput(
        name=f"coworkgym/{meta.slug}",
        description=meta.title,
        instruction=instruction,
        workspace=workspace,
        solve_sh=solve_sh,
        user=user,
        interfaces=interfaces,
        artifacts=artifacts,
        cowork=CoworkMetadata(
            taxonomy=TaxonomyLabels(
                capabilities=list(labels.capabilities),
                scenario=labels.scenario,
                difficulty=labels.difficulty,
                user_role=labels.user_role,
                deliverables=list(labels.deliverables),
                modality=list(labels.modality),
                safety=list(labels.safety),
            ),
            family="llm",
            seed=spec.task.seed,
            spec_digest=spec.digest(),
            iterations=iteration + 1,
        ),
        turns=turns,
        agent_timeout_sec=meta.agent_timeout_sec,
    )


def outputs_in_s0(artifacts: ArtifactGraph, workspace: dict[str, bytes]) -> list[str]:
    """A declared output already in s0 (whole or partial) is work the agent never does; only
    an output declared ``in_place`` (a file the task edits where it stands) belongs there."""
    return [
        f"workspace/{a.path}: the declared output {a.path} is already in s0; the agent must "
        "produce it, so remove it from workspace/ (an output the task edits where it stands "
        'is declared with "in_place": true)'
        for a in artifacts.outputs
        if a.path in workspace and not a.in_place
    ]


def unlisted_invalidations(artifacts: ArtifactGraph, turns: list[UserTurn]) -> list[str]:
    """A turn that changes an input must list every artifact depending on it (artifacts.json
    ``depends_on``, transitively) in ``invalidates``."""
    problems = []
    for turn in turns:
        missing = artifacts.unlisted_invalidations(turn.patch)
        if missing:
            changed = ", ".join(u.path for u in turn.patch.updates)
            problems.append(
                f"patches/turn-{turn.patch.turn:02d}/patch.json: invalidates: misses "
                f"{', '.join(missing)} (computed from {changed}, which this turn changes, "
                "by depends_on in artifacts.json); list them"
            )
    return problems


def export_builder(
    built: BuilderOutput,
    root: Path,
    *,
    reference: dict[str, bytes] | None = None,
) -> None:
    """Write a Builder output in its layout (plus, for the Verifier Constructor, the
    grounded reference completion under reference/ and the final inputs under
    final_inputs/: the declared inputs after every user turn)."""
    slug = built.name.split("/", 1)[-1]
    meta = TaskMeta(slug=slug, title=built.description, agent_timeout_sec=built.agent_timeout_sec)
    files: dict[str, bytes] = {
        "task.json": dumps_json(meta),
        "instruction.md": built.instruction.encode(),
        "solve.sh": built.solve_sh.encode(),
        "user.json": dumps_json(built.user),
        "interfaces.json": dumps_json(built.interfaces),
        "artifacts.json": dumps_json(built.artifacts),
    }
    files.update({f"workspace/{k}": v for k, v in built.workspace.items()})
    for turn in built.turns:
        base = f"patches/turn-{turn.patch.turn:02d}"
        files[f"{base}/patch.json"] = dumps_json(turn.patch)
        files.update({f"{base}/files/{k}": v for k, v in turn.files.items()})
    if reference is not None:
        files.update({f"reference/{k}": v for k, v in reference.items()})
        files.update({f"final_inputs/{k}": v for k, v in built.final_inputs().items()})
    write_tree(root, files)


def _turns(files: dict[str, bytes], problems: list[str]) -> list[UserTurn]:
    found: dict[int, UserTurn] = {}
    names = {
        rel.split("/")[1] for rel in files if rel.startswith("patches/") and rel.count("/") > 1
    }
    for name in sorted(names):
        match = PATCH_DIR.match(name)
        if match is None:
            problems.append(f"patches/{name}: name turn folders turn-01, turn-02, …")
            continue
        patch = _model(files, f"patches/{name}/patch.json", TurnPatch, problems, required=True)
        if patch is None:
            continue
        if patch.turn != int(match.group(1)):
            problems.append(
                f"patches/{name}/patch.json: turn: is {patch.turn} but the folder is {name}"
            )
            continue
        found[patch.turn] = UserTurn(patch, _under(files, f"patches/{name}/files"))
    expected = list(range(1, len(found) + 1))
    if sorted(found) != expected:
        problems.append(f"patches/: turns must be numbered {expected}, found {sorted(found)}")
    return [found[t] for t in sorted(found)]


# ---- Verifier Constructor ---------------------------------------------------------------
def load_verifier(root: Path) -> VerifierOutput:
    problems: list[str] = []
    files = read_files(root, problems)
    spec = _model(files, "verifier.json", VerifierSpec, problems, required=True)
    private = {k: v for k, v in files.items() if k != "verifier.json"}
    for rel in private:
        if rel.startswith(RESERVED_TESTS) or rel in RESERVED_TESTS:
            problems.append(f"{rel}: reserved for the package's fixed verifier files; rename it")
    if problems or spec is None:
        raise LayoutError(problems)
    return VerifierOutput(spec=spec, private_files=private)


def export_verifier(output: VerifierOutput, root: Path) -> None:
    files = {"verifier.json": dumps_json(output.spec.engine_dict()), **output.private_files}
    write_tree(root, files)


# ---- files ------------------------------------------------------------------------------
def read_files(root: Path, problems: list[str]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                problems.append(f"{rel}: is a symlink; write regular files only")
                continue
            files[rel] = path.read_bytes()
            if len(files) > MAX_FILES:
                problems.append(f"more than {MAX_FILES} files; keep the output small")
                return files
    return files


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _under(files: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    base = prefix.rstrip("/") + "/"
    return {k[len(base) :]: v for k, v in files.items() if k.startswith(base)}


def _text(files: dict[str, bytes], rel: str, problems: list[str]) -> str:
    content = files.get(rel, b"").decode("utf-8", errors="replace")
    if not content.strip():
        problems.append(f"{rel}: missing or empty")
    return content


def _model[M: BaseModel](
    files: dict[str, bytes], rel: str, model: type[M], problems: list[str], required: bool = True
) -> M | None:
    if rel not in files:
        if required:
            problems.append(f"{rel}: missing; write it")
        return None
    try:
        data: Any = json.loads(files[rel])
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(PackageError.from_validation(rel, exc).problems)
    except ValueError as exc:
        problems.append(f"{rel}: not valid JSON ({exc})")
    return None

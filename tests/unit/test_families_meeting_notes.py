"""The meeting-notes family: deterministic drafts, edits that carry news, and a verifier
whose expectations follow the final notes.

The helpers here (``built_of``, ``run_reference``, ``reward``) are shared by the other
family tests: the reference solution runs unsandboxed, with this interpreter standing in for
``python3``, and the verifier engine runs in-process — fast, no bubblewrap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.base import TaskFamily
from coworkgym.families.meeting_notes import ITEMS, MEMO, NOTES, MeetingNotes, parse_notes
from coworkgym.package.assemble import BuilderOutput, UserTurn
from coworkgym.package.config import CoworkMetadata, TaxonomyLabels
from coworkgym.package.cowork import ArtifactGraph
from coworkgym.verifier.engine import verify

FAMILY = MeetingNotes()


def built_of(family: TaskFamily, params: FamilyParams) -> BuilderOutput:
    """The Builder's output without grounding (no sandbox run)."""
    draft = family.draft(params)
    return BuilderOutput(
        name=f"coworkgym/{draft.slug}",
        description=draft.title,
        instruction=draft.instruction,
        workspace=draft.workspace,
        solve_sh=draft.solve_sh,
        user=draft.user,
        interfaces=draft.interfaces,
        artifacts=ArtifactGraph(artifacts=[*draft.inputs, *draft.outputs]),
        cowork=CoworkMetadata(
            taxonomy=TaxonomyLabels(
                capabilities=list(family.capabilities),
                scenario=family.scenarios[0],
                difficulty=params.difficulty,
                user_role="administrator",
                deliverables=list(family.deliverables),
                modality=list(family.modalities),
            ),
            family=family.name,
            seed=params.seed,
        ),
        turns=draft.turns,
    )


def run_reference(built: BuilderOutput, root: Path, upto: int | None = None) -> Path:
    """solve.sh turn by turn on a scratch s0, each user patch applied first; ``upto`` stops
    early and then applies the remaining patches (the detector's stale state)."""
    workspace = root / "workspace"
    for rel, content in built.workspace.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(content)
    shim = root / "bin"
    shim.mkdir()
    # a wrapper, not a symlink: a symlinked venv interpreter would not find its packages
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    env["COWORK_WORKSPACE"] = str(workspace)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # a solution running pytest starts faster
    last = len(built.turns) if upto is None else upto
    for turn in range(len(built.turns) + 1):
        if turn:
            _apply(built.turns[turn - 1], workspace)
        if turn <= last:
            env["COWORK_TURN"] = str(turn)
            subprocess.run(["bash", "-c", built.solve_sh], cwd=workspace, env=env, check=True)
    return workspace


def _apply(turn: UserTurn, workspace: Path) -> None:
    for update in turn.patch.updates:
        target = workspace / update.path
        if update.op == "delete":
            target.unlink(missing_ok=True)
        else:
            assert update.source is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(turn.files[update.source])


def reward(
    family: TaskFamily, built: BuilderOutput, params: FamilyParams, workspace: Path, root: Path
) -> float:
    output = family.verifier(built, params)
    tests = root / "tests"
    for rel, content in output.private_files.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_bytes(content)
    report = verify(output.spec.engine_dict(), workspace, tests)
    assert report.status == "valid", report.error
    assert report.reward is not None
    return report.reward


def test_registered() -> None:
    assert isinstance(FAMILIES["meeting_notes"], MeetingNotes)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_draft_is_deterministic_by_seed(difficulty: str) -> None:
    params = FamilyParams(seed=11, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    a, b = FAMILY.draft(params), FAMILY.draft(params)
    assert a.workspace == b.workspace and a.instruction == b.instruction
    assert [t.patch for t in a.turns] == [t.patch for t in b.turns]
    assert [t.files for t in a.turns] == [t.files for t in b.turns]
    other = FAMILY.draft(FamilyParams(seed=12, difficulty=difficulty, turns=3))  # type: ignore[arg-type]
    assert other.workspace[NOTES] != a.workspace[NOTES]


def test_difficulty_scales_the_notes() -> None:
    counts = []
    for difficulty in ("easy", "medium", "hard"):
        draft = FAMILY.draft(FamilyParams(seed=5, difficulty=difficulty))  # type: ignore[arg-type]
        notes = parse_notes(draft.workspace[NOTES].decode())
        counts.append((len(notes.attendees), notes.decisions))
    assert counts == sorted(counts) and counts[0] < counts[-1]


def test_hard_notes_withdraw_an_action_and_use_first_names() -> None:
    text = FAMILY.draft(FamilyParams(seed=3, difficulty="hard")).workspace[NOTES].decode()
    assert "~~Action:" in text
    notes = parse_notes(text)
    assert all(owner in notes.attendees for owner, _t, _d in notes.actions)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_later_turn_edits_the_notes(seed: int) -> None:
    draft = FAMILY.draft(FamilyParams(seed=seed, turns=3))
    previous = draft.workspace[NOTES]
    assert len(draft.turns) == 2
    for turn in draft.turns:
        assert turn.patch.kind == "input_edited"
        assert [u.path for u in turn.patch.updates] == [NOTES]
        assert set(turn.patch.invalidates) == {ITEMS, MEMO}
        new = turn.files["meeting-notes.md"]
        assert new != previous
        previous = new
    one = parse_notes(draft.workspace[NOTES].decode())
    final = parse_notes(previous.decode())
    assert len(final.actions) == len(one.actions) + 1  # the late item
    assert sorted(d for *_x, d in final.actions) != sorted(d for *_x, d in one.actions)


def test_expectations_follow_the_final_notes() -> None:
    params = FamilyParams(seed=4, difficulty="easy", turns=2)  # easy notes use ISO dates
    built = built_of(FAMILY, params)
    spec = FAMILY.verifier(built, params).spec
    final = parse_notes(built.final_inputs()[NOTES].decode())
    count = next(c for c in spec.components if c.id == "action_count")
    assert getattr(count.check, "equals", None) == len(final.actions)
    # edit the notes of the last turn: the verifier's expected due dates move with them
    turn = built.turns[-1]
    old = final.actions[0][2].isoformat()
    text = turn.files["meeting-notes.md"].decode()
    assert old in text
    turn.files["meeting-notes.md"] = text.replace(old, "2031-01-31").encode()
    keys = {getattr(c.check, "key", None) for c in FAMILY.verifier(built, params).spec.components}
    assert "2031-01-31" in keys and old not in keys


@pytest.mark.parametrize(("turns", "difficulty"), [(1, "easy"), (2, "medium"), (3, "hard")])
def test_reference_passes_and_shortcuts_fail(tmp_path: Path, turns: int, difficulty: str) -> None:
    params = FamilyParams(seed=7, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    (workspace / ITEMS).write_text("owner,task,due\n")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

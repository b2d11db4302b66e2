"""The folder-organizing family: deterministic messy inboxes, the rules as the verifier
applies them, drops and scheme changes as later turns, and checks that follow the final
inputs (including files that only a later turn brings)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.folder_organize import (
    EXPECTED,
    MANIFEST,
    FolderOrganize,
    category_of,
    organize,
    target,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = FolderOrganize()


def test_registered() -> None:
    assert isinstance(FAMILIES["folder_organize"], FolderOrganize)


@pytest.mark.parametrize(
    ("name", "month", "where"),
    [
        ("weather_2013-05-04.csv", False, "organized/weather/2013/weather_2013-05-04.csv"),
        ("seattle-weather-20130504.csv", True, "organized/weather/2013/05/"),
        ("Weather 2014-11-02.csv", True, "organized/weather/2014/11/"),
        ("prices-IBM-2004-12-31.csv", True, "organized/markets/2004/"),
        ("employment_200605.md", False, "organized/labor/2006/"),
        ("generation-2009-summary.csv", False, "organized/energy/2009/"),
        ("todo-from-dana.txt", True, "organized/misc/undated/"),
    ],
)
def test_rules(name: str, month: bool, where: str) -> None:
    assert target(name, month).startswith(where)
    assert target(name, month).endswith("/" + name)
    assert category_of(name) == where.split("/")[1]


def test_duplicates_keep_the_shortest_name_and_earlier_files() -> None:
    batches = [
        {"inbox/a_copy.csv": b"same", "inbox/a.csv": b"same", "inbox/b.csv": b"other"},
        {"inbox/a_resent.csv": b"same", "inbox/z.csv": b"new"},
    ]
    placed, manifest = organize(batches, by_month=False)
    assert manifest["inbox/a_copy.csv"] == {"duplicate_of": "inbox/a.csv"}
    assert manifest["inbox/a_resent.csv"] == {"duplicate_of": "inbox/a.csv"}
    assert len(placed) == 3 and "organized/misc/undated/z.csv" in placed


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_draft_is_deterministic_by_seed(difficulty: str) -> None:
    params = FamilyParams(seed=8, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    a, b = FAMILY.draft(params), FAMILY.draft(params)
    assert a.workspace == b.workspace and a.solve_sh == b.solve_sh
    assert [(t.patch, t.files) for t in a.turns] == [(t.patch, t.files) for t in b.turns]
    other = FAMILY.draft(FamilyParams(seed=9, difficulty=difficulty))  # type: ignore[arg-type]
    assert other.workspace != a.workspace


def test_inbox_size_and_duplicates_scale_with_difficulty() -> None:
    sizes = []
    for difficulty in ("easy", "medium", "hard"):
        draft = FAMILY.draft(FamilyParams(seed=2, difficulty=difficulty))  # type: ignore[arg-type]
        contents = list(draft.workspace.values())
        assert all(p.startswith("inbox/") for p in draft.workspace)
        sizes.append((len(contents), len(contents) - len(set(contents))))
    assert sizes == sorted(sizes) and sizes[0][1] >= 1
    hard = FAMILY.draft(FamilyParams(seed=2, difficulty="hard"))
    assert any(p.startswith("inbox/old/") for p in hard.workspace)


def test_later_turns_drop_files_or_change_the_scheme() -> None:
    kinds = set()
    for seed in range(6):
        draft = FAMILY.draft(FamilyParams(seed=seed, turns=3))
        declared = {a.path for a in draft.inputs}
        for turn in draft.turns:
            kinds.add(turn.patch.kind)
            assert turn.patch.invalidates == [MANIFEST]
            if turn.patch.kind == "input_edited":
                paths = [u.path for u in turn.patch.updates]
                assert len(paths) == 2 and set(paths) <= declared
                assert not set(paths) & set(draft.workspace)  # new files, not rewrites
                dropped = list(turn.files.values())
                assert dropped[1] in draft.workspace.values()  # one copy of a filed file
                assert dropped[0] not in draft.workspace.values()
            else:
                assert "month" in turn.patch.message and not turn.patch.updates
    assert kinds == {"input_edited", "requirement_changed"}


def test_expectations_follow_the_dropped_files_and_the_scheme() -> None:
    for seed in range(10):
        params = FamilyParams(seed=seed, turns=3)
        built = built_of(FAMILY, params)
        if built.turns[0].patch.kind == "input_edited":
            break
    else:
        pytest.fail("no seed whose first later turn drops files")
    expected = json.loads(FAMILY.verifier(built, params).private_files[EXPECTED])
    dropped = [u.path for u in built.turns[0].patch.updates]
    assert set(dropped) <= set(expected["manifest"]) and set(dropped) <= set(expected["contents"])
    weather = [p for p in expected["placed"] if p.startswith("organized/weather/")]
    assert weather and all(len(PurePosixPath(p).parts) == 5 for p in weather)  # month level
    # a different dropped file changes what must be placed
    source = built.turns[0].patch.updates[0].source
    assert source is not None
    built.turns[0].files[source] = b"source,net_generation\nWind,1\n"
    changed = json.loads(FAMILY.verifier(built, params).private_files[EXPECTED])
    assert changed["placed"] != expected["placed"]


@pytest.mark.parametrize(("turns", "difficulty"), [(1, "easy"), (2, "hard"), (3, "medium")])
def test_reference_passes_and_shortcuts_fail(tmp_path: Path, turns: int, difficulty: str) -> None:
    params = FamilyParams(seed=6, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert not [p for p in (workspace / "inbox").rglob("*") if p.is_file()]
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    # deleting a kept file loses content: the red line caps the reward at 0
    victim = next(p for p in sorted((workspace / "organized").rglob("*")) if p.is_file())
    victim.unlink()
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 0.0
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

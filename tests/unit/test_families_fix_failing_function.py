"""The bug-fix family: planted bugs that the visible and hidden tests catch, later turns that
add a requirement or tests, and hidden tests written from the final data. Test suites run
with this interpreter's pytest in a scratch directory (no sandbox)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.base import parse_csv
from coworkgym.families.fix_failing_function import (
    BUGS,
    DATA,
    FIXES,
    MODULE,
    SOURCE,
    TESTS,
    FixFailingFunction,
    hidden_tests,
    planted_bugs,
)
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = FixFailingFunction()
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # what the verifier's command check runs with


def failures(workspace: Path, test_file: Path, tests_dir: Path | None = None) -> int:
    """Run a test file's ``test_*`` functions in-process against the workspace's module
    (a pytest subprocess per suite would be slow); a suite that cannot even import counts
    as failing."""
    sys.modules.pop("stats_utils", None)
    sys.path.insert(0, str(workspace))
    saved = os.environ.get("TESTS_DIR")
    if tests_dir is not None:
        os.environ["TESTS_DIR"] = str(tests_dir)
    try:
        spec = importlib.util.spec_from_file_location(f"suite_{next(_SUITES)}", test_file)
        assert spec is not None and spec.loader is not None
        suite = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(suite)
        except Exception:
            return 1000
        failed = 0
        for name, test in vars(suite).items():
            if name.startswith("test_") and callable(test):
                try:
                    test()
                except Exception:
                    failed += 1
        return failed
    finally:
        sys.path.remove(str(workspace))
        sys.modules.pop("stats_utils", None)
        if saved is None:
            os.environ.pop("TESTS_DIR", None)
        else:
            os.environ["TESTS_DIR"] = saved


_SUITES = itertools.count()


def workspace_with(root: Path, files: dict[str, bytes], module: str) -> Path:
    for rel, content in {**files, MODULE: module.encode()}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return root


def test_registered() -> None:
    assert isinstance(FAMILIES["fix_failing_function"], FixFailingFunction)


def test_every_bug_snippet_is_unique_in_the_source() -> None:
    for bug in BUGS:
        assert SOURCE.count(bug.fixed) == 1, bug.function
        assert bug.buggy not in SOURCE


@pytest.mark.parametrize(("difficulty", "count"), [("easy", 1), ("medium", 2), ("hard", 3)])
def test_draft_is_deterministic_and_bugs_scale(difficulty: str, count: int) -> None:
    params = FamilyParams(seed=13, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    a, b = FAMILY.draft(params), FAMILY.draft(params)
    assert a.workspace == b.workspace and a.solve_sh == b.solve_sh
    assert [(t.patch, t.files) for t in a.turns] == [(t.patch, t.files) for t in b.turns]
    assert len(planted_bugs(a.workspace[MODULE].decode())) == count
    others = [FAMILY.draft(FamilyParams(seed=s, difficulty=difficulty)) for s in range(14, 18)]  # type: ignore[arg-type]
    assert any(o.workspace != a.workspace for o in others)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_visible_tests_fail_on_the_bugs_and_pass_on_the_fix(tmp_path: Path, seed: int) -> None:
    draft = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard"))
    buggy = workspace_with(tmp_path / "buggy", draft.workspace, draft.workspace[MODULE].decode())
    assert failures(buggy, buggy / TESTS) > 0
    fixed = workspace_with(tmp_path / "fixed", draft.workspace, SOURCE)
    assert failures(fixed, fixed / TESTS) == 0
    for bug in BUGS:  # each bug alone is caught by the visible suite
        one = workspace_with(
            tmp_path / bug.function, draft.workspace, SOURCE.replace(bug.fixed, bug.buggy)
        )
        assert failures(one, one / TESTS) > 0, bug.function


def test_hidden_tests_catch_each_bug_alone(tmp_path: Path) -> None:
    draft = FAMILY.draft(FamilyParams(seed=4))
    data = draft.workspace[DATA]
    rows = [{k: (None if v == "NA" else v) for k, v in r.items()} for r in parse_csv(data)]
    tests_dir = tmp_path / "tests"
    (tests_dir / "inputs" / "data").mkdir(parents=True)
    (tests_dir / "inputs" / DATA).write_bytes(data)
    for function, text in hidden_tests(rows).items():
        (tests_dir / f"test_{function}.py").write_text(text)
    fixed = workspace_with(tmp_path / "fixed", {}, SOURCE)
    for function in hidden_tests(rows):
        assert failures(fixed, tests_dir / f"test_{function}.py", tests_dir) == 0, function
    for bug in BUGS:
        broken = workspace_with(tmp_path / bug.function, {}, SOURCE.replace(bug.fixed, bug.buggy))
        target = tests_dir / f"test_{bug.function}.py"
        assert failures(broken, target, tests_dir) > 0, bug.function


def test_later_turns_add_a_requirement_or_tests() -> None:
    kinds = set()
    for seed in range(6):
        draft = FAMILY.draft(FamilyParams(seed=seed, turns=3))
        for turn in draft.turns:
            kinds.add(turn.patch.kind)
            assert set(turn.patch.invalidates) == {MODULE, FIXES}
            if turn.patch.kind == "input_edited":
                new = turn.files[TESTS].decode()
                assert [u.path for u in turn.patch.updates] == [TESTS]
                assert new.startswith(draft.workspace[TESTS].decode().split("\n\n\ndef")[0][:40])
                assert (
                    new.count("def test_") == draft.workspace[TESTS].decode().count("def test_") + 2
                )
                assert "spread" in new
            else:
                assert "None" in turn.patch.message and not turn.patch.updates
    assert kinds == {"input_edited", "requirement_changed"}


def test_expectations_follow_the_final_inputs() -> None:
    for seed in range(10):
        params = FamilyParams(seed=seed, turns=2)
        built = built_of(FAMILY, params)
        if built.turns[0].patch.kind == "input_edited":
            break
    else:
        pytest.fail("no seed whose later turn edits the tests")
    output = FAMILY.verifier(built, params)
    ids = {c.id: c for c in output.spec.components}
    assert "spread_added" in ids and "hidden/test_spread.py" in output.private_files
    assert getattr(ids["fixes_tests_passed"].check, "expected", None) == 10  # 8 + 2 added
    assert output.private_files[f"inputs/{TESTS}"] == built.turns[0].files[TESTS]
    # other data, other hidden expectations
    rows = parse_csv(built.workspace[DATA])
    built.workspace[DATA] = b"\n".join(built.workspace[DATA].splitlines()[: len(rows) // 2]) + b"\n"
    changed = FAMILY.verifier(built, params).private_files
    assert changed["hidden/test_count_by.py"] != output.private_files["hidden/test_count_by.py"]


def _system_pytest() -> bool:
    python = shutil.which("python3", path=SYSTEM_PATH)
    if python is None:
        return False
    done = subprocess.run([python, "-c", "import pytest"], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.skipif(not _system_pytest(), reason="the verifier's python3 (system) lacks pytest")
@pytest.mark.parametrize(("turns", "difficulty"), [(3, "hard")])
def test_reference_passes_and_stale_fails(tmp_path: Path, turns: int, difficulty: str) -> None:
    params = FamilyParams(seed=2, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99

"""A task image's root, writable as in Harbor's one container (issue 26): what the solution
writes outside the working directory is there for the verifier, what a verifier writes is
thrown away, the agent phase never sees tests/, and the image itself is never written.

The image here is a tiny one made from the host's own bash, rm and setpriv (and their
libraries), so no buildah is needed; the overlay needs root."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from coworkgym.detector.review import tree_key
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime.local import LocalRuntime
from coworkgym.runtime.workspace import copy_tree, root_changes
from coworkgym.sandbox import BubblewrapSandbox, Mount, RootOverlay
from coworkgym.sandbox.bwrap import SANDBOX_HOST_UID
from coworkgym.sandbox.overlay import hand_over_directories, overlay_unavailable

pytestmark = pytest.mark.skipif(
    overlay_unavailable() is not None, reason=f"no overlay root here: {overlay_unavailable()}"
)

WORKDIR = "/task"
TASK = {
    "task.toml": 'schema_version = "1.4"\n[verifier]\ntimeout_sec = 60.0\n',
    "instruction.md": "Write /output/state.json.\n",
    "environment/Dockerfile": "FROM debian:bookworm\nWORKDIR /task\nRUN mkdir -p /output\n",
    "solution/solve.sh": (
        "#!/bin/bash\n"
        "echo solved > /output/state.json\n"
        "echo $UID > uid.txt\n"
        "if [ -e /tests/test.sh ] || [ -e /output/verifier-was-here ]; then\n"
        "  echo yes > saw-the-verifier.txt\n"
        "fi\n"
    ),
    "tests/test.sh": (
        "#!/bin/bash\n"
        "echo scored > /output/verifier-was-here\n"
        "read -r state < /output/state.json\n"
        'if [ "$state" = solved ]; then echo 100 > /tests/score.txt; fi\n'
        "read -r score < /tests/score.txt || score=0\n"
        'if [ "$score" = 100 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    ),
}


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """A root file system with bash, rm and setpriv, /task and a root-owned /output, handed over
    to the sandbox user as ``check`` hands over a task image's working container."""
    rootfs = tmp_path / "image"
    for top in ("bin", "lib", "lib64", "sbin"):
        (rootfs / "usr" / top).mkdir(parents=True)
        (rootfs / top).symlink_to(f"usr/{top}")
    for binary in ("/usr/bin/bash", "/usr/bin/rm", "/usr/bin/setpriv"):
        needed = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
        libraries = [w for w in needed.stdout.split() if w.startswith("/")]
        for path in (binary, *libraries):
            target = rootfs / Path(path).resolve().relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(path).resolve(), target)
            alias = rootfs / path.lstrip("/")
            if not alias.exists():
                alias.symlink_to(Path(path).resolve())
    for name in ("task", "output", "etc", "tmp", "proc", "dev"):
        (rootfs / name).mkdir(exist_ok=True)
    hand_over_directories(rootfs, SANDBOX_HOST_UID)
    return rootfs


def _runtime(image: Path) -> LocalRuntime:
    runtime = LocalRuntime(BubblewrapSandbox(rootfs=image))
    runtime.writable_root = True
    return runtime


def _task(root: Path) -> EnvironmentPackage:
    for rel, text in TASK.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return EnvironmentPackage.load(root)


def test_the_verifier_reads_what_the_solution_wrote_outside_the_workdir(
    tmp_path: Path, image: Path
) -> None:
    pkg, runtime = _task(tmp_path / "task"), _runtime(image)
    workspace = tmp_path / "states" / "reference"
    workspace.mkdir(parents=True)
    solved = runtime.run_solution(pkg, workspace, WORKDIR)
    assert solved.ok, solved.describe()
    assert (root_changes(workspace) / "output" / "state.json").read_text() == "solved\n"
    assert (workspace / "uid.txt").read_text().strip() != "0"  # never root inside
    assert not (image / "output" / "state.json").exists()  # the image stays as built
    outcome = runtime.run_verifier(pkg, workspace, WORKDIR)
    assert outcome.valid and outcome.reward == 1.0, outcome.error

    untouched = tmp_path / "states" / "untouched"
    untouched.mkdir()
    assert runtime.run_verifier(pkg, untouched, WORKDIR).reward == 0.0


def test_the_agent_phase_never_sees_the_tests_nor_what_a_verifier_wrote(
    tmp_path: Path, image: Path
) -> None:
    pkg, runtime = _task(tmp_path / "task"), _runtime(image)
    workspace = tmp_path / "states" / "reference"
    workspace.mkdir(parents=True)
    assert runtime.run_solution(pkg, workspace, WORKDIR).ok
    assert runtime.run_verifier(pkg, workspace, WORKDIR).reward == 1.0
    again = runtime.run_solution(pkg, workspace, WORKDIR, turn=1)
    assert again.ok, again.describe()
    assert not (workspace / "saw-the-verifier.txt").exists()
    assert not (root_changes(workspace) / "output" / "verifier-was-here").exists()
    assert not (root_changes(workspace) / "tests").exists()


def test_a_copy_of_a_state_carries_its_root_changes_and_tells_them_apart(
    tmp_path: Path, image: Path
) -> None:
    pkg, runtime = _task(tmp_path / "task"), _runtime(image)
    untouched = tmp_path / "states" / "untouched"
    untouched.mkdir(parents=True)
    solved = copy_tree(untouched, tmp_path / "states" / "reference")
    assert runtime.run_solution(pkg, solved, WORKDIR).ok
    (solved / "uid.txt").unlink()  # the workspaces are the same; only /output differs
    assert tree_key(solved) != tree_key(untouched)
    variant = copy_tree(solved, tmp_path / "states" / "variant")
    assert tree_key(variant) == tree_key(solved)
    assert runtime.run_verifier(pkg, variant, WORKDIR).reward == 1.0


def test_a_deletion_in_the_image_is_kept_and_the_layers_below_stay_as_they_were(
    tmp_path: Path, image: Path
) -> None:
    (image / "output" / "stale.txt").write_text("from the build\n")  # root's file
    sandbox = BubblewrapSandbox(rootfs=image)
    first, second = tmp_path / "first", tmp_path / "second"
    wrote = sandbox.run(["bash", "-c", "echo one > /output/one"], [], root=RootOverlay(first))
    assert wrote.ok, wrote.describe()
    removed = sandbox.run(["rm", "/output/stale.txt"], [], root=RootOverlay(second, (first,)))
    assert removed.ok, removed.describe()
    look = "read -r a < /output/one; [ -e /output/stale.txt ] && echo kept || echo $a gone"
    seen = sandbox.run(
        ["bash", "-c", look], [], root=RootOverlay(tmp_path / "third", (second, first))
    )
    assert seen.stdout.strip() == "one gone", seen.describe()
    assert (image / "output" / "stale.txt").is_file()
    assert sorted(p.name for p in (first / "output").iterdir()) == ["one"]
    assert (second / "output" / "stale.txt").is_char_device()  # overlayfs' deletion mark


def test_without_an_overlay_the_image_root_stays_read_only(tmp_path: Path, image: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = BubblewrapSandbox(rootfs=image)
    refused = sandbox.run(
        ["bash", "-c", "echo x > /output/x"], [Mount(ws, WORKDIR, writable=True)], cwd=WORKDIR
    )
    assert not refused.ok and "Read-only file system" in refused.stderr
    assert not (image / "output" / "x").exists()

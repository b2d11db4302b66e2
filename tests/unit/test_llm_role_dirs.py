"""In a stage pod the LLM Builder copies the bundled resources into /resources, an emptyDir
mount point owned by root that its non-root user may write into but not chmod or touch."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coworkgym.roles.llm import copy_into

NOBODY = 65534


@pytest.fixture
def mount_point() -> Iterator[tuple[Path, Path]]:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the copy as another user")
    root = Path(tempfile.mkdtemp(prefix="role-dirs-"))
    source, target = root / "resources", root / "mount"
    (source / "templates").mkdir(parents=True)
    (source / "templates" / "a.txt").write_text("a")
    (source / "top.json").write_text("{}")
    target.mkdir()
    os.chmod(target, 0o777)  # writable by all (as an emptyDir with fsGroup), owned by root
    for path in (root, source, source / "templates"):
        os.chmod(path, 0o755)
    yield source, target
    shutil.rmtree(root)


def as_nobody(copy: Callable[[Path, Path], object], source: Path, target: Path) -> str:
    """Run the copy in a forked child that dropped to another user: its error, or ''."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        error = b""
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            copy(source, target)
        except BaseException as exc:
            error = repr(exc).encode() or b"error"
        os.write(write, error)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        reported = pipe.read().decode()
    os.waitpid(pid, 0)
    return reported


def test_copy_into_a_mount_point_it_does_not_own(mount_point: tuple[Path, Path]) -> None:
    source, target = mount_point
    # what the Builder did before: copytree copies the mount point's own mode and times
    error = as_nobody(lambda s, t: shutil.copytree(s, t, dirs_exist_ok=True), source, target)
    assert "Operation not permitted" in error
    assert as_nobody(copy_into, source, target) == ""
    assert (target / "templates" / "a.txt").read_text() == "a"
    assert (target / "top.json").read_text() == "{}"

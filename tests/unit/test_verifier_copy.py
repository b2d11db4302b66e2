"""The verifier's copy of a workspace (issue 24, item 1): whatever the agent left, the copy
is readable, holds no link out, no FIFO, socket or device, no undecodable name and no
oversized file, records every entry it dropped and why, and leaves the source as it was."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from coworkgym.runtime import verifier_copy
from coworkgym.runtime.verifier_copy import copy_for_verifier

WORKDIR = "/app"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "data").mkdir(parents=True)
    (root / "data" / "in.csv").write_text("a,b\n1,2\n")
    (root / "report.md").write_text("# Report\n")
    return root


def copied(ws: Path) -> tuple[Path, verifier_copy.CopyReport]:
    dest = ws.parent / "copy"
    return dest, copy_for_verifier(ws, dest, WORKDIR)


def dropped(report: verifier_copy.CopyReport, rel: str) -> str:
    found = [d for d in report.dropped if d.startswith(f"{rel}: ")]
    assert found, f"{rel} not dropped: {report.dropped}"
    return found[0]


def test_an_untouched_workspace_is_copied_whole(ws: Path) -> None:
    dest, report = copied(ws)
    assert (dest / "data" / "in.csv").read_text() == "a,b\n1,2\n"
    assert (dest / "report.md").read_text() == "# Report\n"
    assert report.dropped == [] and report.files == 2 and report.bytes == 17


def test_modes_are_normalised_and_the_source_keeps_its_own(ws: Path) -> None:
    (ws / "data" / "in.csv").chmod(0)
    (ws / "report.md").chmod(0o4711)  # set-uid and execute bits
    (ws / "data").chmod(0)
    dest, report = copied(ws)
    assert stat.S_IMODE((dest / "data").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "data" / "in.csv").stat().st_mode) == 0o644
    assert stat.S_IMODE((dest / "report.md").stat().st_mode) == 0o755
    assert (dest / "data" / "in.csv").read_text() == "a,b\n1,2\n"
    assert report.modes_fixed == 3 and report.dropped == []
    assert stat.S_IMODE((ws / "data").stat().st_mode) == 0  # the source is left as it was


def test_an_unprivileged_host_opens_what_its_own_agent_locked_and_puts_the_modes_back() -> None:
    """As a uid that owns the workspace and has no capability (an unprivileged host, whose
    agent's uid maps to its own), the copy still reads a mode-000 file and directory."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become an unprivileged uid) and setpriv")
    base = Path(tempfile.mkdtemp(prefix="cwg-copy-unpriv-"))  # not under pytest's 0700 dir
    try:
        base.chmod(0o755)
        ws = base / "ws"
        (ws / "data").mkdir(parents=True)
        (ws / "data" / "in.csv").write_text("a,b\n1,2\n")
        shutil.copy(verifier_copy.__file__, base / "verifier_copy.py")  # stdlib only
        for path in (base, ws, ws / "data", ws / "data" / "in.csv"):
            os.chown(path, 65534, 65534)
        (ws / "data" / "in.csv").chmod(0)
        (ws / "data").chmod(0)
        script = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); import verifier_copy as v; "
            "r = v.copy_for_verifier(v.Path(sys.argv[2]), v.Path(sys.argv[3]), '/app'); "
            "print(json.dumps(r.as_dict()))"
        )
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             "--bounding-set=-all", "/usr/bin/python3", "-c", script,
             str(base), str(ws), str(base / "copy")],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["dropped"] == []
        assert (base / "copy" / "data" / "in.csv").read_text() == "a,b\n1,2\n"
        assert stat.S_IMODE((ws / "data").stat().st_mode) == 0  # put back
        assert stat.S_IMODE((ws / "data" / "in.csv").stat().st_mode) == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/etc/passwd", "leads out of the workspace"),  # a host file, absolute
        ("/app/../etc/passwd", "leads out of the workspace"),
        ("../../../../etc/passwd", "leads out of the workspace"),  # relative, escaping
        ("missing.csv", "dangling or a loop"),
        ("/app/data/nowhere", "dangling or a loop"),
    ],
)
def test_links_out_and_dangling_links_are_dropped(ws: Path, target: str, why: str) -> None:
    (ws / "data" / "in.csv").unlink()
    (ws / "data" / "in.csv").symlink_to(target)
    dest, report = copied(ws)
    assert not os.path.lexists(dest / "data" / "in.csv")
    assert why in dropped(report, "data/in.csv")


def test_a_link_to_a_host_file_outside_the_workdir_is_refused_even_with_the_same_bytes(
    ws: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host-copy.csv"
    shutil.copy(ws / "data" / "in.csv", host)
    (ws / "data" / "in.csv").unlink()
    (ws / "data" / "in.csv").symlink_to(host)
    dest, report = copied(ws)
    assert not os.path.lexists(dest / "data" / "in.csv")
    assert str(host) in dropped(report, "data/in.csv")


def test_loops_and_chains_through_a_dropped_link_are_dropped(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "self").symlink_to("self")
    (ws / "out").symlink_to("/etc")  # a directory out
    (ws / "via").symlink_to("out/passwd")  # goes out through another link
    _, report = copied(ws)
    for rel in ("a", "b", "self", "out", "via"):
        dropped(report, rel)
    assert report.links == 0


def test_links_inside_the_workspace_are_kept_and_absolute_ones_made_relative(ws: Path) -> None:
    (ws / "rel").symlink_to("data/in.csv")
    (ws / "abs").symlink_to("/app/data/in.csv")
    (ws / "data" / "up").symlink_to("/app")
    dest, report = copied(ws)
    assert os.readlink(dest / "rel") == "data/in.csv"
    assert os.readlink(dest / "abs") == "data/in.csv"
    assert os.readlink(dest / "data" / "up") == ".."
    assert (dest / "abs").read_text() == "a,b\n1,2\n"
    assert report.links == 3 and report.dropped == []


def test_fifos_sockets_and_devices_are_dropped(ws: Path, tmp_path: Path) -> None:
    os.mkfifo(ws / "pipe")
    short = Path("/tmp") / f"cwg-sock-{os.getpid()}"  # AF_UNIX paths are short
    short.mkdir(exist_ok=True)
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(short / "s"))
        os.replace(short / "s", ws / "sock")
        server.close()
    finally:
        shutil.rmtree(short, ignore_errors=True)
    kinds = {"pipe": "a FIFO", "sock": "a socket"}
    try:
        os.mknod(ws / "dev", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        kinds["dev"] = "a character device"
    except PermissionError:
        pass  # unprivileged: no device can be made, so none can be left (the agent's neither)
    _, report = copied(ws)
    for rel, kind in kinds.items():
        assert dropped(report, rel).endswith(kind)
    if os.geteuid() != 0:
        pytest.skip("device node: mknod needs CAP_MKNOD (the FIFO and socket were checked)")


def test_a_huge_sparse_file_is_refused_before_a_byte_is_read(ws: Path) -> None:
    with (ws / "big").open("wb") as f:
        f.truncate(100 * 1024**3)  # 100 GB apparent, nothing allocated
    dest, report = copied(ws)
    assert not (dest / "big").exists()
    assert "over the copy's" in dropped(report, "big")


def test_a_sparse_file_under_the_cap_keeps_its_holes(ws: Path) -> None:
    with (ws / "holes").open("wb") as f:
        f.truncate(64 * 1024 * 1024)
        f.seek(10)
        f.write(b"x")
    dest, report = copied(ws)
    info = (dest / "holes").stat()
    assert info.st_size == 64 * 1024 * 1024 and info.st_blocks * 512 <= 2 * 1024 * 1024
    with (dest / "holes").open("rb") as f:
        assert f.read(11) == b"\0" * 10 + b"x"
    assert report.dropped == []


def test_the_total_and_the_entry_count_are_capped(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verifier_copy, "MAX_TOTAL_BYTES", 15)
    monkeypatch.setattr(verifier_copy, "MAX_ENTRIES", 3)
    (ws / "z1").write_text("x" * 10)
    (ws / "z2").write_text("x")
    _, report = copied(ws)
    # entries in order: data, report.md (9 bytes), z1 (the 3rd; 10 more bytes, past 15),
    # then z2 and data/in.csv, past the 3 entries
    assert "holds 15 bytes at most" in dropped(report, "z1")
    assert "entries" in dropped(report, "z2") and "entries" in dropped(report, "data/in.csv")


def test_a_directory_where_a_file_was_is_copied_as_a_directory(ws: Path) -> None:
    (ws / "report.md").unlink()
    (ws / "report.md").mkdir()
    dest, report = copied(ws)
    assert (dest / "report.md").is_dir() and report.dropped == []


def test_undecodable_names_are_dropped_and_shown_escaped(ws: Path) -> None:
    name = os.fsdecode(b"r\xffport.md")
    (ws / name).write_text("x")
    (ws / "link").symlink_to(os.fsdecode(b"t\xfe"))
    _, report = copied(ws)
    assert "r\\xffport.md: the name is not UTF-8" in report.dropped
    assert "link: the symlink's target is not UTF-8" in report.dropped
    json.dumps(report.as_dict()).encode("utf-8")  # the record carries no surrogate


def test_a_deep_tree_is_cut_at_the_path_length(ws: Path) -> None:
    deep = ws
    for _ in range(120):
        deep = deep / ("d" * 20)
    os.makedirs(deep)
    _, report = copied(ws)
    assert any("longer than" in d for d in report.dropped)


def test_a_deleted_input_is_simply_absent(ws: Path) -> None:
    (ws / "data" / "in.csv").unlink()
    dest, report = copied(ws)
    assert not (dest / "data" / "in.csv").exists() and report.dropped == []

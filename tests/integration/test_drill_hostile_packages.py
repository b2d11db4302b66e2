"""Drill 4 (issue 17): hostile packages. A good package (weather_report) is spoiled one way
at a time — path traversal, symlinks out of the package or into tests/, a FIFO, a device
node, a socket, a 1 GiB file, 10 001 files, XLSX and DOCX zip bombs, JSON nested 100 000
deep, non-UTF-8 and control-character names — and given to the loader, `check` (the Issue
Detector), `verify` (the real command, in-process) and the release store (a local target;
the S3 store is tests/testbed/test_drill_hostile_packages_s3.py). Each must be refused with
a reason that names the file, nothing may be written outside the target, and the memory
this process holds must stay bounded (peak RSS measured around each case)."""

from __future__ import annotations

import io
import os
import socket
import stat
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.detector import IssueDetector
from coworkgym.package.errors import PackageError
from coworkgym.package.limits import MAX_LOAD_ENTRIES
from coworkgym.package.package import EnvironmentPackage, write_tree
from coworkgym.release import LocalPublisher
from coworkgym.rollout.engine import unsupported
from tests.drills.record import DrillResult, Row, peak_rss_mb, record
from tests.support.builders import good_package

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
WS = "environment/workspace"
MEMORY_BOUND_MB = 150  # what one refusal may add to this process's peak RSS


@dataclass
class Spoil:
    id: str
    what: str
    apply: Callable[[Path], None]  # spoils a written good package in place
    says: str  # part of every refusal's reason
    refused_by_loader: bool = True  # False: loads, but check flags it and verify refuses


def _symlink(rel: str, target: str) -> Callable[[Path], None]:
    def spoil(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)

    return spoil


def _fifo(root: Path) -> None:
    os.mkfifo(root / WS / "pipe")


def _device(root: Path) -> None:
    os.mknod(root / WS / "zero", stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero


def _socket(root: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / WS / "sock"))


def _huge(root: Path) -> None:
    with (root / WS / "huge.csv").open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB to stat, nothing on disk


def _many(root: Path) -> None:
    many = root / WS / "many"
    many.mkdir()
    for i in range(MAX_LOAD_ENTRIES + 1):
        (many / f"{i}.txt").touch()


def _zip_bomb(name: str, member: str) -> Callable[[Path], None]:
    def spoil(root: Path) -> None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            archive.writestr("[Content_Types].xml", "<Types/>")
            with archive.open(member, "w", force_zip64=True) as handle:
                block = b"\0" * (1 << 20)
                for _ in range(200):  # 200 MiB of zeros, about 200 KB compressed
                    handle.write(block)
        (root / WS / name).write_bytes(buffer.getvalue())

    return spoil


def _deep_json(rel: str) -> Callable[[Path], None]:
    def spoil(root: Path) -> None:
        (root / rel).write_text("[" * 100_000 + "]" * 100_000)

    return spoil


def _named(raw: bytes) -> Callable[[Path], None]:
    def spoil(root: Path) -> None:
        path = os.path.join(os.fsencode(root / WS), raw)
        with open(path, "wb") as handle:
            handle.write(b"x\n")

    return spoil


SPOILS = [
    Spoil(
        "absolute-symlink",
        "absolute symlink out (/etc/passwd)",
        _symlink(f"{WS}/passwd", "/etc/passwd"),
        "absolute symlink",
    ),
    Spoil(
        "relative-symlink-out",
        "relative symlink out of the package (../../../../outside)",
        _symlink(f"{WS}/up", "../../../../outside"),
        "points outside the package",
    ),
    Spoil(
        "directory-symlink-out",
        "symlinked directory out (data -> /etc)",
        _symlink(f"{WS}/etc", "/etc"),
        "absolute symlink",
    ),
    Spoil(
        "symlink-into-tests",
        "symlink from the workspace into tests/",
        _symlink(f"{WS}/answers.json", "../../tests/verifier.json"),
        "answers.json -> ../../tests/verifier.json",
        refused_by_loader=False,
    ),
    Spoil(
        "fifo",
        "a FIFO in the workspace",
        _fifo,
        "is a FIFO",
    ),
    Spoil(
        "char-device",
        "a character device (/dev/zero's numbers)",
        _device,
        "is a device node",
    ),
    Spoil(
        "socket",
        "a unix socket",
        _socket,
        "is a socket",
    ),
    Spoil(
        "huge-file",
        "a 1 GiB file (sparse)",
        _huge,
        "a package file may have at most",
    ),
    Spoil(
        "many-files",
        f"{MAX_LOAD_ENTRIES + 1} files",
        _many,
        "entries; not a package",
    ),
    Spoil(
        "xlsx-bomb",
        "an XLSX zip bomb (200 MiB of zeros in 0.2 MB)",
        _zip_bomb("bomb.xlsx", "xl/worksheets/sheet1.xml"),
        "zip bomb",
    ),
    Spoil(
        "docx-bomb",
        "a DOCX zip bomb",
        _zip_bomb("bomb.docx", "word/document.xml"),
        "zip bomb",
    ),
    Spoil(
        "deep-json-interfaces",
        "JSON nested 100 000 deep (.cowork/interfaces.json)",
        _deep_json(".cowork/interfaces.json"),
        "nested deeper than 64",
    ),
    Spoil(
        "deep-json-verifier",
        "JSON nested 100 000 deep (tests/verifier.json)",
        _deep_json("tests/verifier.json"),
        "nested deeper than 64",
    ),
    Spoil(
        "non-utf8-name",
        "a file name that is not UTF-8",
        _named(b"\xff\xfe-data.csv"),
        "not UTF-8",
    ),
    Spoil(
        "newline-name",
        "a file name with a line break",
        _named(b"a\nb.csv"),
        "control character",
    ),
]


@dataclass
class Outcome:
    loader: str  # the loader's refusal ("" if it loaded)
    check: str  # check's error defects, codes and messages
    check_verdict: str
    verify: str  # verify's refusal
    rollout: str  # the rollout engine's refusal ("" if it would run)
    outside: list[str]  # what appeared outside the package's folder
    rss_growth_mb: float
    seconds: float


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


def listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def attack(good: EnvironmentPackage, spoil: Spoil, base: Path) -> Outcome:
    sandbox = base / spoil.id  # everything this case may touch; the package is inside
    root = good.write(sandbox / "package")
    spoil.apply(root)
    before = listing(sandbox) - {p for p in listing(sandbox) if p.startswith("package/")}
    rss = peak_rss_mb()
    started = time.monotonic()
    try:
        loaded: EnvironmentPackage | None = EnvironmentPackage.load(root)
        loader = ""
    except PackageError as exc:
        loaded, loader = None, str(exc)
    report = IssueDetector(run_harbor_lint=False).check_dir(root)
    check = "\n".join(f"{d.code}: {d.message}" for d in report.errors)
    workspace = sandbox / "attempt"
    workspace.mkdir()
    result = CliRunner().invoke(app, ["verify", str(root), "--workspace", str(workspace)])
    verify = str(result.exception) if isinstance(result.exception, PackageError) else ""
    rollout = (unsupported(loaded) or "") if loaded is not None else loader
    seconds = time.monotonic() - started
    after = listing(sandbox) - {p for p in listing(sandbox) if p.startswith("package/")}
    return Outcome(
        loader=loader,
        check=check,
        check_verdict=report.verdict,
        verify=verify,
        rollout=rollout,
        outside=sorted(after - before - {"attempt"}),
        rss_growth_mb=round(peak_rss_mb() - rss, 1),
        seconds=round(seconds, 2),
    )


def note(o: Outcome) -> str:
    by = "the loader" if o.loader else "check (PATH_ESCAPE), verify and the rollout engine"
    return f"refused by {by}; peak RSS +{o.rss_growth_mb} MB; {o.seconds} s"


def test_every_hostile_package_is_refused_with_its_reason(
    good: EnvironmentPackage, tmp_path: Path
) -> None:
    outcomes = {s.id: attack(good, s, tmp_path) for s in SPOILS}
    wrong = []
    for spoil in SPOILS:
        o = outcomes[spoil.id]
        if spoil.refused_by_loader and spoil.says not in o.loader:
            wrong.append(f"{spoil.id}: loader said {o.loader!r}")
        if not spoil.refused_by_loader and o.loader:
            wrong.append(f"{spoil.id}: loader refused {o.loader!r}")
        if o.check_verdict != "fail" or spoil.says not in o.check:
            wrong.append(f"{spoil.id}: check {o.check_verdict}: {o.check!r}")
        if spoil.says not in o.verify or spoil.says not in o.rollout:
            wrong.append(f"{spoil.id}: verify {o.verify!r}, rollout {o.rollout!r}")
        if o.outside:
            wrong.append(f"{spoil.id}: wrote outside the package: {o.outside}")
        if o.rss_growth_mb > MEMORY_BOUND_MB:
            wrong.append(f"{spoil.id}: peak RSS grew {o.rss_growth_mb} MB")
    record(
        DrillResult(
            drill="hostile-packages",
            title="Hostile packages",
            summary="A good package spoiled one way at a time, then loaded, checked "
            "(`check`), verified (`verify`) and offered to the rollout engine in one process; "
            "peak RSS read before and after each case.",
            rows=[
                Row(
                    what=spoil.what,
                    runs=1,
                    held=int(not any(w.startswith(spoil.id + ":") for w in wrong)),
                    note=note(outcomes[spoil.id]),
                )
                for spoil in SPOILS
            ],
            figures={
                "cases": len(SPOILS),
                "written_outside": sum(len(o.outside) for o in outcomes.values()),
                "max_rss_growth_mb": max(o.rss_growth_mb for o in outcomes.values()),
                "memory_bound_mb": MEMORY_BOUND_MB,
            },
            seconds=round(sum(o.seconds for o in outcomes.values()), 1),
        )
    )
    assert not wrong, "\n".join(wrong)


# ---- the writers: in-memory packages (what a store or a Builder hands over) ---------------
TRAVERSALS = {
    "../escaped.txt": "'..'",
    "environment/../../escaped.txt": "'..'",
    "/tmp/escaped.txt": "relative path",
    "environment//x.txt": "empty parts",
}


@pytest.mark.parametrize("name", TRAVERSALS, ids=list(TRAVERSALS))
def test_a_traversing_name_is_refused_by_the_loader_and_every_writer(
    good: EnvironmentPackage, tmp_path: Path, name: str
) -> None:
    files = {**good.files, name: b"pwned\n"}
    with pytest.raises(PackageError, match=TRAVERSALS[name]):
        EnvironmentPackage.from_files(files, good.executables)
    target = tmp_path / "store" / "out"
    with pytest.raises(PackageError, match=TRAVERSALS[name]):
        write_tree(target, files)
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()
    assert not target.exists()  # refused before the first write


@pytest.mark.parametrize("name", ["../outside", "/tmp/outside", "a/../../b", "", "a\nb"])
def test_the_release_store_refuses_a_name_that_climbs_out(
    good: EnvironmentPackage, tmp_path: Path, name: str
) -> None:
    store = tmp_path / "store"
    with pytest.raises(PackageError):
        LocalPublisher(store).publish(name, good, {"name": name})
    assert listing(tmp_path) <= {"store"}


def test_a_write_never_follows_a_symlink_left_in_the_target(
    good: EnvironmentPackage, tmp_path: Path
) -> None:
    """A folder re-published over: a directory symlink planted where `environment` goes
    must be replaced, not written through."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "store" / "pkg"
    target.mkdir(parents=True)
    (target / "environment").symlink_to(outside)
    (target / "task.toml").symlink_to(outside / "task.toml")
    good.write(target)
    assert list(outside.iterdir()) == []
    assert not (target / "environment").is_symlink()
    assert EnvironmentPackage.load(target).files == good.files

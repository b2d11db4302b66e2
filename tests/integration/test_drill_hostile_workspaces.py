"""Drill (issue 24, item 1): what an agent leaves in its workspace is *scored*, never
invalid. On a real package (weather_report) and the real bubblewrap sandbox, each vector
is applied to the untouched s0 or to the reference solution's final workspace and scored
by ``LocalRuntime.run_verifier`` twice:

- full: as rollouts and ``cowork-gym verify`` score, through the normalised copy
  (``runtime.verifier_copy``: modes fixed, links out, FIFOs, sockets, devices, undecodable
  names and oversized files dropped) and the engine;
- engine alone: the workspace copied verbatim (modes, links, FIFOs, devices kept), so the
  engine's own checks must turn each broken file into a failed component.

Each must be valid with the reward its broken files leave: 0 when the input red line
fails, the weighted share of the untouched components otherwise, and the reference
itself 1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime import LocalRuntime, local
from coworkgym.runtime.verifier_copy import CopyReport
from coworkgym.runtime.workspace import materialize
from tests.drills.record import DrillResult, Row, record
from tests.support.builders import good_package

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

INPUT = "data/weather.csv"
XLSX, JSON = "report.xlsx", "summary.json"
ALL = "everything"  # every component and the red line
HUGE = 300 * 1024 * 1024  # over the copy's 256 MiB a file: dropped before a byte is read
OVER_PARSE = 40 * 1024 * 1024  # copied, but more than the engine parses (32 MiB)


@dataclass
class Vector:
    id: str
    what: str
    apply: Callable[[Path, Path], None]  # (workspace, a host folder outside it)
    full: set[str]  # what it breaks through the normalised copy: files, or ALL
    engine: set[str]  # what it breaks with the workspace copied verbatim
    base: str = "reference"  # or "s0": the untouched initial workspace
    needs_root: bool = False


def chmod(rel: str, mode: int = 0) -> Callable[[Path, Path], None]:
    return lambda ws, _: (ws / rel if rel else ws).chmod(mode)


def link_to_host_copy(rel: str) -> Callable[[Path, Path], None]:
    """``rel`` moved out of the workspace (same bytes) and linked back by absolute path."""

    def apply(ws: Path, host: Path) -> None:
        outside = host / Path(rel).name
        shutil.move(ws / rel, outside)
        (ws / rel).symlink_to(outside)

    return apply


def relink(rel: str, target: str) -> Callable[[Path, Path], None]:
    def apply(ws: Path, _: Path) -> None:
        (ws / rel).unlink()
        (ws / rel).symlink_to(target)

    return apply


def absolute_link_inside(ws: Path, _: Path) -> None:
    shutil.copy(ws / INPUT, ws / "data" / "copy.csv")
    relink(INPUT, "/app/data/copy.csv")(ws, _)


def fifo(rel: str) -> Callable[[Path, Path], None]:
    def apply(ws: Path, _: Path) -> None:
        (ws / rel).unlink(missing_ok=True)
        os.mkfifo(ws / rel)

    return apply


def make_socket(ws: Path, rel: str) -> None:
    short = Path("/tmp") / f"cwg-drill-{os.getpid()}-{time.monotonic_ns()}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(short))
    server.close()
    (ws / rel).unlink(missing_ok=True)
    os.replace(short, ws / rel)


def device(ws: Path, _: Path) -> None:
    (ws / INPUT).unlink()
    os.mknod(ws / INPUT, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers


def sparse(rel: str, size: int) -> Callable[[Path, Path], None]:
    def apply(ws: Path, _: Path) -> None:
        with (ws / rel).open("wb") as f:
            f.truncate(size)

    return apply


def as_directory(rel: str) -> Callable[[Path, Path], None]:
    def apply(ws: Path, _: Path) -> None:
        (ws / rel).unlink()
        (ws / rel).mkdir()
        (ws / rel / "inside.txt").write_text("x")

    return apply


def undecodable_rename(ws: Path, _: Path) -> None:
    (ws / INPUT).rename(ws / "data" / os.fsdecode(b"weather\xff.csv"))


def data_dir_to_host(ws: Path, host: Path) -> None:
    shutil.move(ws / "data", host / "data")
    (ws / "data").symlink_to(host / "data")


def xlsx_bomb(ws: Path, _: Path) -> None:
    (ws / XLSX).unlink()
    with zipfile.ZipFile(ws / XLSX, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("xl/worksheets/sheet1.xml", b" " * (200 * 1024 * 1024))


def litter(ws: Path, _: Path) -> None:
    """Harmless junk beside the deliverables: it breaks nothing."""
    (ws / os.fsdecode(b"notes-\xfe.txt")).write_text("x")
    os.mkfifo(ws / "pipe")
    make_socket(ws, "sock")
    (ws / "loop").symlink_to("loop")
    (ws / "etc").symlink_to("/etc")


VECTORS = [
    Vector("s0-chmod-input", "s0, no deliverables: chmod 000 the input (the issue's case)",
           chmod(INPUT), {ALL}, {ALL}, base="s0"),
    Vector("s0-input-to-host", "s0, no deliverables: the input replaced by a symlink to a "
           "host file", link_to_host_copy(INPUT), {ALL}, {ALL}, base="s0"),
    Vector("chmod-input", "chmod 000 the input", chmod(INPUT), set(), {ALL}),
    Vector("chmod-input-dir", "chmod 000 the input's directory", chmod("data"), set(), {ALL}),
    Vector("chmod-workspace", "chmod 000 the workspace itself", chmod(""), set(), {ALL}),
    Vector("chmod-deliverable", "chmod 000 a deliverable (report.xlsx)", chmod(XLSX),
           set(), {XLSX}),
    Vector("input-to-host", "the input moved out and symlinked back (a host file, same bytes)",
           link_to_host_copy(INPUT), {ALL}, {ALL}),
    Vector("input-abs-inside", "the input a symlink by absolute path to a same-bytes copy "
           "inside the workspace", absolute_link_inside, set(), set()),
    Vector("input-escaping", "the input a relative symlink climbing out (../../../etc/hostname)",
           relink(INPUT, "../../../../../../etc/hostname"), {ALL}, {ALL}),
    Vector("input-dangling", "the input a dangling symlink", relink(INPUT, "gone.csv"),
           {ALL}, {ALL}),
    Vector("input-loop", "the input a symlink loop", relink(INPUT, "weather.csv"),
           {ALL}, {ALL}),
    Vector("input-dir-to-host", "the input's directory moved out and symlinked back",
           data_dir_to_host, {ALL}, {ALL}),
    Vector("input-fifo", "the input replaced by a FIFO", fifo(INPUT), {ALL}, {ALL}),
    Vector("input-socket", "the input replaced by a socket",
           lambda ws, _: make_socket(ws, INPUT), {ALL}, {ALL}),
    Vector("input-device", "the input replaced by a character device (1,5: /dev/zero)",
           device, {ALL}, {ALL}, needs_root=True),
    Vector("input-huge-sparse", "the input replaced by a 300 MiB sparse file",
           sparse(INPUT, HUGE), {ALL}, {ALL}),
    Vector("input-directory", "a directory where the input was", as_directory(INPUT),
           {ALL}, {ALL}),
    Vector("input-deleted", "the input deleted", lambda ws, _: (ws / INPUT).unlink(),
           {ALL}, {ALL}),
    Vector("input-undecodable-name", "the input renamed to a non-UTF-8 name",
           undecodable_rename, {ALL}, {ALL}),
    Vector("deliverable-to-host", "a deliverable moved out and symlinked back (report.xlsx)",
           link_to_host_copy(XLSX), {XLSX}, {XLSX}),
    Vector("deliverable-fifo", "a FIFO where a deliverable was (report.xlsx)", fifo(XLSX),
           {XLSX}, {XLSX}),
    Vector("deliverable-directory", "a directory where a deliverable was (summary.json)",
           as_directory(JSON), {JSON}, {JSON}),
    Vector("deliverable-over-parse", "a deliverable a 40 MiB sparse file (summary.json)",
           sparse(JSON, OVER_PARSE), {JSON}, {JSON}),
    Vector("deliverable-huge-sparse", "a deliverable a 300 MiB sparse file (summary.json)",
           sparse(JSON, HUGE), {JSON}, {JSON}),
    Vector("deliverable-zip-bomb", "a deliverable a zip declaring 200 MiB (report.xlsx)",
           xlsx_bomb, {XLSX}, {XLSX}),
    Vector("litter", "litter beside the deliverables: a non-UTF-8 name, a FIFO, a socket, a "
           "symlink loop, a symlink to /etc", litter, set(), set()),
    Vector("untouched", "the reference's workspace untouched", lambda ws, _: None,
           set(), set()),
]  # fmt: skip


def verbatim_copy(src: Path, dest: Path, workdir: str = "/app") -> CopyReport:
    """The workspace as the agent left it: modes, symlinks, FIFOs, sockets and devices
    reproduced (what the engine meets when nothing normalises in front of it)."""
    dirs: list[tuple[Path, int]] = []
    for from_dir, names, files in os.walk(src):
        to_dir = dest / Path(from_dir).relative_to(src)
        to_dir.mkdir(exist_ok=True)
        dirs.append((to_dir, os.lstat(from_dir).st_mode))
        for name in [*names, *files]:
            a, b = Path(from_dir) / name, to_dir / name
            info = os.lstat(a)
            if stat.S_ISLNK(info.st_mode):
                b.symlink_to(os.readlink(a))
                if name in names:
                    names.remove(name)
            elif stat.S_ISREG(info.st_mode):
                with a.open("rb") as f_in, b.open("wb") as f_out:
                    while chunk := f_in.read(1 << 20):
                        if chunk.count(0) == len(chunk):
                            f_out.seek(len(chunk), os.SEEK_CUR)
                        else:
                            f_out.write(chunk)
                    f_out.truncate(info.st_size)
                b.chmod(stat.S_IMODE(info.st_mode))
            elif stat.S_ISFIFO(info.st_mode):
                os.mkfifo(b)
            elif stat.S_ISSOCK(info.st_mode):
                make_socket(to_dir, name)
            elif stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
                os.mknod(b, info.st_mode, info.st_rdev)
    for path, mode in reversed(dirs):  # last, or the copy could not enter them
        path.chmod(stat.S_IMODE(mode))
    return CopyReport()


@pytest.fixture(scope="module")
def package() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


@pytest.fixture(scope="module")
def bases(
    package: EnvironmentPackage, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("bases")
    s0, reference = root / "s0", root / "reference"
    workdir = materialize(package, s0).workdir
    assert workdir == "/app"
    shutil.copytree(s0, reference)
    assert all(r.ok for r in LocalRuntime().run_reference(package, reference, workdir))
    yield {"s0": s0, "reference": reference}


def expected_reward(pkg: EnvironmentPackage, broken: set[str]) -> float:
    """The reward when every component reading a file in ``broken`` fails (0 when the
    input, so the red line, is among them; scaled by the gate scale when a gate fails)."""
    if ALL in broken or INPUT in broken:
        return 0.0
    assert pkg.verifier is not None
    total = right = 0.0
    scale = 1.0
    for component in pkg.verifier.components:
        check = component.check.model_dump()
        files = {check.get("path"), (check.get("left") or {}).get("path")}
        files.add((check.get("right") or {}).get("path"))
        total += component.weight
        right += 0.0 if files & broken else component.weight
        if files & broken and component.gate:
            scale = pkg.verifier.scoring.gate_scale
    return round(right / total * scale, 6)


def test_every_workspace_vector_is_scored_never_invalid(
    package: EnvironmentPackage,
    bases: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = LocalRuntime()
    rows, failures, seen = [], [], []
    rewards: dict[str, dict[str, float | None]] = {}
    started_all = time.monotonic()
    for n, v in enumerate(VECTORS):
        if v.needs_root and os.geteuid() != 0:
            rows.append(Row(what=v.what, runs=0, held=0, lost="—",
                            note="skipped: mknod needs CAP_MKNOD (an unprivileged agent "
                            "cannot make a device either)"))  # fmt: skip
            continue
        outcomes = {}
        for layer in ("full", "engine"):
            ws, host = tmp_path / f"{n}-{layer}" / "ws", tmp_path / f"{n}-{layer}" / "host"
            host.mkdir(parents=True)
            shutil.copytree(bases[v.base], ws, symlinks=True)
            v.apply(ws, host)
            with monkeypatch.context() as patch:
                if layer == "engine":
                    patch.setattr(local, "copy_for_verifier", verbatim_copy)
                clock = time.monotonic()
                outcome = runtime.run_verifier(package, ws, "/app")
                seconds = time.monotonic() - clock
            want = expected_reward(package, v.full if layer == "full" else v.engine)
            held = outcome.valid and outcome.reward == want
            if not held:
                failures.append(f"{v.id} ({layer}): valid {outcome.valid}, reward "
                                f"{outcome.reward}, expected {want}: {outcome.error}")  # fmt: skip
            outcomes[layer] = (outcome, want, held, seconds)
            seen.append(outcome)
            _unlock(ws)
        full, engine = outcomes["full"], outcomes["engine"]
        rewards[v.id] = {"full": full[0].reward, "engine": engine[0].reward}
        copied = full[0].copied
        dropped = [d.replace(str(tmp_path), "$TMP") for d in (copied.dropped if copied else [])]
        rows.append(
            Row(
                what=v.what,
                runs=2,
                held=sum(1 for o in outcomes.values() if o[2]),
                lost="nothing" if all(o[2] for o in outcomes.values()) else "see the test",
                note=f"full: reward {full[0].reward} (expected {full[1]}, "
                f"{copied.modes_fixed if copied else 0} modes fixed, "
                f"dropped {len(dropped)}{': ' + dropped[0] if dropped else ''}); "
                f"engine alone: reward {engine[0].reward} (expected {engine[1]}); "
                f"{full[3] + engine[3]:.1f} s",
            )
        )
    record(
        DrillResult(
            drill="hostile-workspaces",
            title="Hostile workspaces",
            summary="Each vector applied to a weather_report package's s0 or to its reference "
            "solution's final workspace, scored by the real verifier in the bubblewrap "
            "sandbox twice: through the normalised copy (full) and with the workspace copied "
            "verbatim (engine alone); held = valid, with the reward the broken files leave "
            "(0 when the input red line fails, the untouched components' weighted share "
            "otherwise).",
            rows=rows,
            figures={
                "vectors": len(VECTORS),
                "runs": len(seen),
                "invalid": sum(1 for o in seen if not o.valid),
                "wrong_reward": len(failures),
                "reference_reward": rewards["untouched"],
            },
            seconds=round(time.monotonic() - started_all, 1),
        )
    )
    assert not failures, "\n".join(failures)


def _unlock(ws: Path) -> None:
    """Give pytest back a tree it can delete (a mode-000 workspace, a FIFO)."""
    for path in [ws, *ws.rglob("*")] if ws.exists() else []:
        if not path.is_symlink() and path.exists():
            path.chmod(0o755)


def test_the_verify_command_scores_the_issues_workspace(
    package: EnvironmentPackage, bases: dict[str, Path], tmp_path: Path
) -> None:
    """The issue's reproduction, through ``cowork-gym verify``: chmod 000 the input of a
    copy of s0 → a valid 0 (it was INVALID), and the dropped link is shown."""
    from typer.testing import CliRunner

    from coworkgym.cli import app

    package_dir = package.write(tmp_path / "package")
    for n, apply in enumerate((chmod(INPUT), link_to_host_copy(INPUT))):
        ws, host = tmp_path / f"ws{n}", tmp_path / f"host{n}"
        host.mkdir()
        shutil.copytree(bases["s0"], ws)
        apply(ws, host)
        result = CliRunner().invoke(
            app, ["verify", str(package_dir), "--workspace", str(ws), "--json"]
        )
        assert result.exit_code == 0, result.output
        data = json.loads(result.output[result.output.index("{\n") :])  # after the logs
        assert data["valid"] and data["rewards"]["reward"] == 0.0
        if n == 1:
            assert "leads out of the workspace" in data["workspace_copy"]["dropped"][0]
        _unlock(ws)


AGENT_SHELLS = {
    "chmod-input": "chmod 000 data/weather.csv",
    "chmod-dirs": "chmod 000 data . ",
    "input-to-host": "ln -sf /etc/passwd data/weather.csv",
    "input-escaping": "ln -sf ../../../../etc/hostname data/weather.csv",
    "special-files": "rm data/weather.csv && mkfifo data/weather.csv report.xlsx && "
    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('summary.json')\"",
    "undecodable-names": "mv data/weather.csv data/$'\\xff'.csv && touch $'\\xfe'",
    "directories": "rm data/weather.csv && mkdir data/weather.csv report.xlsx",
    "loops": "ln -sf weather.csv data/weather.csv && ln -s a b && ln -s b a",
}


def _register_shell_agents() -> None:
    from coworkgym.rollout.harness import Episode, PolicyConfig, register
    from coworkgym.rollout.trajectory import ToolCall

    for key, command in AGENT_SHELLS.items():

        class Play:
            name = f"hostile-ws-{key}"

            def run(self, episode: Episode, policy: PolicyConfig, command: str = command) -> None:
                call = ToolCall(id="c1", name="shell", arguments=json.dumps({"command": command}))
                episode.record_agent("", [call])
                episode.execute(call)
                finish = ToolCall(id="fin", name="finish", arguments='{"summary": "done"}')
                episode.record_agent("", [finish])
                episode.execute(finish)

        register(f"hostile-ws-{key}")(Play)


def test_an_agent_breaking_its_workspace_in_a_real_rollout_gets_a_valid_0(
    package: EnvironmentPackage,
) -> None:
    """The same vectors made by the agent itself, through the rollout engine: each
    rollout is verified valid with reward 0 (it made no deliverable), and its trajectory
    (with the final workspace's digests) can be written as JSON."""
    from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
    from coworkgym.rollout.harness import PolicyConfig
    from coworkgym.rollout.trajectory import Trajectory

    _register_shell_agents()
    problems = []
    with RolloutEngine(limits=RolloutLimits(timeout_s=120)) as engine:
        for key in AGENT_SHELLS:
            t = engine.run(package, f"hostile-ws-{key}", PolicyConfig(model="scripted"))
            v = t.verification
            if v is None or not v.valid or v.reward != 0.0:
                problems.append(f"{key}: {t.termination.reason}, {v}")
            Trajectory.model_validate_json(t.model_dump_json())  # it can be recorded
    assert not problems, "\n".join(problems)

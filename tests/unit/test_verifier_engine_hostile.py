"""The verifier engine on a workspace the agent broke (issue 24, item 1), with no
normalised copy in front of it: an unreadable, undecodable or wrong-typed deliverable or
input fails its component (score 0, with the reason), and the run stays *valid*. Only a
fault on the verifier's own side is invalid.

These run in this process; the permission vectors (which root does not feel) run in the
real sandbox in tests/integration/test_drill_hostile_workspaces.py."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from coworkgym.verifier.engine import CHECKS, verify
from coworkgym.verifier.engine import values as engine_values
from coworkgym.verifier.engine.checks import Context

INPUT = b"date,rain\n2012-01-01,1.5\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "data").mkdir(parents=True)
    (root / "data" / "in.csv").write_bytes(INPUT)
    (root / "out.json").write_text(json.dumps({"total": 3}))
    (root / "table.csv").write_text("k,v\na,1\n")
    book = openpyxl.Workbook()
    book.active.append(["k", "v"])
    book.active.append(["a", 1])
    book.save(root / "report.xlsx")
    return root


def spec() -> dict[str, Any]:
    digest = hashlib.sha256(INPUT).hexdigest()
    return {
        "components": [
            {"id": "json", "weight": 1.0, "check": _json("out.json")},
            {"id": "csv", "weight": 1.0, "check": _csv("table.csv")},
            {"id": "xlsx", "weight": 1.0, "check": _csv("report.xlsx")},
        ],
        "red_lines": [
            {
                "id": "inputs",
                "check": {"type": "inputs_unmodified", "files": {"data/in.csv": digest}},
            }
        ],
    }


def _json(path: str) -> dict[str, Any]:
    return {"type": "json_value", "path": path, "pointer": "/total", "expected": 3}


def _csv(path: str) -> dict[str, Any]:
    return {
        "type": "csv_value" if path.endswith(".csv") else "xlsx_value",
        "path": path,
        "key_column": "k",
        "key": "a",
        "column": "v",
        "expected": 1,
    }


def scored(ws: Path, tmp_path: Path) -> dict[str, tuple[float, str]]:
    report = verify(spec(), ws, tmp_path)
    assert report.status == "valid", report.error
    return {c.id: (c.score, c.evidence) for c in report.components + report.red_lines}


def replace(path: Path) -> Path:
    path.unlink()
    return path


def test_the_untouched_workspace_scores_1(ws: Path, tmp_path: Path) -> None:
    assert verify(spec(), ws, tmp_path).reward == 1.0


def fifo(path: Path) -> None:
    os.mkfifo(replace(path))


def sock(path: Path) -> None:
    replace(path)
    short = Path("/tmp") / f"cwg-eng-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(short))
    server.close()
    os.replace(short, path)


def directory(path: Path) -> None:
    replace(path).mkdir()


def dangling(path: Path) -> None:
    replace(path).symlink_to("nowhere")


def loop(path: Path) -> None:
    replace(path).symlink_to(path.name)


def host_link(path: Path) -> None:
    outside = path.parents[2] / f"host-{path.name}"
    outside.write_bytes(path.read_bytes())  # the same bytes, out of the workspace
    replace(path).symlink_to(outside)


def huge_sparse(path: Path) -> None:
    with replace(path).open("wb") as f:
        f.truncate(engine_values.MAX_PARSE_BYTES + 1)


VECTORS = {
    "a FIFO": (fifo, "a FIFO"),
    "a socket": (sock, "a socket"),
    "a directory": (directory, "a directory"),
    "a dangling symlink": (dangling, "symlink"),
    "a symlink loop": (loop, "symlink"),
    "a symlink to a host file with the same bytes": (host_link, "symlink"),
    "a huge sparse file": (huge_sparse, "more than the verifier parses"),
    "deleted": (lambda p: p.unlink(), "does not exist"),
}


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_a_deliverable_broken_fails_only_its_component(
    vector: str, ws: Path, tmp_path: Path
) -> None:
    make, why = VECTORS[vector]
    make(ws / "out.json")
    scores = scored(ws, tmp_path)
    assert scores["json"][0] == 0.0 and why in scores["json"][1]
    assert scores["csv"][0] == scores["xlsx"][0] == scores["inputs"][0] == 1.0


INPUT_WHY = {
    "a FIFO": "replaced by a FIFO",
    "a socket": "replaced by a socket",
    "a directory": "replaced by a directory",
    "a dangling symlink": "dangling symlink",
    "a symlink loop": "dangling symlink",
    "a symlink to a host file with the same bytes": "symlink out of the workspace",
    "a huge sparse file": "modified",
    "deleted": "deleted",
}


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_an_input_broken_fails_the_red_line_not_the_run(
    vector: str, ws: Path, tmp_path: Path
) -> None:
    make, _ = VECTORS[vector]
    make(ws / "data" / "in.csv")
    report = verify(spec(), ws, tmp_path)
    assert report.status == "valid" and report.reward == 0.0, report.error
    (red,) = report.red_lines
    assert red.status == "failed" and INPUT_WHY[vector] in red.evidence, red.evidence


def test_an_input_behind_a_symlinked_directory_out_of_the_workspace_is_altered(
    ws: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host-data"
    (ws / "data").rename(host)  # the same file, now outside
    (ws / "data").symlink_to(host)
    (ws / "out.json").rename(host / "out.json")
    (ws / "out.json").symlink_to(host / "out.json")
    scores = scored(ws, tmp_path)
    assert "symlink out of the workspace" in scores["inputs"][1]
    assert scores["json"][0] == 0.0


def test_a_deliverable_through_a_symlinked_directory_out_of_the_workspace_fails(
    ws: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "out.json").write_text(json.dumps({"total": 3}))
    check = _json("sub/out.json")
    (ws / "sub").symlink_to(host)
    result = _run(check, ws, tmp_path)
    assert result == (0.0, "sub/out.json is reached through a symlink out of the workspace")


def test_an_input_linked_to_a_file_inside_the_workspace_is_followed(
    ws: Path, tmp_path: Path
) -> None:
    (ws / "data" / "in.csv").rename(ws / "moved.csv")
    (ws / "data" / "in.csv").symlink_to("../moved.csv")
    assert scored(ws, tmp_path)["inputs"][0] == 1.0


def _run(check: dict[str, Any], ws: Path, tests: Path, trajectory: Any = None) -> Any:
    report = verify({"components": [{"id": "c", "weight": 1.0, "check": check}]}, ws, tests,
                    trajectory=trajectory)  # fmt: skip
    assert report.status == "valid", report.error
    return report.components[0].score, report.components[0].evidence


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"k,v\na," + b"x" * 200_000 + b"\n", "not readable CSV"),  # past the field limit
        (b"\xff\xfe k,v", "not UTF-8"),
    ],
)
def test_an_unparseable_csv_fails(content: bytes, why: str, ws: Path, tmp_path: Path) -> None:
    (ws / "table.csv").write_bytes(content)
    score, evidence = _run(_csv("table.csv"), ws, tmp_path)
    assert score == 0.0 and why in evidence


def test_json_nested_past_the_recursion_limit_fails(ws: Path, tmp_path: Path) -> None:
    (ws / "out.json").write_text("[" * 200_000 + "]" * 200_000)
    score, evidence = _run(_json("out.json"), ws, tmp_path)
    assert score == 0.0 and "too deeply" in evidence


def test_an_xlsx_bomb_fails_before_it_is_inflated(ws: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(ws / "report.xlsx", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/bomb.xml", b"\0" * (engine_values.MAX_UNZIPPED_BYTES + 1))
    score, evidence = _run(_csv("report.xlsx"), ws, tmp_path)
    assert score == 0.0 and "more than the verifier inflates" in evidence


def test_a_workbook_of_only_a_chartsheet_fails(ws: Path, tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    book.create_chartsheet("Chart")
    book.remove(book.active)
    book.save(ws / "report.xlsx")
    score, evidence = _run(_csv("report.xlsx"), ws, tmp_path)
    assert score == 0.0 and "report.xlsx" in evidence


def test_claims_out_of_the_workspace_count_as_missing_not_as_a_spec_fault(
    ws: Path, tmp_path: Path
) -> None:
    trajectory = {"claimed_files": ["out.json", "a/../../etc/passwd", "", 7]}
    score, evidence = _run({"type": "claimed_files_exist"}, ws, tmp_path, trajectory)
    assert score == 0.0 and "a/../../etc/passwd" in evidence


def test_file_absent_that_cannot_tell_fails(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(self: Path) -> os.stat_result:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "lstat", denied)
    score, evidence = _run({"type": "file_absent", "path": "secret/x"}, ws, tmp_path)
    assert score == 0.0 and "cannot tell" in evidence


def test_a_command_whose_cwd_the_agent_removed_fails(ws: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    report = verify(
        {
            "components": [
                {"id": "c", "weight": 1.0, "check": {"type": "command", "argv": ["true"]}}
            ]
        },
        gone,
        tmp_path,
    )
    assert report.status == "valid" and report.components[0].score == 0.0
    assert "cannot run in the workspace" in report.components[0].evidence


def test_a_command_printing_undecodable_bytes_is_scored(ws: Path, tmp_path: Path) -> None:
    check = {"type": "command", "argv": ["printf", "\\377\\376"]}
    assert _run(check, ws, tmp_path)[0] == 1.0


def test_an_os_error_in_the_workspace_fails_the_component_one_outside_voids_the_run(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The net under every check: an OSError about a workspace path is the agent's, any
    other is the verifier's (invalid, never a 0)."""
    where: dict[str, str] = {}

    def broken(p: dict[str, Any], ctx: Context) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", where["path"])

    monkeypatch.setitem(CHECKS, "file_exists", broken)
    check = {"type": "file_exists", "path": "out.json"}
    where["path"] = str(ws / "out.json")
    assert _run(check, ws, tmp_path)[0] == 0.0
    where["path"] = str(tmp_path / "inputs" / "x.csv")
    spec_ = {"components": [{"id": "c", "weight": 1.0, "check": check}]}
    assert verify(spec_, ws, tmp_path).status == "invalid"


def test_the_engine_stays_standard_library_and_python_311() -> None:
    """It is copied into every package and runs on the sandbox's python3.11: no import
    beyond the standard library at module level (openpyxl, docx, jsonschema are lazy)."""
    import ast

    engine = Path(engine_values.__file__).parent
    allowed = {"__future__", *__import__("sys").stdlib_module_names}
    for source in engine.glob("*.py"):
        tree = ast.parse(source.read_text(), feature_version=(3, 11))
        for node in tree.body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            assert all(n.split(".")[0] in allowed for n in names), (source.name, names)

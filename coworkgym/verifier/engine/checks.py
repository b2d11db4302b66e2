"""Deterministic check types. Each takes the check's parameters and a Context and returns a
CheckResult; agent-caused failures raise CheckFailure, verifier faults raise SpecError.

Every entry of CHECKS is a plain function, testable alone; the spec names it by ``type``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CheckFailure, SpecError
from .values import (
    MISSING_ERRNOS,
    extract,
    inside,
    json_pointer,
    kind_of,
    parse_number,
    read_json,
    read_table,
    read_text,
    require_file,
    resolve,
    same,
)

__all__ = ["CHECKS", "CheckFailure", "CheckResult", "Context", "SpecError"]


@dataclass
class Context:
    workspace: Path
    tests_dir: Path
    trajectory: dict[str, Any] | None = None
    command_timeout: float = 120.0


@dataclass
class CheckResult:
    score: float
    evidence: str
    skipped: bool = False
    details: dict[str, Any] = field(default_factory=dict)


def ok(evidence: str, **details: Any) -> CheckResult:
    return CheckResult(1.0, evidence, details=details)


def file_exists(p: dict[str, Any], ctx: Context) -> CheckResult:
    path = require_file(ctx.workspace, p["path"])
    size = path.stat().st_size
    if size < p.get("min_bytes", 1):
        raise CheckFailure(f"{p['path']} has {size} bytes, fewer than {p.get('min_bytes', 1)}")
    return ok(f"{p['path']} exists ({size} bytes)")


def file_absent(p: dict[str, Any], ctx: Context) -> CheckResult:
    path = resolve(ctx.workspace, p["path"])
    try:
        path.lstat()
    except MISSING_ERRNOS:
        return ok(f"{p['path']} is absent")
    except OSError as exc:  # e.g. a parent the agent made unreadable: not shown absent
        raise CheckFailure(f"cannot tell whether {p['path']} exists ({exc.strerror})") from None
    raise CheckFailure(f"{p['path']} should not exist")


def value(p: dict[str, Any], ctx: Context) -> CheckResult:
    """json_value / csv_value / xlsx_value / document_value: one value against an expectation."""
    actual = extract(ctx.workspace, {**p, "kind": VALUE_KINDS[p["type"]]})
    expected = p["expected"]
    if same(actual, expected, p.get("tolerance", 0.0), p.get("rel_tolerance", 0.0)):
        return ok(f"{_where(p)} = {actual!r} (expected {expected!r})")
    raise CheckFailure(f"{_where(p)} = {actual!r}, expected {expected!r}")


def _where(p: dict[str, Any]) -> str:
    for key in ("pointer", "cell", "label"):
        if key in p:
            return f"{p['path']}[{p[key]}]"
    if "key" in p:
        return f"{p['path']}[{p['key_column']}={p['key']!r}].{p['column']}"
    return str(p["path"])


def json_schema(p: dict[str, Any], ctx: Context) -> CheckResult:
    import jsonschema

    document = read_json(require_file(ctx.workspace, p["path"]))
    validator = jsonschema.Draft202012Validator(p["schema"])
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/" + "/".join(str(x) for x in first.path)
        raise CheckFailure(f"{p['path']}{where}: {first.message} ({len(errors)} error(s))")
    return ok(f"{p['path']} matches its schema")


def table_columns(p: dict[str, Any], ctx: Context) -> CheckResult:
    table = read_table(require_file(ctx.workspace, p["path"]), p.get("sheet"))
    present = set(table[0]) if table else set()
    missing = [c for c in p["columns"] if c not in present]
    if missing:
        raise CheckFailure(f"{p['path']} lacks columns {missing} (has {sorted(present)})")
    return ok(f"{p['path']} has columns {p['columns']}")


def row_count(p: dict[str, Any], ctx: Context) -> CheckResult:
    path = require_file(ctx.workspace, p["path"])
    if path.suffix.lower() == ".json":
        rows: Any = json_pointer(read_json(path), p.get("pointer", ""))
        if not isinstance(rows, list):
            raise CheckFailure(f"{p['path']}{p.get('pointer', '')} is not a list")
        count = len(rows)
    else:
        count = len(read_table(path, p.get("sheet")))
    low, high = p.get("min", p.get("equals")), p.get("max", p.get("equals"))
    if (low is not None and count < low) or (high is not None and count > high):
        raise CheckFailure(f"{p['path']} has {count} rows, expected {_bounds(low, high)}")
    return ok(f"{p['path']} has {count} rows")


def _bounds(low: Any, high: Any) -> str:
    if low == high:
        return f"exactly {low}"
    return f"between {low if low is not None else '-∞'} and {high if high is not None else '∞'}"


AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "mean": lambda xs: sum(xs) / len(xs),
    "count": lambda xs: float(len(xs)),
    "min": min,
    "max": max,
}


def aggregate(p: dict[str, Any], ctx: Context) -> CheckResult:
    """Recompute a grouped aggregate from the task's inputs (the verifier's private copy)
    and compare every group in the deliverable; the score is the share of groups right."""
    source = p["source"]
    source_path = resolve(ctx.tests_dir, source["path"])
    if not source_path.is_file():
        raise SpecError(f"verifier input {source['path']} is missing from tests/")
    op = AGGREGATES.get(source["op"])
    if op is None:
        raise SpecError(f"unknown aggregate {source['op']!r}")
    groups: dict[str, list[float]] = {}
    where = source.get("where", {})
    prefix = source.get("group_prefix")
    for source_row in read_table(source_path, source.get("sheet")):
        if any(str(source_row.get(k, "")).strip() != str(v) for k, v in where.items()):
            continue
        raw = source_row.get(source["value"])
        number = parse_number(raw) if source["op"] != "count" else 0.0
        if number is None:
            continue
        group = source.get("group_by")
        key = str(source_row.get(group, "")).strip() if group else "*"
        key = key[:prefix] if prefix else key
        groups.setdefault(key, []).append(number)
    if not groups:
        raise SpecError(f"verifier input {source['path']} yields no groups")
    expected = {k: round(op(v), 6) for k, v in groups.items()}
    table = read_table(require_file(ctx.workspace, p["path"]), p.get("sheet"))
    by_key = {str(r.get(p["key_column"], "")).strip().casefold(): r for r in table}
    tolerance = p.get("tolerance", 0.01)
    wrong: list[str] = []
    for key, want in sorted(expected.items()):
        row = by_key.get(key.casefold())
        got = row.get(p["value_column"]) if row else None
        if row is None or not same(got, want, tolerance):
            wrong.append(f"{key}: got {got!r}, expected {want}")
    right = len(expected) - len(wrong)
    score = right / len(expected)
    evidence = f"{right}/{len(expected)} groups match the recomputed {source['op']}"
    if wrong:
        evidence += "; " + "; ".join(wrong[:5])
    if score == 0:
        raise CheckFailure(evidence)
    return CheckResult(score, evidence, details={"wrong": wrong})


def cross_file(p: dict[str, Any], ctx: Context) -> CheckResult:
    left, right = extract(ctx.workspace, p["left"]), extract(ctx.workspace, p["right"])
    number = parse_number(left)
    expected: Any = number if number is not None else left
    if same(right, expected, p.get("tolerance", 0.0)):
        return ok(f"{p['left']['path']} and {p['right']['path']} agree on {left!r}")
    raise CheckFailure(f"{p['left']['path']} says {left!r} but {p['right']['path']} says {right!r}")


def text_regex(p: dict[str, Any], ctx: Context) -> CheckResult:
    text = read_text(require_file(ctx.workspace, p["path"]))
    flags = re.IGNORECASE if p.get("ignore_case", True) else 0
    try:
        found = re.search(p["pattern"], text, flags | re.MULTILINE)
    except re.error as exc:
        raise SpecError(f"bad pattern {p['pattern']!r}: {exc}") from exc
    if bool(found) != p.get("must_match", True):
        verb = "does not contain" if p.get("must_match", True) else "must not contain"
        raise CheckFailure(f"{p['path']} {verb} /{p['pattern']}/")
    return ok(f"{p['path']} {'matches' if found else 'does not match'} /{p['pattern']}/")


def command(p: dict[str, Any], ctx: Context) -> CheckResult:
    """Run a command (e.g. a hidden test suite from tests/) in a copy-free way: the
    workspace is the cwd; TESTS_DIR points at the verifier's private files."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "TESTS_DIR": str(ctx.tests_dir),
        "WORKSPACE": str(ctx.workspace),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    timeout = p.get("timeout", ctx.command_timeout)
    # Specs name the verifier's files as /tests/...; they may live elsewhere (a pod's volume).
    argv = [str(ctx.tests_dir) + a[6:] if a.startswith("/tests/") else a for a in p["argv"]]
    try:
        done = subprocess.run(
            argv,
            cwd=ctx.workspace,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",  # the agent's code may print any bytes
            timeout=timeout,
            check=False,
        )
    except OSError as exc:
        if exc.filename is not None and str(exc.filename) == str(ctx.workspace):
            # the workspace is the cwd: one the agent made unusable fails the check
            raise CheckFailure(f"cannot run in the workspace ({exc.strerror})") from None
        if isinstance(exc, FileNotFoundError):
            raise SpecError(f"command not found: {p['argv'][0]}") from exc
        raise
    except subprocess.TimeoutExpired as exc:
        raise CheckFailure(f"{' '.join(p['argv'])} timed out after {timeout}s") from exc
    tail = (done.stdout + done.stderr)[-800:]
    if done.returncode != p.get("expect_exit", 0):
        raise CheckFailure(f"exit {done.returncode} (expected {p.get('expect_exit', 0)}): {tail}")
    return ok(f"exit {done.returncode}: {tail[-200:]}")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def input_change(root: Path, rel: str, digest: str) -> str | None:
    """How an input differs from its recorded digest, or None. A symlink is followed only
    to a regular file inside the workspace; whatever else stands there (a link out, a
    directory, a FIFO, a file nobody may read) is an altered input, never an error."""
    path = resolve(root, rel)
    try:
        info = path.lstat()
    except MISSING_ERRNOS:
        return "deleted"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        if not inside(root, path):
            return "replaced by a symlink out of the workspace"
        try:
            info = path.stat()
        except OSError:
            return "replaced by a dangling symlink"
    if not stat.S_ISREG(info.st_mode):
        return f"replaced by {kind_of(info.st_mode)}"
    if not inside(root, path):
        return "reached through a symlink out of the workspace"
    try:
        actual = sha256_file(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return None if actual == digest else "modified"


def inputs_unmodified(p: dict[str, Any], ctx: Context) -> CheckResult:
    changed = []
    for rel, digest in sorted(p["files"].items()):
        change = input_change(ctx.workspace, rel, digest)
        if change is not None:
            changed.append(f"{rel} {change}")
    if changed:
        raise CheckFailure("inputs altered: " + ", ".join(changed))
    return ok(f"{len(p['files'])} input file(s) unchanged")


def _tool_calls(trajectory: dict[str, Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = list(trajectory.get("tool_calls", []))
    for step in trajectory.get("steps", []):
        calls.extend(step.get("tool_calls", []))
    return calls


def claimed_files_exist(p: dict[str, Any], ctx: Context) -> CheckResult:
    """Every file the agent says it produced must exist (claim vs evidence)."""
    trajectory = ctx.trajectory
    if trajectory is None:
        return CheckResult(0.0, "no trajectory provided", skipped=True)
    claims = {str(c) for c in trajectory.get("claimed_files", [])}
    for step in trajectory.get("steps", []):
        claims.update(str(c) for c in step.get("claimed_files", []))
    missing = sorted(c for c in claims if not _claim_exists(ctx.workspace, c))
    if missing:
        raise CheckFailure(f"agent claimed files that do not exist: {missing}")
    return ok(f"all {len(claims)} claimed file(s) exist")


def _claim_exists(root: Path, claim: str) -> bool:
    """A claimed file exists when it is there, inside the workspace; a claim naming a path
    out of it (with '..') is the agent's, so it counts as missing, not as a spec fault."""
    rel = claim.lstrip("./")
    if not rel or ".." in Path(rel).parts:
        return False
    path = root / rel
    try:
        path.stat()
    except OSError:  # missing, dangling, a loop, or a parent nobody may enter
        return False
    return inside(root, path)


def forbidden_tool(p: dict[str, Any], ctx: Context) -> CheckResult:
    trajectory = ctx.trajectory
    if trajectory is None:
        return CheckResult(0.0, "no trajectory provided", skipped=True)
    forbidden = set(p["tools"])
    used = sorted({c.get("name", "") for c in _tool_calls(trajectory)} & forbidden)
    if used:
        raise CheckFailure(f"forbidden tool(s) used: {used}")
    return ok(f"none of {sorted(forbidden)} used")


def custom_script(p: dict[str, Any], ctx: Context) -> CheckResult:
    """Escape hatch: a script from tests/ prints {"score": x, "evidence": "..."}; a crash or
    bad output is a verifier fault (invalid), not a failed workspace."""
    script = resolve(ctx.tests_dir, p["script"])
    if not script.is_file():
        raise SpecError(f"custom check script {p['script']} is missing from tests/")
    try:
        done = subprocess.run(
            [p.get("interpreter", "python3"), str(script), str(ctx.workspace)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=p.get("timeout", ctx.command_timeout),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SpecError(f"custom check {p['script']} timed out") from exc
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
        score = float(result["score"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SpecError(f"custom check {p['script']} gave no score: {done.stderr[-400:]}") from exc
    if not 0.0 <= score <= 1.0:
        raise SpecError(f"custom check {p['script']} gave score {score} outside [0, 1]")
    return CheckResult(score, str(result.get("evidence", "")))


CHECKS: dict[str, Callable[[dict[str, Any], Context], CheckResult]] = {
    "file_exists": file_exists,
    "file_absent": file_absent,
    "json_value": value,
    "csv_value": value,
    "xlsx_value": value,
    "document_value": value,
    "json_schema": json_schema,
    "table_columns": table_columns,
    "row_count": row_count,
    "aggregate": aggregate,
    "cross_file": cross_file,
    "text_regex": text_regex,
    "command": command,
    "inputs_unmodified": inputs_unmodified,
    "claimed_files_exist": claimed_files_exist,
    "forbidden_tool": forbidden_tool,
    "custom_script": custom_script,
}
VALUE_KINDS = {
    "json_value": "json",
    "csv_value": "csv",
    "xlsx_value": "xlsx",
    "document_value": "document",
}

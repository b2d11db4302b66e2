"""Reading values out of workspace files: JSON, CSV, XLSX, DOCX, Markdown and text.

A *value reference* is a small dict naming a file and where in it a value sits; the
``*_value``, ``cross_file`` and ``aggregate`` checks are built from it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
import zipfile
from pathlib import Path
from typing import Any

from .errors import CheckFailure, SpecError

NUMBER_RE = re.compile(r"[-+]?\(?\$?€?£?\d[\d,]*(?:\.\d+)?%?\)?|[-+]?\.\d+%?")

# What the engine parses of one deliverable (an honest one is far smaller: the Issue
# Detector flags 5 MiB); beyond it the component fails rather than the verifier's memory.
MAX_PARSE_BYTES = 32 * 1024 * 1024
MAX_UNZIPPED_BYTES = 128 * 1024 * 1024  # an XLSX/DOCX's members, as its directory declares
MAX_ZIP_MEMBERS = 10_000
MISSING_ERRNOS = (FileNotFoundError, NotADirectoryError)
KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symlink",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def resolve(root: Path, rel: str) -> Path:
    """A workspace-relative path that cannot escape the workspace."""
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        raise SpecError(f"path {rel!r} must be relative to the workspace, without '..'")
    return root / rel


def inside(root: Path, path: Path) -> bool:
    """``path``, every symlink on the way resolved, lies within ``root``."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def kind_of(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def require_file(root: Path, rel: str) -> Path:
    """A deliverable the engine can read: a regular file (not a symlink, directory, FIFO,
    device), inside the workspace, readable, of a size it can parse. Anything else is the
    workspace's failure (CheckFailure), never an exception that would void the run."""
    path = resolve(root, rel)
    try:
        info = path.lstat()
    except MISSING_ERRNOS:
        raise CheckFailure(f"{rel} does not exist") from None
    except OSError as exc:
        raise CheckFailure(f"{rel} cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise CheckFailure(f"{rel} is a symlink; deliverables must be regular files")
    if not stat.S_ISREG(info.st_mode):
        raise CheckFailure(f"{rel} is {kind_of(info.st_mode)}, not a regular file")
    if not inside(root, path):
        raise CheckFailure(f"{rel} is reached through a symlink out of the workspace")
    if info.st_size > MAX_PARSE_BYTES:
        raise CheckFailure(f"{rel} has {info.st_size} bytes, more than the verifier parses")
    if not os.access(path, os.R_OK):
        raise CheckFailure(f"{rel} cannot be read (permission denied)")
    return path


def read_bytes(path: Path) -> bytes:
    """A deliverable's bytes (at most MAX_PARSE_BYTES); an OS error is the workspace's."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PARSE_BYTES + 1)
    except OSError as exc:
        raise CheckFailure(f"{path.name} cannot be read ({exc.strerror})") from None
    if len(data) > MAX_PARSE_BYTES:
        raise CheckFailure(f"{path.name} is larger than the verifier parses")
    return data


def zip_guard(path: Path) -> None:
    """An XLSX/DOCX whose members declare more than the verifier may inflate is the
    agent's failure, before a parser tries (zipfile never inflates past a declared size)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except Exception as exc:  # a malformed deliverable: any zipfile error
        raise CheckFailure(f"{path.name} is not a readable archive: {exc}") from None
    declared = sum(m.file_size for m in members)
    if len(members) > MAX_ZIP_MEMBERS or declared > MAX_UNZIPPED_BYTES:
        raise CheckFailure(
            f"{path.name} declares {len(members)} members and {declared} bytes unzipped, "
            "more than the verifier inflates"
        )


def parse_number(raw: Any) -> float | None:
    """Numbers as people write them: '1,234.50', '$12', '(3.5)' for negatives, '12%'."""
    if isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, int | float):
        return float(raw) if math.isfinite(raw) else None
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    match = NUMBER_RE.fullmatch(text) or NUMBER_RE.search(text)
    if match is None:
        return None
    token = match.group(0)
    negative = token.startswith("(") and token.endswith(")")
    cleaned = token.strip("()").replace(",", "").replace("$", "").replace("€", "").replace("£", "")
    cleaned = cleaned.rstrip("%")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return -value if negative else value


def read_text(path: Path) -> str:
    """Text of a document: DOCX paragraphs and tables, or the file decoded as UTF-8."""
    if path.suffix.lower() == ".docx":
        zip_guard(path)
        try:
            import docx  # python-docx

            document = docx.Document(str(path))
        except Exception as exc:  # a malformed deliverable is the agent's failure
            raise CheckFailure(f"{path.name} is not a readable DOCX: {exc}") from exc
        lines = [p.text for p in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                lines.append(" | ".join(cell.text for cell in row.cells))
        return "\n".join(lines)
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckFailure(f"{path.name} is not UTF-8 text") from exc


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_bytes(path).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckFailure(f"{path.name} is not valid JSON: {exc}") from exc
    except RecursionError:  # nested deeper than Python's recursion limit
        raise CheckFailure(f"{path.name} nests too deeply to read as JSON") from None


def json_pointer(document: Any, pointer: str) -> Any:
    """RFC 6901 lookup; a missing member is the agent's failure, not a spec error."""
    if pointer in ("", "/"):
        return document
    if not pointer.startswith("/"):
        raise SpecError(f"JSON pointer {pointer!r} must start with '/'")
    node = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            if not token.isdigit() or int(token) >= len(node):
                raise CheckFailure(f"no element {token!r} at {pointer}")
            node = node[int(token)]
        elif isinstance(node, dict):
            if token not in node:
                raise CheckFailure(f"no member {token!r} at {pointer}")
            node = node[token]
        else:
            raise CheckFailure(f"cannot descend into a scalar at {pointer}")
    return node


Table = list[dict[str, Any]]


def read_table(path: Path, sheet: str | None = None) -> Table:
    """Rows of a CSV or XLSX table as dicts keyed by the (stripped) header row."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            text = read_bytes(path).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CheckFailure(f"{path.name} is not UTF-8 CSV") from exc
        try:
            rows = list(csv.reader(io.StringIO(text)))
        except csv.Error as exc:  # a NUL byte, a field past the csv module's limit
            raise CheckFailure(f"{path.name} is not readable CSV: {exc}") from exc
    elif suffix in (".xlsx", ".xlsm"):
        rows = _xlsx_rows(path, sheet)
    else:
        raise SpecError(f"{path.name}: tables must be .csv or .xlsx")
    if not rows:
        raise CheckFailure(f"{path.name} is empty")
    header = [str(h).strip() if h is not None else "" for h in rows[0]]
    table: Table = []
    for row in rows[1:]:
        if all(cell in (None, "") for cell in row):
            continue
        table.append({header[i]: row[i] for i in range(min(len(header), len(row)))})
    return table


def _xlsx_rows(path: Path, sheet: str | None) -> list[list[Any]]:
    workbook = open_workbook(path)
    if sheet is not None and sheet not in workbook.sheetnames:
        raise CheckFailure(f"{path.name} has no sheet {sheet!r} (sheets: {workbook.sheetnames})")
    worksheet = workbook[sheet] if sheet is not None else _first_sheet(workbook, path)
    if not hasattr(worksheet, "iter_rows"):  # a chartsheet holds no cells
        raise CheckFailure(f"{path.name}: sheet {worksheet.title!r} is not a worksheet")
    return [list(r) for r in worksheet.iter_rows(values_only=True)]


def _first_sheet(workbook: Any, path: Path) -> Any:
    if not workbook.worksheets:
        raise CheckFailure(f"{path.name} has no worksheet")
    return workbook.worksheets[0]


def open_workbook(path: Path) -> Any:
    zip_guard(path)
    try:
        import openpyxl

        return openpyxl.load_workbook(str(path), data_only=True, read_only=False)
    except Exception as exc:
        raise CheckFailure(f"{path.name} is not a readable XLSX: {exc}") from exc


def find_row(table: Table, key_column: str, key: Any, where: str) -> dict[str, Any]:
    for row in table:
        if key_column in row and same(row[key_column], key):
            return row
    raise CheckFailure(f"{where}: no row with {key_column} = {key!r}")


def same(actual: Any, expected: Any, tolerance: float = 0.0, rel_tolerance: float = 0.0) -> bool:
    """Equality as a reviewer would judge it: numbers within tolerance, text normalized."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return str(actual).strip().lower() == str(expected).strip().lower()
    if isinstance(expected, int | float):
        number = parse_number(actual)
        if number is None:
            return False
        allowed = max(tolerance, rel_tolerance * abs(expected))
        return abs(number - expected) <= allowed + 1e-9
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(
                same(a, e, tolerance, rel_tolerance) for a, e in zip(actual, expected, strict=True)
            )
        )
    if expected is None:
        return actual is None or actual == ""
    return normalize_text(actual) == normalize_text(expected)


def normalize_text(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def extract(root: Path, ref: dict[str, Any]) -> Any:
    """The value a reference points at. Kinds: json, csv, xlsx, document."""
    kind = ref.get("kind") or _kind_from_suffix(ref.get("path", ""))
    path = require_file(root, ref["path"])
    if kind == "json":
        return json_pointer(read_json(path), ref.get("pointer", ""))
    if kind == "xlsx" and "cell" in ref:
        workbook = open_workbook(path)
        sheet = ref.get("sheet")
        if sheet is not None and sheet not in workbook.sheetnames:
            raise CheckFailure(f"{path.name} has no sheet {sheet!r}")
        worksheet = workbook[sheet] if sheet else _first_sheet(workbook, path)
        if not hasattr(worksheet, "iter_rows"):
            raise CheckFailure(f"{path.name}: sheet {worksheet.title!r} is not a worksheet")
        return worksheet[ref["cell"]].value
    if kind in ("csv", "xlsx"):
        table = read_table(path, ref.get("sheet"))
        row = find_row(table, ref["key_column"], ref["key"], ref["path"])
        column = ref["column"]
        if column not in row:
            raise CheckFailure(f"{ref['path']}: no column {column!r} (columns: {list(row)})")
        return row[column]
    if kind == "document":
        return document_field(read_text(path), ref["label"], ref["path"])
    raise SpecError(f"unknown value kind {kind!r}")


def document_field(text: str, label: str, where: str) -> str:
    """The value after 'Label:' (or '| Label | value |', '**Label**: value') in a document."""
    prefix, suffix = r"^[\s>*#|-]*\**\s*", r"\s*\**\s*[:|=–-]\s*\**\s*(?P<value>.+?)\s*\|?\s*$"
    pattern = re.compile(
        prefix + re.escape(label) + suffix,
        re.IGNORECASE | re.MULTILINE,
    )
    match = pattern.search(text)
    if match is None:
        raise CheckFailure(f"{where}: no field labelled {label!r}")
    return match.group("value").strip().strip("*").strip()


def _kind_from_suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {
        ".json": "json",
        ".csv": "csv",
        ".xlsx": "xlsx",
        ".xlsm": "xlsx",
        ".docx": "document",
        ".md": "document",
        ".txt": "document",
    }.get(suffix, "document")

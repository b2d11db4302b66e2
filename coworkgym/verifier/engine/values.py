"""Reading values out of workspace files: JSON, CSV, XLSX, DOCX, Markdown and text.

A *value reference* is a small dict naming a file and where in it a value sits; the
``*_value``, ``cross_file`` and ``aggregate`` checks are built from it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import CheckFailure, SpecError

NUMBER_RE = re.compile(r"[-+]?\(?\$?€?£?\d[\d,]*(?:\.\d+)?%?\)?|[-+]?\.\d+%?")


def resolve(root: Path, rel: str) -> Path:
    """A workspace-relative path that cannot escape the workspace."""
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        raise SpecError(f"path {rel!r} must be relative to the workspace, without '..'")
    return root / rel


def require_file(root: Path, rel: str) -> Path:
    path = resolve(root, rel)
    if path.is_symlink():
        raise CheckFailure(f"{rel} is a symlink; deliverables must be regular files")
    if not path.is_file():
        raise CheckFailure(f"{rel} does not exist")
    return path


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
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CheckFailure(f"{path.name} is not UTF-8 text") from exc


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckFailure(f"{path.name} is not valid JSON: {exc}") from exc


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
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CheckFailure(f"{path.name} is not UTF-8 CSV") from exc
        rows = list(csv.reader(io.StringIO(text)))
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
    worksheet = workbook[sheet] if sheet is not None else workbook.worksheets[0]
    return [list(r) for r in worksheet.iter_rows(values_only=True)]


def open_workbook(path: Path) -> Any:
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
        worksheet = workbook[sheet] if sheet else workbook.worksheets[0]
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

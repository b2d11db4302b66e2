"""Controlled failures: ways to damage a correct workspace that a sound verifier must reject.

Each mutation edits a workspace directory in place; all are deterministic.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..package.limits import loads_bounded, zip_problem

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _shift(match: re.Match[str]) -> str:
    value = float(match.group(0))
    shifted = value * 1.37 + 3
    return f"{shifted:.2f}" if "." in match.group(0) else str(round(shifted))


def perturb_text(text: str) -> str:
    """Every number wrong, everything else intact: a plausible but incorrect deliverable."""
    return NUMBER.sub(_shift, text)


def _perturb_json(node: Any) -> Any:
    if isinstance(node, bool):
        return not node
    if isinstance(node, int | float):
        return round(node * 1.37 + 3, 2)
    if isinstance(node, str):
        return perturb_text(node) if NUMBER.search(node) else node[: len(node) // 2] + "?"
    if isinstance(node, list):
        return [_perturb_json(x) for x in node[: max(1, len(node) - 1)]]
    if isinstance(node, dict):
        return {k: _perturb_json(v) for k, v in node.items()}
    return node


# One JSON value a line (a request log): each line's values are what a reader checks, and
# shifting the digits of its text alone can leave an encoded field (base64) that decodes to
# what it said.
JSON_LINES = (".ndjson", ".jsonl")


def wrong_values(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            path.write_text(json.dumps(_perturb_json(loads_bounded(path.read_bytes()))))
            return "numbers and strings perturbed"
        except ValueError:  # not JSON, or nested too deep (TooDeep) for this process
            pass
    if suffix in JSON_LINES:
        try:
            lines = [loads_bounded(line) for line in path.read_bytes().splitlines() if line.strip()]
            path.write_text("".join(json.dumps(_perturb_json(line)) + "\n" for line in lines))
            return "numbers and strings perturbed on every line"
        except ValueError:  # a line that is not JSON: perturb the text as it is
            pass
    if suffix in (".xlsx", ".docx") and zip_problem(path.name, path.read_bytes()):
        return garble(path)  # a zip bomb is never inflated here, only broken
    if suffix == ".xlsx":
        return _perturb_xlsx(path)
    if suffix == ".docx":
        return _perturb_docx(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    changed = perturb_text(text)
    if changed == text:  # no numbers: break the content instead
        lines = text.splitlines()
        changed = "\n".join(lines[: len(lines) // 2]) + "\nTODO\n"
    path.write_text(changed)
    return "values perturbed"


def _perturb_xlsx(path: Path) -> str:
    import openpyxl

    workbook = openpyxl.load_workbook(path)
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                    cell.value = round(cell.value * 1.37 + 3, 2)
                elif isinstance(cell.value, str) and cell.row > 1:
                    cell.value = perturb_text(cell.value) + " (draft)"
    buffer = io.BytesIO()
    workbook.save(buffer)
    path.write_bytes(buffer.getvalue())
    return "cell values perturbed"


def _perturb_docx(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    for paragraph in document.paragraphs:
        for run in paragraph.runs:
            run.text = perturb_text(run.text)
    for table in document.tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    for run in paragraph.runs:
                        run.text = perturb_text(run.text)
    document.save(str(path))
    return "document numbers perturbed"


def garble(path: Path) -> str:
    """A malformed file: the first half of its bytes."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return "truncated to half its bytes"


def remove(path: Path) -> str:
    path.unlink()
    return "removed"


def empty(path: Path) -> str:
    path.write_bytes(b"")
    return "emptied"


Corruption = Callable[[Path], str]
CORRUPTIONS: dict[str, Corruption] = {"wrong_values": wrong_values, "garbled": garble}


# ---- blank free text ------------------------------------------------------------------
# A field whose name says it holds prose (a reason, a note), or a value that reads as a
# sentence: what an agent that skips the explaining would leave empty.
PROSE_NAME = re.compile(
    r"reason|rationale|explanation|justification|comment|note|remark|why|summary|"
    r"description|message|body|detail",
    re.IGNORECASE,
)
PROSE_LINE_WORDS = 6  # a markdown/text/docx line of at least this many words is prose
WORD = re.compile(r"[^\W\d_]{2,}")


def is_free_text(value: str, name: str | None = None) -> bool:
    """Prose: a value under a prose-like name with a word in it, or four words or more."""
    words = WORD.findall(value)
    if name is not None and PROSE_NAME.search(name) and words:
        return True
    return len(value.split()) >= 5 and len(words) >= 4


def _blank_json(node: Any, name: str | None, count: list[int]) -> Any:
    if isinstance(node, str) and is_free_text(node, name):
        count[0] += 1
        return ""
    if isinstance(node, list):
        return [_blank_json(x, name, count) for x in node]
    if isinstance(node, dict):
        return {k: _blank_json(v, str(k), count) for k, v in node.items()}
    return node


def _prose_columns(rows: list[list[Any]]) -> list[int]:
    """Columns named like prose, or whose filled cells are mostly sentences."""
    header = [str(h or "") for h in rows[0]]
    found = []
    for index, name in enumerate(header):
        cells = [r[index] for r in rows[1:] if index < len(r) and isinstance(r[index], str)]
        filled = [c for c in cells if c.strip()]
        if not filled:
            continue
        prose = [c for c in filled if is_free_text(c, name)]
        if (PROSE_NAME.search(name) and prose) or len(prose) * 2 > len(filled):
            found.append(index)
    return found


def _blank_csv(path: Path) -> int:
    import csv

    text = path.read_text(encoding="utf-8-sig", errors="replace")
    rows: list[list[Any]] = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        return 0
    count = 0
    for index in _prose_columns(rows):
        for row in rows[1:]:
            if index < len(row) and row[index].strip():
                row[index] = ""
                count += 1
    if count:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        path.write_text(out.getvalue())
    return count


def _blank_xlsx(path: Path) -> int:
    import openpyxl

    workbook = openpyxl.load_workbook(path)
    count = 0
    for sheet in workbook.worksheets:
        rows = [list(r) for r in sheet.iter_rows(values_only=True)]
        if len(rows) < 2:
            continue
        for index in _prose_columns(rows):
            for row in sheet.iter_rows(min_row=2, min_col=index + 1, max_col=index + 1):
                cell = row[0]
                if isinstance(cell.value, str) and cell.value.strip():
                    cell.value = None
                    count += 1
    if count:
        buffer = io.BytesIO()
        workbook.save(buffer)
        path.write_bytes(buffer.getvalue())
    return count


def _is_prose_line(line: str) -> bool:
    stripped = line.strip()
    if not stripped or stripped.startswith(("#", "|", "```")):
        return False  # headings, table rows and code keep the document's shape
    label, colon, rest = stripped.partition(":")
    if colon and len(label.split()) <= 4 and len(rest.split()) < PROSE_LINE_WORDS:
        return False  # a "label: value" line
    return len(WORD.findall(stripped)) >= PROSE_LINE_WORDS


def _blank_docx(path: Path) -> int:
    import docx

    document = docx.Document(str(path))
    count = 0
    paragraphs = list(document.paragraphs)
    for table in document.tables:
        for row in table.rows:
            for cell in row.cells:
                paragraphs += cell.paragraphs
    for paragraph in paragraphs:
        if _is_prose_line(paragraph.text):
            for run in paragraph.runs:
                run.text = ""
            count += 1
    if count:
        document.save(str(path))
    return count


def blank_free_text(path: Path) -> int:
    """Empty every free-text field of a deliverable (JSON strings, CSV/XLSX prose columns,
    prose lines of a document), keeping its structure; returns how many were emptied."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".xlsx", ".docx") and zip_problem(path.name, path.read_bytes()):
            return 0  # never inflated here
        if suffix == ".json":
            found = [0]
            blanked = _blank_json(loads_bounded(path.read_bytes()), None, found)
            if found[0]:
                path.write_text(json.dumps(blanked, indent=2))
            return found[0]
        if suffix == ".csv":
            return _blank_csv(path)
        if suffix == ".xlsx":
            return _blank_xlsx(path)
        if suffix == ".docx":
            return _blank_docx(path)
    except (ValueError, OSError, KeyError, zipfile.BadZipFile):
        return 0  # a deliverable this cannot read is not free text to blank
    if suffix not in (".md", ".txt"):
        return 0
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    kept = ["\n" if _is_prose_line(line) else line for line in lines]
    count = sum(1 for old, new in zip(lines, kept, strict=True) if old != new)
    if count:
        path.write_text("".join(kept))
    return count

"""Controlled failures: ways to damage a correct workspace that a sound verifier must reject.

Each mutation edits a workspace directory in place; all are deterministic.
"""

from __future__ import annotations

import io
import json
import re
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


def wrong_values(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            path.write_text(json.dumps(_perturb_json(loads_bounded(path.read_bytes()))))
            return "numbers and strings perturbed"
        except ValueError:  # not JSON, or nested too deep (TooDeep) for this process
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

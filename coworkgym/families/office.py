"""Office files (XLSX, DOCX) as stable bytes: the same seed gives the same workbook or
document, byte for byte, whenever it is drafted (openpyxl and python-docx stamp the save
time into the zip entries and ``docProps/core.xml``)."""

from __future__ import annotations

import io
import re
import zipfile

FIXED_TIME = (2026, 1, 5, 9, 0, 0)
STAMP = "2026-01-05T09:00:00Z"
_MODIFIED = re.compile(rb"(<dcterms:(?:modified|created)[^>]*>)[^<]*(</dcterms:)")


def stable_office_bytes(data: bytes) -> bytes:
    """``data`` (a zip-based office file) re-packed with fixed entry times and fixed
    created/modified properties."""
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename == "docProps/core.xml":
                content = _MODIFIED.sub(rb"\g<1>" + STAMP.encode() + rb"\g<2>", content)
            entry = zipfile.ZipInfo(item.filename, date_time=FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(entry, content)
    return buffer.getvalue()


def docx_body(data: bytes) -> tuple[list[tuple[str, str]], list[list[list[str]]]]:
    """A DOCX's body as (style id, text) per top-level paragraph, and each table as rows of
    cell texts; the standard library only (check scripts carry this function's source)."""
    import xml.etree.ElementTree as ET
    import zipfile as zf

    w = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    root = ET.fromstring(zf.ZipFile(io.BytesIO(data)).read("word/document.xml"))
    body = root.find(f"{w}body")
    paragraphs: list[tuple[str, str]] = []
    tables: list[list[list[str]]] = []
    for child in body if body is not None else []:
        if child.tag == f"{w}p":
            style = child.find(f"{w}pPr/{w}pStyle")
            text = "".join(t.text or "" for t in child.iter(f"{w}t"))
            paragraphs.append(("" if style is None else style.get(f"{w}val", ""), text))
        elif child.tag == f"{w}tbl":
            rows = []
            for row in child.iter(f"{w}tr"):
                cells = []
                for cell in row.iter(f"{w}tc"):
                    cells.append("".join(t.text or "" for t in cell.iter(f"{w}t")))
                rows.append(cells)
            tables.append(rows)
    return paragraphs, tables

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

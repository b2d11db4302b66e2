"""Shell blocks that the docs mark for tests to run as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def docs_block(marker: str, doc: Path = DEPLOY_DOC) -> str:
    """The ```bash block right after `<!-- docs-path: <marker> -->` in `doc`."""
    pattern = rf"<!-- docs-path: {re.escape(marker)} -->\n```bash\n(.*?)\n```"
    found = re.search(pattern, doc.read_text(), re.DOTALL)
    assert found, f"{doc.name} has no ```bash block after <!-- docs-path: {marker} -->"
    return found.group(1)

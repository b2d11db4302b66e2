"""The local release store: a campaign that released nothing still leaves a manifest."""

from __future__ import annotations

from pathlib import Path

from coworkgym.release import LocalPublisher


def test_manifest_of_an_empty_campaign_is_an_empty_file(tmp_path: Path) -> None:
    store = LocalPublisher(tmp_path / "new-folder")
    path = Path(store.write_manifest())
    assert path == tmp_path / "new-folder" / "manifest.jsonl"
    assert path.read_text() == ""

"""The inbox-triage family: threads by headers, the latest message by its send time, and
reply drafts on exactly the threads that wait for one. The hard tier (its own module): a
messy inbox, response targets in business hours, a handover queue built on the triage,
contradictions settled by asking, and later exports that change what only re-reading shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.inbox_triage import CONTACTS, DRAFTS, INBOX, TRIAGE, InboxTriage
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = InboxTriage()


def test_registered() -> None:
    assert isinstance(FAMILIES["inbox_triage"], InboxTriage)


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (6, "hard", 2),
     (8, "medium", 3)],
)
def test_reference_passes_and_wrong_triage_fails(
    seed: int, difficulty: str, turns: int, tmp_path: Path
) -> None:
    params = FamilyParams(seed=seed, difficulty=difficulty, turns=turns)  # type: ignore[arg-type]
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    drafts = (workspace / DRAFTS).read_bytes()
    # a draft for every thread, waiting or not: the extra drafts cost
    document = json.loads((workspace / TRIAGE).read_text())
    for entry in document["threads"].values():
        entry["reply_needed"] = True
    (workspace / TRIAGE).write_text(json.dumps(document))
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    # the drafts without their References headers
    (workspace / DRAFTS).write_bytes(b"\n".join(
        line for line in drafts.split(b"\n") if not line.startswith(b"References:")
    ))
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") < 0.99
    untouched = tmp_path / "untouched"
    for rel, content in built.workspace.items():
        (untouched / rel).parent.mkdir(parents=True, exist_ok=True)
        (untouched / rel).write_bytes(content)
    assert reward(FAMILY, built, params, untouched, tmp_path / "u") < 0.5
    if turns > 1:
        stale = run_reference(built, tmp_path / "stale", upto=0)
        assert reward(FAMILY, built, params, stale, tmp_path / "stale") < 0.99


def test_medium_inboxes_keep_their_send_order_and_offices() -> None:
    files = FAMILY.draft(FamilyParams(seed=1, difficulty="medium")).workspace
    assert b"updated" not in files[CONTACTS] and b"Auto-Submitted" not in files[INBOX]
    assert set(files) == {INBOX, CONTACTS, "triage_policy.md"}

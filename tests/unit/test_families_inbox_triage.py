"""The inbox-triage family: threads by headers, the latest message by its send time, and
reply drafts on exactly the threads that wait for one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkgym.families import FAMILIES, FamilyParams
from coworkgym.families.inbox_triage import CONTACTS, DRAFTS, INBOX, TRIAGE, InboxTriage, triage
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = InboxTriage()


def test_registered() -> None:
    assert isinstance(FAMILIES["inbox_triage"], InboxTriage)


def test_hard_inboxes_are_shuffled_so_file_order_misleads() -> None:
    misled = 0
    for seed in range(6):
        files = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard")).workspace
        by_time = triage(files[INBOX], files[CONTACTS])
        by_file = triage(files[INBOX], files[CONTACTS], by_time=False)
        misled += any(by_time[r].last != by_file[r].last for r in by_time)
        assert {t.category for t in by_time.values()} >= {"newsletter", "billing"}
    assert misled >= 3


@pytest.mark.parametrize(
    ("seed", "difficulty", "turns"),
    [(0, "easy", 1), (1, "medium", 2), (2, "hard", 3), (5, "hard", 1), (8, "medium", 3)],
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


def test_hard_contacts_contradict_themselves_and_asking_settles_it() -> None:
    """Hard: contacts.csv lists a gold customer with a waiting thread a second time, in an
    older row last in the file with the other tier; the row updated last is current (the
    user's answer, when asked); reading the last row changes a priority; no answer or turn
    message gives the trap away."""
    from coworkgym.families.base import parse_csv
    from coworkgym.rollout.user import matches

    for seed in range(4):
        draft = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard", turns=3))
        rows = parse_csv(draft.workspace[CONTACTS])
        domains = [r["domain"] for r in rows]
        [twice] = [d for d in set(domains) if domains.count(d) == 2]
        assert rows[-1]["domain"] == twice and rows[-1]["updated"] < "2026"
        lines = draft.workspace[CONTACTS].splitlines(keepends=True)
        without_old = b"".join(lines[:-1])
        current = next(n for n, line in enumerate(lines) if line.startswith(twice.encode()))
        misread = b"".join(lines[:current] + lines[current + 1 :])  # the last row kept
        right = triage(draft.workspace[INBOX], draft.workspace[CONTACTS])
        assert right == triage(draft.workspace[INBOX], without_old)
        assert right != triage(draft.workspace[INBOX], misread)
        assert any(t.tier == "gold" and t.reply_needed and t.reply_to.endswith(twice)
                   for t in right.values())  # fmt: skip
        assert "ask\nme which to trust" in draft.instruction
        asked = f"{twice} is in contacts.csv twice, in two rows with different tiers: which?"
        [answer] = [s.reveals for s in draft.user.signal_plan if matches(asked, s.trigger)]
        assert "latest `updated`" in answer
        spoken = [s.reveals for s in draft.user.signal_plan]
        spoken += [t.patch.message for t in draft.turns]
        assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]
    easy = FAMILY.draft(FamilyParams(seed=0, difficulty="easy", turns=3))
    assert b"updated" not in easy.workspace[CONTACTS] and len(easy.user.signal_plan) == 1

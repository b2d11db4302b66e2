"""The hard tier of inbox_triage: each difficulty it is built on is present in every draft,
decides a checked value (the misreading gives another), and is fair — stated in the
instruction or the policy, or answered by the user when asked, never given away."""

from __future__ import annotations

import csv
import email.message
import io
import itertools
import json
import re
import time
from datetime import timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from coworkgym.families import inbox_triage_hard as hard
from coworkgym.families import inbox_triage_texts as texts
from coworkgym.families.base import FamilyParams, parse_csv
from coworkgym.families.inbox_triage import DRAFTS, TRIAGE, InboxTriage
from coworkgym.llm.tools import MAX_TOOL_OUTPUT
from coworkgym.rollout.user import ScriptedVoice, VoiceContext, matches
from tests.unit.test_families_meeting_notes import built_of, reward, run_reference

FAMILY = InboxTriage()
SEEDS = range(4)


def _draft(seed: int, turns: int = 3) -> hard.HardDraft:
    return hard.draft_hard(FamilyParams(seed=seed, difficulty="hard", turns=turns))


def _triage(files: dict[str, bytes], export_at: str, seed: int) -> dict[str, hard.Thread]:
    when = hard.clock(FamilyParams(seed=seed, difficulty="hard"))
    export = when.first if export_at == "first" else when.later
    truth = _draft(seed).truth
    return hard.hard_triage(files[hard.INBOX], files[hard.CONTACTS], export, when.closed, truth)


def _final_files(seed: int) -> dict[str, bytes]:
    drafted = _draft(seed)
    return {**drafted.workspace, **drafted.turns[1].files}


def _answer(drafted: hard.HardDraft, question: str) -> str:
    [answer] = [s.reveals for s in drafted.user.signal_plan if matches(question, s.trigger)]
    return answer


@pytest.mark.parametrize("seed", SEEDS)
def test_drafts_are_deterministic_fast_and_too_large_to_eyeball(seed: int) -> None:
    started = time.perf_counter()
    a = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard", turns=3))
    assert time.perf_counter() - started < 2.0
    b = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard", turns=3))
    assert a.workspace == b.workspace and a.instruction == b.instruction
    assert [t.files for t in a.turns] == [t.files for t in b.turns]
    threads = _triage(a.workspace, "first", seed)
    messages = hard._parse_mbox(a.workspace[hard.INBOX])
    assert 45 <= len(threads) <= 60 and len(messages) >= 120
    assert set(a.workspace) == {hard.INBOX, hard.CONTACTS, hard.POLICY, hard.ROTA}
    # what a reader must see, decoded, is far more than one tool result shows
    assert sum(len(hard.plain_text(m)) for m in messages) > 10 * MAX_TOOL_OUTPUT


@pytest.mark.parametrize("seed", SEEDS)
def test_the_mail_must_be_decoded_and_threaded_by_the_policy(seed: int) -> None:
    """Bodies in base64 and quoted-printable; a quoted "should be resolved" keeps a thread
    waiting; an out-of-office reply is no latest message; a message exported twice counts
    once; a chased thread goes up a priority; the reply goes to Reply-To."""
    files = _draft(seed).workspace
    raw = files[hard.INBOX]
    messages = hard._parse_mbox(raw)
    threads = _triage(files, "first", seed)
    encodings = {str(part.get("Content-Transfer-Encoding", "7bit")).lower()
                 for m in messages for part in m.walk()
                 if part.get_content_type() == "text/plain"}
    assert {"base64", "quoted-printable"} <= encodings
    assert any(t.reply_needed and "> " + texts.STAFF_FIX in hard.plain_text(m)
               for t in threads.values() for m in messages
               if str(m["Message-ID"]).strip() == t.last)  # fmt: skip
    automatic = [m for m in messages if m.get("Auto-Submitted")]
    assert automatic
    for m in automatic:
        root = str(m["References"]).split()[0]
        assert str(m["Message-ID"]).strip() not in threads[root].references
        assert not threads[root].reply_needed  # the auto-reply came after our answer
    ids = [str(m["Message-ID"]).strip() for m in messages]
    assert len(ids) - len(set(ids)) == 2
    chased = [t for t in threads.values() if t.reply_needed and t.priority != hard._priority(
        t.category, t.tier, chased=False)]
    assert chased
    assert any(t.reply_needed and t.reply_to.startswith("helpdesk@") for t in threads.values())
    assert {t.category for t in threads.values()} == {"newsletter", *texts.CATEGORIES}


def _first_text(messages: list[email.message.Message], root: str) -> str:
    [first] = {hard.plain_text(m) for m in messages if str(m["Message-ID"]).strip() == root}
    return first


def _keyword_reading(
    files: dict[str, bytes], *, careful: bool
) -> dict[str, tuple[str, str | None, bool]]:
    """What a grep-and-script triage reads: the category by the keywords of each class in
    precedence, the order by the first number (``careful``: the thread's last number, quotes,
    forwarded mail and signatures cut away), and a thread closed when its latest message
    says so in a closing word. A capable agent without reading writes something like it."""
    classes = (
        ("security", r"phishing|breach|compromis\w*|hack\w*|stolen|attacker|intruder"),
        ("incident", r"error|down|outage|not working|failed|fails|stopped|gone"),
        ("refund", r"refund\w*|money back|reimburse|paid back|pay \w+ back|credit"),
        ("billing", r"invoice|payment|billing|charge\w*"),
    )

    def own(text: str) -> str:
        if not careful:
            return text
        text = text.split("---------- Forwarded message")[0].split("Kind regards,")[0]
        return "\n".join(line for line in text.splitlines() if not line.startswith(">"))

    out: dict[str, tuple[str, str | None, bool]] = {}
    for root, items in hard.thread_messages(files[hard.INBOX]).items():
        first, last = items[0], items[-1]
        if first.get("List-Unsubscribe"):
            out[root] = ("newsletter", None, False)
            continue
        text = own(hard.plain_text(first)).lower()
        category = next((name for name, words in classes
                         if re.search(rf"\b({words})\b", text)), "request")
        numbers = [n for m in items for n in re.findall(r"NW-\d{5}", own(hard.plain_text(m)))
                   if str(m["From"]).find(hard.US) < 0]
        order = (numbers[-1] if careful else numbers[0]) if numbers else None
        closing = re.search(r"\b(resolved|close[ds]?|sorted|works|no need|ignore|done)\b",
                            own(hard.plain_text(last)).lower())
        waits = hard.US not in str(last["From"]) and not closing
        out[root] = (category, order, waits)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_a_keyword_script_gets_the_triage_wrong_where_a_reader_gets_it_right(
    seed: int,
) -> None:
    """Category, order and whether a thread waits are what the customers mean: a script of
    keywords and regular expressions, naive or careful, misreads many threads (the package
    needs every one right), while the same fields read from the meaning are all right."""
    final = _final_files(seed)
    right = _triage(final, "later", seed)
    for careful, most in ((False, 0.6), (True, 0.8)):
        guessed = _keyword_reading(final, careful=careful)
        good = [r for r, t in right.items()
                if guessed[r] == (t.category, t.order, t.reply_needed)]  # fmt: skip
        assert len(good) / len(right) < most, (careful, len(good), len(right))
        for field in range(3):  # each field on its own has threads it misreads
            truth = {r: (t.category, t.order, t.reply_needed)[field] for r, t in right.items()}
            assert any(guessed[r][field] != truth[r] for r in right), (careful, field)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_item_states_its_meaning_plainly(seed: int) -> None:
    """Fairness: each first message holds one paraphrase of its category's concern with the
    number it gives, and none of another category's; a correction states the new number;
    a customer who closes the matter says so in one of the closing sentences."""
    drafted = _draft(seed)
    messages = hard._parse_mbox(_final_files(seed)[hard.INBOX])
    text_of = {str(m["Message-ID"]).strip(): hard.plain_text(m) for m in messages}
    for mid, meaning in drafted.truth.items():
        own = texts.own_text(text_of[mid]).split("---------- Forwarded message")[0]
        if meaning.category:
            said = {c for c, bank in texts.CONCERNS.items() for line in bank
                    if line.format(order=meaning.order) in own}
            assert said == {meaning.category}, mid
        elif meaning.order:
            assert any(line.split("{old}")[0].format(new=meaning.order) in own
                       for line in texts.CORRECTIONS), mid
        if meaning.closes:
            assert any(line in own for line in texts.CLOSINGS), mid
    closing_said = [mid for mid, text in text_of.items()
                    if any(line in texts.own_text(text) for line in texts.CLOSINGS)]
    assert all(drafted.truth[mid].closes for mid in closing_said)


def test_seeds_differ_in_items_phrasings_and_traps() -> None:
    def fingerprint(seed: int) -> tuple[frozenset[str], frozenset[str]]:
        messages = hard._parse_mbox(_final_files(seed)[hard.INBOX])
        owns = [texts.own_text(hard.plain_text(m)) for m in messages]
        phrasings = {line for bank in texts.CONCERNS.values() for line in bank
                     if any(line.split("{order}")[0] in own for own in owns)}
        traps = {f"{line}" for bank in (*texts.DENIALS.values(), *texts.PAST.values())
                 for line in bank if any(line in own for own in owns)}
        return frozenset(phrasings), frozenset(traps)

    prints = [fingerprint(seed) for seed in SEEDS]
    assert len({p[0] for p in prints}) == len(prints)
    assert len({p[1] for p in prints}) == len(prints)
    orders = [{t.order for t in _triage(_final_files(s), "later", s).values()} for s in SEEDS]
    assert all(not (a & b) - {None} for a, b in itertools.combinations(orders, 2))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_business_hours_conflict_moves_due_times_and_asking_settles_it(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    drafted = _draft(seed)
    text = drafted.workspace[hard.POLICY].decode()
    assert "08:00 to 18:00" in text and hard.OUTDATED_HOURS in text
    # a contradiction on the page, not two clocks a reader may take as meant: the targets
    # section calls business hours the service hours, then gives other times (three blind
    # players read the two as different clocks while the policy did not say so)
    targets = text[text.index("## Response targets") :]
    assert "business hours are our service hours" in " ".join(targets.split())
    assert "ask me which to trust" in drafted.instruction
    right = _triage(_final_files(seed), "later", seed)
    monkeypatch.setattr(hard, "OPENING", 9)
    monkeypatch.setattr(hard, "CLOSING", 17)
    misread = _triage(_final_files(seed), "later", seed)
    assert [t.due for t in right.values()] != [t.due for t in misread.values()]
    answer = _answer(drafted, "The policy says 08:00 to 18:00 under service hours but "
                              "09:00 to 17:00 for the response targets: which hours count?")
    assert "08:00 to 18:00" in answer


@pytest.mark.parametrize("seed", SEEDS)
def test_each_contacts_export_lists_a_customer_twice_and_no_row_position_reads_both(
    seed: int,
) -> None:
    """Turn 1: a gold customer's older row is last; the afternoon's export adds an upgrade as
    a newer row after everything. Keeping the first row misreads the upgrade, keeping the
    last row misreads the first conflict; the row updated last (the user's answer) is right."""
    drafted = _draft(seed)
    final = _final_files(seed)
    rows = parse_csv(final[hard.CONTACTS])
    domains = [r["domain"] for r in rows]
    twice = sorted(d for d in set(domains) if domains.count(d) == 2)
    assert len(twice) == 2
    right = _triage(final, "later", seed)
    for keep in ("first", "last"):
        kept: dict[str, dict[str, str]] = {}
        for row in rows:
            if keep == "last" or row["domain"] not in kept:
                kept[row["domain"]] = row
        table = io.StringIO()
        writer = csv.DictWriter(table, hard.CONTACT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept.values())
        misread = _triage({**final, hard.CONTACTS: table.getvalue().encode()}, "later", seed)
        assert misread != right, keep
    assert any(t.reply_needed and t.tier == "gold" and t.domain in twice for t in right.values())
    answer = _answer(drafted, f"{twice[0]} is in contacts.csv twice, in two rows with "
                              "different tiers: which one?")
    assert "latest `updated`" in answer


@pytest.mark.parametrize("seed", SEEDS)
def test_the_later_exports_change_threads_that_got_no_new_mail(seed: int) -> None:
    """Only re-reading shows it: threads without a new message become breached (the later
    export time), the upgraded customer's priorities move; one thread is answered by a
    colleague and one closed by its customer, so their drafts must go; one customer corrects
    the order number; one more thread waits."""
    drafted = _draft(seed)
    first = _triage(drafted.workspace, "first", seed)
    final = _triage(_final_files(seed), "later", seed)
    untouched = [r for r in first if first[r].references == final[r].references]
    assert any(first[r].breached != final[r].breached for r in untouched)
    assert any(first[r].priority != final[r].priority for r in untouched)
    assert sum(first[r].order != final[r].order for r in first) == 1  # a number corrected
    stopped = [r for r in first if first[r].reply_needed and not final[r].reply_needed]
    assert len(stopped) >= 2 and len(final) == len(first) + 1
    message = drafted.turns[1].patch.message
    assert "resolved" not in message.lower() and "gold" not in message.lower()


@pytest.mark.parametrize("seed", SEEDS)
def test_the_queue_is_built_on_the_triage_with_the_rota(seed: int) -> None:
    drafted = _draft(seed)
    when = hard.clock(FamilyParams(seed=seed, difficulty="hard"))
    threads = _triage(drafted.workspace, "first", seed)
    rows = hard.queue_rows(threads, drafted.workspace[hard.ROTA], when.first)
    waiting = sorted(r for r, t in threads.items() if t.reply_needed)
    assert sorted(r[0] for r in rows) == waiting
    assert [r[3] for r in rows] == sorted(r[3] for r in rows)
    lead = {r["date"]: r["lead"] for r in parse_csv(drafted.workspace[hard.ROTA])}[
        when.first.date().isoformat()]
    on_shift = [r for r in rows if not threads[r[0]].breached]
    assert on_shift and any(r[4] != lead for r in on_shift)
    assert all(r[4] == lead for r in rows if threads[r[0]].breached)
    assert when.closed.isoformat() not in drafted.workspace[hard.ROTA].decode()


def test_the_user_gives_no_trap_away() -> None:
    for seed in SEEDS:
        draft = FAMILY.draft(FamilyParams(seed=seed, difficulty="hard", turns=3))
        spoken = [s.reveals for s in draft.user.signal_plan]
        spoken += [t.patch.message for t in draft.turns]
        assert not [t.name for t in FAMILY.traps for text in spoken if t.given_away(text)]
        assert len(draft.user.signal_plan) == 3


@pytest.mark.parametrize("seed", [1, 3])
def test_the_reference_passes_and_each_slip_fails(seed: int, tmp_path: Path) -> None:
    params = FamilyParams(seed=seed, difficulty="hard", turns=3)
    built = built_of(FAMILY, params)
    workspace = run_reference(built, tmp_path / "ref")
    assert reward(FAMILY, built, params, workspace, tmp_path / "ref") == 1.0
    good = {p: (workspace / p).read_bytes() for p in (TRIAGE, DRAFTS, hard.QUEUE)}

    def slip(path: str, content: bytes) -> float:
        (workspace / path).write_bytes(content)
        score = reward(FAMILY, built, params, workspace, tmp_path / "ref")
        (workspace / path).write_bytes(good[path])
        return score

    built_truth = hard.draft_hard(params).truth
    triage = json.loads(good[TRIAGE])
    waiting = sorted(r for r, e in triage["threads"].items() if e["reply_needed"])
    one_due = json.loads(good[TRIAGE])
    one_due["threads"][waiting[0]]["due"] = "2026-03-20T09:00:00Z"
    assert slip(TRIAGE, json.dumps(one_due).encode()) <= 0.5
    corrected = [r for r, m in built_truth.items() if m.order and not m.category]
    first_number = json.loads(good[TRIAGE])
    [root] = [r for r, e in first_number["threads"].items() if e["order"] ==
              built_truth[corrected[0]].order]
    first_number["threads"][root]["order"] = built_truth[root].order  # the number corrected
    assert slip(TRIAGE, json.dumps(first_number).encode()) <= 0.5
    queue = good[hard.QUEUE].decode().splitlines()
    swapped = [queue[0], *queue[1:][::-1]]
    assert slip(hard.QUEUE, "\n".join(swapped).encode() + b"\n") <= 0.5
    no_cc = b"\n".join(line for line in good[DRAFTS].split(b"\n") if not line.startswith(b"Cc:"))
    assert slip(DRAFTS, no_cc) <= 0.5
    stale = run_reference(built, tmp_path / "stale", upto=1)  # the afternoon's export ignored
    assert reward(FAMILY, built, params, stale, tmp_path / "stale") <= 0.5


@pytest.mark.parametrize("seed", SEEDS)
def test_file_order_misleads_and_the_instruction_rules_it_out(seed: int) -> None:
    """The readings the Issue Detector recomputes: taking each thread in file order changes
    whether some thread waits; the instruction's sentence settles it by the Date header."""
    drafted = _draft(seed)
    readings = FAMILY.readings(_final_files(seed), [t.patch for t in drafted.turns])
    assert len(readings) == len(_triage(_final_files(seed), "later", seed))
    assert any(r.values["by time"] != r.values["by file order"] for r in readings)
    sentence = " ".join(drafted.instruction.split())
    assert re.search(readings[0].phrases["by time"], sentence, re.IGNORECASE)


def _reply(drafted: hard.HardDraft, question: str) -> tuple[list[str], str]:
    """What the scripted user reveals to ``question`` and says, chosen as the simulator
    chooses: every signal whose subject the question names."""
    allowed = [s for s in drafted.user.signal_plan if matches(question, s.trigger)]
    ctx = VoiceContext(drafted.user, drafted.instruction, drafted.instruction)
    return [s.reveals for s in allowed], ScriptedVoice().answer(question, allowed, ctx)


@pytest.mark.parametrize("seed", range(6))
def test_a_question_about_the_contacts_rows_gets_that_answer_alone(seed: int) -> None:
    """A blind player quoted both rows (one updated 2026-01-09) and asked which counts; the
    user also said which business hours count (the "09" of the date and "count" were two of
    the hours subject's words)."""
    drafted = _draft(seed)
    rows = drafted.workspace[hard.CONTACTS].decode().splitlines()
    domain = rows[-1].split(",")[0]
    both = [r for r in rows if r.startswith(f"{domain},")]
    question = (f"contacts.csv lists {domain} twice: `{both[0]}` and `{both[1]}`. Which row "
                "counts?")
    revealed, said = _reply(drafted, question)
    assert len(revealed) == 1 and "latest `updated`" in revealed[0]
    assert "08:00" not in said and "UTC+01:00" not in said


@pytest.mark.parametrize("seed", SEEDS)
def test_a_question_the_user_cannot_answer_gets_an_honest_i_dont_know(seed: int) -> None:
    drafted = _draft(seed)
    export = hard.clock(FamilyParams(seed=seed, difficulty="hard")).later
    late = export + timedelta(minutes=2)
    question = (f"One message is dated {late:%Y-%m-%d %H:%M}, two minutes after the "
                f"{export:%H:%M} export was taken. Does it count?")
    revealed, said = _reply(drafted, question)
    assert revealed == [] and "don't know" in said


@pytest.mark.parametrize("seed", range(12))
def test_no_export_holds_a_message_sent_after_it_was_taken(seed: int) -> None:
    """The blind player found a 15:02 customer message in the 15:00 export."""
    drafted = _draft(seed)
    when = hard.clock(FamilyParams(seed=seed, difficulty="hard"))
    for inbox, taken in ((drafted.workspace[hard.INBOX], when.first),
                         (drafted.turns[1].files[hard.INBOX], when.later)):
        sent = [parsedate_to_datetime(str(m["Date"])) for m in hard._parse_mbox(inbox)]
        assert max(sent) < taken

"""The ``hard`` tier of ledger_reconciliation: a year-end close of the fund's cash account
under a written policy, in three turns that build on each other, where which trade a
transfer settles is decided by what the brokers' settlement desks *say*, and a different set
of problems in every seed.

The workspace: ``bank.csv`` (the custodian's statement: an opening line, the bank's ``ref``
per transfer, debit/credit columns with thousands separators, a running balance, lines that
run ten days past the period end), ``notes.md`` (about a hundred messages from the desks
and the bank, ``ledger_reconciliation_notes``), ``books.csv`` (our ledger export, which runs
as far), ``policy.md`` (the period, the opening balance, how ids match and what the notes
decide, how differences are classified, the limit past which an unsettled entry goes to the
accountant, which account each adjusting entry goes to, the reconciliation statement),
``accounts.xlsx`` (the chart of accounts, a closed account among the active ones) and
``import_spec.md`` (the ledger system's journal import format). Four or five symbols traded
five to seven times a month (more often with four): 250 to 450 statement lines.

What only reading settles (``ledger_reconciliation_notes``): 70 to 90 transfers show a blank
id or another trade's id and the broker's name instead of the deal; the desk's message says
which trade(s) each settles, in phrasings drawn per message (``ledger_reconciliation_texts``),
framed by distractors a keyword script trips on — another trade named first only to be
denied, a slip corrected after it, a past trade in a PS, an old question quoted above the
answer, a forwarded message below it, an earlier note withdrawn by a later one. Amounts do
not settle it: two trades in five repeat an earlier deal of their month a day or two later
(the same amount in the same settlement days), both transfers of 16 to 22 such pairs have
no id, a few transfers pay two trades, the bank mistypes some amounts; matching amounts and
dates settles about half the transfers (the tests show). The bank's refunds
show only "Refund" and the like; its message says which charge each returns (the entry's
account), sometimes denying another. Every meaning is stated plainly in its message and
drawn before the text is written; the verifier and the reference solution take it from the
seed (``final_truth``), never from the text.

What else varies by seed (``draw_plan``): how many trades and symbols; how many of the
books' amounts are mistyped (digits transposed) or keyed with the side reversed; two or
three statement lines at an amount the deal does not give (the bank's error); one to four
trades booked in the last days (outstanding) and some after the end; which bank charges
occur and how often; and two or three of four problems that ``policy.md`` leaves open and
only the user settles, each visible in the data to a careful reader and each a separate
question:

- the statement posts a trade a second time (the later line is the bank's error);
- a settlement "less commission" (by the policy's letter a bank error; the user: the
  broker's charge is ours, a ``book_error`` booked to Broker commissions);
- a bank line the policy's table does not list (the user names its account);
- a trade in the books still unsettled past the policy's limit (the policy says to raise it;
  the user: it fell through, the books reverse it as a ``book_error``).

Why hard is hard — what a careful agent must do (the tool calls estimated by reading a
hard:3 package as the agent receives it; the readable corpus is over ten times a tool
result's limit, so seeing it takes many calls and the agent must track what it has read):

- **Turn 1** (the Unmatched and Settlements sheets, counts, both period-end balances): read
  the policy, the statement's and the books' heads, then ``notes.md`` in eight or more
  slices, judging each transfer's message (which trade, or two; a wrong id on the
  statement; a later correction) and writing the mapping down; a script keyed on the first
  or the last trade id a message names gets a quarter or more of the rows wrong (the tests
  show), so the judgement is the agent's. Then the close as before: the period end, the
  deals (now from the books' descriptions where the statement shows the broker), the open
  problems asked one by one. About 17–22 calls.
- **Turn 2** (builds on turn 1): the Adjustments sheet (a refund to the account of the
  charge its message names, a commission to Broker commissions, an unlisted line to the
  account the user named), the adjusted balances (which agree only if turn 1 was right) and
  ``journal.csv`` in ``import_spec.md``'s format. About 7–9 calls: re-read the refunds'
  messages, read the spec, edit, run, check the journal and the statement, finish.
- **Turn 3** (invalidates all three deliverables in ways only re-reading shows): the journal
  posted (all but the entries the user names as waiting; one bank fee keyed with the wrong
  sign, which the message does not say), a revised statement (one of the bank's mistyped
  lines corrected, an interest credit added, another unlisted line where the seed has one),
  an amended ``policy.md`` (interest to another account) and new messages in ``notes.md``:
  the desk had two transfers of the same amount the wrong way round (nothing else changes,
  so only reading the new messages finds it). About 7–10 calls: compare the four files with
  the old ones, read the new messages and the amendment, rerun, find the slip, check,
  regenerate the journal, finish.

Together about 31–41 tool calls for a careful agent; each Settlements row, each unasked
question and each misread refund costs the final grade (one wrong item fails the package).

Each difficulty is stated in the instruction, ``policy.md``, ``notes.md`` or
``import_spec.md``, or answered by the user when asked; each trap is declared on the family
(``TaskFamily.traps``) and checked by the verifier with exact values.

Each part of the tier has a module of its own: the seed's year and the bank's revision
(``ledger_reconciliation_draw``), the files written from it (``ledger_reconciliation_inputs``:
the statement, the books, the chart, the policy and its amendment, the import spec, the
books after posting), the desks' notes (``ledger_reconciliation_notes``), the close as the
policy defines it (``ledger_reconciliation_close``), what the user says
(``ledger_reconciliation_user``) and the verifier's cell checks
(``ledger_reconciliation_checks``). This module declares the traps, works out the truth
behind the final files (``final_truth``) and assembles the draft and the verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..verifier.spec import Component, VerifierSpec, XlsxValue
from .base import NEVER, FamilyDraft, FamilyParams, Trap
from .common import (
    Format,
    after_reply,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    requirement_turn,
    rubric,
    table_shape,
    verifier_output,
)
from .ledger_reconciliation_checks import (
    adjustment_components,
    journal_components,
    slug,
    unmatched_components,
)
from .ledger_reconciliation_close import (
    ACCOUNTS,
    ADJUSTMENTS,
    BANK,
    BANK_ERROR,
    BOOK_ERROR,
    BOOKS,
    IMPORT_SPEC,
    JOURNAL,
    JSON,
    POLICY,
    SOLVE,
    UNMATCHED,
    XLSX,
    Reconciliation,
    Terms,
    reconcile_close,
    terms,
)
from .ledger_reconciliation_draw import (
    OPEN_PROBLEMS,
    RUNS_ON,
    Close,
    Plan,
    draw_close,
    draw_plan,
    mistype,
    monthly_prices,
    revised_statement,
)
from .ledger_reconciliation_inputs import (
    accounts_xlsx,
    amended_policy,
    books_csv,
    import_spec_md,
    policy_md,
    posted_books,
    readme_md,
    statement_csv,
)
from .ledger_reconciliation_notes import (
    NOTES,
    SETTLEMENTS,
    Desk,
    Line,
    messages,
    notes_md,
    settlements,
)
from .ledger_reconciliation_user import ADJUSTMENTS_REQUEST, instruction, user

TRAPS = (
    Trap(
        "period_cutoff",
        "the statement and the books run past the period end (hard): later lines belong "
        "to the next period, and trades booked in the last days are outstanding",
        # not "cut-off": the lower tiers' stale-entries turn is about a cut-off date
        (r"\b(after|past|beyond) the period end", r"\bnot (in|part of) (the|this) period\b"),
    ),
    Trap(
        "bank_side_error",
        "a statement line settles a trade at an amount its deal does not give (hard): "
        "the bank, not the books, is wrong",
        (r"\bbank (is|was) wrong\b", r"\bbank'?s? (mistake|typo|keying)", r"\bdeal ticket"),
    ),
    Trap(
        "reversed_side",
        "the books key a trade with its side reversed (hard): a BUY as money in",
        (r"\b(side|sign) (is |was )?reversed\b", r"\bopposite (side|sign)\b", r"\bbackwards\b"),
    ),
    Trap(
        "commission_netted",
        "a settlement is less the broker's commission (hard): not the bank's error",
        (r"\bless commission\b", r"\bnet of\b", r"\bnetted\b"),
    ),
    Trap(
        "unlisted_bank_line",
        "a bank line the policy's account table does not list (hard)",
        (
            r"\bunlisted\b",
            r"\bnot (in|on) (the |policy\.md'?s? )?(policy|table)",
            r"\bnot listed\b",
        ),
    ),
    Trap(
        "fell_through",
        "a trade in the books unsettled past the policy's limit (hard)",
        (r"\bunsettled for\b", r"\b60 days\b", r"\bnever (settled|cleared)\b"),
    ),
    Trap(
        "wrong_reference",
        "a transfer's statement id names another trade; the desk's message gives the right "
        "one (hard)",
        (r"\bwrong (id|reference|trade number)\b", r"\b(id|reference) (is|was) wrong\b"),
    ),
    Trap(
        "note_withdrawn",
        "a later message of the desk withdraws an earlier one; in the last turn the desk "
        "corrects two transfers it had the wrong way round (hard)",
        (
            r"\b(later|latest) (note|message)",
            r"\bwithdr[ae]w",
            r"\bswapp?ed\b",
            r"\bwrong way round\b",
        ),
    ),
    Trap(
        "posting_slip",
        "the books of the last turn post one bank charge with the wrong sign (hard)",
        (r"\bwrong sign\b", r"\bsign (is|was) wrong\b", r"\bflipped\b", r"\bas a credit\b"),
    ),
    Trap(
        "statement_revised",
        "the revised statement of the last turn corrects the bank's mistyped lines and adds "
        "an interest credit (hard)",
        (r"\bcorrected (its|the|their) (error|amount|mistake)", r"\bleft out\b", r"\bomitted\b"),
    ),
    Trap(
        "policy_amended",
        "the amended policy of the last turn books interest to another account (hard)",
        (r"\bother income\b", r"\binterest (now|is now|goes)\b"),
    ),
)


def resolved(lines: Sequence[Line], desk: Desk) -> list[Line]:
    """The statement lines with the trade each transfer settles as ``desk`` says (after turn
    3's corrections two transfers of the same amount exchange their trades)."""
    return [
        replace(s, id=desk.remittances[s.ref].trades[0])
        if s.ref in desk.remittances and len(desk.remittances[s.ref].trades) == 1
        else s
        for s in lines
    ]


def _settled(lines: Sequence[Line], desk: Desk) -> dict[str, list[list[object]]]:
    """For the reference solution: each transfer the desks write about → [trade id, its
    amount on the statement] per trade it settles."""
    return {
        ref: [[s.id, s.amount] for s in lines if s.ref == ref] for ref in sorted(desk.remittances)
    }


@dataclass(frozen=True)
class Truth:
    """What the final statement means: every trade's own line, and the Settlements sheet."""

    statement: bytes
    settled: dict[str, str]


def final_truth(params: FamilyParams, revised: bool) -> Truth:
    """The truth behind the final ``bank.csv`` and ``notes.md`` (turn 3's when ``revised``),
    drawn again from the seed: the text is never read back."""
    close = draw_close(params.rng("ledger"))
    desk, lines = close.desk, close.statement
    if revised:
        desk, lines = desk.revised(), revised_statement(close, params.rng("revision"))
    lines = resolved(lines, desk)
    return Truth(statement_csv(close, lines, truth=True), settlements(desk, close.end, lines))


def draft(params: FamilyParams) -> FamilyDraft:
    close = draw_close(params.rng("ledger"))
    workspace = {
        BANK: statement_csv(close),
        NOTES: notes_md(messages(close.desk, close.statement, params.rng("notes"))).encode(),
        BOOKS: books_csv(close.books),
        POLICY: policy_md(close).encode(),
        ACCOUNTS: accounts_xlsx(close.symbols),
        IMPORT_SPEC: import_spec_md().encode(),
        "README.md": readme_md(close).encode(),
    }
    # Turn 2 asks for what builds on turn 1; turn 3 (the posted journal) needs turn 2's.
    kinds = ["requirement_changed", "input_replaced"][: params.turns - 1]
    turns: list[UserTurn] = []
    if "requirement_changed" in kinds:
        turns.append(requirement_turn(1, ADJUSTMENTS_REQUEST, [XLSX, JSON]))
    if "input_replaced" in kinds:
        truth = {**workspace, BANK: statement_csv(close, truth=True)}
        posted, held = posted_books(close, truth, params.rng("posting"))
        revised = revised_statement(close, params.rng("revision"))
        notes = notes_md(
            messages(
                close.desk,
                close.statement,
                params.rng("notes"),
                close.desk.revised(),
                close.end + timedelta(days=RUNS_ON + 2),
            )
        )
        turns.append(
            input_turn(
                2,
                after_reply(2),
                f"I posted your journal, all but the entries for {_listed(held)}, which "
                f"wait for the broker's confirmation; `{BOOKS}` is the new ledger export. The bank "
                f"also sent a revised statement for the period, now in `{BANK}`, and the "
                f"auditors amended `{POLICY}`; the desks' new messages are in `{NOTES}`. "
                "Please bring everything up to date: all three sheets, "
                f"`{JOURNAL}` (what remains to post) and the summary.",
                {
                    BOOKS: posted,
                    BANK: statement_csv(close, revised),
                    POLICY: amended_policy(close).encode(),
                    NOTES: notes.encode(),
                },
                reason="journal posted, statement revised, policy amended, new notes",
                invalidates=[XLSX, JSON, JOURNAL],
            )
        )
    period = f"{close.start:%Y-%m}-to-{close.end:%Y-%m}"
    adjusting = "requirement_changed" in kinds
    outputs: dict[str, Format] = {XLSX: "xlsx", JSON: "json"}
    if adjusting:
        outputs[JOURNAL] = "csv"
    inputs = [BANK, BOOKS, NOTES, POLICY, ACCOUNTS, IMPORT_SPEC]
    revising = "input_replaced" in kinds
    final = resolved(revised if revising else close.statement,
                     close.desk.revised() if revising else close.desk)  # fmt: skip
    solve = fill_template(
        SOLVE,
        adjustments_from_turn=1 if adjusting else NEVER,
        notes_revised_from_turn=2 if revising else NEVER,
        settled=repr(_settled(resolved(close.statement, close.desk), close.desk)),
        settled_revised=repr(_settled(final, close.desk)),
        refunds=repr({ref: r.charge for ref, r in sorted(close.desk.refunds.items())}),
    )
    return FamilyDraft(
        slug=f"ledger-reconciliation-{period}-{params.seed}",
        title=f"Close the fund's cash account, {period}",
        instruction=instruction(adjusting),
        workspace=workspace,
        solve_sh=solve,
        user=user(close),
        inputs=input_artifacts(
            {
                BANK: "csv",
                BOOKS: "csv",
                NOTES: "md",
                POLICY: "md",
                ACCOUNTS: "xlsx",
                IMPORT_SPEC: "md",
            }
        ),
        outputs=output_artifacts(outputs, inputs),
        turns=turns,
        agent_timeout_sec=2400.0,
    )


def _listed(ids: Sequence[str]) -> str:
    return ids[0] if len(ids) == 1 else f"{', '.join(ids[:-1])} and {ids[-1]}"


def verifier(built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
    inputs = built.final_inputs()
    close = terms(inputs[POLICY], inputs[ACCOUNTS])
    revised = any(t.patch.kind == "input_replaced" for t in built.turns)
    truth = final_truth(params, revised)
    result = reconcile_close(truth.statement, inputs[BOOKS], close)
    components = [
        *table_shape(
            "settlements",
            XLSX,
            ["ref", "ids"],
            len(truth.settled),
            "Settlements sheet columns",
            f"one row per transfer the desks' messages in {NOTES} say settles trades",
            sheet=SETTLEMENTS,
        ),
        *table_shape(
            "unmatched",
            XLSX,
            ["id", "source", "amount"],
            len(result.differences),
            "Unmatched sheet columns",
            "one row per difference of the period (policy.md's period end)",
            sheet=UNMATCHED,
        ),
        json_value("matched_count", JSON, "/matched", result.matched, "ids of the period matched"),
        json_value(
            "bank_balance",
            JSON,
            "/bank_balance",
            result.bank_balance,
            "the statement's balance at the period end",
            weight=2,
            tolerance=0.005,
        ),
        json_value(
            "book_balance",
            JSON,
            "/book_balance",
            result.book_balance,
            "the books' balance at the period end, from policy.md's opening balance",
            weight=2,
            tolerance=0.005,
        ),
    ]
    for key, source in (
        ("bank_only", "bank"),
        ("books_only", "books"),
        ("book_errors", BOOK_ERROR),
        ("bank_errors", BANK_ERROR),
    ):
        components.append(
            json_value(f"{key}_count", JSON, f"/{key}", result.count(source), f"{key} count")
        )
    for d in result.differences:
        components += unmatched_components(d)
    for ref, ids in truth.settled.items():
        components.append(
            Component(
                id=f"settlement_{slug(ref)}_ids",
                weight=1,
                check=XlsxValue(
                    path=XLSX,
                    sheet=SETTLEMENTS,
                    key_column="ref",
                    key=ref,
                    column="ids",
                    expected=ids,
                ),
                requirement=f"{ref}: the trades the desks' messages say it settles",
            )
        )
    if any(t.patch.kind == "requirement_changed" for t in built.turns):
        components += adjustment_components(result)
        components += journal_components(result, close)
    inputs_kept = {
        path: inputs[path] for path in (BANK, BOOKS, NOTES, POLICY, ACCOUNTS, IMPORT_SPEC)
    }
    spec = VerifierSpec(
        components=components,
        red_lines=[
            inputs_unmodified(
                "inputs_unmodified",
                "the statement, the books, the notes, the policy, the chart and the import "
                "format are evidence and must not change",
                inputs_kept,
            )
        ],
        rubric=rubric(
            "auditable",
            "An auditor can follow the workbook: rows are sorted by id, each source follows "
            "policy.md, amounts keep their sign, and adjusting entries use active accounts.",
            [XLSX, JSON],
        ),
    )
    return verifier_output(spec, inputs_kept)


__all__ = [
    "ACCOUNTS",
    "ADJUSTMENTS",
    "BANK",
    "BANK_ERROR",
    "BOOKS",
    "BOOK_ERROR",
    "IMPORT_SPEC",
    "JOURNAL",
    "JSON",
    "NOTES",
    "OPEN_PROBLEMS",
    "POLICY",
    "TRAPS",
    "UNMATCHED",
    "XLSX",
    "Close",
    "Line",
    "Plan",
    "Reconciliation",
    "Terms",
    "Truth",
    "draft",
    "draw_close",
    "draw_plan",
    "final_truth",
    "mistype",
    "monthly_prices",
    "reconcile_close",
    "terms",
    "verifier",
]

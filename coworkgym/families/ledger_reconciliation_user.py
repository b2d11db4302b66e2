"""What the user of ledger_reconciliation's ``hard`` close says: the instruction, turn 2's
request for the adjusting entries, and the answers the simulated accountant gives when
asked — one per open problem the seed has."""

from __future__ import annotations

from ..package.cowork import Signal, UserState
from .ledger_reconciliation_close import (
    ACCOUNTS,
    ADJUSTMENTS,
    BANK,
    BANK_ERROR,
    BOOK_ERROR,
    BOOKS,
    COMMISSION,
    IMPORT_SPEC,
    JOURNAL,
    JOURNAL_COLUMNS,
    JSON,
    POLICY,
    UNMATCHED,
    USER_ACCOUNTS,
    XLSX,
)
from .ledger_reconciliation_draw import (
    COMMISSION_NETTED,
    FELL_THROUGH,
    REPEATED,
    UNLISTED,
    Close,
)
from .ledger_reconciliation_notes import NOTES, SETTLEMENTS

# How an unlisted bank line is named in a question (two words, both needed to match).
UNLISTED_SUBJECT = {
    "Wire recall fee": "wire recall",
    "Returned payment fee": "returned payment",
    "Statement reprint fee": "statement reprint",
    "Overdraft interest": "overdraft interest",
}
# Turn 2: the adjusting entries, the adjusted balances and the journal.
ADJUSTMENTS_REQUEST = (
    "Thanks. The auditors now want the adjusting entries and the reconciliation statement, "
    "and I will post the entries through the ledger system's import. Add a sheet "
    f"`{ADJUSTMENTS}` to the workbook with the columns `id`, `account`, `amount`: one row per "
    "difference our books must correct, as policy.md says, sorted by id, with `account` the "
    f"account's code from `{ACCOUNTS}` and `amount` the entry's amount. Add "
    "`adjusted_bank_balance` and `adjusted_book_balance` to the JSON, as policy.md defines "
    f"them, rounded to cents. And write the same entries as `{JOURNAL}` in the format "
    f"`{IMPORT_SPEC}` describes (columns " + ", ".join(f"`{c}`" for c in JOURNAL_COLUMNS) + ")."
)


def instruction(journal: bool) -> str:
    later = ""
    if journal:
        later = (
            f"\nLater I will post adjusting entries from a `{JOURNAL}` in the format "
            f"`{IMPORT_SPEC}`\ndescribes; I will say when.\n"
        )
    return f"""\
Please close our fund's cash account for the period. The bank statement is `{BANK}`, our
books are `{BOOKS}`, `{POLICY}` is the reconciliation policy the auditors hold us to (it
decides the period, what matches and how each difference is classified) and `{ACCOUNTS}`
is our chart of accounts. A statement line and a book entry share an `id` when they are the
same transaction; where the statement's `id` is blank or wrong, the brokers' settlement
desks say in `{NOTES}` which trade(s) a transfer (the statement's `ref`) settles, and the
bank says there what its refunds return. The statement has separate `debit` (money out) and
`credit` (money in) columns written with thousands separators, and a running `balance`; the
books have one signed `amount`.

Create:

1. `{XLSX}` with a sheet named `{UNMATCHED}` and the columns `id`, `source`,
   `amount`: one row per difference of the period, sorted by id. `source` is `bank`,
   `books`, `book_error` or `bank_error`, as policy.md classifies it; `amount` is the
   entry's signed amount for `bank` and `books` rows, and the statement's amount minus
   the books' amount for `book_error` and `bank_error` rows. `id` is the trade's id, also
   where the statement's is blank or wrong.
   A second sheet `{SETTLEMENTS}` with the columns `ref`, `ids`: one row per transfer of the
   period that the desks' messages say settles trades, sorted by `ref`, with `ids` the
   trade id(s) it settles, ascending, separated by one space (`TX1201 TX1207`).
2. `{JSON}` with the keys `matched` (how many ids of the period match),
   `bank_only`, `books_only`, `book_errors` and `bank_errors` (how many `{UNMATCHED}` rows
   have each source), `bank_balance` (the statement's balance at the period end) and
   `book_balance` (our books' balance at the period end), amounts rounded to cents.

Do not modify the input files. Where the files and the policy do not settle how to list
something, ask me before you finish: I know the trades and the bank's lines.
{later}"""


def user(close: Close) -> UserState:
    """The accountant: the answers every close needs, and one per open problem this seed has
    (asked about anything else, the user says nothing of them)."""
    signals = [
        Signal(
            trigger="agent asks about the sign of amounts",
            reveals="money leaving the account is a debit on the statement and negative "
            "in the books",
        ),
        Signal(
            trigger="agent asks which dates, days or lines the period or the close covers",
            reveals="the close follows policy.md to the letter: the auditors check it "
            "against the policy",
        ),
        Signal(
            trigger="agent asks what a bank transfer with a blank or mistyped reference pays for",
            reveals=f"the brokers' desks know their transfers better than I do: go by what "
            f"they wrote in {NOTES}",
        ),
        Signal(
            trigger="agent asks which charge or fee a refund gives back",
            reveals=f"the bank's message in {NOTES} says; I know nothing more about it",
        ),
        Signal(
            trigger="agent asks whether to edit, change or post entries in the books",
            reveals="never edit the ledgers yourself: I post the entries, you list what "
            "our books must correct",
        ),
    ]
    problems = close.plan.open_problems
    if REPEATED in problems:
        signals.append(
            Signal(
                # in the words players used: "appears/shown/paid twice", "a duplicate
                # debit"; none of the generic ones (statement, trade) that every question has
                trigger="agent asks about an id that appears, is shown or is paid twice: a "
                "double, duplicate, duplicated or repeated posting, line or entry",
                # about the statement only: the books' correcting lines follow policy.md
                reveals=f"on the statement only the first line of a trade counts; a later "
                f"statement line for that trade is a bank error: list it in {UNMATCHED} with "
                f"source `{BANK_ERROR}` and its own amount, and keep the trade itself matched "
                "(our books' correcting entries follow policy.md)",
            )
        )
    if COMMISSION_NETTED in problems:
        signals.append(
            Signal(
                # players write "less commission" and rarely "broker" (issue 25)
                trigger="agent asks about a commission: a broker's commission netted, "
                "deducted or taken from a settlement (less commission)",
                reveals="the broker's commission is a real cost that our books missed, not "
                f"the bank's error: list that trade as `{BOOK_ERROR}` (the statement's amount "
                f"minus ours) and correct it against {COMMISSION}",
            )
        )
    if UNLISTED in problems:
        account = USER_ACCOUNTS[close.unlisted]
        signals.append(
            Signal(
                trigger=f"agent asks about the {UNLISTED_SUBJECT[close.unlisted]}",
                reveals=f"the {close.unlisted.lower()} is the bank's own line, right as the "
                f"statement shows it; book it against {account}",
            )
        )
    if FELL_THROUGH in problems:
        signals.append(
            Signal(
                # players wrote "never settled", "still not settled … 60 days": not "old"
                trigger="agent asks about an entry never settled: unsettled, outstanding or "
                "not settled after 60 days, raised with the accountant",
                reveals="that trade fell through with the broker and will not settle: our "
                f"books must reverse it. List it as `{BOOK_ERROR}` at minus its book amount "
                "and correct it against the trade's investment account",
            )
        )
    return UserState(
        persona="Fund accountant who closes the cash account at each period end.",
        role="accountant",
        latent_goals=["Every difference must be explainable to the auditors line by line."],
        knowledge_boundary=["does not know how the bank's posting system works inside"],
        signal_plan=signals,
    )

"""The verifier's cell-by-cell checks of ledger_reconciliation's ``hard`` close: the rows of
the Unmatched and Adjustments sheets and the lines of ``journal.csv``, each cell a
component."""

from __future__ import annotations

from collections.abc import Sequence

from ..verifier.spec import Component, CsvValue, XlsxValue
from .common import json_value, table_shape
from .ledger_reconciliation_close import (
    ADJUSTMENTS,
    IMPORT_SPEC,
    JOURNAL,
    JOURNAL_COLUMNS,
    JSON,
    UNMATCHED,
    XLSX,
    Difference,
    Reconciliation,
    Terms,
    journal_lines,
)


def _cents(amount: float) -> float:
    """Half a cent, for rounding; none for amounts so small that it would be lax."""
    return 0.005 if abs(amount) >= 0.05 else 0.0


def slug(key: str) -> str:
    """``key`` as part of a component id: lower case, ``_`` for ``-``."""
    return key.lower().replace("-", "_")


def unmatched_components(d: Difference) -> list[Component]:
    cells = (("amount", d.amount), ("source", d.source))
    what = f"the {d.source} difference"
    return _row_components("unmatched", UNMATCHED, d.id, d.amount, cells, what)


def _row_components(
    prefix: str,
    sheet: str,
    key: str,
    amount: float,
    cells: Sequence[tuple[str, object]],
    what: str,
) -> list[Component]:
    """One check per cell of the workbook row ``key`` (column ``id``) on ``sheet``; an
    ``amount`` cell may be off by the row's rounding (``_cents``), any other must match."""
    return [
        Component(
            id=f"{prefix}_{slug(key)}_{column}",
            weight=1,
            check=XlsxValue(
                path=XLSX,
                sheet=sheet,
                key_column="id",
                key=key,
                column=column,
                expected=expected,
                tolerance=_cents(amount) if column == "amount" else 0.0,
            ),
            requirement=f"{key}: {what}'s {column}",
        )
        for column, expected in cells
    ]


def adjustment_components(result: Reconciliation) -> list[Component]:
    components = [
        *table_shape(
            "adjustments",
            XLSX,
            ["id", "account", "amount"],
            len(result.adjustments),
            "Adjustments sheet columns",
            "one adjusting entry per bank and book_error difference",
            sheet=ADJUSTMENTS,
        ),
        json_value(
            "adjusted_bank_balance",
            JSON,
            "/adjusted_bank_balance",
            result.adjusted_bank_balance,
            "policy.md's adjusted bank balance",
            weight=2,
            tolerance=0.005,
        ),
        json_value(
            "adjusted_book_balance",
            JSON,
            "/adjusted_book_balance",
            result.adjusted_book_balance,
            "policy.md's adjusted book balance",
            weight=2,
            tolerance=0.005,
        ),
    ]
    for a in result.adjustments:
        cells = (("account", a.account), ("amount", a.amount))
        components += _row_components(
            "adjustment", ADJUSTMENTS, a.id, a.amount, cells, "the adjusting entry"
        )
    return components


def journal_components(result: Reconciliation, close: Terms) -> list[Component]:
    lines = journal_lines(result, close)
    components = table_shape(
        "journal",
        JOURNAL,
        JOURNAL_COLUMNS,
        len(lines),
        "import_spec.md's columns",
        "two lines per adjusting entry",
    )
    for j in lines:
        checked: list[tuple[str, object]] = [("account", j.account), ("debit", j.debit),
                                             ("credit", j.credit)]  # fmt: skip
        if j.line.endswith("-1"):
            checked += [("memo", j.memo), ("date", j.day)]
        components += [
            Component(
                id=f"journal_{slug(j.line)}_{column}",
                weight=1,
                check=CsvValue(
                    path=JOURNAL,
                    key_column="line",
                    key=j.line,
                    column=column,
                    expected=expected,
                    tolerance=0.005 if column in ("debit", "credit") else 0.0,
                ),
                requirement=f"{j.line}: the journal line's {column}, as {IMPORT_SPEC} says",
            )
            for column, expected in checked
        ]
    return components

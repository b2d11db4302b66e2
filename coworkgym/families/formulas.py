"""A small spreadsheet-formula evaluator: numbers, cell references (``Sheet!A1``, ``$``
anchors), ranges, ``+ - * /``, parentheses and ``SUM``/``AVERAGE``/``MIN``/``MAX``.

Workbooks here are ``{sheet: {"A1": value}}`` with formulas as strings starting with ``=``
(what openpyxl reads without ``data_only``). The formula-repair family computes its expected
values without it; its check script carries this module's source (``SOURCE``) so the
verifier recomputes what the agent's formulas give — openpyxl stores no computed values.
Standard library only.
"""

from __future__ import annotations

import inspect
import re
import sys

TOKEN = re.compile(
    r"\s*(?:(?P<err>#REF!)|(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<fn>[A-Z]+)\("
    r"|(?P<ref>(?:[A-Za-z_][A-Za-z0-9_]*!)?\$?[A-Z]{1,3}\$?\d+(?::\$?[A-Z]{1,3}\$?\d+)?)"
    r"|(?P<op>[-+*/(),]))"
)
CELL = re.compile(r"\$?([A-Z]{1,3})\$?(\d+)")


class FormulaError(ValueError):
    """The formula does not compute (a #REF!, a division by zero, a loop, bad syntax)."""


def column_index(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def column_letters(index: int) -> str:
    out = ""
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise FormulaError(f"cannot read {text[pos:]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _cells(sheet: str, ref: str) -> list[tuple[str, str]]:
    if "!" in ref:
        sheet, ref = ref.split("!", 1)
    first, _, last = ref.partition(":")
    a = CELL.fullmatch(first)
    b = CELL.fullmatch(last or first)
    if a is None or b is None:
        raise FormulaError(f"bad reference {ref!r}")
    c1, c2 = sorted((column_index(a[1]), column_index(b[1])))
    r1, r2 = sorted((int(a[2]), int(b[2])))
    return [
        (sheet, f"{column_letters(c)}{r}") for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)
    ]


def evaluate(book: dict[str, dict[str, object]], sheet: str, cell: str) -> float:
    """The value of ``sheet!cell``: a number, or a formula computed (recursively)."""
    return _value(book, sheet, cell, ())


def _value(
    book: dict[str, dict[str, object]], sheet: str, cell: str, seen: tuple[str, ...]
) -> float:
    key = f"{sheet}!{cell}"
    if key in seen:
        raise FormulaError(f"circular reference through {key}")
    if sheet not in book:
        raise FormulaError(f"no sheet {sheet!r}")
    value = book[sheet].get(cell)
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise FormulaError(f"{key} holds a boolean")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.startswith("="):
        parser = _Parser(book, sheet, _tokens(value[1:]), (*seen, key))
        result = parser.expression()
        if parser.pos != len(parser.tokens):
            raise FormulaError(f"{key}: unexpected {parser.tokens[parser.pos][1]!r}")
        return result
    raise FormulaError(f"{key} holds text {value!r}")


class _Parser:
    def __init__(
        self,
        book: dict[str, dict[str, object]],
        sheet: str,
        tokens: list[tuple[str, str]],
        seen: tuple[str, ...],
    ) -> None:
        self.book, self.sheet, self.tokens, self.seen, self.pos = book, sheet, tokens, seen, 0

    def _peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", "")

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        self.pos += 1
        return token

    def expression(self) -> float:
        total = self._term()
        while self._peek() in (("op", "+"), ("op", "-")):
            total = total + self._term() if self._take()[1] == "+" else total - self._term()
        return total

    def _term(self) -> float:
        total = self._factor()
        while self._peek() in (("op", "*"), ("op", "/")):
            op = self._take()[1]
            right = self._factor()
            if op == "/" and right == 0:
                raise FormulaError("division by zero")
            total = total * right if op == "*" else total / right
        return total

    def _factor(self) -> float:
        kind, text = self._take()
        if (kind, text) == ("op", "-"):
            return -self._factor()
        if (kind, text) == ("op", "+"):
            return self._factor()
        if kind == "num":
            return float(text)
        if kind == "err":
            raise FormulaError("#REF!")
        if kind == "ref":
            cells = _cells(self.sheet, text)
            if len(cells) != 1:
                raise FormulaError(f"a range {text} where one value is needed")
            return _value(self.book, cells[0][0], cells[0][1], self.seen)
        if (kind, text) == ("op", "("):
            inner = self.expression()
            if self._take() != ("op", ")"):
                raise FormulaError("missing )")
            return inner
        if kind == "fn":
            return self._function(text)
        raise FormulaError(f"unexpected {text!r}")

    def _function(self, name: str) -> float:
        values: list[float] = []
        while True:
            kind, text = self._peek()
            following = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
            if kind == "ref" and following in (("op", ","), ("op", ")")):
                self._take()
                values += [  # blank cells of a range are skipped, as spreadsheets do
                    _value(self.book, s, c, self.seen)
                    for s, c in _cells(self.sheet, text)
                    if self.book.get(s, {}).get(c) not in (None, "")
                ]
            else:
                values.append(self.expression())
            separator = self._take()
            if separator == ("op", ")"):
                break
            if separator != ("op", ","):
                raise FormulaError(f"{name}: expected , or )")
        if name == "SUM":
            return sum(values)
        if name == "AVERAGE":
            if not values:
                raise FormulaError("AVERAGE of nothing")
            return sum(values) / len(values)
        if name in ("MIN", "MAX"):
            return min(values) if name == "MIN" else max(values)
        raise FormulaError(f"unknown function {name}")


# this module as a script's opening (the future import first), less this line
SOURCE = inspect.getsource(sys.modules[__name__]).split("\n# this module as a script")[0]

"""``sql/parse.check_tokens`` (issue 21: one pass over the tokens) refuses the same token
streams with the same error as :func:`_check_nesting` (kept here as the oracle) then
:func:`check_numbers`, the two passes it replaced in ``_parse_with``: nesting first, then the
first malformed number."""

from __future__ import annotations

import random
from typing import Any

import pytest

from dpproxy.errors import DPProxyError, StatementTooComplex
from dpproxy.sql.parse import (
    _CLOSE,
    _OPEN,
    _UNARY,
    INPUT_DIALECT,
    MAX_NESTING,
    _take_reader,
    check_numbers,
    check_tokens,
    too_complex,
)


def _check_nesting(tokens: list[Any]) -> None:
    """The nesting pass as it was before issue 21 merged it into ``check_tokens``."""
    depth = run = 0
    for tok in tokens:
        kind = tok.token_type
        if kind in _UNARY:
            run += 1
        else:
            run = 0
        if kind in _OPEN:
            depth += 1
        elif kind in _CLOSE:
            depth = max(depth - 1, 0)
        if depth + run > MAX_NESTING:
            raise too_complex(f"more than {MAX_NESTING} levels of nesting")


def _two_passes(tokens: list[object]) -> None:
    _check_nesting(tokens)
    check_numbers(tokens)  # type: ignore[arg-type]


def _outcome(check: object, sql: str) -> str:
    tokens = _take_reader(INPUT_DIALECT)[0].tokenize(sql)
    try:
        check(tokens)  # type: ignore[operator]
    except DPProxyError as e:
        return f"{type(e).__name__} {e.sqlstate} {e.message} {e.hint} {e.position}"
    return ""


def _queries() -> list[str]:
    pieces = ["(", ")", "[", "]", "CASE", "END", "-", "+", "NOT", "1", "1e", "5e2.5", "2.5",
              ".5", "x", ",", "*", "1e5", "3E+2", "0x1F"]  # fmt: skip
    rng = random.Random(21)
    out = [
        "SELECT 1e FROM t",
        "SELECT " + "(" * (MAX_NESTING + 1) + "1e" + ")" * (MAX_NESTING + 1),
        "SELECT 1e, " + "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1),
        "SELECT " + "-" * (MAX_NESTING + 1) + "1",
        "SELECT " + "(" * MAX_NESTING + "1" + ")" * MAX_NESTING,
        "SELECT " + "NOT " * 60 + "(" * 41 + "1e" + ")" * 41,
    ]
    for _ in range(400):
        n = rng.choice([5, 20, 150, 300])
        weights = [rng.random() for _ in pieces]
        out.append("SELECT " + " ".join(rng.choices(pieces, weights, k=n)))
    return out


@pytest.mark.parametrize("sql", _queries())
def test_check_tokens_is_the_two_passes(sql: str) -> None:
    assert _outcome(check_tokens, sql) == _outcome(_two_passes, sql)


def test_the_cases_cover_both_refusals_and_acceptance() -> None:
    outcomes = {_outcome(_two_passes, sql).split(" ")[0] for sql in _queries()}
    assert {"", StatementTooComplex.__name__, "SQLSyntaxError"} <= outcomes

"""Text → exactly one sqlglot statement. Input SQL is read in the PostgreSQL dialect."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dpproxy.errors import SQLSyntaxError, UnsupportedQuery

INPUT_DIALECT = "postgres"


def _offset(sql: str, line: int, col: int) -> int:
    """1-based character position (as Postgres reports it) of a line/column pair."""
    lines = sql.split("\n")
    before = sum(len(x) + 1 for x in lines[: max(line - 1, 0)])
    return max(1, before + col)


def parse(sql: str) -> exp.Expression:
    """Parse one statement; several statements or none are refused.

    >>> type(parse("SELECT COUNT(*) FROM adult")).__name__
    'Select'
    """
    if not sql.strip().strip(";").strip():
        raise SQLSyntaxError("empty query", hint="send one SELECT statement")
    try:
        statements = [s for s in sqlglot.parse(sql, read=INPUT_DIALECT) if s is not None]
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line"), first.get("col")
        pos = _offset(sql, line, col) if isinstance(line, int) and isinstance(col, int) else None
        near = first.get("highlight") or ""
        raise SQLSyntaxError(
            f'syntax error at or near "{near}"' if near else "syntax error",
            position=pos,
            log_detail=str(first.get("description", e)),
        ) from e
    except TokenError as e:
        raise SQLSyntaxError("syntax error: unterminated string or identifier") from e
    if not statements:
        raise SQLSyntaxError("empty query", hint="send one SELECT statement")
    if len(statements) != 1:
        raise UnsupportedQuery(
            f"one statement per query, got {len(statements)}",
            hint="send the statements one at a time; each is planned and charged on its own",
        )
    statement = statements[0]
    if not isinstance(statement, exp.Expression):
        raise UnsupportedQuery("this kind of statement is not supported")
    return statement

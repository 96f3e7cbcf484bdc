"""``EXPLAIN [ ( option [, ...] ) ] query`` as a statement: the plan as rows, spending nothing.

Over the wire (``dpproxy serve``) and in the embedded DB-API (``cursor.execute("EXPLAIN ...")``)
the answer has PostgreSQL's shape: one text column ``QUERY PLAN``, one row per line of
``dpproxy explain`` (cost ε/δ, the analyst's budget, the mechanism of every noisy primitive, the
predicted 95% error of every output column, the rewritten SQL); with ``FORMAT JSON`` one row
holding the JSON document of ``dpproxy explain --format json``. Options PostgreSQL knows but that
mean nothing here (VERBOSE, COSTS, SETTINGS, BUFFERS, TIMING, SUMMARY, WAL) are accepted and
ignored; ANALYZE is refused, since it would run — and charge — the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from dpproxy.errors import SQLSyntaxError, UnsupportedQuery

if TYPE_CHECKING:
    from dpproxy.catalog.model import MechanismKind
    from dpproxy.engine import Engine
    from dpproxy.planning.plan import Method

COLUMN = "QUERY PLAN"
# Leading comments are skipped (a hint belongs to the query: EXPLAIN /*+ dpproxy ... */ SELECT).
# (A comment cannot span another's end, so there is one way to read them: no backtracking.)
_HEAD = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*(?:[^*]|\*(?!/))*\*/)\s*)*EXPLAIN\b", re.I)
_OPTIONS = re.compile(r"\s*\(([^()]*)\)")
_LEGACY = re.compile(r"\s*(ANALY[SZ]E|VERBOSE)\b", re.IGNORECASE)
_IGNORED = {"VERBOSE", "COSTS", "SETTINGS", "BUFFERS", "TIMING", "SUMMARY", "WAL", "GENERIC_PLAN"}
_FALSE = {"FALSE", "OFF", "0", "NO"}


@dataclass(frozen=True, slots=True)
class ExplainStatement:
    query: str
    json: bool


def parse_explain(sql: str) -> ExplainStatement | None:
    """The query and format of an EXPLAIN statement; None when ``sql`` is not one.

    >>> parse_explain("explain (format json) SELECT COUNT(*) FROM t")
    ExplainStatement(query='SELECT COUNT(*) FROM t', json=True)
    >>> parse_explain("SELECT 1") is None
    True
    """
    start = query_start(sql)
    if start is None:
        return None
    rest = sql[start:]
    as_json = False
    head = _HEAD.match(sql)
    assert head is not None
    options = _OPTIONS.match(sql, head.end())
    if options is not None:
        for option in options.group(1).split(","):
            words = option.split()
            if not words:
                raise SQLSyntaxError("syntax error in EXPLAIN options")
            name, value = words[0].upper(), " ".join(words[1:]).upper()
            if name == "FORMAT":
                if value not in ("TEXT", "JSON"):
                    raise UnsupportedQuery(
                        f"EXPLAIN format {value.lower() or '(none)'} is not supported",
                        hint="FORMAT TEXT or FORMAT JSON",
                    )
                as_json = value == "JSON"
            elif name == "ANALYZE" or name == "ANALYSE":
                if value not in _FALSE:
                    _refuse_analyze()
            elif name not in _IGNORED:
                raise SQLSyntaxError(f'unrecognized EXPLAIN option "{words[0].lower()}"')
    elif re.search(r"ANALY[SZ]E", sql[head.end() : start], re.IGNORECASE):
        _refuse_analyze()
    query = rest.strip().rstrip(";").strip()
    if not query:
        raise SQLSyntaxError("syntax error at end of input: EXPLAIN needs a query")
    return ExplainStatement(query, as_json)


def query_start(sql: str) -> int | None:
    """Where the query of an EXPLAIN statement begins (after its options), else None; the
    server finds the ``$n`` parameters of ``EXPLAIN ... $1`` in the query from there."""
    head = _HEAD.match(sql)
    if head is None:
        return None
    pos = head.end()
    options = _OPTIONS.match(sql, pos)
    if options is not None:
        return options.end()
    while (legacy := _LEGACY.match(sql, pos)) is not None:
        pos = legacy.end()
    return pos


def _refuse_analyze() -> None:
    raise UnsupportedQuery(
        "EXPLAIN ANALYZE is not supported: it would run the query and spend budget",
        hint="EXPLAIN alone shows the plan, cost and predicted errors; run the query itself "
        "to get the answer",
    )


def explain_rows(
    engine: Engine,
    statement: ExplainStatement,
    *,
    analyst: str,
    epsilon: Fraction | None = None,
    delta: Fraction | None = None,
    mechanism: MechanismKind | None = None,
    method: Method | None = None,
) -> list[tuple[str]]:
    """The rows of ``EXPLAIN``: pure planning, nothing runs on the data, nothing is charged."""
    # imported here: every statement of the DB-API passes parse_explain, few are EXPLAINs
    from dpproxy.explain import BudgetView, explain_json, explain_text

    q = statement.query
    prepared = engine.canonical().prepare(
        q, epsilon=epsilon, delta=delta, mechanism=mechanism, method=method, analyst=analyst
    )
    status = engine.accountant.status(analyst)
    cached = engine.is_cached(
        q, analyst=analyst, epsilon=epsilon, delta=delta, mechanism=mechanism, method=method
    )
    view = BudgetView(analyst, status.remaining, status.spent, status.tightest, cached)
    sql = ";\n".join(prepared.statements)
    if statement.json:
        return [(explain_json(prepared.plan, sql, view),)]
    return [(line,) for line in explain_text(prepared.plan, sql, view).split("\n")]

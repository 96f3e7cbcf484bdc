"""An analyst's own spending, as read-only virtual tables on the wire.

``dpproxy.spending``: one row per release charged to the connected analyst (sequence number,
time, kind, normalised query, plan, mechanism, ε, δ, ρ); ``dpproxy.budget``: one row with the
analyst's total, spent, reserved and remaining budget and the tightest (ε, δ) of the spending.
Any SELECT over them works (filters, aggregates, ORDER BY): it runs in a private in-memory
DuckDB database that holds these rows and nothing else, with external access disabled. No
private data is involved — only what the analyst already knows about their own queries — so
nothing is charged.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import duckdb
from sqlglot import exp

from dpproxy.accounting.memory import BudgetStatus, Spending
from dpproxy.errors import Forbidden, SQLSyntaxError
from dpproxy.server import pgtypes
from dpproxy.sql.parse import parse_statements

PATTERN = re.compile(r"\bdpproxy\s*\.\s*(spending|budget)\b", re.IGNORECASE)

_DUCK_TO_OUTPUT = {
    "BIGINT": "integer",
    "INTEGER": "integer",
    "HUGEINT": "integer",
    "DOUBLE": "double",
    "FLOAT": "double",
    "DECIMAL": "double",
    "BOOLEAN": "boolean",
    "DATE": "date",
}


def mentions_spending(sql: str) -> bool:
    return PATTERN.search(sql) is not None


def answer(
    sql: str, status: BudgetStatus, releases: list[Spending]
) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]]]:
    """Run a SELECT over the analyst's own ``dpproxy.spending`` and ``dpproxy.budget``."""
    trees = parse_statements(sql)  # within sql/parse.py's limits
    if len(trees) != 1:
        raise SQLSyntaxError("send one statement over dpproxy.spending at a time")
    tree = trees[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise Forbidden("dpproxy.spending and dpproxy.budget are read-only")
    con = duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 1,
            "max_memory": "64MB",
        },
    )
    try:
        con.execute("CREATE SCHEMA dpproxy")
        con.execute(
            "CREATE TABLE dpproxy.spending (seq BIGINT, time TEXT, kind TEXT, query TEXT, "
            "plan TEXT, mechanism TEXT, epsilon DOUBLE, delta DOUBLE, rho DOUBLE)"
        )
        rows = [
            (
                s.seq,
                datetime.datetime.fromtimestamp(s.time, datetime.UTC).isoformat(),
                s.kind,
                s.query,
                s.plan,
                s.mechanism,
                float(s.cost.epsilon),
                float(s.cost.delta),
                float(s.cost.rho),
            )
            for s in releases
        ]
        if rows:  # DuckDB refuses executemany with no parameter sets
            con.executemany("INSERT INTO dpproxy.spending VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        con.execute(
            "CREATE TABLE dpproxy.budget (total_epsilon DOUBLE, total_delta DOUBLE, "
            "spent_epsilon DOUBLE, spent_delta DOUBLE, reserved_epsilon DOUBLE, "
            "reserved_delta DOUBLE, remaining_epsilon DOUBLE, remaining_delta DOUBLE, "
            "tightest_spent_epsilon DOUBLE, tightest_spent_delta DOUBLE)"
        )
        s = status
        con.execute(
            "INSERT INTO dpproxy.budget VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                float(v)
                for v in (
                    s.total.epsilon,
                    s.total.delta,
                    s.spent.epsilon,
                    s.spent.delta,
                    s.reserved.epsilon,
                    s.reserved.delta,
                    s.remaining.epsilon,
                    s.remaining.delta,
                    s.tightest.epsilon,
                    s.tightest.delta,
                )
            ],
        )
        try:
            cur = con.execute(tree.sql(dialect="duckdb"))
        except duckdb.PermissionException:
            raise Forbidden("only dpproxy.spending and dpproxy.budget can be read here") from None
        except duckdb.Error as e:
            raise SQLSyntaxError(f"cannot answer this query on dpproxy.spending: {e}") from None
        rows = cur.fetchall()
        fields = [
            (d[0], pgtypes.oid_of(_DUCK_TO_OUTPUT.get(str(d[1]).split("(")[0], "text")))
            for d in cur.description or ()
        ]
        return fields, [tuple(r) for r in rows]
    finally:
        con.close()


def describe_budget(status: BudgetStatus) -> str:
    """``SHOW dpproxy.budget``: remaining, total, spent, reserved and the tightest spent."""
    s = status
    text = f"remaining {s.remaining} of {s.total}; spent {s.spent}"
    if s.reserved.epsilon or s.reserved.delta:
        text += f", reserved {s.reserved}"
    if s.tightest.epsilon < s.spent.epsilon:
        text += f" (tightest accounting: {s.tightest})"
    return text

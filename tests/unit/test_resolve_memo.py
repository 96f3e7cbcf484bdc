"""``Scope.resolve`` over a scope of ``table_scope`` is memoised on the node's exact tree, the
table and the qualifiers (``sql/scope.py``): each answer, and each refusal, is the one a fresh
scope gives without the memo."""

from __future__ import annotations

from typing import Any

import pytest
from sqlglot import exp

from dpproxy.errors import DPProxyError
from dpproxy.sql import scope as scope_module
from dpproxy.sql.parse import parse
from dpproxy.sql.scope import Scope, table_scope

NODES = (
    "age",
    "ADULT.age",
    "a.age",
    "x.age",
    "age + 1",
    "capital_gain - capital_loss",
    "hours_per_week * 52",
    "income_class = '>50K'",
    "age > '40'",
    "age > 'forty'",
    "no_such_column + 1",
    "CASE WHEN sex = 'Female' THEN 1 ELSE 0 END",
    "age / NULLIF(hours_per_week, 0)",
    "LENGTH(occupation) > 3",
    "(SELECT 1)",
    "*",
)
QUALIFIERS = (set(), {"adult"}, {"a", "adult"})


def _outcome(resolve: Any, text: str) -> str:
    node = parse(f"SELECT {text}").expressions[0]
    try:
        out = resolve(node)
    except DPProxyError as e:
        return f"{type(e).__name__} {e.sqlstate} {e.message} {e.hint}"
    return f"{out.sql()} {out!r}"


@pytest.mark.parametrize("text", NODES)
def test_memoised_resolve_is_the_fresh_one(demo_catalog: Any, text: str) -> None:
    table = demo_catalog.table("adult")
    for qualifiers in QUALIFIERS:
        scope_module._RESOLVED.clear()
        fresh = table_scope(table)
        fresh.qualifiers = set(qualifiers)
        expected = _outcome(fresh._resolve, text)
        for _ in range(2):  # computed, then from the memo
            memo = table_scope(table)
            memo.qualifiers = set(qualifiers)
            assert _outcome(memo.resolve, text) == expected, qualifiers


def test_a_hit_is_a_copy_and_a_changed_scope_is_not_memoised(demo_catalog: Any) -> None:
    table = demo_catalog.table("adult")
    scope = table_scope(table)
    node = parse("SELECT age + 1").expressions[0]
    first = scope.resolve(node)
    first.set("this", exp.Literal.number(7))  # what a caller may do with its tree
    assert scope.resolve(node).sql() == "age + 1"
    scope.names = {**scope.names, "age": exp.column("hours_per_week")}  # a CTE's renaming
    assert scope.resolve(node).sql() == "hours_per_week + 1"
    plain = Scope(table, dict(table_scope(table).names), set(), [], dict(scope.column_types))
    assert plain.made is None and plain.resolve(node).sql() == "age + 1"

"""``sql/parse.check_tree`` (issue 21: no tuple or generator per node, each node class's checks
found once) refuses the same trees with the same error, found in the same order, and drops the
same source positions as the loop it replaced (kept verbatim below as the reference)."""

from __future__ import annotations

import random

import pytest
from sqlglot import exp

from dpproxy.errors import DPProxyError, SQLSyntaxError, UndefinedFunction
from dpproxy.sql.parse import (
    _POSITION_KEYS,
    INPUT_DIALECT,
    MAX_DEPTH,
    _parse_with,
    _take_reader,
    check_tree,
    too_complex,
)

_REQUIRED: dict[type, tuple[str, ...]] = {}


def _reference(tree: exp.Expr) -> None:
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_complex(f"an expression more than {MAX_DEPTH} levels deep")
        meta = node._meta
        if meta is not None and meta.keys() <= _POSITION_KEYS:
            node._meta = None
        if isinstance(node, exp.Func):
            keys = _REQUIRED.get(type(node))
            if keys is None:
                keys = _REQUIRED[type(node)] = tuple(k for k, r in node.arg_types.items() if r)
            if any(node.args.get(key) in (None, []) for key in keys):
                raise UndefinedFunction(
                    f"function {node.sql_name().lower()}() does not exist",
                    hint="the function needs arguments",
                )
        if isinstance(node, exp.In) and not any(
            node.args.get(key) for key in ("expressions", "query", "unnest", "field")
        ):
            raise SQLSyntaxError('syntax error at or near ")"', hint="IN needs a value")
        depth += 1
        stack.extend((child, depth) for child in node.iter_expressions())


def _outcome(check: object, sql: str) -> tuple[str, list[object]]:
    try:
        statements = _parse_with(_take_reader(INPUT_DIALECT), sql)  # parse_statements' reader
    except DPProxyError:
        return "not parsed", []
    tree = statements[0]
    assert tree is not None
    try:
        check(tree)  # type: ignore[operator]
        error = ""
    except DPProxyError as e:
        error = f"{type(e).__name__} {e.sqlstate} {e.message} {e.hint}"
    return error, [n._meta for n in tree.walk()]


def _queries() -> list[str]:
    broken = ["FLOOR()", "x IN ()", "CEIL()", "LN()", "y NOT IN ()", "SQRT()"]
    fine = ["FLOOR(a)", "x IN (1, 2)", "ROUND(b, 2)", "a + 1", "x IN (SELECT 1)", "1"]
    rng = random.Random(21)
    out = [
        "SELECT COUNT(*) FROM adult",
        "SELECT FLOOR(), x IN () FROM t",
        "SELECT x IN () , FLOOR() FROM t",
        "SELECT a FROM t WHERE FLOOR() > 1 AND b IN () OR CEIL() = 2",
        "SELECT " + "(" * (MAX_DEPTH - 3) + "1" + ")" * (MAX_DEPTH - 3),
        "SELECT " + "(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5),
        "SELECT FLOOR(), " + "(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5),
        "SELECT " + "(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5) + ", FLOOR()",
        "SELECT " + " OR ".join(f"c = {i}" for i in range(400)) + " FROM t",
        "SELECT CASE WHEN a IN () THEN SQRT() END FROM t GROUP BY LN() ORDER BY CEIL()",
    ]
    for _ in range(300):
        items = [rng.choice(broken + fine * 3) for _ in range(rng.randint(1, 6))]
        where = " AND ".join(f"({rng.choice(broken + fine * 3)}) IS NOT NULL" for _ in range(3))
        out.append(f"SELECT {', '.join(items)} FROM t WHERE {where}")
    return out


@pytest.mark.parametrize("sql", _queries())
def test_check_tree_is_the_reference_loop(sql: str) -> None:
    assert _outcome(check_tree, sql) == _outcome(_reference, sql)

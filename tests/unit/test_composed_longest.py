"""``ComposedPlan.longest`` and ``deepest_text`` bound the outer query's text at any released
values: its length, and its nesting and depth as the parser measures them.

The text written after the releases is parsed again after the charge, so its length is bounded
before the budget is reserved (``composed.check_outer_binds``, 54001 beyond the parser's
limit). The bound must hold whatever the noise gives: every subset of the keys kept, any
float (the longest texts, negatives written ``(-…)``, huge and tiny magnitudes), NULLs; keys
with quotes and backslashes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.planning.keyed import KeyedPart
from dpproxy.planning.relations import RelationPart
from dpproxy.planning.scalars import ComposedPlan
from dpproxy.sql.scalars import constant
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: longest
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000, delta: 0.5}
tables:
  t:
    private: true
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      k: {type: integer}
      x: {type: float, lower: 0, upper: 100}
      name: {type: text}
  p:
    private: false
    columns:
      k: {type: integer}
      name: {type: text}
      y: {type: float}
"""
NAMES = ("a", "o'neil", "back\\slash", "ü", "", "x" * 40)
QUERIES = (
    "SELECT COUNT(*) FROM p, (SELECT name, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY name) r "
    "WHERE r.name = p.name AND r.s > 1",
    "SELECT COUNT(*) FROM p WHERE y > (SELECT SUM(x) FROM t WHERE t.k = p.k)",
    "SELECT COUNT(*) FROM t, p WHERE t.k = p.k AND x > (SELECT AVG(x) FROM t t2 "
    "WHERE t2.k = p.k) AND x < (SELECT AVG(x) FROM t)",
)
VALUES = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([-2.2250738585072014e-308, -1.2345678901234567e-300, -9.87654321e18]),
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path: Path = tmp_path_factory.mktemp("longest") / "l.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t(uid INTEGER, k INTEGER, x DOUBLE, name VARCHAR)")
    con.execute("CREATE TABLE p(k INTEGER, name VARCHAR, y DOUBLE)")
    for i, name in enumerate(NAMES):
        con.execute("INSERT INTO p VALUES (?, ?, 1.5)", [i - 2, name])
        con.execute("INSERT INTO t VALUES (?, ?, 1.0, ?)", [i, i - 2, name])
    con.close()
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())
    yield e
    e.close()


def _text(composed: ComposedPlan, data: st.DataObject) -> str:
    values = []
    for p in composed.scalars:
        if isinstance(p, RelationPart):
            width = len(p.items)
            rows = [
                (key, data.draw(st.lists(VALUES, min_size=width, max_size=width)))
                for key in p.keys
                if data.draw(st.booleans())
            ]
            values.append(p.body([(k, [_finite(v) for v in vs]) for k, vs in rows]))
        elif isinstance(p, KeyedPart):
            rows = [(i, _finite(data.draw(VALUES)), 1) for i in range(len(p.keys))]
            values.append(p.value(rows))
        else:
            values.append(constant(data.draw(VALUES)))
    return composed.outer_text(values)


def _finite(v: object) -> object:
    """What a released relation or keyed value can be: a number, NaN, ±inf or NULL."""
    if isinstance(v, int) and abs(v) > 10**300:
        return float("inf") if v > 0 else float("-inf")
    return v


@pytest.mark.parametrize("sql", QUERIES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_bound_holds_at_any_released_values(
    engine: Engine, sql: str, data: st.DataObject
) -> None:
    composed = engine._composed(sql, None, None, None, None)
    assert composed is not None
    assert len(_text(composed, data)) <= composed.longest()


def _nesting(sql: str) -> tuple[int, int]:
    """The parser's two measures of ``sql``: its brackets' nesting (with unary operators in a
    row, as ``sql/parse.check_tokens``) and its tree's depth."""
    from sqlglot.dialects.postgres import Postgres

    from dpproxy.sql.parse import _CLOSE, _OPEN, _UNARY, parse

    most = depth = run = 0
    for tok in Postgres().tokenize(sql):
        if tok.token_type in _UNARY:
            run += 1
        else:
            run = 0
            if tok.token_type in _OPEN:
                depth += 1
            elif tok.token_type in _CLOSE:
                depth = max(depth - 1, 0)
        most = max(most, depth + run)
    stack: list[tuple[exp.Expr, int]] = [(parse(sql), 1)]
    deepest = 0
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack += [(child, d + 1) for child in node.iter_expressions()]
    return most, deepest


@pytest.mark.parametrize("sql", QUERIES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_no_released_text_nests_deeper_than_the_deepest(
    engine: Engine, sql: str, data: st.DataObject
) -> None:
    composed = engine._composed(sql, None, None, None, None)
    assert composed is not None
    worst = _nesting(composed.deepest_text())
    real = _nesting(_text(composed, data))
    assert real[0] <= worst[0] and real[1] <= worst[1]

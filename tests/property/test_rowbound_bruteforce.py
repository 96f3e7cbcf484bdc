"""``planning/rowbound.most_rows`` against the rows DuckDB returns.

Random tables of 0 to 4 rows over a small value range (so joins match some rows, all or none)
and random queries of the public path's shapes — joins of every kind, comma joins, derived
tables, CTEs (shadowing a table too), VALUES lists as released relations, WHERE, GROUP BY
(on one item's column, on two, by position, by output alias, on a constant), DISTINCT,
aggregates without GROUP BY, HAVING, LIMIT, UNION [ALL], INTERSECT, EXCEPT — run on an
in-memory DuckDB: the bound is never below the rows returned, and every such query has
one. The bound is what keeps a public outer query around released parts from failing on its
row cap after the charge (``composed.check_outer_rows``)."""

from __future__ import annotations

import re
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import parse_one

from dpproxy.planning.rowbound import most_rows

TABLES = ("t", "u", "p")
JOINS = ("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN", ",", "SEMI JOIN",
         "ANTI JOIN")  # fmt: skip

Draw = Any


@st.composite
def relation(draw: Draw, depth: int) -> str:
    """A FROM item with one column ``a``: a table, a VALUES list or a derived table."""
    kind = draw(st.sampled_from(("table", "values", "derived") if depth else ("table", "values")))
    if kind == "table":
        return draw(st.sampled_from(TABLES))
    if kind == "values":
        rows = draw(st.lists(st.integers(0, 2), min_size=1, max_size=4))
        return "(SELECT * FROM (VALUES " + ", ".join(f"({v})" for v in rows) + ") AS v(a))"
    return f"({draw(query(depth - 1))})"


@st.composite
def select(draw: Draw, depth: int) -> str:
    items = draw(st.lists(relation(depth), min_size=1, max_size=3))
    sql = f"FROM {items[0]} AS r0"
    visible = [0]  # the items whose columns the SELECT sees (not a SEMI or ANTI join's)
    for i, item in enumerate(items[1:], start=1):
        join = draw(st.sampled_from(JOINS))
        if join not in ("SEMI JOIN", "ANTI JOIN"):
            visible.append(i)
        if join in (",", "CROSS JOIN"):
            sql += f"{' ' if join == 'CROSS JOIN' else ''}{join} {item} AS r{i}"
        else:
            sql += f" {join} {item} AS r{i} ON r0.a = r{i}.a"
    if draw(st.booleans()):
        sql += f" WHERE r0.a >= {draw(st.integers(0, 2))}"
    shape = draw(st.sampled_from(("rows", "grouped", "aggregate")))
    # a key of one item, of two, positional, by its output alias, or a constant
    item = f"r{draw(st.sampled_from(visible))}"
    key = draw(st.sampled_from((f"{item}.a", f"r0.a + {item}.a", "1", "a", "0 + 0")))
    if key == "a" and len(visible) > 1:
        key = "1"  # by output alias: only where no input column is called a too
    if shape == "grouped" and key in ("1", "a"):
        sql = f"SELECT {item}.a AS a {sql} GROUP BY {key}"
    elif shape == "grouped":
        sql = f"SELECT {key} AS a {sql} GROUP BY {key}"
        if draw(st.booleans()):
            sql += " HAVING COUNT(*) > 1"
    elif shape == "aggregate":
        sql = f"SELECT COUNT(*) AS a {sql}"
        if draw(st.booleans()):
            sql += " HAVING COUNT(*) > 1"
    else:
        distinct = "DISTINCT " if draw(st.booleans()) else ""
        sql = f"SELECT {distinct}{item}.a AS a {sql}"
    if draw(st.booleans()):
        sql += f" LIMIT {draw(st.integers(0, 5))}"
    return sql


@st.composite
def query(draw: Draw, depth: int) -> str:
    kind = draw(st.sampled_from(("select", "setop", "cte") if depth else ("select",)))
    if kind == "select":
        return draw(select(depth))
    if kind == "setop":
        op = draw(st.sampled_from(("UNION ALL", "UNION", "INTERSECT", "EXCEPT")))
        left, right = draw(select(depth - 1)), draw(select(depth - 1))
        limit = f" LIMIT {draw(st.integers(0, 5))}" if draw(st.booleans()) else ""
        return f"(SELECT * FROM ({left})) {op} (SELECT * FROM ({right})){limit}"
    name = draw(st.sampled_from(("c", "t")))  # "t": the CTE shadows the table
    body = draw(select(depth - 1))
    if name == "t":  # a CTE does not read itself (that would be WITH RECURSIVE)
        body = re.sub(r"\bt AS r", "u AS r", body)
    main = re.sub(r"\bt AS r", f"{name} AS r", draw(select(depth)))
    return f"WITH {name} AS ({body}) {main}"


@pytest.fixture(scope="module")
def con() -> Any:
    """DuckDB without its optimizer, as the oracle of SQL's semantics: DuckDB 2.0.1 optimised
    ``SELECT u.a FROM u LEFT JOIN t ON u.a = t.a WHERE u.a >= 0 LIMIT 1`` over an empty ``t``
    into a plan without the LIMIT and returned every row of ``u`` (with ORDER BY, or without
    the optimizer, one row; :func:`test_duckdb_drops_a_limit_the_bound_keeps`)."""
    connection = duckdb.connect()
    connection.execute("PRAGMA disable_optimizer")
    yield connection
    connection.close()


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sizes=st.tuples(*(st.lists(st.integers(0, 2), max_size=4) for _ in TABLES)),
    sql=query(2),
)
def test_the_bound_holds_on_every_database(
    con: Any, sizes: tuple[list[int], ...], sql: str
) -> None:
    for name, values in zip(TABLES, sizes, strict=True):
        con.execute(f"CREATE OR REPLACE TABLE {name}(a INTEGER)")
        if values:
            con.executemany(f"INSERT INTO {name} VALUES (?)", [[v] for v in values])
    rows = len(con.execute(sql).fetchall())
    counts = {name: len(values) for name, values in zip(TABLES, sizes, strict=True)}
    columns = {name: {"a"} for name in TABLES}
    bound = most_rows(parse_one(sql, read="duckdb"), counts.get, columns.get)
    assert bound is not None, sql
    assert rows <= bound, (sql, rows, bound)


def test_unknown_tables_and_limits_alone() -> None:
    """A table of unknown size gives no bound, unless a LIMIT of the query gives one."""
    assert most_rows(parse_one("SELECT a FROM x"), {}.get) is None
    assert most_rows(parse_one("SELECT a FROM x LIMIT 7"), {}.get) == 7
    assert most_rows(parse_one("SELECT a FROM x UNION ALL SELECT a FROM y LIMIT 3"), {}.get) == 3
    assert most_rows(parse_one("SELECT a FROM x JOIN t ON x.a = t.a"), {"t": 2}.get) is None
    assert most_rows(parse_one("SELECT MAX(a) FROM x"), {}.get) == 1
    assert most_rows(parse_one("SELECT SUM(a) OVER () FROM t"), {"t": 4}.get) == 4


def test_duckdb_drops_a_limit_the_bound_keeps() -> None:
    """The DuckDB defect the oracle avoids, kept visible: when it is fixed this test says so
    (and the public path never relies on it: ``release.public.release_public`` counts the
    rows it got and refuses more than the cap, whatever LIMIT the database honoured)."""
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t(a INTEGER)")
        con.execute("CREATE TABLE u(a INTEGER)")
        con.execute("INSERT INTO u VALUES (0), (0), (0)")
        sql = "SELECT u.a FROM u LEFT JOIN t ON u.a = t.a WHERE u.a >= 0 LIMIT 1"
        assert most_rows(parse_one(sql), {"t": 0, "u": 3}.get) == 1
        if len(con.execute(sql).fetchall()) == 1:
            pytest.fail(f"DuckDB {duckdb.__version__} honours this LIMIT now: drop the note")
        con.execute("PRAGMA disable_optimizer")
        assert len(con.execute(sql).fetchall()) == 1
    finally:
        con.close()


@pytest.mark.parametrize(
    ("sql", "rows", "bound"),
    [  # t = {0, 1, 2}, u = {0}: the unmatched rows of t make one more group, NULL
        ("SELECT u.a FROM t LEFT JOIN u ON t.a = u.a GROUP BY u.a", 2, 2),
        ("SELECT DISTINCT u.a FROM t LEFT JOIN u ON t.a = u.a", 2, 2),
        ("SELECT u.a FROM t JOIN u ON t.a = u.a GROUP BY u.a", 1, 1),
        ("SELECT t.a + u.a FROM t FULL JOIN u ON t.a = u.a GROUP BY 1", 2, 7),
    ],
)
def test_groups_count_the_nulls_of_an_outer_join(sql: str, rows: int, bound: int) -> None:
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (0), (1), (2)) v(a)")
        con.execute("CREATE TABLE u AS SELECT * FROM (VALUES (0)) v(a)")
        assert len(con.execute(sql).fetchall()) == rows
    finally:
        con.close()
    got = most_rows(parse_one(sql), {"t": 3, "u": 1}.get, {"t": {"a"}, "u": {"a"}}.get)
    assert got == bound

"""rewrite/inline.py: the ``__rows`` CTE written in place (DuckDB), same rows, same values."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from dpproxy.rewrite.inline import inline_rows

ROWS = (
    "WITH __rows AS (SELECT pid AS __unit, g AS __key_0, "
    "CASE WHEN CAST(x AS DOUBLE) < 0 THEN 0 WHEN CAST(x AS DOUBLE) > 10 THEN 10 "
    "ELSE CAST(x AS DOUBLE) END - 1 AS __p0_m FROM t WHERE (y > 0)) "
)
# (the statement dpproxy builds, what inline_rows makes of it)
CASES = [
    (
        "WITH __rows AS (SELECT pid AS __unit FROM t WHERE (y > 0)) "
        "SELECT COUNT(*) AS __p0 FROM __rows",
        "SELECT COUNT(*) AS __p0 FROM t WHERE (y > 0)",
    ),
    (
        "WITH __rows AS (SELECT pid AS __unit, g AS __key_0 FROM t) "
        "SELECT __key_0, COUNT(*) AS __p0, COUNT(__unit) AS __p1 FROM __rows GROUP BY __key_0",
        "SELECT g AS __key_0, COUNT(*) AS __p0, COUNT(pid) AS __p1 FROM t GROUP BY g",
    ),
    (  # read once under an operator: parenthesised
        ROWS + "SELECT __key_0, SUM(__p0_m * 2) AS __p0 FROM __rows GROUP BY __key_0",
        "SELECT g AS __key_0, SUM((CASE WHEN CAST(x AS DOUBLE) < 0 THEN 0 WHEN CAST(x AS DOUBLE)"
        " > 10 THEN 10 ELSE CAST(x AS DOUBLE) END - 1) * 2) AS __p0 FROM t WHERE (y > 0) "
        "GROUP BY g",
    ),
    (  # read twice: a derived table, without the unit nobody reads
        ROWS + "SELECT __key_0, COUNT(__p0_m) AS __p0, SUM(__p0_m * __p0_m) AS __p1 "
        "FROM __rows GROUP BY __key_0",
        "SELECT __key_0, COUNT(__p0_m) AS __p0, SUM(__p0_m * __p0_m) AS __p1 FROM (SELECT g AS "
        "__key_0, CASE WHEN CAST(x AS DOUBLE) < 0 THEN 0 WHEN CAST(x AS DOUBLE) > 10 THEN 10 "
        "ELSE CAST(x AS DOUBLE) END - 1 AS __p0_m FROM t WHERE (y > 0)) AS __rows "
        "GROUP BY __key_0",
    ),
    (  # a CAST to the type its operand already is cast to: left out
        "WITH __rows AS (SELECT pid AS __unit, CAST(CASE WHEN y < 0 THEN 0 ELSE y END AS BIGINT)"
        " AS __p0_m FROM t) SELECT COALESCE(SUM(CAST(__p0_m AS BIGINT)), 0) AS __p0 FROM __rows",
        "SELECT COALESCE(SUM(CAST(CASE WHEN y < 0 THEN 0 ELSE y END AS BIGINT)), 0) AS __p0 FROM t",
    ),
]
CASES += [
    (  # COUNT of a clamp counts the clamped column's non-NULL rows: read once, flattened
        "WITH __rows AS (SELECT pid AS __unit, g AS __key_0, CASE WHEN CAST(x AS DOUBLE) < 0 "
        "THEN 0 WHEN CAST(x AS DOUBLE) > 10 THEN 10 ELSE CAST(x AS DOUBLE) END AS __p0_m FROM t)"
        " SELECT __key_0, COUNT(__p0_m) AS __p0, SUM(__p0_m - 5) AS __p1 FROM __rows "
        "GROUP BY __key_0",
        "SELECT g AS __key_0, COUNT(x) AS __p0, SUM(CASE WHEN CAST(x AS DOUBLE) < 0 THEN 0 WHEN "
        "CAST(x AS DOUBLE) > 10 THEN 10 ELSE CAST(x AS DOUBLE) END - 5) AS __p1 FROM t GROUP BY g",
    ),
    (  # a clamp of another column than its comparisons': not a clamp, read twice
        "WITH __rows AS (SELECT pid AS __unit, CASE WHEN y < 0 THEN 0 ELSE x END AS __p0_m "
        "FROM t) SELECT COUNT(__p0_m) AS __p0, SUM(__p0_m) AS __p1 FROM __rows",
        "SELECT COUNT(__p0_m) AS __p0, SUM(__p0_m) AS __p1 FROM (SELECT CASE WHEN y < 0 THEN 0 "
        "ELSE x END AS __p0_m FROM t) AS __rows",
    ),
]
KEPT = [
    # contribution bounding: more than one CTE
    "WITH __rows AS (SELECT pid AS __unit FROM t), __bounded AS (SELECT * FROM __rows) "
    "SELECT COUNT(*) AS __p0 FROM __bounded",
    # a subquery in the outer query (rewrite/unclamp.py's correction)
    "WITH __rows AS (SELECT pid AS __unit, y AS __p0_m FROM t) "
    "SELECT SUM(__p0_m) + (SELECT SUM(y) FROM t) AS __p0 FROM __rows",
    # the public domain's semi-join around the groups
    "WITH __rows AS (SELECT pid AS __unit, g AS __key_0 FROM t) SELECT * FROM (SELECT __key_0,"
    " COUNT(*) AS __p0 FROM __rows GROUP BY __key_0) AS __groups WHERE (__key_0 IN ('a'))",
]


def _table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t (pid BIGINT, g TEXT, x DOUBLE, y INTEGER, __p0 INTEGER)")
    con.execute(
        "INSERT INTO t VALUES (1, 'a', 3.5, 1, 0), (2, 'a', NULL, 2, 0), (3, 'b', -4, 3, 0), "
        "(4, NULL, 1e300, 0, 0), (NULL, 'b', 'NaN', NULL, 0), (6, 'c', 7.25, -5, 0)"
    )


@pytest.mark.parametrize(("sql", "expected"), CASES)
def test_written_in_place_gives_the_same_rows(sql: str, expected: str) -> None:
    out = inline_rows(sqlglot.parse_one(sql, read="duckdb")).sql(dialect="duckdb")
    assert out == expected
    con = duckdb.connect()
    _table(con)
    # compared as text: NaN (the 'NaN' row) is not equal to itself
    assert sorted(map(repr, con.execute(out).fetchall())) == sorted(
        map(repr, con.execute(sql).fetchall())
    )


@pytest.mark.parametrize("sql", KEPT)
def test_other_shapes_are_left_as_they_are(sql: str) -> None:
    tree = sqlglot.parse_one(sql, read="duckdb")
    assert inline_rows(tree).sql(dialect="duckdb") == tree.sql(dialect="duckdb")
    assert inline_rows(tree).args.get("with_") is not None


def test_a_column_named_like_an_alias_is_not_flattened() -> None:
    """``t.__p0`` shares the outer query's alias ``__p0``: the rows stay a derived table."""
    sql = (
        "WITH __rows AS (SELECT pid AS __unit, y + __p0 AS __p0_m FROM t) "
        "SELECT SUM(__p0_m) AS __p0 FROM __rows"
    )
    out = inline_rows(sqlglot.parse_one(sql, read="duckdb")).sql(dialect="duckdb")
    assert out == "SELECT SUM(__p0_m) AS __p0 FROM (SELECT y + __p0 AS __p0_m FROM t) AS __rows"
    con = duckdb.connect()
    _table(con)
    assert con.execute(out).fetchall() == con.execute(sql).fetchall()

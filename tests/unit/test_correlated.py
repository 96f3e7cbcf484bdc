"""The tree work of correlated subqueries keyed on a public table (``sql/correlated.py``): the
shape found, the key domain query (the enclosing SELECT's conjuncts over the public table only),
the keyed release, and the released table written back as a CASE over the outer key."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from sqlglot import exp

from dpproxy.catalog.load import load_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.correlated import Correlation, correlation, key_codes, keyed_sql, literal, lookup
from dpproxy.sql.parse import parse
from dpproxy.sql.scalars import find_scalars, outer_columns

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "tpch"


@pytest.fixture(scope="module")
def tpch() -> Catalog:
    return load_catalog(ROOT / "schemas" / "tpch.yaml")


def _corr(sql: str, catalog: Catalog) -> Correlation:
    tree = parse(sql)
    (node,) = find_scalars(tree)
    return correlation(node, outer_columns(node.this, catalog, tree), catalog)


def test_q17_is_keyed_on_part(tpch: Catalog) -> None:
    corr = _corr((CORPUS / "q17.sql").read_text(encoding="utf-8"), tpch)
    assert corr.table == "part"
    assert [c.sql() for c in corr.inner] == ["l_partkey"]
    assert [c.sql() for c in corr.outer] == ["p_partkey"]
    assert corr.domain_sql == (
        "SELECT DISTINCT p_partkey FROM part WHERE p_brand = 'Brand#23' AND "
        "p_container = 'MED BOX' AND NOT p_partkey IS NULL"
    )  # the join equality and the correlated comparison itself read other tables
    assert not corr.counts
    assert "l_partkey" not in corr.rest.sql()  # the correlation is taken out


def test_q20_is_keyed_on_partsupp_with_its_public_subquery(tpch: Catalog) -> None:
    corr = _corr((CORPUS / "q20.sql").read_text(encoding="utf-8"), tpch)
    assert corr.table == "partsupp"
    assert [c.sql() for c in corr.outer] == ["ps_partkey", "ps_suppkey"]
    assert corr.domain_sql == (
        "SELECT DISTINCT ps_partkey, ps_suppkey FROM partsupp WHERE ps_partkey IN "
        "(SELECT p_partkey FROM part WHERE p_name LIKE 'forest%') AND NOT ps_partkey IS NULL "
        "AND NOT ps_suppkey IS NULL"
    )
    sql = keyed_sql(corr, [(1, 2), (1, 3), (4, 2)])  # integer keys: grouped by their code
    assert sql.startswith(
        "SELECT l_partkey * 4 + l_suppkey AS key_index, "
        "0.5 * SUM(l_quantity) AS value, COUNT(*) AS key_rows FROM lineitem WHERE "
    )
    assert (
        "l_partkey IN (1, 4) AND l_suppkey IN (2, 3) AND l_partkey * 4 + l_suppkey IN (6, 7, 18)"
        in sql
    )
    assert sql.endswith("GROUP BY 1") and "CASE" not in sql
    sql = keyed_sql(corr, [(1, 2), (1, -3)])  # a negative key: the CASE of key indexes
    assert sql.startswith(
        "SELECT CASE WHEN l_partkey = 1 AND l_suppkey = 2 THEN 0 WHEN l_partkey = 1 AND "
        "l_suppkey = (-3) THEN 1 END AS key_index, "
        "0.5 * SUM(l_quantity) AS value, COUNT(*) AS key_rows FROM lineitem WHERE "
    )


def test_key_codes_are_distinct_and_exact() -> None:
    keys = [(1, 2), (1, 3), (4, 2), (0, 0)]
    assert key_codes(keys) == [6, 7, 18, 0]  # k1 * (max k2 + 1) + k2
    assert key_codes([(5,), (-2,)]) == [5, -2]  # one column: the key itself
    assert key_codes([(1, True)]) is None and key_codes([(1, 2.0)]) is None
    assert key_codes([(2**40, 2**20)]) is None  # beyond 2**53: not exact as a DOUBLE
    assert key_codes([(1, 2, 3), (0, 1, 0)]) == [1 * 3 * 4 + 2 * 4 + 3, 4]


def test_the_lookup_case(tpch: Catalog) -> None:
    corr = _corr((CORPUS / "q20.sql").read_text(encoding="utf-8"), tpch)
    keys = [(1, 2), (1, 3), (4, 2)]
    case = lookup(corr, keys, [2.5, None, -3])
    assert case.sql("postgres") == (
        "CASE WHEN ps_partkey = 1 AND ps_suppkey = 2 THEN 2.5 "
        "WHEN ps_partkey = 4 AND ps_suppkey = 2 THEN (-3.0) END"
    )  # a key without a value has no branch: NULL, as the subquery over no rows
    assert isinstance(lookup(corr, keys, [None, None, None]), exp.Null)
    # a value that is not finite (post-processing overflowed) has no branch either
    assert lookup(corr, keys, [float("nan"), float("inf"), 2]).sql("postgres") == (
        "CASE WHEN ps_partkey = 4 AND ps_suppkey = 2 THEN 2.0 END"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (5, "5"),
        (-5, "(-5)"),
        ("it's", "'it''s'"),
        (True, "TRUE"),
        (None, "NULL"),
        (datetime.date(1994, 1, 1), "CAST('1994-01-01' AS DATE)"),
    ],
)
def test_key_literals(value: object, text: str) -> None:
    assert literal(value).sql("postgres") == text


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT COUNT(*) FROM orders WHERE o_totalprice > (SELECT AVG(l_extendedprice) "
            "FROM lineitem WHERE l_orderkey = o_orderkey)",
            "of the private table orders",
        ),
        (
            "SELECT COUNT(*) FROM part WHERE p_size > (SELECT AVG(l_quantity) FROM lineitem "
            "WHERE l_partkey = p_partkey OR l_quantity > p_size)",
            "only as inner_column = outer_column",
        ),
        (
            "SELECT COUNT(*) FROM part LEFT JOIN partsupp ON ps_partkey = p_partkey WHERE "
            "p_size > (SELECT AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)",
            "inner joins only",
        ),
    ],
)
def test_refused_shapes(sql: str, message: str, tpch: Catalog) -> None:
    with pytest.raises(UnsupportedQuery, match=message):
        _corr(sql, tpch)


def test_a_count_is_zero_for_a_key_outside_the_domain(tpch: Catalog) -> None:
    """A NULL outer key matches no inner row: SQL's COUNT over no rows is 0, not NULL."""
    corr = _corr(
        "SELECT COUNT(*) FROM part WHERE p_size > "
        "(SELECT 2 * COUNT(*) + 1 FROM lineitem WHERE l_partkey = p_partkey)",
        tpch,
    )
    assert corr.counts
    assert lookup(corr, [(7,)], [4]).sql("postgres") == (
        "CASE WHEN p_partkey = 7 THEN 4.0 ELSE (2 * 0 + 1) END"
    )
    assert lookup(corr, [(7,)], [None]).sql("postgres") == "(2 * 0 + 1)"

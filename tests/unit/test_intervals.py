"""DP_INTERVAL_LOW/HIGH (validation, one release, the ends) and the EXPLAIN statement's parser."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpproxy.catalog.model import Catalog
from dpproxy.errors import DPProxyError
from dpproxy.explain_command import ExplainStatement, parse_explain, query_start
from dpproxy.explain_errors import column_errors
from dpproxy.planning.plan import AggregatePlan, QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.release.intervals import interval_ends, interval_notes, requested
from dpproxy.server.notices import release_notice
from dpproxy.sql.parse import parse
from dpproxy.sql.scope import AggKind
from dpproxy.sql.validate import validate
from dpproxy.values import Cost, Interval


def _plan(catalog: Catalog, sql: str) -> QueryPlan:
    return plan_query(validate(parse(sql), catalog, sql), catalog.policy)


def test_the_aggregate_inside_and_outside_is_one_release(demo_catalog: Catalog) -> None:
    plain = _plan(demo_catalog, "SELECT sex, AVG(age) FROM adult GROUP BY sex")
    both = _plan(
        demo_catalog,
        "SELECT sex, AVG(age), DP_INTERVAL_LOW(AVG(age)) AS lo, dp_interval_high(avg(age)) "
        "FROM adult GROUP BY sex",
    )
    assert both.cost == plain.cost
    assert both.primitives == plain.primitives
    assert len(both.aggregates) == 1
    assert [o.name for o in both.query.outputs] == ["sex", "avg", "lo", "dp_interval_high"]
    assert [o.expr.sql() for o in both.query.outputs[1:]] == ["__agg_0", "__lo_0", "__hi_0"]
    assert requested(both) == [0]
    # alone, the interval still releases (and charges) its aggregate once
    alone = _plan(demo_catalog, "SELECT DP_INTERVAL_HIGH(COUNT(*)) FROM adult")
    assert len(alone.aggregates) == 1 and alone.cost.epsilon == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT DP_INTERVAL_LOW(age) FROM adult",
        "SELECT COUNT(*), DP_INTERVAL_LOW(COUNT(*) + 1) FROM adult",
        "SELECT DP_INTERVAL_LOW(COUNT(*), SUM(age)) FROM adult",
        "SELECT DP_INTERVAL_LOW() FROM adult",
        "SELECT COUNT(*) FROM adult WHERE DP_INTERVAL_LOW(age) > 1",
    ],
)
def test_an_interval_needs_one_aggregate(demo_catalog: Catalog, sql: str) -> None:
    with pytest.raises(DPProxyError) as err:
        validate(parse(sql), demo_catalog, sql)
    assert err.value.sqlstate in ("0A000", "42501", "42803", "42883")


def test_interval_in_having_and_order_by(demo_catalog: Catalog) -> None:
    p = _plan(
        demo_catalog,
        "SELECT education, COUNT(*) FROM adult GROUP BY education "
        "HAVING DP_INTERVAL_LOW(COUNT(*)) > 100 ORDER BY DP_INTERVAL_HIGH(COUNT(*)) DESC",
    )
    assert requested(p) == [0]


def _agg(kind: AggKind, lo: int | None = None, hi: int | None = None) -> AggregatePlan:
    bounds = Interval(Fraction(lo), Fraction(hi)) if lo is not None and hi is not None else None
    return AggregatePlan(kind, ("__p0",), bounds)


def test_interval_ends_clip_to_what_the_noiseless_value_can_be() -> None:
    assert interval_ends(_agg(AggKind.COUNT_STAR), None) == (None, None)
    assert interval_ends(_agg(AggKind.COUNT_STAR), (-3.5, 8.2)) == (0.0, 8.0)
    assert interval_ends(_agg(AggKind.COUNT_STAR), (10.2, 30.9), max_count=20) == (11.0, 20.0)
    assert interval_ends(_agg(AggKind.SUM, 0, 90), (-5.0, 100.0)) == (0.0, 100.0)
    assert interval_ends(_agg(AggKind.SUM, -9, -1), (-5.0, 4.0)) == (-5.0, 0.0)
    assert interval_ends(_agg(AggKind.SUM, -9, 9), (-5.0, 4.0)) == (-5.0, 4.0)
    assert interval_ends(_agg(AggKind.AVG, 17, 90), (10.0, 20.0)) == (17.0, 20.0)
    assert interval_ends(_agg(AggKind.MEDIAN, 17, 90), (85.0, 95.0)) == (85.0, 90.0)


def test_exponential_median_interval_is_null_with_a_reason(demo_catalog: Catalog) -> None:
    p = _plan(demo_catalog, "SELECT MEDIAN(age), DP_INTERVAL_LOW(MEDIAN(age)) FROM adult")
    (note,) = interval_notes(p)
    assert "MEDIAN(age) is NULL" in note and "exponential mechanism" in note and "rank" in note
    assert "mechanism=ptr" in note
    plain = _plan(demo_catalog, "SELECT MEDIAN(age) FROM adult")
    assert interval_notes(plain) == []  # no interval asked for: nothing to say


def test_release_notice() -> None:
    rem = Cost(Fraction(9), Fraction(1, 100000))
    assert release_notice(Cost(Fraction(1)), rem, False) == (
        "dpproxy: this answer cost ε=1, δ=0; budget left ε=9, δ=1e-05"
    )
    assert release_notice(Cost.zero(), rem, True) == (
        "dpproxy: this answer came from the cache, no cost; budget left ε=9, δ=1e-05"
    )


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("EXPLAIN SELECT 1", ExplainStatement("SELECT 1", False)),
        ("  explain\n(FORMAT JSON) SELECT 1;", ExplainStatement("SELECT 1", True)),
        ("EXPLAIN (VERBOSE, COSTS off, FORMAT text) SELECT 1", ExplainStatement("SELECT 1", False)),
        ("EXPLAIN (ANALYZE false) SELECT 1", ExplainStatement("SELECT 1", False)),
        ("EXPLAIN VERBOSE SELECT 1", ExplainStatement("SELECT 1", False)),
        ("SELECT 1", None),
        ("EXPLAINED", None),
        (
            "-- why\n/* c */ EXPLAIN /*+ dpproxy bins=10 */ SELECT 1",
            ExplainStatement("/*+ dpproxy bins=10 */ SELECT 1", False),
        ),
        ("/* EXPLAIN */ SELECT 1", None),
    ],
)
def test_parse_explain(sql: str, expected: ExplainStatement | None) -> None:
    assert parse_explain(sql) == expected


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        ("EXPLAIN ANALYZE SELECT 1", "0A000"),
        ("EXPLAIN VERBOSE ANALYSE SELECT 1", "0A000"),
        ("EXPLAIN (ANALYZE) SELECT 1", "0A000"),
        ("EXPLAIN (FORMAT YAML) SELECT 1", "0A000"),
        ("EXPLAIN (COLOUR on) SELECT 1", "42601"),
        ("EXPLAIN (,) SELECT 1", "42601"),
        ("EXPLAIN", "42601"),
    ],
)
def test_parse_explain_refusals(sql: str, sqlstate: str) -> None:
    with pytest.raises(DPProxyError) as err:
        parse_explain(sql)
    assert err.value.sqlstate == sqlstate


def test_query_start() -> None:
    sql = "EXPLAIN (FORMAT JSON) SELECT COUNT(*) FROM adult WHERE age > $1"
    start = query_start(sql)
    assert start is not None and sql[start:].strip().startswith("SELECT")
    assert query_start("SELECT 1") is None


def test_explain_names_the_interval_columns(demo_catalog: Catalog) -> None:
    p = _plan(
        demo_catalog,
        "SELECT MEDIAN(age), DP_INTERVAL_LOW(MEDIAN(age)), DP_INTERVAL_HIGH(AVG(age)) FROM adult",
    )
    errors = {c.name: c.error95 for c in column_errors(p)}
    assert errors["dp_interval_low"].startswith("lower end of the 95% interval of median(age)")
    assert "NULL for this plan" in errors["dp_interval_low"]
    assert errors["dp_interval_high"].startswith("upper end of the 95% interval of avg(age)")
    assert "no cost of its own" in errors["dp_interval_high"]

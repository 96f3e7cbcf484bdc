"""The shared workload of the peer comparison: data sets, bounds, privacy unit and queries.

Pure data and the standard library only, so the adapter of every system (each in its own
virtual environment) can import it by path. See INTERFACE.md.
"""

from __future__ import annotations

from dataclasses import dataclass

EPSILON = 1.0  # per query, for every system
DELTA = 1e-5  # where a mechanism needs one
TABLE = "data"  # the table name in every query
UNIT = "pid"  # the privacy unit: one row per person


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "int" | "text"
    lower: float | None = None
    upper: float | None = None
    domain: tuple[str, ...] | None = None  # public values of a text column


# One schema for every system: PUMS (1,000 rows) and a synthetic table with the same columns.
COLUMNS: tuple[Column, ...] = (
    Column("pid", "int"),
    Column("age", "int", 0, 100),
    Column("sex", "text", domain=("0", "1")),
    Column("educ", "text"),  # 16 levels; no public domain: groups need partition selection
    Column("race", "text", domain=("1", "2", "3", "4", "5", "6")),
    Column("income", "int", 0, 500_000),
    Column("married", "text", domain=("0", "1")),
)

DATASETS = {
    "pums": 1_000,  # ../shared/data/pums/PUMS_pid.csv
    "adult": 32_561,  # ../shared/data/adult/adult.data in PUMS's columns and codes (data.py)
    "synthetic_1m": 1_000_000,  # data.py, fixed seed
    "tpch": 6_001_215,  # the line items of TPC-H at scale 1 (data.py, tpchgen-cli)
}


@dataclass(frozen=True)
class Query:
    id: str
    title: str
    sql: str  # PostgreSQL dialect; table `data`, or the TPC-H tables for the tpch queries
    kind: str  # for the report's grouping: count, sum, avg, var, group, quantile, rate, post, join
    datasets: tuple[str, ...] = ("pums", "adult", "synthetic_1m")  # the data sets it runs on


QUERIES: tuple[Query, ...] = (
    Query("Q01", "COUNT(*)", "SELECT COUNT(*) AS n FROM data", "count"),
    Query(
        "Q02", "filtered COUNT", "SELECT COUNT(*) AS n FROM data WHERE age > 40", "count"
    ),
    Query("Q03", "SUM(income)", "SELECT SUM(income) AS s FROM data", "sum"),
    Query("Q04", "AVG, narrow bound (age)", "SELECT AVG(age) AS a FROM data", "avg"),
    Query("Q05", "AVG, wide bound (income)", "SELECT AVG(income) AS a FROM data", "avg"),
    Query("Q06", "VAR(age)", "SELECT VAR_SAMP(age) AS v FROM data", "var"),
    Query("Q07", "STDDEV(income)", "SELECT STDDEV_SAMP(income) AS sd FROM data", "var"),
    Query(
        "Q08",
        "COUNT by a public domain (sex)",
        "SELECT sex, COUNT(*) AS n FROM data GROUP BY sex",
        "group",
    ),
    Query(
        "Q09",
        "COUNT by private keys (educ), partition selection",
        "SELECT educ, COUNT(*) AS n FROM data GROUP BY educ",
        "group",
    ),
    Query(
        "Q10",
        "grouped AVG (age by sex)",
        "SELECT sex, AVG(age) AS a FROM data GROUP BY sex",
        "group",
    ),
    Query("Q11", "MEDIAN(age)", "SELECT MEDIAN(age) AS m FROM data", "quantile"),
    Query(
        "Q12",
        "90th percentile of income",
        "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p90 FROM data",
        "quantile",
    ),
    Query(
        "Q13",
        "a rate (AVG of a 0/1 expression)",
        "SELECT AVG(CASE WHEN married = '1' THEN 1 ELSE 0 END) AS rate FROM data",
        "rate",
    ),
    Query(
        "Q14",
        "HAVING, ORDER BY, LIMIT",
        "SELECT race, COUNT(*) AS n FROM data GROUP BY race HAVING COUNT(*) > 50 "
        "ORDER BY n DESC LIMIT 3",
        "post",
    ),
    Query(
        "Q15",
        "filtered AVG",
        "SELECT AVG(income) AS a FROM data WHERE age > 30",
        "avg",
    ),
    Query(
        "Q16",
        "grouped SUM (income by sex)",
        "SELECT sex, SUM(income) AS s FROM data GROUP BY sex",
        "group",
    ),
    # TPC-H at scale 1 with the customer as the privacy unit (the set-up of Wilson et al.,
    # "Differentially Private SQL with Bounded User Contribution", PoPETs 2020): a customer owns
    # their orders, and the line items of those orders.
    Query(
        "T01",
        "TPC-H Q1 style (line items, customer as unit)",
        "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, "
        "SUM(l_extendedprice) AS sum_base_price, AVG(l_discount) AS avg_disc, "
        "COUNT(*) AS count_order FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' "
        "GROUP BY l_returnflag, l_linestatus",
        "join",
        ("tpch",),
    ),
    Query(
        "T03",
        "TPC-H Q3 style (three-table join)",
        "SELECT o_orderpriority, SUM(l_extendedprice) AS revenue, COUNT(*) AS lines "
        "FROM customer JOIN orders ON c_custkey = o_custkey "
        "JOIN lineitem ON l_orderkey = o_orderkey "
        "WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15' "
        "GROUP BY o_orderpriority",
        "join",
        ("tpch",),
    ),
)

BY_ID = {q.id: q for q in QUERIES}


def queries_for(dataset: str) -> tuple[Query, ...]:
    """The workload queries that run on ``dataset`` (in workload order)."""
    return tuple(q for q in QUERIES if dataset in q.datasets)


# ---------------------------------------------------------------------------- TPC-H
# The tpch data set: the TPC-H tables at scale TPCH_SCALE, generated offline by tpchgen-cli
# (dpproxy.tpch.generate_tpch; data.py). Under <data dir>/tpch/: tpch.duckdb, and one Parquet
# file per table (customer.parquet, orders.parquet, lineitem.parquet and the public tables);
# in PostgreSQL, schema TPCH_PG_SCHEMA. Everything below is copied from schemas/tpch.yaml.
TPCH_SCALE = 1.0
TPCH_PG_SCHEMA = "compare_tpch"
TPCH_TABLES = ("customer", "orders", "lineitem")  # the private tables the queries read
# The privacy unit: a customer. Each private table's way to it, as the hops
# (column, referenced table, referenced column) from the table to the customer.
TPCH_UNIT = ("customer", "c_custkey")
TPCH_UNIT_PATHS: dict[str, list[tuple[str, str, str]]] = {
    "customer": [],
    "orders": [("o_custkey", "customer", "c_custkey")],
    "lineitem": [("l_orderkey", "orders", "o_orderkey"), ("o_custkey", "customer", "c_custkey")],
}
# Public bounds of the numeric columns the queries aggregate (TPC-H specification, clause 4.2.3).
TPCH_BOUNDS: dict[str, tuple[float, float]] = {
    "l_quantity": (1.0, 50.0),
    "l_extendedprice": (0.0, 104_950.0),
    "l_discount": (0.0, 0.10),
}
# Public domains of the text columns the queries group or filter by (clause 4.2.2.13, 4.2.3).
TPCH_DOMAINS: dict[str, tuple[str, ...]] = {
    "l_returnflag": ("A", "N", "R"),
    "l_linestatus": ("F", "O"),
    "o_orderpriority": ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"),
    "c_mktsegment": ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"),
}
# The bound on rows per customer given to a peer that needs one (a guess made without looking
# at the data: at scale 1 a customer with orders has about 15 orders of 1 to 7 line items).
# dpproxy is not given it: it chooses its bound per query with DP from a share of ε.
TPCH_GUESS_ROWS = 100

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
    "synthetic_1m": 1_000_000,  # data.py, fixed seed
}


@dataclass(frozen=True)
class Query:
    id: str
    title: str
    sql: str  # PostgreSQL dialect, table `data`
    kind: str  # for the report's grouping: count, sum, avg, var, group, quantile, rate, post


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
)

BY_ID = {q.id: q for q in QUERIES}

"""The Tumult Analytics adapter of the peer comparison (INTERFACE.md), run with its own venv.

Tumult Analytics (``tmlt.analytics``, on Tumult Core and PySpark) has no SQL front end: every
workload query is written here once more as a ``QueryBuilder`` program (``PROGRAMS``: query id →
a function that builds the query, evaluates it and post-processes the released DataFrame),
following its SQL: the same filters, the same clamping bounds (``workload.COLUMNS``), groups
over the public domains of sex/race/married as ``KeySet.from_dict``, MEDIAN/PERCENTILE_CONT as
``median``/``quantile`` (Tumult's exponential mechanism over [low, high]), VAR_SAMP/STDDEV_SAMP as
``variance``/``stdev`` (Tumult's are the sample statistics, n − 1), the rate as the ``average`` of
a 0/1 column made by ``map``, and HAVING/ORDER BY/LIMIT applied in pandas to the released rows
(post-processing, free).

Privacy unit: ``AddRowsWithID("pid")`` with ``enforce(MaxRowsPerID(1))`` in every program: the
neighbouring relation is adding or removing every row of one ``pid``, and Tumult truncates each
pid to one row (hash-based, data independent) before aggregating. That is dpproxy's policy
(privacy unit ``pid``, ``max_rows_per_unit: 1``, add/remove) and holds whatever the data; with
one row per pid, as in these files, it is the same relation as ``AddOneRow()`` and gives the
same noise scales, only with a truncation step more in each Spark plan. ``--protected-change
row`` runs ``AddOneRow()`` instead (to measure that step's cost).

Budget: two long-lived Sessions on the same cached DataFrame, made once in the set-up: one
``PureDPBudget`` Session for the pure queries and one ``ApproxDPBudget`` Session for Q09 (Tumult
refuses a budget of the other kind in a Session). Each has a large total budget; every query is
evaluated with exactly its own budget (``privacy_budget=`` of ``evaluate``), and the adapter
checks after every run that the Session's remaining budget went down by exactly (ε, δ).
Pure queries: ``PureDPBudget(ε)``. Q09 (educ has no public domain): Tumult's DP partition
selection, ``get_groups(["educ"])`` (its geometric-noise count with a threshold derived from
(ε, δ)), with ``ApproxDPBudget(ε/2, δ)``, then the noisy counts over the released keys with
``ApproxDPBudget(ε/2, 0)``: (ε, δ) in all, the same half/half split as dpproxy's
``selection_share`` (and as Tumult's own experimental ``auto_partition_selection``). No key set
is read from the data.

TPC-H (``--dataset tpch``; T01, T03): three private tables in ONE ID space, the customer
(``workload.TPCH_UNIT``): ``Session.Builder().with_id_space("customer")`` with
``AddRowsWithID(id_column, id_space="customer")`` on ``customer`` (``c_custkey``), ``orders``
(``o_custkey``) and ``lineitem`` (``l_custkey``); one ``PureDPBudget`` Session. Tumult needs the
privacy ID as a column of every private table, and line items have none: at set-up the adapter
gives each line item its order's customer key by a join in Spark (``lineitem ⋈ orders`` on
``l_orderkey = o_orderkey``, the first hop of ``workload.TPCH_UNIT_PATHS["lineitem"]``). That
is the data owner's preparation, done once and timed in ``setup_s`` (``tpch_prep_s`` in the
lines: reading, the ID join and caching); dpproxy follows the same path inside each query. Only
the columns the TPC-H queries read are loaded (DECIMAL, if any, cast to double: Tumult has no
decimal type), and the three tables are cached. Each program:

* filters first (the SQL's WHERE, as Spark SQL strings), narrows the rows to the columns it
  needs, then truncates with ``enforce(MaxRowsPerID(workload.TPCH_GUESS_ROWS))`` (100 rows per
  customer; Tumult has no automatic choice, dpproxy draws its bound with DP). ``MaxRowsPerID``
  rather than ``MaxGroupsPerID(g)`` × ``MaxRowsPerGroupPerID(r)``: under PureDP (Laplace)
  Tumult's sensitivity of the pair is g·r, so the same noise (g·r = 100) would cut every
  customer to r rows *in each group* (T01: g = 4 flag/status groups, r = 25; T03: g = 5
  priorities, r = 20), dropping more rows than one cap of 100 over all groups; the pair only
  pays under zCDP (√g). The cap drops 1.4% of T01's line items (6,933 customers have more
  than 100, up to 178), a bias in its sums and counts; T03 loses 2 rows (one customer has 102);
* groups by ``KeySet.from_dict`` over ``workload.TPCH_DOMAINS`` (T01: the 3 × 2 cross product
  of l_returnflag × l_linestatus, so the two combinations that never occur, (A, O) and (R, O),
  are released too, as pure noise; T03: the 5 priorities);
* answers each SELECT aggregate as one Tumult aggregation (Tumult has one aggregation per
  query) with an equal share of ε (T01: four of ε/4, T03: two of ε/2; sequential composition,
  ε in all, checked against the Session), clamped with ``workload.TPCH_BOUNDS``: SUM as
  ``sum(col, lo, hi)``, COUNT(*) as ``count()``, and T01's AVG(l_discount) as the released
  clamped SUM(l_discount) over the released COUNT(*) of the same groups and rows (post-
  processing; ``max(1, count)`` as in Tumult's own average, the ratio clamped to the bounds).
  Tumult's ``average()`` would be the literal translation, but Tumult Core shifts every row by
  the midpoint in a row-by-row Python map (``rdd.map``): 466 s for one T01 run at scale 1 on 2
  cores instead of about 55 s, over the harness' ``--query-timeout``; ``--tpch-avg average``
  runs it. The released frames are merged on the keys in pandas (post-processing);
* keeps the filtered, joined, truncated rows of one run in a cached in-session view
  (``create_view(..., cache=True)``, free of budget, deleted at the end of the run), so the
  aggregations of a run share the filter, the join and the truncation (Tumult still truncates
  once more inside every aggregation, on the view). ``--tpch-view none`` builds every
  aggregation from the source tables instead (measured 2.5x slower on T01, 2x on T03).
* T03 (customer ⋈ orders ⋈ lineitem) is a private join in the ID space: the three
  ``QueryBuilder``s (each filtered and narrowed with ``select``) get their ID column renamed to
  ``custkey`` (Tumult joins ID tables only on a common ID column name) and ``o_orderkey``/
  ``l_orderkey`` to ``orderkey``, then ``customer.join_private(orders, join_columns=
  ["custkey"]).join_private(lineitem, join_columns=["custkey", "orderkey"])``. The SQL joins
  line items on the order key alone; adding the customer key changes nothing (an order has one
  customer, the one the set-up attached), and Tumult needs it. No truncation at the joins
  (Tumult needs none for ID tables); ``MaxRowsPerID`` on the joined rows.

Spark: local mode on all cores (``local[*]``), ``spark.driver.memory`` 2g, 4 shuffle partitions,
UI off, logging off (a log4j2 file in a temporary directory), the warehouse (where Tumult
materialises every released table) in a temporary directory removed at exit.
``PYSPARK_PYTHON`` is set to this interpreter: Spark's Python workers run Tumult's code (its
noise is added in a pandas UDF; AVG, VAR and STDDEV shift the column by the midpoint of its
bounds in a row-by-row Python map, as does Q13's 0/1 map), so they must import ``tmlt``.
``java`` must be on PATH or ``JAVA_HOME`` set (Java 17 works; nothing else is needed).

``setup_s``: importing PySpark and Tumult, starting Spark, reading the CSV (all columns as text,
age/income/pid cast to integers), caching it, and making the Sessions (TPC-H: reading the three
Parquet files, the ID join, caching, one PureDP Session); its parts go to stderr.
``seconds`` per run: build the program + ``evaluate`` + ``toPandas`` + post-processing.
"""

from __future__ import annotations

import atexit
import functools
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import adapter_kit as kit  # noqa: E402
import workload  # noqa: E402

SYSTEM = "tumult"
SOURCE = "data"
COL = {c.name: c for c in workload.COLUMNS}
TPCH = "tpch"
TPCH_SPACE = "customer"  # the one ID space of the three TPC-H tables
# The privacy ID column of each private TPC-H table; lineitem's is made at set-up (load_tpch).
TPCH_ID = {"customer": "c_custkey", "orders": "o_custkey", "lineitem": "l_custkey"}
# The columns loaded (those the TPC-H queries read, and the keys of the ID join).
TPCH_COLUMNS = {
    "customer": ("c_custkey", "c_mktsegment"),
    "orders": ("o_orderkey", "o_custkey", "o_orderdate", "o_orderpriority"),
    "lineitem": (
        "l_orderkey",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_returnflag",
        "l_linestatus",
        "l_shipdate",
    ),
}
TPCH_VIEW = "tpch_run"  # the per-run view of the filtered, truncated rows
LOG4J2 = """\
# The root at WARN, the level Spark's shell logic expects (else it prints a notice about it);
# the console appender drops everything below FATAL.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = fatal
"""


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bounds(name: str) -> tuple[int, int]:
    c = COL[name]
    assert c.lower is not None and c.upper is not None, name
    return int(c.lower), int(c.upper)


def domain(name: str) -> list[str]:
    c = COL[name]
    assert c.domain is not None, name
    return list(c.domain)


def tpch_bounds(name: str) -> tuple[float, float]:
    lo, hi = workload.TPCH_BOUNDS[name]
    return lo, hi


class Ctx:
    """What a program needs: the Sessions, the budget, and the query builder of the table."""

    def __init__(
        self,
        tmlt: Any,
        pure: Any,
        approx: Any,
        epsilon: float,
        delta: float,
        by_id: bool,
        rows_per_id: int = 1,
        view: str = "cached",
        avg: str = "ratio",
    ) -> None:
        self.t = tmlt  # the tmlt.analytics module
        self.pure = pure
        self.approx = approx  # None for TPC-H (pure queries only)
        self.epsilon = epsilon
        self.delta = delta
        self.by_id = by_id
        self.rows_per_id = rows_per_id  # TPC-H: MaxRowsPerID
        self.view = view  # TPC-H: "cached" (one view per run) or "none"
        self.avg = avg  # TPC-H AVG: "ratio" (SUM / COUNT) or "average" (Tumult's)

    def base(self) -> Any:
        q = self.t.QueryBuilder(SOURCE)
        return q.enforce(self.t.MaxRowsPerID(1)) if self.by_id else q

    def keys(self, *names: str) -> Any:
        return self.t.KeySet.from_dict({n: domain(n) for n in names})

    def pure_eval(self, query: Any) -> Any:
        """One pure query with the whole per-query ε; the released rows as pandas."""
        return self.pure.evaluate(query, self.t.PureDPBudget(self.epsilon)).toPandas()

    def tpch_keys(self, *names: str) -> Any:
        return self.t.KeySet.from_dict({n: list(workload.TPCH_DOMAINS[n]) for n in names})

    def tpch_release(
        self, rows: Callable[[], Any], id_col: str, keys: list[str], aggs: list[Agg]
    ) -> Any:
        """Several aggregates of one SELECT over the same rows, ε split equally among them.

        ``rows()`` builds a fresh QueryBuilder of the (filtered, joined) rows, with the ID
        column ``id_col``; each ``(column, aggregation)`` of ``aggs`` is one Tumult aggregation
        of the grouped rows narrowed to the ID, the keys and ``column`` (None: no measure).
        The rows are truncated to ``MaxRowsPerID(rows_per_id)``; with ``view == "cached"`` the
        truncated rows are a cached in-session view for this run only (no budget), removed at
        the end. The released frames are merged on the keys (post-processing).
        """
        t = self.t
        keyset = self.tpch_keys(*keys)
        share = t.PureDPBudget(self.epsilon / len(aggs))
        truncated = t.MaxRowsPerID(self.rows_per_id)

        def narrowed(source: Any, column: str | None) -> Any:
            return source.select([id_col, *keys, *([column] if column else [])])

        frames = []
        if self.view == "cached":
            self.pure.create_view(rows().enforce(truncated), TPCH_VIEW, cache=True)
            try:
                for column, agg in aggs:
                    q = agg(narrowed(t.QueryBuilder(TPCH_VIEW), column).groupby(keyset))
                    frames.append(self.pure.evaluate(q, share).toPandas())
            finally:
                self.pure.delete_view(TPCH_VIEW)
        else:
            for column, agg in aggs:
                q = agg(narrowed(rows(), column).enforce(truncated).groupby(keyset))
                frames.append(self.pure.evaluate(q, share).toPandas())
        return functools.reduce(lambda a, b: a.merge(b, on=keys, how="outer"), frames)


# A program: Ctx → the released rows (pandas, columns named as the SQL's aliases and keys).
Program = Callable[[Ctx], Any]
# One aggregation of a TPC-H SELECT: its measure column (None for COUNT) and the function that
# turns the grouped QueryBuilder into the Tumult aggregation.
Agg = tuple[str | None, Callable[[Any], Any]]


def q01(c: Ctx) -> Any:  # SELECT COUNT(*) AS n FROM data
    return c.pure_eval(c.base().count(name="n"))


def q02(c: Ctx) -> Any:  # SELECT COUNT(*) AS n FROM data WHERE age > 40
    return c.pure_eval(c.base().filter("age > 40").count(name="n"))


def q03(c: Ctx) -> Any:  # SELECT SUM(income) AS s FROM data
    return c.pure_eval(c.base().sum("income", *bounds("income"), name="s"))


def q04(c: Ctx) -> Any:  # SELECT AVG(age) AS a FROM data
    return c.pure_eval(c.base().average("age", *bounds("age"), name="a"))


def q05(c: Ctx) -> Any:  # SELECT AVG(income) AS a FROM data
    return c.pure_eval(c.base().average("income", *bounds("income"), name="a"))


def q06(c: Ctx) -> Any:  # SELECT VAR_SAMP(age) AS v FROM data
    return c.pure_eval(c.base().variance("age", *bounds("age"), name="v"))


def q07(c: Ctx) -> Any:  # SELECT STDDEV_SAMP(income) AS sd FROM data
    return c.pure_eval(c.base().stdev("income", *bounds("income"), name="sd"))


def q08(c: Ctx) -> Any:  # SELECT sex, COUNT(*) AS n FROM data GROUP BY sex
    return c.pure_eval(c.base().groupby(c.keys("sex")).count(name="n"))


def q09(c: Ctx) -> Any:  # SELECT educ, COUNT(*) AS n FROM data GROUP BY educ
    # educ has no public domain: Tumult's DP partition selection releases the keys with half of
    # ε and all of δ; the counts over the released keys take the other half (pure, δ = 0).
    t = c.t
    half = c.epsilon / 2
    groups = c.approx.evaluate(c.base().get_groups(["educ"]), t.ApproxDPBudget(half, c.delta))
    keys = t.KeySet.from_dataframe(groups)
    counts = c.base().groupby(keys).count(name="n")
    return c.approx.evaluate(counts, t.ApproxDPBudget(half, 0)).toPandas()


def q10(c: Ctx) -> Any:  # SELECT sex, AVG(age) AS a FROM data GROUP BY sex
    return c.pure_eval(c.base().groupby(c.keys("sex")).average("age", *bounds("age"), name="a"))


def q11(c: Ctx) -> Any:  # SELECT MEDIAN(age) AS m FROM data
    return c.pure_eval(c.base().median("age", *bounds("age"), name="m"))


def q12(c: Ctx) -> Any:  # SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p90
    return c.pure_eval(c.base().quantile("income", 0.9, *bounds("income"), name="p90"))


def q13(c: Ctx) -> Any:  # SELECT AVG(CASE WHEN married = '1' THEN 1 ELSE 0 END) AS rate
    t = c.t

    # Nested, so cloudpickle ships it by value to Spark's Python workers (a module-level
    # function would be pickled by reference, which the workers cannot import).
    def married_flag(row: Any) -> dict[str, int]:
        return {"married_flag": 1 if row["married"] == "1" else 0}

    flag = t.ColumnDescriptor(t.ColumnType.INTEGER, allow_null=False)
    q = c.base().map(married_flag, new_column_types={"married_flag": flag}, augment=True)
    return c.pure_eval(q.average("married_flag", 0, 1, name="rate"))


def q14(c: Ctx) -> Any:  # race, COUNT(*) AS n ... HAVING COUNT(*) > 50 ORDER BY n DESC LIMIT 3
    df = c.pure_eval(c.base().groupby(c.keys("race")).count(name="n"))
    # HAVING, ORDER BY, LIMIT on the released noisy counts (post-processing).
    return df[df["n"] > 50].sort_values("n", ascending=False, kind="stable").head(3)


def q15(c: Ctx) -> Any:  # SELECT AVG(income) AS a FROM data WHERE age > 30
    return c.pure_eval(c.base().filter("age > 30").average("income", *bounds("income"), name="a"))


def q16(c: Ctx) -> Any:  # SELECT sex, SUM(income) AS s FROM data GROUP BY sex
    return c.pure_eval(c.base().groupby(c.keys("sex")).sum("income", *bounds("income"), name="s"))


def t01(c: Ctx) -> Any:  # TPC-H Q1-like: line items by return flag and line status
    # SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, SUM(l_extendedprice) AS
    # sum_base_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order FROM lineitem
    # WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus
    keys = ["l_returnflag", "l_linestatus"]
    measures = ["l_quantity", "l_extendedprice", "l_discount"]

    def rows() -> Any:
        return (
            c.t.QueryBuilder("lineitem")
            .filter("l_shipdate <= DATE '1998-09-02'")
            .select([TPCH_ID["lineitem"], *keys, *measures])
        )

    qty, price, disc = (tpch_bounds(n) for n in measures)
    aggs: list[Agg] = [
        ("l_quantity", lambda g: g.sum("l_quantity", *qty, name="sum_qty")),
        ("l_extendedprice", lambda g: g.sum("l_extendedprice", *price, name="sum_base_price")),
    ]
    if c.avg == "average":  # Tumult's own AVG: a Python map over every row (minutes here)
        aggs.append(("l_discount", lambda g: g.average("l_discount", *disc, name="avg_disc")))
    else:  # AVG = the released SUM / the released COUNT(*) (post-processing)
        aggs.append(("l_discount", lambda g: g.sum("l_discount", *disc, name="sum_disc")))
    aggs.append((None, lambda g: g.count(name="count_order")))
    df = c.tpch_release(rows, TPCH_ID["lineitem"], keys, aggs)
    if c.avg != "average":
        # As Tumult's own average does: the noisy sum over max(1, noisy count); then clamped
        # to the bounds, where every true average lies.
        ratio = df["sum_disc"] / df["count_order"].clip(lower=1)
        df["avg_disc"] = ratio.clip(lower=disc[0], upper=disc[1])
    return df


def t03(c: Ctx) -> Any:  # TPC-H Q3-like: a three-table join, revenue by order priority
    # SELECT o_orderpriority, SUM(l_extendedprice) AS revenue, COUNT(*) AS lines FROM customer
    # JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
    # WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15' GROUP BY o_orderpriority
    t = c.t

    def rows() -> Any:
        customers = (
            t.QueryBuilder("customer")
            .filter("c_mktsegment = 'BUILDING'")
            .select(["c_custkey"])
            .rename({"c_custkey": "custkey"})
        )
        orders = (
            t.QueryBuilder("orders")
            .filter("o_orderdate < DATE '1995-03-15'")
            .select(["o_custkey", "o_orderkey", "o_orderpriority"])
            .rename({"o_custkey": "custkey", "o_orderkey": "orderkey"})
        )
        items = (
            t.QueryBuilder("lineitem")
            .select(["l_custkey", "l_orderkey", "l_extendedprice"])
            .rename({"l_custkey": "custkey", "l_orderkey": "orderkey"})
        )
        return customers.join_private(orders, join_columns=["custkey"]).join_private(
            items, join_columns=["custkey", "orderkey"]
        )

    price = tpch_bounds("l_extendedprice")
    aggs: list[Agg] = [
        ("l_extendedprice", lambda g: g.sum("l_extendedprice", *price, name="revenue")),
        (None, lambda g: g.count(name="lines")),
    ]
    return c.tpch_release(rows, "custkey", ["o_orderpriority"], aggs)


PROGRAMS: dict[str, Program] = {
    "Q01": q01,
    "Q02": q02,
    "Q03": q03,
    "Q04": q04,
    "Q05": q05,
    "Q06": q06,
    "Q07": q07,
    "Q08": q08,
    "Q09": q09,
    "Q10": q10,
    "Q11": q11,
    "Q12": q12,
    "Q13": q13,
    "Q14": q14,
    "Q15": q15,
    "Q16": q16,
    "T01": t01,
    "T03": t03,
}
# Output columns (keys first) and group keys of each program, as in the SQL.
COLUMNS: dict[str, list[str]] = {
    "Q01": ["n"],
    "Q02": ["n"],
    "Q03": ["s"],
    "Q04": ["a"],
    "Q05": ["a"],
    "Q06": ["v"],
    "Q07": ["sd"],
    "Q08": ["sex", "n"],
    "Q09": ["educ", "n"],
    "Q10": ["sex", "a"],
    "Q11": ["m"],
    "Q12": ["p90"],
    "Q13": ["rate"],
    "Q14": ["race", "n"],
    "Q15": ["a"],
    "Q16": ["sex", "s"],
    "T01": [
        "l_returnflag",
        "l_linestatus",
        "sum_qty",
        "sum_base_price",
        "avg_disc",
        "count_order",
    ],
    "T03": ["o_orderpriority", "revenue", "lines"],
}
KEYS: dict[str, list[str]] = {
    "Q08": ["sex"],
    "Q09": ["educ"],
    "Q10": ["sex"],
    "Q14": ["race"],
    "Q16": ["sex"],
    "T01": ["l_returnflag", "l_linestatus"],
    "T03": ["o_orderpriority"],
}
APPROX = {"Q09"}  # the programs that need δ (and the ApproxDP Session)


def _float(x: Any) -> float:
    """A float of a Tumult ExactNumber (or of a plain number)."""
    return x.to_float(round_up=False) if hasattr(x, "to_float") else float(x)


def normalise(qid: str, df: Any) -> list[list[Any]]:
    """Key columns first (as strings), then the values (floats), sorted by the keys."""
    keys = KEYS.get(qid, [])
    vals = [c for c in COLUMNS[qid] if c not in keys]
    records = df[keys + vals].to_dict("records")
    return kit.rows_keys_first(([r[c] for c in keys + vals] for r in records), len(keys))


def start_spark(tmp: Path) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = tmp / "log4j2.properties"
    log4j.write_text(LOG4J2)
    java_opts = (
        f"-Dlog4j2.configurationFile=file:{log4j} -Dio.netty.tryReflectionSetAccessible=true"
    )
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(os.environ.get("TUMULT_SPARK_MASTER", "local[*]"))
        .appName("dpproxy-compare-tumult")
        .config("spark.driver.memory", os.environ.get("TUMULT_DRIVER_MEMORY", "2g"))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.local.dir", str(tmp / "local"))
        .config("spark.sql.shuffle.partitions", os.environ.get("TUMULT_SHUFFLE_PARTITIONS", "4"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.eventLog.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for item in filter(None, os.environ.get("TUMULT_SPARK_CONF", "").split(",")):
        key, _, val = item.partition("=")
        spark = spark.config(key.strip(), val.strip())
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    return spark


def load(spark: Any, path: Path) -> Any:
    """The CSV as a cached DataFrame: text columns as strings, int columns as bigint."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    with path.open() as f:
        header = f.readline().strip().split(",")
    schema = StructType([StructField(h, StringType(), True) for h in header])
    raw = spark.read.csv(str(path), header=True, schema=schema)
    types = {c.name: c.type for c in workload.COLUMNS}
    cols = [
        F.col(h).cast("double").cast("long").alias(h) if types.get(h) == "int" else F.col(h)
        for h in header
    ]
    df = raw.select(*cols).cache()
    df.count()  # materialise the cache
    return df


def load_tpch(spark: Any, data_dir: Path) -> tuple[dict[str, Any], dict[str, float]]:
    """The three private TPC-H tables as cached DataFrames, each with its customer ID column.

    The data owner's preparation: only ``TPCH_COLUMNS`` are read (DECIMAL cast to double, which
    Tumult needs; other types kept), and line items get their order's customer key
    (``l_custkey``) by an inner join with orders on ``l_orderkey = o_orderkey`` (the first hop
    of ``workload.TPCH_UNIT_PATHS["lineitem"]``). Returns the tables and the seconds of each
    step.
    """
    # The paths to the customer: orders hold the key, line items reach it through their order.
    assert tuple(workload.TPCH_UNIT) == ("customer", TPCH_ID["customer"]), workload.TPCH_UNIT
    assert workload.TPCH_UNIT_PATHS["orders"][0][0] == TPCH_ID["orders"]
    hop_col, hop_table, hop_ref = workload.TPCH_UNIT_PATHS["lineitem"][0]
    assert hop_table == "orders", workload.TPCH_UNIT_PATHS["lineitem"]
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    def read(name: str) -> Any:
        df = spark.read.parquet(str(data_dir / TPCH / f"{name}.parquet"))
        df = df.select(*TPCH_COLUMNS[name])
        decimal = {f.name for f in df.schema.fields if isinstance(f.dataType, DecimalType)}
        return df.select(
            *[F.col(n).cast("double") if n in decimal else F.col(n) for n in df.columns]
        )

    secs: dict[str, float] = {}
    t = time.perf_counter()
    customer = read("customer").cache()
    orders = read("orders").cache()
    n_customer, n_orders = customer.count(), orders.count()
    secs["read_customer_orders"] = time.perf_counter() - t
    t = time.perf_counter()
    owner = orders.select(
        F.col(hop_ref).alias(hop_col), F.col(TPCH_ID["orders"]).alias(TPCH_ID["lineitem"])
    )
    lineitem = read("lineitem").join(owner, on=hop_col, how="inner").cache()
    n_lineitem = lineitem.count()
    secs["lineitem_id_join"] = time.perf_counter() - t
    progress(
        f"tumult: tpch tables customer {n_customer:,}, orders {n_orders:,}, lineitem "
        f"{n_lineitem:,} rows (with l_custkey)"
    )
    return {"customer": customer, "orders": orders, "lineitem": lineitem}, secs


def remaining(ctx: Ctx, qid: str) -> tuple[float, float]:
    """The (ε, δ) left in the Session that answers ``qid``."""
    v = (ctx.approx if qid in APPROX else ctx.pure).remaining_privacy_budget.value
    e, d = v if isinstance(v, tuple) else (v, 0)
    return _float(e), _float(d)


def timed_run(ctx: Ctx, qid: str, program: Program, want: tuple[float, float]) -> tuple[Any, float]:
    """One run of a program: its released rows and seconds, after checking it spent ``want``."""
    before = remaining(ctx, qid)
    t = time.perf_counter()
    res = program(ctx)
    seconds = time.perf_counter() - t
    after = remaining(ctx, qid)
    spent = (before[0] - after[0], before[1] - after[1])
    if not all(
        math.isclose(s, w, rel_tol=1e-6, abs_tol=1e-12) for s, w in zip(spent, want, strict=True)
    ):
        raise RuntimeError(f"{qid} spent (ε, δ) = {spent}, expected {want}")
    return res, seconds


def main() -> None:
    p = kit.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--protected-change",
        choices=("id", "row"),
        default="id",
        help="id: AddRowsWithID('pid') + MaxRowsPerID(1) (default); row: AddOneRow()",
    )
    p.add_argument(
        "--tpch-view",
        choices=("cached", "none"),
        default="cached",
        help="TPC-H: one cached view of the truncated rows per run (default), or none",
    )
    p.add_argument(
        "--tpch-avg",
        choices=("ratio", "average"),
        default="ratio",
        help="TPC-H AVG: released SUM / released COUNT (default), or Tumult's average()",
    )
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()
    tpch = args.dataset == TPCH
    if tpch and args.protected_change != "id":
        p.error("--dataset tpch needs --protected-change id (the customer ID space)")

    warnings.filterwarnings("ignore")
    logging.getLogger("py4j").setLevel(logging.ERROR)
    queries = kit.queries(args)
    tmp = Path(tempfile.mkdtemp(prefix="dpproxy-tumult-"))

    # ---- set-up (timed): imports, Spark, the cached table, the Sessions
    started = time.perf_counter()
    spark = start_spark(tmp)
    t_spark = time.perf_counter()
    import tmlt.analytics as tmlt
    from tmlt.core.utils import cleanup as core_cleanup

    t_import = time.perf_counter()

    def _stop() -> None:
        # Tumult's own exit hook would restart Spark after this stop: drop its temporary
        # database here, then unregister the hook.
        atexit.unregister(core_cleanup._cleanup_temp)
        try:
            core_cleanup.cleanup()
            spark.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    atexit.register(_stop)
    by_id = args.protected_change == "id"
    extra: dict[str, Any] = {}
    # Large finite totals (δ = 1 would make the budget infinite in Tumult): each evaluate
    # spends exactly its query's budget (checked below).
    if tpch:
        tables, prep = load_tpch(spark, args.data_dir)
        t_load = time.perf_counter()
        builder = tmlt.Session.Builder().with_privacy_budget(tmlt.PureDPBudget(1e9))
        builder = builder.with_id_space(TPCH_SPACE)
        for name, frame in tables.items():
            builder = builder.with_private_dataframe(
                name,
                frame,
                protected_change=tmlt.AddRowsWithID(id_column=TPCH_ID[name], id_space=TPCH_SPACE),
            )
        pure, approx = builder.build(), None
        change: Any = (
            f"AddRowsWithID(id_space={TPCH_SPACE!r}: "
            + ", ".join(f"{n}.{c}" for n, c in TPCH_ID.items())
            + ")"
        )
        extra = {
            "max_rows_per_id": workload.TPCH_GUESS_ROWS,
            "tpch_prep_s": sum(prep.values()),
            "tpch_view": args.tpch_view,
            "tpch_avg": args.tpch_avg,
        }
    else:
        df = load(spark, args.data_dir / f"{args.dataset}.csv")
        t_load = time.perf_counter()
        change = tmlt.AddRowsWithID(workload.UNIT) if by_id else tmlt.AddOneRow()
        pure = tmlt.Session.from_dataframe(
            privacy_budget=tmlt.PureDPBudget(1e9),
            source_id=SOURCE,
            dataframe=df,
            protected_change=change,
        )
        approx = tmlt.Session.from_dataframe(
            privacy_budget=tmlt.ApproxDPBudget(1e9, 0.5),
            source_id=SOURCE,
            dataframe=df,
            protected_change=change,
        )
    ended = time.perf_counter()
    setup_s = ended - started
    progress(
        f"tumult: setup {setup_s:.2f} s (spark start {t_spark - started:.2f}, tmlt import "
        f"{t_import - t_spark:.2f}, load+cache {t_load - t_import:.2f}, sessions "
        f"{ended - t_load:.3f}); Spark {spark.version}, {spark.sparkContext.master}, "
        f"{spark.sparkContext.defaultParallelism} cores, protected change {change}"
    )
    if tpch:
        progress("tumult: tpch preparation " + ", ".join(f"{k} {v:.2f} s" for k, v in prep.items()))
    rows_per_id = workload.TPCH_GUESS_ROWS if tpch else 1
    ctx = Ctx(
        tmlt,
        pure,
        approx,
        args.epsilon,
        args.delta,
        by_id,
        rows_per_id,
        args.tpch_view,
        args.tpch_avg,
    )
    version = tmlt.__version__

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for q in queries:
            rec = kit.record(
                SYSTEM, version, args, q.id, setup_s,
                protected_change=str(change),
                **extra,
            )
            rec["columns"] = COLUMNS.get(q.id, [])
            try:
                program = PROGRAMS.get(q.id)
                if program is None:
                    raise NotImplementedError(f"no QueryBuilder program for {q.id}")
                want = (args.epsilon, args.delta if q.id in APPROX else 0.0)

                def once(
                    qid: str = q.id, program: Program = program,
                    want: tuple[float, float] = want,
                ) -> tuple[Any, float]:
                    return timed_run(ctx, qid, program, want)

                def describe(
                    res: tuple[Any, float], _s: float, qid: str = q.id
                ) -> tuple[dict[str, Any], list[list[Any]]]:
                    # The program's own seconds: without the budget checks around it.
                    return {"seconds": res[1]}, normalise(qid, res[0])

                rec["runs"] = kit.timed_runs(args, once, describe)
            except Exception as e:  # not supported: say why, go on
                kit.refuse(rec, e, debug=args.debug)
            kit.write(out, rec)
            if rec["supported"]:
                secs = [r["seconds"] for r in rec["runs"]]
                progress(
                    f"tumult {args.dataset} {q.id}: {len(secs)} runs, median "
                    f"{sorted(secs)[len(secs) // 2] if secs else float('nan'):.3f} s"
                )


if __name__ == "__main__":
    main()

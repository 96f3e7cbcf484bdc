"""``explain`` says how each construct of issue 18 is handled, in words an analyst can read.

One representative analyst query per construct, over the demo's ``adult`` data
(``schemas/adult.yaml``) and TPC-H at scale 0.01 (``schemas/tpch.yaml``), run through the real
explain in its three forms: the text ``dpproxy explain`` prints (the CLI, in-process), the rows
of an ``EXPLAIN`` statement (``explain_command.py``, what the wire server and the DB-API return)
and ``FORMAT JSON``. Each explanation must contain the words that name how the construct is
handled (a semi-join, a folded date constant, "released first", "computed by dpproxy on the
released values", ...) and no internal name (``__agg_0``, ``__sq1_t``, sqlglot classes) outside
the rewritten SQL, which is shown as it runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.cli import main
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.explain import explain_json, explain_text
from dpproxy.explain_command import ExplainStatement, explain_rows
from dpproxy.values import Cost
from tests.fixtures import parse_cases

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
ROOT = Path(__file__).resolve().parents[2]

# construct -> (schema, query, words the text explanation must contain)
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "date folded with an interval": (
        "tpch",
        "SELECT COUNT(*) FROM orders WHERE o_orderdate < DATE '1995-01-01' + INTERVAL '3 months'",
        ("o_orderdate < DATE '1995-04-01'", "folded to constants"),
    ),
    "CURRENT_DATE": (
        "tpch",
        "SELECT COUNT(*) FROM orders WHERE o_orderdate > CURRENT_DATE - INTERVAL '30 years'",
        ("current_date 2", "o_orderdate > DATE '", "folded to constants"),
    ),
    "DATE_TRUNC key": (
        "tpch",
        "SELECT DATE_TRUNC('month', o_orderdate) AS month, COUNT(*) FROM orders "
        "WHERE o_orderdate >= DATE '1996-01-01' AND o_orderdate < DATE '1997-01-01' GROUP BY 1",
        ("group key DATE_TRUNC('MONTH', o_orderdate): computed on each row",),
    ),
    "EXTRACT key, ORDER BY an output name": (
        "tpch",
        "SELECT EXTRACT(YEAR FROM o_orderdate) AS yr, COUNT(*) FROM orders GROUP BY yr ORDER BY yr",
        (
            "group key EXTRACT(YEAR FROM o_orderdate)",
            "ORDER BY yr (= EXTRACT(YEAR FROM o_orderdate)): applied by dpproxy to the released",
        ),
    ),
    "semi-join": (
        "tpch",
        "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT 1 FROM lineitem "
        "WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)",
        ("semi-join (EXISTS / IN)", "own privacy unit", "before the bound on rows per unit"),
    ),
    "semi-join through IN": (
        "tpch",
        "SELECT o_orderpriority, COUNT(*) FROM orders WHERE o_orderkey IN "
        "(SELECT l_orderkey FROM lineitem WHERE l_quantity > 30) GROUP BY o_orderpriority",
        ("semi-join (EXISTS / IN)",),
    ),
    "anti-join": (
        "tpch",
        "SELECT COUNT(*) FROM customer WHERE NOT EXISTS "
        "(SELECT 1 FROM orders WHERE o_custkey = c_custkey)",
        ("anti-join (NOT EXISTS / NOT IN)", "own privacy unit"),
    ),
    "public tables only": (
        "tpch",
        "SELECT n_name, r_name FROM nation JOIN region ON n_regionkey = r_regionkey",
        ("public tables only: answered exactly, no privacy cost", "ε = 0"),
    ),
    "per-unit aggregate with LEFT JOIN on the unit": (
        "tpch",
        "SELECT c_count, COUNT(*) FROM (SELECT c_custkey, COUNT(o_orderkey) FROM customer "
        "LEFT OUTER JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) "
        "AS c_orders (c_custkey, c_count) GROUP BY c_count",
        ("per-unit subquery", "one row of the derived relation", "LEFT JOIN on the unit"),
    ),
    "UNION ALL of private relations in FROM": (
        "tpch",
        "SELECT src, COUNT(*) FROM (SELECT 'cust' AS src FROM customer UNION ALL "
        "SELECT 'cust' FROM customer WHERE c_acctbal > 0) u GROUP BY src",
        (
            "UNION ALL of 2 private relations",
            "at most 2 rows per unit, the sum of the branches' declared bounds",
            "u (UNION ALL of customer ∪ customer)",
        ),
    ),
    "per-unit HAVING": (
        "tpch",
        "SELECT COUNT(*) FROM (SELECT o_custkey FROM orders GROUP BY o_custkey "
        "HAVING COUNT(*) > 20) t",
        ("per-unit subquery", "WHERE as planned: COUNT(*) per unit > 20"),
    ),
    "join of two aliases of a public table": (
        "tpch",
        "SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, COUNT(*) "
        "FROM supplier, lineitem, orders, customer, nation n1, nation n2 "
        "WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey "
        "AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey "
        "AND n1.n_name = 'FRANCE' GROUP BY n1.n_name, n2.n_name ORDER BY supp_nation",
        ("n1.n_name = 'FRANCE'", "ORDER BY supp_nation (= n1.n_name)"),
    ),
    "scalar subquery": (
        "adult",
        "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult)",
        ("scalar subquery 1, released first with noise", "sum of the 2 parts"),
    ),
    "correlated subquery keyed on a public table": (
        "tpch",
        "SELECT n_name FROM nation WHERE 0 < "
        "(SELECT AVG(c_acctbal) FROM customer WHERE c_nationkey = n_nationkey)",
        (
            "subquery 1, correlated on n_nationkey, keyed on a public table",
            "released first with noise",
        ),
    ),
    "aggregate CTE": (
        "tpch",
        "WITH revenue AS (SELECT l_suppkey AS supplier_no, SUM(l_extendedprice) AS total "
        "FROM lineitem GROUP BY l_suppkey) SELECT s_name, total FROM supplier "
        "JOIN revenue ON s_suppkey = supplier_no ORDER BY total DESC LIMIT 5",
        ("part 1, the aggregate relation revenue, released first with noise", "as public rows"),
    ),
    "aggregate derived table": (
        "adult",
        "SELECT AVG(n) FROM (SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation) t",
        ("part 1, the aggregate relation t, released first with noise", "as public rows"),
    ),
    "LEFT JOIN": (
        "tpch",
        "SELECT COUNT(o_orderkey), COUNT(*) FROM customer LEFT JOIN orders "
        "ON c_custkey = o_custkey",
        ("outer join (LEFT JOIN)", "kept once, with NULLs", "bounded per unit"),
    ),
    "FULL JOIN": (
        "tpch",
        "SELECT COUNT(c_custkey), COUNT(o_orderkey) FROM customer FULL OUTER JOIN orders "
        "ON c_custkey = o_custkey",
        ("outer join (FULL JOIN)",),
    ),
    "RIGHT JOIN keeping public rows": (
        "tpch",
        "SELECT n_name, COUNT(c_custkey), SUM(c_acctbal) FROM customer RIGHT JOIN nation "
        "ON c_nationkey = n_nationkey GROUP BY n_name",
        ("outer join (RIGHT JOIN) keeping public rows", "which every aggregate ignores"),
    ),
    "COUNT(DISTINCT value)": (
        "tpch",
        "SELECT o_orderpriority, COUNT(DISTINCT o_orderstatus) FROM orders "
        "GROUP BY o_orderpriority",
        ("count(DISTINCT o_orderstatus): each distinct value counted once",),
    ),
    "COUNT(DISTINCT unit)": (
        "tpch",
        "SELECT COUNT(DISTINCT o_custkey) FROM orders",
        ("count(DISTINCT o_custkey): the number of distinct privacy units",),
    ),
    "SUM and AVG (DISTINCT)": (
        "adult",
        "SELECT SUM(DISTINCT age), AVG(DISTINCT age) FROM adult",
        ("sum(DISTINCT age): over the distinct values", "avg(DISTINCT age): over the distinct"),
    ),
    "row-level math and buckets, GROUP BY and ORDER BY ordinals": (
        "adult",
        "SELECT WIDTH_BUCKET(hours_per_week, 1, 99, 10) AS bucket, AVG(SQRT(age)) AS m "
        "FROM adult GROUP BY 1 ORDER BY 1",
        (
            "group key WIDTH_BUCKET(hours_per_week, 1, 99, 10): computed on each row",
            "a public domain of 12 values",
            "avg(SQRT(age))",
            "ORDER BY bucket (= WIDTH_BUCKET(hours_per_week, 1, 99, 10))",
        ),
    ),
    "row-level text": (
        "adult",
        "SELECT LOWER(education) AS edu, COUNT(*) FROM adult GROUP BY LOWER(education)",
        ("group key LOWER(education): computed on each row",),
    ),
    "TO_CHAR key": (
        "tpch",
        "SELECT TO_CHAR(o_orderdate, 'YYYY-MM') AS m, COUNT(*) FROM orders GROUP BY 1",
        ("group key TO_CHAR(o_orderdate, 'YYYY-MM'): computed on each row",),
    ),
    "math over released aggregates": (
        "adult",
        "SELECT sex, SQRT(VARIANCE(hours_per_week)) AS sd, LN(COUNT(*)) AS l, "
        "TRUNC(AVG(age), 1) AS t, SUM(capital_gain) / COUNT(*) AS r FROM adult GROUP BY sex",
        (
            "sd: double, SQRT(var_samp(hours_per_week)): computed by dpproxy on the released "
            "values",
            "SQRT is NULL for a negative value",
            "l: double, LN(count(*)): computed by dpproxy on the released values",
            "LN is NULL for a value <= 0",
            "TRUNC(avg(age), 1): computed by dpproxy on the released values",
            "sum(capital_gain) / count(*): computed by dpproxy",
            "a division by 0 is NULL",
        ),
    ),
    "window over released aggregates": (
        "adult",
        "SELECT sex, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total FROM adult GROUP BY sex",
        (
            "SUM(count(*)) OVER (...): a window function computed by dpproxy on the released",
            "window functions: computed by dpproxy",
        ),
    ),
    "HAVING over released aggregates": (
        "adult",
        "SELECT race, COUNT(*) FROM adult GROUP BY race HAVING COUNT(*) > 100",
        ("HAVING count(*) > 100: computed by dpproxy on the released values",),
    ),
    "ORDER BY an output name, GROUP BY an ordinal": (
        "adult",
        "SELECT sex AS s, COUNT(*) AS n FROM adult GROUP BY 1 ORDER BY n DESC",
        (
            "GROUP BY s (= sex) (output names and ordinals resolved)",
            "ORDER BY n (= count(*)) DESC: applied by dpproxy to the released rows",
        ),
    ),
    "UNION ALL of aggregates, ORDER BY and LIMIT on the whole": (
        "tpch",
        "SELECT 'F' AS s, COUNT(*) AS n FROM orders WHERE o_orderstatus = 'F' UNION ALL "
        "SELECT 'customers', COUNT(*) FROM customer ORDER BY n LIMIT 1",
        (
            "UNION ALL of 2 branches, each released as a query of its own",
            "the sum of the 2 branches below",
            "sequential composition",
            "--- branch 1 of the UNION ALL: SELECT 'F' AS s",
            "--- branch 2 of the UNION ALL: SELECT 'customers'",
            "ORDER BY, LIMIT applied by dpproxy to the released rows",
        ),
    ),
    "UNION of aggregates": (
        "tpch",
        "SELECT COUNT(*) AS n FROM orders UNION SELECT COUNT(*) FROM customer",
        ("UNION of 2 branches", "duplicates of released rows dropped by dpproxy"),
    ),
}
# Internal names: a rewrite's double-underscore columns and tables, sqlglot's classes.
INTERNAL = re.compile(r"__[a-z]|timestamp_trunc|sqlglot|Traceback|\bexp\.[A-Z]")


def _without_sql(text: str) -> str:
    """The explanation less the SQL it shows as it runs (internal names belong there) and the
    list of noisy primitives, named as that SQL selects them."""
    out, skip = [], False
    for line in text.split("\n"):
        if line.startswith(("rewritten SQL", "SQL (runs")):
            skip = True
            continue
        if skip and line.startswith("  "):
            continue
        skip = False
        if line.startswith(("--- ", "query:")):
            continue  # the part's SQL and each query's text, shown as they are
        if re.match(r"  (__p\d+|__units) ", line):
            continue  # a noisy primitive, named as the rewritten SQL selects it
        out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def databases(demo_db: Path, demo_catalog: Catalog, tpch_db: Any) -> Iterator[dict[str, Any]]:
    made = {
        "adult": (demo_db, ROOT / "schemas" / "adult.yaml", demo_catalog),
        "tpch": (tpch_db.path, tpch_db.schema, tpch_db.catalog()),
    }
    engines = {
        name: Engine(catalog, DuckDBBackend(path), accountant=MemoryAccountant(HUGE, cache="off"))
        for name, (path, _, catalog) in made.items()
    }
    yield {name: (made[name][0], made[name][1], engines[name]) for name in made}
    for engine in engines.values():
        engine.close()


@pytest.mark.parametrize("construct", list(CASES))
def test_explain_names_how_the_construct_is_handled(
    construct: str, databases: dict[str, Any]
) -> None:
    schema, sql, words = CASES[construct]
    path, schema_file, engine = databases[schema]
    # The CLI's text.
    result = CliRunner().invoke(
        main, ["explain", "--database", str(path), "--schema", str(schema_file), sql]
    )
    assert result.exit_code == 0, result.output
    cli = result.output
    # The EXPLAIN statement's rows: the same lines (the budget line aside).
    rows = explain_rows(engine, ExplainStatement(sql, json=False), analyst="a")
    statement = "\n".join(r for (r,) in rows)
    for word in words:
        assert word in cli, f"{construct}: {word!r} not in\n{cli}"
        assert word in statement, f"{construct}: {word!r} not in the EXPLAIN rows"
    internal = INTERNAL.findall(_without_sql(cli))
    assert not internal, f"{construct}: internal names {internal} in\n{_without_sql(cli)}"


def _strings(d: Any) -> Iterator[str]:
    if isinstance(d, str):
        if not re.fullmatch(r"__(p\d+|units)", d):  # a primitive, named as the SQL selects it
            yield d
    elif isinstance(d, dict):
        for k, v in d.items():
            if k not in ("rewritten_sql", "query", "domain_sql"):
                yield from _strings(v)
    elif isinstance(d, list):
        for v in d:
            yield from _strings(v)


@pytest.mark.parametrize(
    ("construct", "words"),
    [
        ("date folded with an interval", ("o_orderdate < DATE '1995-04-01'",)),
        ("semi-join", ("semi-join (EXISTS / IN)",)),
        ("anti-join", ("anti-join (NOT EXISTS / NOT IN)",)),
        ("LEFT JOIN", ("outer join (LEFT JOIN)",)),
        ("per-unit aggregate with LEFT JOIN on the unit", ("per-unit subquery",)),
        ("COUNT(DISTINCT unit)", ("the number of distinct privacy units",)),
        ("math over released aggregates", ("SQRT is NULL for a negative value",)),
        ("window over released aggregates", ("a window function computed by dpproxy",)),
        ("ORDER BY an output name, GROUP BY an ordinal", ("ORDER BY n (= count(*)) DESC",)),
        ("correlated subquery keyed on a public table", ("keyed on a public table",)),
        ("aggregate CTE", ("part 1, the aggregate relation revenue, released first",)),
        ("scalar subquery", ("released first",)),
        (
            "UNION ALL of aggregates, ORDER BY and LIMIT on the whole",
            ("UNION ALL of 2 branches", "ORDER BY, LIMIT applied by dpproxy"),
        ),
    ],
)
def test_explain_json_says_it_too(
    construct: str, words: tuple[str, ...], databases: dict[str, Any]
) -> None:
    """``FORMAT JSON``: the same sentences, in the plan's ``how`` list or its columns."""
    schema, sql, _ = CASES[construct]
    _, _, engine = databases[schema]
    [(doc,)] = explain_rows(engine, ExplainStatement(sql, json=True), analyst="a")
    data = json.loads(doc)
    text = "\n".join(_strings(data))
    for word in words:
        assert word in text, f"{construct}: {word!r} not in\n{text}"
    plan = data.get("outer", data)
    assert "how" in plan or "mechanism" in plan
    internal = INTERNAL.findall(text)
    assert not internal, f"{construct}: internal names {internal} in the JSON"


def _corpus() -> list[tuple[str, str, str]]:
    """TPC-H Q1-Q22 and every analyst query of ``tests/corpus``: (schema, name, SQL)."""
    corpus = ROOT / "tests" / "corpus"
    out = [("tpch", p.stem, p.read_text("utf-8")) for p in sorted(corpus.glob("tpch/q*.sql"))]
    for path in sorted(corpus.glob("analyst/*.sql")):
        for case in parse_cases(path.read_text("utf-8"), str(path)):
            out.append((case.get("schema") or "", case.title, case.statements[0]))
    return out


def test_every_answered_corpus_query_is_explained(databases: dict[str, Any]) -> None:
    """explain (text and JSON) of every query the engine plans: no exception, and its ``how``
    lines and computed-column notes name no internal column."""
    explained = 0
    for schema, name, sql in _corpus():
        engine = databases[schema][2]
        try:
            prepared = engine.prepare(sql)
        except DPProxyError:
            continue  # refused: explain refuses it the same way
        statements = ";\n".join(prepared.statements)
        text = explain_text(prepared.plan, statements)
        json.loads(explain_json(prepared.plan, statements))
        ours = [
            line
            for line in text.split("\n")
            if line.startswith("how:") or "computed by dpproxy" in line
        ]
        internal = [line for line in ours if INTERNAL.search(line)]
        assert not internal, f"{name}: {internal}"
        explained += 1
    assert explained >= 150

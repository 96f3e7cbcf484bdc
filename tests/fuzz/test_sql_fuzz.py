"""SQL fuzzing through the embedded engine: never crash, never charge for nothing.

Hypothesis draws queries from a small grammar of the supported subset (select lists of
aggregates and group keys, arithmetic, casts, CASE, functions, WHERE, GROUP BY, HAVING,
ORDER BY, LIMIT, FILTER, percentiles, subqueries, hints) and *mutates* them: tokens deleted,
duplicated, swapped or replaced by random operators, functions and literals (``#>>``, ``::``,
``1e``, ``'nan'``, ``0.5``, ``$1``, ...), and sub-expressions wrapped in deep nesting. Every
query goes through :meth:`Engine.run` on the demo, on DuckDB and on PostgreSQL, and must end in
one of:

* an answer, which charged exactly the plan's cost (or nothing, from the cache);
* a :class:`DPProxyError` with a SQLSTATE other than XX000 (an internal error is a bug, and
  so is PrivateQueryFailed: an accepted query that failed on the data), which charged nothing
  — except propose-test-release's refusal (ZD005), itself a DP release, charged as planned.

Any other exception, an XX000 or a refusal that spent budget fails the test, with the query.

Bounded runs (the default, well under a minute on two cores): ``DPPROXY_FUZZ_EXAMPLES``
examples per test (default 150). A long run, e.g. overnight::

    DPPROXY_FUZZ_EXAMPLES=20000 pytest tests/fuzz/test_sql_fuzz.py -p no:cacheprovider

(``DPPROXY_FUZZ_SEED`` fixes Hypothesis's seed: the CI profile is derandomized anyway.)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.planning.plan import Method
from dpproxy.values import Cost
from tests.demo_engines import demo_engine

EXAMPLES = int(os.environ.get("DPPROXY_FUZZ_EXAMPLES", "150"))
SEED = os.environ.get("DPPROXY_FUZZ_SEED")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CHARGED_REFUSALS = {"ZD005"}  # propose-test-release refused: a DP release of its own

NUMERIC = [
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
]
TEXT = ["sex", "race", "workclass", "education", "occupation", "relationship", "income_class"]
KEYS = ["sex", "race", "workclass", "education_num", "age", "income_class", "occupation"]

# ------------------------------------------------------------------------------- grammar

numbers = st.one_of(
    st.integers(-1000, 1000).map(str),
    st.sampled_from(["0", "0.5", "1e3", "1.5e-3", "2147483647", "9223372036854775807", ".25"]),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: f"{f:.6g}"),
)
strings = st.sampled_from(
    ["''", "'Male'", "'Female'", "'x'", "'12'", "' 12 '", "'nan'", "'Infinity'", "'2024-02-29'",
     "'t'", "'yes'", "'1e999'", "'%a%'", "'Bachelors'"]
)  # fmt: skip
literals = st.one_of(numbers, strings, st.sampled_from(["NULL", "TRUE", "FALSE"]))
casts = st.sampled_from(["INTEGER", "BIGINT", "SMALLINT", "DOUBLE PRECISION", "TEXT", "BOOLEAN",
                         "DATE", "NUMERIC", "REAL", "VARCHAR"])  # fmt: skip
comparisons = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
FUNCTIONS = ["ABS", "FLOOR", "CEIL", "ROUND", "LOWER", "UPPER", "LENGTH", "TRIM"]
HINTS = [
    "",
    "",
    "",
    "/*+ dpproxy mechanism=smooth */ ",
    "/*+ dpproxy ptr_bound=5 */ ",
    "/*+ dpproxy saa_lower=0 saa_upper=100 */ ",
]


def _row_expr(leaves: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A row-level (or post-processing) expression over ``leaves``."""

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda e: f"- {e}"),
            st.tuples(st.sampled_from(FUNCTIONS), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, st.integers(-2, 4)).map(lambda t: f"ROUND({t[0]}, {t[1]})"),
            st.tuples(
                st.sampled_from(["COALESCE", "NULLIF", "GREATEST", "LEAST"]), inner, inner
            ).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            st.tuples(inner, casts).map(lambda t: f"CAST({t[0]} AS {t[1]})"),
            st.tuples(inner, casts).map(lambda t: f"{t[0]}::{t[1]}"),
            st.tuples(inner, comparisons, inner, inner, inner).map(
                lambda t: f"CASE WHEN {t[0]} {t[1]} {t[2]} THEN {t[3]} ELSE {t[4]} END"
            ),
            st.tuples(inner, inner).map(lambda t: f"({t[0]} || {t[1]})"),
        )

    return st.recursive(leaves, extend, max_leaves=4)


def _condition(expr: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    base = st.one_of(
        st.tuples(expr, comparisons, expr).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        expr.map(lambda e: f"{e} IS NULL"),
        expr.map(lambda e: f"{e} IS NOT NULL"),
        st.tuples(expr, st.lists(literals, min_size=1, max_size=4)).map(
            lambda t: f"{t[0]} IN ({', '.join(t[1])})"
        ),
        st.tuples(expr, expr, expr).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
        st.tuples(expr, strings).map(lambda t: f"{t[0]} LIKE {t[1]}"),
        st.sampled_from(["TRUE", "FALSE", "NULL"]),
        st.sampled_from(["sex", "age", "NULL"]).map(lambda c: f"{c} IS TRUE"),
    )
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda c: f"NOT ({c})"),
        ),
        max_leaves=3,
    )


columns = st.sampled_from(NUMERIC + TEXT + ["person_id"])
row_exprs = _row_expr(st.one_of(columns, literals))
conditions = _condition(row_exprs)


@st.composite
def aggregates(draw: st.DrawFn) -> str:
    arg = draw(st.one_of(st.sampled_from(NUMERIC), row_exprs))
    kind = draw(
        st.sampled_from(["COUNT(*)", "COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN", "VAR_POP",
                         "VAR_SAMP", "STDDEV", "PCT", "DISTINCT", "CORR"])
    )  # fmt: skip
    if kind == "COUNT(*)":
        agg = "COUNT(*)"
    elif kind == "PCT":
        agg = f"PERCENTILE_CONT({draw(numbers)}) WITHIN GROUP (ORDER BY {arg})"
    elif kind == "DISTINCT":
        agg = f"COUNT(DISTINCT {draw(st.sampled_from(['person_id', 'age']))})"
    elif kind == "CORR":
        agg = f"CORR({arg}, {draw(st.sampled_from(NUMERIC))})"
    else:
        agg = f"{kind}({arg})"
    if draw(st.integers(0, 5)) == 0:
        agg += f" FILTER (WHERE {draw(conditions)})"
    return agg


@st.composite
def queries(draw: st.DrawFn) -> str:
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    if draw(st.integers(0, 6)) == 0:
        keys = [*keys, draw(row_exprs)]
    aggs = draw(st.lists(aggregates(), min_size=0 if keys else 1, max_size=3))
    released = st.sampled_from(aggs or ["COUNT(*)"])
    intervals = st.tuples(st.sampled_from(["DP_INTERVAL_LOW", "DP_INTERVAL_HIGH"]), released)
    post = _row_expr(
        st.one_of(
            released,
            st.sampled_from(keys or ["1"]),
            numbers,
            strings,
            intervals.map(lambda t: f"{t[0]}({t[1]})"),
        )
    )
    items = [*keys, *aggs]
    if draw(st.booleans()):
        items.append(draw(post))
    items = [f"{e} AS c{i}" if draw(st.booleans()) else e for i, e in enumerate(items)]
    hint = draw(st.sampled_from(HINTS))
    source = "adult"
    if draw(st.integers(0, 8)) == 0:
        source = f"(SELECT * FROM adult WHERE {draw(conditions)}) t"
    sql = f"SELECT {hint}{', '.join(items)} FROM {source}"
    if draw(st.booleans()):
        sql += f" WHERE {draw(conditions)}"
    if keys:
        by = [draw(st.sampled_from([k, str(i + 1)])) for i, k in enumerate(keys)]
        sql += f" GROUP BY {', '.join(by)}"
        if draw(st.booleans()):
            sql += f" HAVING {draw(_condition(post))}"
        if draw(st.booleans()):
            order = draw(st.one_of(post, st.integers(0, len(items) + 1).map(str)))
            sql += f" ORDER BY {order} {draw(st.sampled_from(['', 'DESC', 'NULLS FIRST']))}"
        if draw(st.booleans()):
            sql += f" LIMIT {draw(st.integers(0, 20))}"
    return sql


# ----------------------------------------------------------------------------- mutations

_TOKEN = re.compile(r"'[^']*'|\"[^\"]*\"|[A-Za-z_][A-Za-z_0-9]*|[0-9.]+(?:[eE][+-]?[0-9]+)?|::|"
                    r"#>>|->>|<>|<=|>=|\|\||/\*\+?|\*/|\S")  # fmt: skip
NOISE = [
    "#>>", "->", "::", "||", "@>", ";", "(", ")", ",", ".", "*", "$1", "?", "%", "^", "~",
    "1e", "5e2.5", "'nan'", "0.5", "-0", "1e400", "-9223372036854775808", "NULL", "DISTINCT",
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "UNION", "ALL", "AS",
    "CASE", "WHEN", "END", "NOT", "AND", "OR", "IN", "IS", "LIKE", "CAST", "INTERVAL", "ARRAY",
    "E'\\x00'", "'\\'", "count", "sum", "avg", "median", "pg_sleep", "now()", "random()",
    "generate_series(1, 3)", "adult", "person_id", "age", "sex", "x", "OVER ()", "[1]", "'{}'",
    "/*", "--", "COUNT(*)", "MAX(", "1/0", "NULLIF(1, age)", "TRUE", "ROW(1, 2)", "$$x$$",
    "DP_INTERVAL_LOW(", "DP_INTERVAL_HIGH(COUNT(*))", "DATE '2024-01-01'", "INTERVAL '1 day'",
    "EXTRACT(YEAR FROM", "SUBSTRING(sex, 1, 2)", "ILIKE", "IS DISTINCT FROM", "FILTER (WHERE",
    "WITHIN GROUP (ORDER BY", "JOIN", "ON", "USING", "LATERAL", "WITH t AS (", "EXPLAIN",
]  # fmt: skip
WRAPPERS = ["(", "NOT (", "ABS(", "-(", "COALESCE(", "CASE WHEN TRUE THEN ", "CAST(", "ROUND("]
CLOSERS = {
    "(": ")",
    "NOT (": ")",
    "ABS(": ")",
    "-(": ")",
    "COALESCE(": ", 1)",
    "CASE WHEN TRUE THEN ": " END",
    "CAST(": " AS DOUBLE PRECISION)",
    "ROUND(": ", 1)",
}


@st.composite
def mutated(draw: st.DrawFn) -> str:
    tokens = _TOKEN.findall(draw(queries()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert", "nest"]))
        i = draw(st.integers(0, max(len(tokens) - 1, 0)))
        if not tokens:
            tokens = [draw(st.sampled_from(NOISE))]
        elif op == "delete":
            del tokens[i]
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        elif op == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == "replace":
            tokens[i] = draw(st.sampled_from(NOISE))
        elif op == "insert":
            tokens.insert(i, draw(st.sampled_from(NOISE)))
        else:  # wrap tokens[i:j] in deep nesting
            j = draw(st.integers(i, min(i + 4, len(tokens))))
            wrapper = draw(st.sampled_from(WRAPPERS))
            depth = draw(st.sampled_from([2, 50, 99, 101, 150, 199, 201, 400, 2000]))
            tokens[i:j] = [wrapper * depth, *tokens[i:j], CLOSERS[wrapper] * depth]
    return " ".join(tokens)


@st.composite
def deeply_nested(draw: st.DrawFn) -> str:
    """Long chains and deep nests of every shape the parser or the planner recurses on."""
    n = draw(st.sampled_from([10, 99, 100, 101, 199, 200, 201, 500, 5000]))
    shape = draw(st.integers(0, 6))
    if shape == 0:
        return "SELECT COUNT(*) FROM adult WHERE " + " OR ".join(f"age = {i}" for i in range(n))
    if shape == 1:
        return "SELECT SUM(" + " + ".join(["age"] * n) + ") FROM adult"
    if shape == 2:
        return "SELECT COUNT(*) FROM adult WHERE " + "NOT " * n + "age > 1"
    if shape == 3:
        return "SELECT AVG(" + "- " * n + "age) FROM adult"
    if shape == 4:
        return "SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING " + " AND ".join(
            f"COUNT(*) <> {i}" for i in range(n)
        )
    if shape == 5:
        return "SELECT COUNT(*) FROM " + "(SELECT * FROM " * n + "adult" + ") t" * n
    return "SELECT MEDIAN(" + "COALESCE(" * n + "age" + ", 1)" * n + ") FROM adult"


# ------------------------------------------------------------------------------- the test


@pytest.fixture(
    scope="module", params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def engine(
    request: pytest.FixtureRequest, demo_db: Path, demo_catalog: Catalog
) -> Iterator[Engine]:
    """The demo on DuckDB (the bundled file) or on PostgreSQL (loaded into a fresh database),
    with a budget that is never the reason for a refusal."""
    with demo_engine(
        request.param, request, demo_db, demo_catalog, Cost(Fraction(10**9), Fraction(1, 2))
    ) as e:
        yield e


def check(engine: Engine, sql: str, method: Method | None = None) -> None:
    """The outcome of ``sql`` is an answer or a DPProxyError that charged nothing."""
    before = engine.remaining("fuzz")
    try:
        answer = engine.run(sql, analyst="fuzz", method=method)
    except DPProxyError as e:
        spent = before - engine.remaining("fuzz")
        assert e.sqlstate != "XX000", f"internal error {e.message!r} for:\n{sql}"
        if e.sqlstate not in CHARGED_REFUSALS:
            assert spent == Cost.zero(), f"refused with {e.sqlstate} but charged {spent}:\n{sql}"
        return
    except Exception as e:  # the bug this test exists for
        raise AssertionError(f"{type(e).__name__}: {e}\nfor:\n{sql}") from e
    spent = before - engine.remaining("fuzz")
    assert spent == (Cost.zero() if answer.cached else answer.plan.cost), sql


Test = Callable[..., None]


def _unseeded(test: Test) -> Test:
    return test


SEEDED: Callable[[Test], Test] = seed(int(SEED)) if SEED else _unseeded
METHODS = st.sampled_from([None, None, Method.SMOOTH, Method.EXPONENTIAL])


@SEEDED
@FUZZ
@given(sql=queries(), method=METHODS)
def test_grammar_queries(engine: Engine, sql: str, method: Method | None) -> None:
    check(engine, sql, method)


@SEEDED
@FUZZ
@given(sql=mutated())
def test_mutated_queries(engine: Engine, sql: str) -> None:
    check(engine, sql)


@SEEDED
@settings(FUZZ, max_examples=max(EXAMPLES // 5, 10))
@given(sql=deeply_nested())
def test_deep_nesting(engine: Engine, sql: str) -> None:
    check(engine, sql)

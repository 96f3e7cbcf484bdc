"""Math over released aggregates (``sql/postmath.py``, ``release/functions.py``): computed by
dpproxy on the released values, never by the database; PostgreSQL's values where PostgreSQL
has one, and NULL where it would raise (decided on the released value alone)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlglot import exp

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.analysis.bounds import bounds_of
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog, Column, ColumnType, Table
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.release.evaluation import evaluate, evaluate_span
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))


def _ev(sql: str, **env: Any) -> Any:
    return evaluate(exp.maybe_parse(sql, dialect="postgres"), env)


@pytest.mark.parametrize(
    ("sql", "value", "expected"),
    [
        ("SQRT(__agg_0)", 16.0, 4.0),
        ("SQRT(__agg_0)", -0.5, None),  # PostgreSQL raises: a noisy variance can be < 0
        ("CBRT(__agg_0)", -27.0, -3.0),
        ("LN(__agg_0)", 0.0, None),
        ("LN(__agg_0)", -3.0, None),
        ("LOG(__agg_0)", 1000.0, 3.0),
        ("LOG(__agg_0)", 0, None),
        ("LOG(2, __agg_0)", 8, 3.0),
        ("LOG(1, __agg_0)", 8, None),  # division by zero in PostgreSQL
        ("LOG(-2, __agg_0)", 8, None),
        ("LOG(__agg_0, 8)", 0.0, None),
        ("EXP(__agg_0)", 0.0, 1.0),
        ("EXP(__agg_0)", 1000.0, None),  # beyond the largest double
        ("EXP(__agg_0)", -1000.0, 0.0),  # below the smallest: 0, as PostgreSQL's numeric
        ("POWER(__agg_0, 0.5)", 9.0, 3.0),
        ("POWER(__agg_0, 2)", -3, 9.0),
        ("__agg_0 ^ 3", -2.0, -8.0),
        ("POWER(__agg_0, -1)", 0.0, None),  # zero to a negative power
        ("POWER(__agg_0, 0.5)", -4.0, None),  # a complex result
        ("POWER(__agg_0, 400)", 10.0, None),  # overflow
        ("SIGN(__agg_0 - 40)", 38.5, -1.0),
        ("SIGN(__agg_0)", 0, 0.0),
        ("PI() * __agg_0", 2, 2 * math.pi),
        ("ROUND(__agg_0, -3)", 187654.3, 188000.0),
        ("ROUND(__agg_0, -2)", -1260.0, -1300.0),
        ("TRUNC(__agg_0, 2)", 1.15, 1.15),  # on the decimal text, as numeric cuts it
        ("TRUNC(__agg_0, 1)", -1.57, -1.5),
        ("TRUNC(__agg_0, -2)", -1299.9, -1200.0),
        ("TRUNC(__agg_0)", 39.99, 39.0),
        ("SQRT(__agg_0)", None, None),
        ("LOG(NULL, __agg_0)", 8, None),
        ("SQRT(__agg_0) > 3 AND LN(__agg_0) IS NULL", -1.0, None),
    ],
)
def test_functions_over_released_values(sql: str, value: Any, expected: Any) -> None:
    got = _ev(sql, __agg_0=value)
    if isinstance(expected, float):
        assert isinstance(got, float) and math.isclose(got, expected, rel_tol=1e-12), got
    else:
        assert got == expected and type(got) is type(expected)


def test_error_bounds_follow_monotone_functions() -> None:
    spans: dict[str, tuple[float, float] | None] = {"__agg_0": (4.0, 9.0)}
    assert evaluate_span(exp.maybe_parse("SQRT(__agg_0)"), spans) == (2.0, 3.0)
    assert evaluate_span(exp.maybe_parse("LOG(__agg_0 + 1)"), spans) == (
        math.log10(5),
        1.0,
    )
    # an interval reaching outside the domain: no bound is claimed
    assert evaluate_span(exp.maybe_parse("SQRT(__agg_0 - 5)"), spans) is None
    assert evaluate_span(exp.maybe_parse("POWER(__agg_0, 2)"), spans) is None


# ---------------------------------------------------------------- against PostgreSQL itself

VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 8.0, 10.0, 1e-300, 1e300, -1e300, 700.0, 710.0]
VALUES += [-700.0, -750.0, 123456.789, -27.0]
#: (dpproxy's function, PostgreSQL's call over %s placeholders) per argument count
ONE = {
    "SQRT": "sqrt(%s::float8)",
    "CBRT": "cbrt(%s::float8)",
    "LN": "ln(%s::float8)",
    "LOG": "log(%s::float8)",
    "EXP": "exp(%s::float8)",
    "SIGN": "sign(%s::float8)",
}
TWO = {"LOG": "log(%s::numeric, %s::numeric)", "POWER": "power(%s::float8, %s::float8)"}


def _postgres(pg: Any, call: str, args: Sequence[float]) -> float | Exception | None:
    try:
        row = pg.execute(f"SELECT ({call})::float8", args).fetchone()
    except psycopg.Error as error:
        return error
    return None if row[0] is None else float(row[0])


@pytest.mark.postgres
def test_values_are_postgresqls_and_null_where_it_raises(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        checked = 0
        cases = [(n, c, [v]) for n, c in ONE.items() for v in VALUES]
        cases += [(n, c, [a, b]) for n, c in TWO.items() for a in VALUES[:10] for b in VALUES[:10]]
        for name, call, args in cases:
            args_sql = ", ".join(f"__a{i}" for i in range(len(args)))
            env = {f"__a{i}": v for i, v in enumerate(args)}
            got = _ev(f"{name}({args_sql})", **env)
            want = _postgres(pg, call, args)
            if isinstance(want, Exception):
                underflow = "underflow" in str(want) or (
                    name == "EXP" and args[0] < -700  # numeric gives 0 (module docstring)
                )
                assert got is None or (underflow and got == 0.0), (name, args, want, got)
            elif want is None or not math.isfinite(want) or abs(want) > 1.7976931348623157e308:
                assert got is None, (name, args, want, got)
            else:
                assert got is not None and math.isclose(got, want, rel_tol=1e-12), (
                    name,
                    args,
                    want,
                    got,
                )
                checked += 1
        assert checked > 100


@pytest.mark.postgres
def test_trunc_is_postgresqls_numeric_trunc(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        for v in (1.15, -1.57, 123456.789, -0.001, 2.675, 1e-7, 98765.4321):
            for d in (-3, -1, 0, 1, 2, 5):
                want = pg.execute("SELECT trunc(%s::float8::numeric, %s)::float8", (v, d))
                got = _ev(f"TRUNC(__agg_0, {d})", __agg_0=v)
                assert got == want.fetchone()[0], (v, d, got)


# ------------------------------------------------------------ through the engine, on the data


class Shift(NoNoise):
    """Adds ``by`` to every noisy value: the released values differ from the exact ones."""

    def __init__(self, by: float) -> None:
        super().__init__()
        self.by = by

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        return [v + self.by for v in super().laplace(values, scale, integer=integer)]

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        return [v + self.by for v in super().gaussian(values, sigma, integer=integer)]


@pytest.fixture
def engines(demo_db: Path, demo_catalog: Catalog) -> Iterator[dict[str, Engine]]:
    made = {
        name: Engine(
            demo_catalog,
            DuckDBBackend(demo_db),
            accountant=MemoryAccountant(HUGE, cache="off"),
            noise=noise,
        )
        for name, noise in (("up", Shift(10**9)), ("down", Shift(-(10**12))))
    }
    yield made
    for e in made.values():
        e.close()


def test_computed_in_the_proxy_on_the_released_value(engines: dict[str, Engine]) -> None:
    sql = "SELECT SUM(fnlwgt), LOG(SUM(fnlwgt)), SQRT(SUM(fnlwgt)), LOG(2, SUM(fnlwgt)) FROM adult"
    prepared = engines["up"].prepare(sql)
    for name in ("LOG", "SQRT", "POWER", "EXP"):
        assert all(name not in s.upper() for s in prepared.statements)
    ((total, log10, root, log2),) = engines["up"].run(sql, analyst="t").released.rows
    assert total > 10**9  # the released value carries the shift
    assert log10 == pytest.approx(math.log10(total), rel=1e-12)
    assert root == pytest.approx(math.sqrt(total), rel=1e-12)
    assert log2 == pytest.approx(math.log2(total), rel=1e-12)


def test_out_of_domain_released_values_give_null(engines: dict[str, Engine]) -> None:
    # The released sum is clipped at 0 (fnlwgt >= 0) and the noisy variance of a shifted
    # count can be anything: the functions give NULL, never an error, and the query is charged.
    engine = engines["down"]
    sql = (
        "SELECT SUM(fnlwgt), LOG(SUM(fnlwgt)), LN(SUM(fnlwgt)), SQRT(SUM(fnlwgt) - 1), "
        "POWER(SUM(fnlwgt), -1), LOG(SUM(fnlwgt), 8) FROM adult"
    )
    before = engine.remaining("t")
    rows = engine.run(sql, analyst="t").released.rows
    assert rows == ((0.0, None, None, None, None, None),)
    assert engine.remaining("t") != before


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        ("SELECT SQRT(MAX(sex)) FROM adult", "42804"),
        ("SELECT ROUND(AVG(age), AVG(age)) FROM adult", "0A000"),
        ("SELECT ROUND(AVG(age), 1.5) FROM adult", "0A000"),
        ("SELECT ROUND(AVG(age), -400) FROM adult", "22003"),
        # inside an aggregate the database computes it: row-level rules (sql/mathargs.py)
        ("SELECT AVG(POWER(age, 64.5)) FROM adult", "42883"),
        ("SELECT AVG(LOG(age, 2)) FROM adult", "42883"),
        ("SELECT AVG(LOG(1, age)) FROM adult", "22012"),
    ],
)
def test_refusals(engines: dict[str, Engine], sql: str, sqlstate: str) -> None:
    with pytest.raises(DPProxyError) as refused:
        engines["up"].prepare(sql)
    assert refused.value.sqlstate == sqlstate
    assert "__" not in refused.value.message


def test_unnamed_function_columns_are_named_as_postgresql_names_them(
    engines: dict[str, Engine],
) -> None:
    sql = (
        "SELECT WIDTH_BUCKET(age, 17, 90, 8), SQRT(VAR_POP(age)), ROUND(AVG(age), 1), "
        "LOG(2, COUNT(*)), EXP(AVG(LN(age))), CBRT(SUM(age)), ABS(AVG(age)), PI(), "
        "AVG(age) / 2 FROM adult GROUP BY 1"
    )
    names = [c.name for c in engines["up"].run(sql, analyst="t").released.columns]
    assert names == [
        "width_bucket",
        "sqrt",
        "round",
        "log",
        "exp",
        "cbrt",
        "abs",
        "pi",
        "?column?8",  # an operator: PostgreSQL's ?column? (numbered by dpproxy)
    ]


def test_row_level_round_to_negative_digits_widens_the_interval() -> None:
    """ROUND(x, -3) inside an aggregate moves x by up to 500: the measure's interval (hence the
    clamp and the sensitivity) covers every rounded value, checked on a grid."""
    t = Table("t", True, (Column("x", ColumnType.INTEGER, Fraction(0), Fraction(1400)),))
    node = exp.maybe_parse("ROUND(x, -3)", dialect="postgres")
    v = bounds_of(node, t)
    assert v is not None and v.lo is not None and v.hi is not None
    for x in range(0, 1401, 7):
        rounded = math.copysign(math.floor(abs(x) / 1000 + 0.5) * 1000, x)
        assert v.lo <= rounded <= v.hi
    assert (v.lo, v.hi) == (-1000, 2400)

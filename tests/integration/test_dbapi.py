"""The PEP 249 interface end to end, over the real demo database (and the visits database).

pandas is not installed in the test environment; everything here uses the DB-API alone.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import dpproxy
from dpproxy import dbapi
from dpproxy.errors import DPProxyError
from dpproxy.values import Cost
from tests.noise import NoNoise

ADULT_ROWS = 32561
EXACT_FEMALE = 10771
EXACT_MALE = 21790


@pytest.fixture
def con(demo_db: Path) -> Iterator[dbapi.Connection]:
    """``dpproxy.connect()`` with no arguments: the bundled demo, with real noise."""
    c = dpproxy.connect()
    yield c
    c.close()


@pytest.fixture
def exact_con(demo_db: Path) -> Iterator[dbapi.Connection]:
    """The demo without noise, so parameter binding can be checked against exact counts."""
    c = dpproxy.connect(noise=NoNoise())
    yield c
    c.close()


def test_module_globals() -> None:
    assert dbapi.apilevel == "2.0"
    assert dbapi.paramstyle == "pyformat"
    assert dbapi.threadsafety in (0, 1, 2, 3)
    assert issubclass(dbapi.ProgrammingError, dbapi.Error)
    assert issubclass(dbapi.NotSupportedError, dbapi.DatabaseError)
    assert dpproxy.connect is dbapi.connect


def test_connect_without_arguments_opens_the_demo(con: dbapi.Connection) -> None:
    cur = con.cursor()
    assert cur.description is None
    assert cur.rowcount == -1
    cur.execute("SELECT COUNT(*) FROM adult")
    (n,) = cur.fetchone() or (None,)
    assert isinstance(n, int)
    assert abs(n - ADULT_ROWS) <= 50  # Laplace(b=1): |noise| > 50 has probability e^-50
    assert con.engine.catalog.table("adult") is not None


def test_description_rowcount_and_fetching(con: dbapi.Connection) -> None:
    cur = con.cursor()
    result = cur.execute("SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex")
    assert result is cur
    assert cur.description is not None
    assert [d[0] for d in cur.description] == ["sex", "n", "mean_age"]
    assert [d[1] for d in cur.description] == ["text", "integer", "double"]
    assert all(len(d) == 7 for d in cur.description)
    assert cur.rowcount == 2
    first = cur.fetchone()
    assert first is not None and first[0] == "Female"
    rest = cur.fetchmany(5)
    assert len(rest) == 1 and rest[0][0] == "Male"
    assert cur.fetchone() is None
    assert cur.fetchmany() == []
    assert cur.fetchall() == []
    cur.execute("SELECT race, COUNT(*) FROM adult GROUP BY race")
    assert cur.rowcount == 5
    assert len(cur.fetchmany(2)) == 2
    cur.arraysize = 2
    assert len(cur.fetchmany()) == 2
    assert len(cur.fetchall()) == 1
    cur.execute("SELECT race, COUNT(*) FROM adult GROUP BY race")
    assert len(list(cur)) == 5


def test_values_are_plausible(con: dbapi.Connection) -> None:
    cur = con.cursor().execute(
        "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex")
    rows = dict((r[0], r[1:]) for r in cur.fetchall())
    assert abs(rows["Female"][0] - EXACT_FEMALE) <= 50
    assert abs(rows["Male"][0] - EXACT_MALE) <= 50
    assert 17 <= rows["Female"][1] <= 90 and abs(rows["Female"][1] - 36.86) < 2
    assert abs(rows["Male"][1] - 39.43) < 2


def test_privacy_cost_and_remaining_budget(con: dbapi.Connection) -> None:
    cur = con.cursor()
    start = cur.remaining_budget
    assert start.epsilon == 10
    assert start.delta == Fraction(1.0e-5)  # the schema's YAML float, at its exact binary value
    assert cur.privacy_cost is None
    previous = start
    for i in range(3):
        cur.execute(f"SELECT COUNT(*) FROM adult WHERE age > {20 + i}")
        assert cur.privacy_cost == Cost(Fraction(1)) and not cur.cached
        left = cur.remaining_budget
        assert left.epsilon == previous.epsilon - 1
        previous = left
    # the same query again: the answer released before, from the cache, at no cost
    first = cur.execute("SELECT COUNT(*) FROM adult WHERE age > 20").fetchall()
    assert cur.cached and cur.privacy_cost == Cost.zero()
    assert cur.execute("select count(*)  from ADULT where AGE > 20").fetchall() == first
    assert con.remaining_budget == previous
    assert con.cursor().remaining_budget == previous  # the budget belongs to the analyst


def test_error_bounds_are_shaped_like_rows(con: dbapi.Connection) -> None:
    cur = con.cursor().execute(
        "SELECT education, COUNT(*), SUM(hours_per_week), AVG(age) FROM adult GROUP BY education")
    rows = cur.fetchall()
    assert cur.description is not None
    assert len(cur.error_bounds) == len(rows) == 16
    for row, bounds in zip(rows, cur.error_bounds, strict=True):
        assert len(bounds) == len(row) == len(cur.description)
        for value in bounds[1:]:
            assert value is not None and value >= 0
    count_errors = [b[1] for b in cur.error_bounds]
    # The COUNT is read off the AVG's joint release (A + B: planning/derived.py), the same law
    # in every group; its bound is that law's 95% half-width plus the distance to the whole
    # number released (at most 1/2), so the groups' bounds differ by at most 1/2.
    assert max(count_errors) - min(count_errors) <= 0.5 + 1e-9


def test_explain_spends_nothing(con: dbapi.Connection) -> None:
    cur = con.cursor()
    before = cur.remaining_budget
    text = cur.explain("SELECT sex, AVG(age) FROM adult GROUP BY sex")
    assert "rewritten SQL" in text and "Laplace" in text
    assert cur.remaining_budget == before


def test_pyformat_positional_parameters(exact_con: dbapi.Connection) -> None:
    cur = exact_con.cursor()
    cur.execute("SELECT COUNT(*) FROM adult WHERE sex = %s AND age > %s", ("Female", 40))
    assert cur.fetchall() == [(cur.connection.engine.run(
        "SELECT COUNT(*) FROM adult WHERE sex = 'Female' AND age > 40",
        analyst="check").released.rows[0][0],)]
    cur.execute("SELECT COUNT(*) FROM adult WHERE sex = %s", ["Male"])
    assert cur.fetchall() == [(EXACT_MALE,)]


def test_pyformat_named_parameters(exact_con: dbapi.Connection) -> None:
    cur = exact_con.cursor()
    cur.execute("SELECT COUNT(*) FROM adult WHERE sex = %(sex)s OR sex = %(sex)s",
                {"sex": "Female"})
    assert cur.fetchall() == [(EXACT_FEMALE,)]


def test_a_quote_in_a_parameter_stays_inside_the_string(exact_con: dbapi.Connection) -> None:
    cur = exact_con.cursor()
    # quoted correctly this matches nobody; pasted in raw it would match everyone
    cur.execute("SELECT COUNT(*) FROM adult WHERE occupation = %(o)s", {"o": "x' OR '1'='1"})
    assert cur.fetchall() == [(0,)]
    cur.execute("SELECT COUNT(*) FROM adult WHERE native_country = %s", ("O'Higgins",))
    assert cur.fetchall() == [(0,)]


def test_parameter_types(exact_con: dbapi.Connection) -> None:
    cur = exact_con.cursor()
    cur.execute("SELECT COUNT(*) FROM adult WHERE occupation LIKE %s", ("Prof%",))
    (prof,) = cur.fetchone() or (None,)
    assert isinstance(prof, int) and prof > 0
    cur.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (40.5,))
    (over,) = cur.fetchone() or (None,)
    cur.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (Fraction(81, 2),))
    assert cur.fetchone() == (over,)
    cur.execute("SELECT COUNT(*) FROM adult WHERE (workclass = %s) IS NULL", (None,))
    assert cur.fetchone() == (ADULT_ROWS,)


def test_parameters_are_bound_in_multi_row_databases(multi_db: Any) -> None:
    with dpproxy.connect(str(multi_db.path), schema=str(multi_db.schemas["visits_rows"]),
                         noise=NoNoise()) as c:
        cur = c.cursor()
        cur.execute("SELECT COUNT(*) FROM visits WHERE flag = %s AND user_id <= %s", (True, 40))
        (n,) = cur.fetchone() or (None,)
        cur.execute("SELECT COUNT(*) FROM visits WHERE flag AND user_id <= 40")
        assert cur.fetchone() == (n,)
        cur.execute("SELECT COUNT(*) FROM visits WHERE CAST(%s AS DATE) < DATE '2030-01-01'",
                    (datetime.date(2024, 5, 1),))
        assert cur.fetchone() == (160,)  # every row, under the 3-rows-per-user bound


@pytest.mark.parametrize("sql,params", [
    ("SELECT COUNT(*) FROM adult WHERE sex = %s AND age > %s", ("Male",)),
    ("SELECT COUNT(*) FROM adult WHERE sex = %s", ("Male", "Female")),
    ("SELECT COUNT(*) FROM adult WHERE sex = %(s)s", {"t": "Male"}),
])
def test_wrong_parameters_raise_a_dbapi_error(
    sql: str, params: Any, con: dbapi.Connection
) -> None:
    """PEP 249: a wrong number of parameters is a ProgrammingError (an ``Error``), not a bare
    TypeError or KeyError, and it costs nothing."""
    cur = con.cursor()
    before = cur.remaining_budget
    with pytest.raises(dbapi.Error):
        cur.execute(sql, params)
    assert cur.remaining_budget == before


def test_unsupported_parameter_type(con: dbapi.Connection) -> None:
    cur = con.cursor()
    with pytest.raises(dbapi.Error) as info:
        cur.execute("SELECT COUNT(*) FROM adult WHERE sex = %s", (object(),))
    assert info.value.sqlstate == "22023"


def test_refusals_raise_dbapi_errors_with_sqlstate(con: dbapi.Connection) -> None:
    cur = con.cursor()
    before = cur.remaining_budget
    with pytest.raises(dbapi.Error) as info:
        cur.execute("SELECT * FROM adult")
    assert info.value.sqlstate == "42501"
    with pytest.raises(dbapi.NotSupportedError):
        cur.execute("SELECT MODE() WITHIN GROUP (ORDER BY age) FROM adult")
    with pytest.raises(dbapi.ProgrammingError) as syntax:
        cur.execute("SELEC COUNT(*) FROM adult")
    assert syntax.value.sqlstate == "42601"
    assert cur.remaining_budget == before


def test_budget_exhaustion_through_the_cursor(demo_db: Path) -> None:
    with dpproxy.connect(epsilon=4, cache="off") as c:
        cur = c.cursor()
        cur.execute("SELECT COUNT(*) FROM adult")
        cur.execute("SELECT COUNT(*) FROM adult")
        assert cur.remaining_budget.epsilon == 2
        with pytest.raises(dbapi.OperationalError) as info:
            cur.execute("SELECT COUNT(*) FROM adult")
        assert info.value.sqlstate == "ZD001"
        assert cur.remaining_budget.epsilon == 2


def test_budget_and_per_query_parameters(demo_db: Path) -> None:
    with dpproxy.connect(epsilon="1/2", budget_epsilon=1, analyst="carol", cache="off") as c:
        cur = c.cursor()
        assert cur.remaining_budget.epsilon == 1
        cur.execute("SELECT COUNT(*) FROM adult")
        assert cur.privacy_cost == Cost(Fraction(1, 2))
        cur.execute("SELECT COUNT(*) FROM adult")
        assert cur.remaining_budget.epsilon == 0
    with dpproxy.connect(mechanism="gaussian", delta="1e-6") as c:
        cur = c.cursor().execute("SELECT COUNT(*) FROM adult")
        assert cur.privacy_cost is not None and cur.privacy_cost.delta == Fraction(1, 10**6)


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0},
    {"epsilon": -1},
    {"epsilon": "abc"},
    {"epsilon": float("nan")},
    {"epsilon": float("inf")},
    {"delta": 1},
    {"delta": -0.1},
    {"delta": "x"},
    {"mechanism": "cauchy"},
    {"budget_epsilon": 0},
])
def test_connect_rejects_bad_privacy_parameters(kwargs: dict[str, Any], demo_db: Path) -> None:
    with pytest.raises(DPProxyError) as info:
        dpproxy.connect(**kwargs)
    assert info.value.sqlstate == "ZD003"


def test_closed_cursor_and_connection(demo_db: Path) -> None:
    c = dpproxy.connect()
    cur = c.cursor()
    cur.close()
    with pytest.raises(dbapi.Error):
        cur.execute("SELECT COUNT(*) FROM adult")
    c.close()
    c.close()  # idempotent
    with pytest.raises(dbapi.Error):
        c.cursor()
    c.commit()
    c.rollback()


def test_executemany_spends_once_per_parameter_set(exact_con: dbapi.Connection) -> None:
    cur = exact_con.cursor()
    before = cur.remaining_budget.epsilon
    cur.executemany("SELECT COUNT(*) FROM adult WHERE sex = %s", [("Male",), ("Female",)])
    assert cur.fetchall() == [(EXACT_FEMALE,)]
    assert cur.remaining_budget.epsilon == before - 2


def test_paths_may_be_pathlib_paths(demo_db: Path, tmp_path: Path) -> None:
    """``database``, ``schema`` and ``ledger`` as ``pathlib.Path`` (they raised AttributeError
    from deep in the opener before): the same answer as with strings, the ledger file made."""
    from dpproxy.demo import demo_schema_path

    ledger = tmp_path / "ledger.sqlite"
    with dpproxy.connect(
        demo_db, schema=Path(demo_schema_path()), ledger=ledger, noise=NoNoise()
    ) as c:
        assert c.cursor().execute("SELECT COUNT(*) FROM adult").fetchall() == [(ADULT_ROWS,)]
    assert ledger.is_file()


@pytest.mark.parametrize("kwargs", [
    {"database": 3, "schema": "x.yaml"},
    {"database": "x.duckdb", "schema": b"x.yaml"},
    {"ledger": ["ledger.sqlite"]},
])
def test_paths_of_another_type_are_refused(kwargs: dict[str, Any], demo_db: Path) -> None:
    with pytest.raises(dbapi.DataError) as info:
        dpproxy.connect(**kwargs)
    assert info.value.sqlstate == "22023"
    assert "must be a path or a string" in str(info.value)

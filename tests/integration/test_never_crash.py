"""Never crash, never charge for nothing: the inputs fuzzing found, embedded and on the wire.

Every input gets an answer or a DPProxyError with a SQLSTATE; a query refused before its
release spends nothing; on the wire the session survives (the next ``SELECT COUNT(*) FROM
adult`` on the same connection is answered) and the server logs no traceback.

Before the fixes: deep nesting raised RecursionError (the wire session was dropped), a CAST of
a text group key in ORDER BY or HAVING raised TypeError after the query was charged, ε ≥ 750
a "math domain error" after charging, ``SELECT #>>`` a TypeError inside sqlglot (session
dropped), ``GROUP BY 0.5`` a ValueError, ``HAVING COUNT(*) > ''`` a TypeError after charging,
``HAVING sex`` silently answered no rows, ``SELECT x`` XX000 on the wire and
``MAX(NULLIF(1, capital_gain))`` XX000.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.demo import demo_schema_path
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.server.server import Server, ServerConfig
from dpproxy.values import Cost
from tests.integration.test_server import Running, start_server, stop_server

_WHERE = "SELECT COUNT(*) FROM adult WHERE "
_BY_SEX = "SELECT sex, COUNT(*) FROM adult GROUP BY sex "

# (id, SQL, the SQLSTATE of its refusal or None for an answer)
CASES: list[tuple[str, str, str | None]] = [
    ("5000-parentheses", _WHERE + "(" * 5000 + "age > 1" + ")" * 5000, "54001"),
    ("20000-term-or", _WHERE + " OR ".join(f"age = {i}" for i in range(20_000)), "54001"),
    ("1000-nested-not", _WHERE + "NOT (" * 1000 + "age > 1" + ")" * 1000, "54001"),
    (
        "1000-nested-abs",
        "SELECT SUM(" + "ABS(" * 1000 + "age" + ")" * 1000 + ") FROM adult",
        "54001",
    ),
    ("1000-unary-minus", "SELECT SUM(" + "- " * 1000 + "age) FROM adult", "54001"),
    (
        "1000-nested-case",
        "SELECT SUM(" + "CASE WHEN age > 1 THEN " * 1000 + "age" + " END" * 1000 + ") FROM adult",
        "54001",
    ),
    ("100-parentheses-answered", _WHERE + "(" * 100 + "age > 1" + ")" * 100, None),
    (
        "12-nested-round",
        "SELECT SUM(" + "ROUND(" * 12 + "age" + ", 1)" * 12 + ") FROM adult",
        "54001",
    ),
    ("30-nested-mod", "SELECT SUM(" + "(" * 30 + "age" + " % 7)" * 30 + ") FROM adult", "54001"),
    (
        "4-nested-round-answered",
        "SELECT SUM(" + "ROUND(" * 4 + "age" + ", 1)" * 4 + ") FROM adult",
        None,
    ),
    ("150-term-or-answered", _WHERE + " OR ".join(f"age = {i}" for i in range(150)), None),
    ("cast-text-key-order-by", _BY_SEX + "ORDER BY CAST(sex AS INTEGER)", None),
    ("cast-text-key-having", _BY_SEX + "HAVING CAST(sex AS INTEGER) > 1", None),
    ("jsonb-operator", _WHERE + "sex #>> '{a}' = 'x'", "42883"),
    ("bare-jsonb-operator", "SELECT #>>", "42601"),
    ("group-by-0.5", "SELECT COUNT(*) FROM adult GROUP BY 0.5", "42601"),
    ("order-by-1.5", _BY_SEX + "ORDER BY 1.5", "42601"),
    ("having-count-empty-string", _BY_SEX + "HAVING COUNT(*) > ''", "22P02"),
    ("1e-'nan'", _WHERE + "age > 1e-'nan'", "42601"),
    ("having-text-column", _BY_SEX + "HAVING sex", "42804"),
    ("having-number-column", "SELECT age, COUNT(*) FROM adult GROUP BY age HAVING age", "42804"),
    ("select-x", "SELECT x", "42703"),
    ("floor-without-argument", _WHERE + "age = FLOOR()", "42883"),  # AttributeError
    ("empty-in-list", _WHERE + "age IN ()", "42601"),  # PostgreSQL failed after charging
    ("minus-null", _WHERE + "age = - NULL", "42725"),  # PostgreSQL failed after charging
    ("null-times-null", _WHERE + "age = NULL * NULL", "42725"),  # likewise
    ("extract-from-null", _WHERE + "EXTRACT(YEAR FROM NULL) = 1", "42725"),  # likewise
    ("sum-of-null", "SELECT SUM(CASE WHEN age > 1 THEN NULL END) FROM adult", "42804"),
    ("coalesce-of-nulls", _WHERE + "age = COALESCE(NULL, NULL)", "42883"),  # text there
    ("max-of-a-constant", "SELECT MAX(NULLIF(1, capital_gain)) FROM adult", None),
]
IDS = [c[0] for c in CASES]


def _outcome(engine: Engine, sql: str, **kw: object) -> tuple[str | None, Cost]:
    """(the SQLSTATE of the refusal or None, what the call spent); never another exception."""
    before = engine.remaining("ana")
    try:
        engine.run(sql, analyst="ana", **kw)  # type: ignore[arg-type]
        state = None
    except DPProxyError as e:
        state = e.sqlstate
    return state, before - engine.remaining("ana")


@pytest.fixture(scope="module")
def engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    budget = Cost(Fraction(10**6), Fraction(1, 10))
    e = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(budget))
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize(("name", "sql", "expected"), CASES, ids=IDS)
def test_embedded(engine: Engine, name: str, sql: str, expected: str | None) -> None:
    state, spent = _outcome(engine, sql)
    assert state == expected
    assert spent == (Cost.zero() if expected else engine.plan(sql).cost)


def test_a_constant_measure_has_its_one_value(engine: Engine) -> None:
    answer = engine.run("SELECT MAX(NULLIF(1, capital_gain)) FROM adult", analyst="ana")
    assert answer.released.rows == ((1.0,),)


def test_a_cast_that_fails_in_post_processing_is_null(engine: Engine) -> None:
    """CAST of a released text key reads it as the row-level cast would: NULL here."""
    sql = "SELECT sex, CAST(sex AS INTEGER) AS n, COUNT(*) FROM adult GROUP BY sex ORDER BY n"
    rows = engine.run(sql, analyst="ana").released.rows
    assert [r[:2] for r in rows] == [("Female", None), ("Male", None)]


@pytest.mark.parametrize(
    ("epsilon", "delta", "expected"),
    [
        ("750", None, None),
        ("1000", None, None),
        ("1000.5", None, "22023"),
        ("1e6", None, "22023"),
        ("1e-300", None, "22023"),
        ("1", "1e-301", "22023"),
        (Fraction(1, 3**2000), None, "22023"),
    ],
)
def test_privacy_parameters_are_checked_before_the_data(
    engine: Engine, epsilon: str | Fraction, delta: str | None, expected: str | None
) -> None:
    eps = Fraction(epsilon)
    kw = {"epsilon": eps, "delta": None if delta is None else Fraction(delta)}
    for sql in ("SELECT COUNT(*) FROM adult", "SELECT AVG(age), MEDIAN(age) FROM adult"):
        state, spent = _outcome(engine, sql, **kw)
        assert state == expected
        assert spent == Cost.zero() if expected else spent.epsilon == eps


# ------------------------------------------------------------------------------- the wire


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("never-crash"))
    try:
        yield run
    finally:
        log = stop_server(run)
        assert "Traceback" not in log, log[-3000:]


def _budget(con: psycopg.Connection) -> str:
    row = con.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(("name", "sql", "expected"), CASES, ids=IDS)
def test_wire(server: Running, name: str, sql: str, expected: str | None) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        con.execute("SET dpproxy.epsilon = 0.01")  # one budget for every case of the module
        before = _budget(con)
        if expected is None:
            con.execute(sql).fetchall()
            assert _budget(con) != before
        else:
            with pytest.raises(psycopg.Error) as refused:
                con.execute(sql)
            assert refused.value.sqlstate == expected
            assert _budget(con) == before
        (n,) = con.execute("SELECT COUNT(*) FROM adult").fetchone()  # type: ignore[misc]
        assert 30_000 < n < 35_000


def test_wire_epsilon_750_is_answered(tmp_path: Path, demo_db: Path) -> None:
    """ε = 750 (a schema allowing 1000 per query) is answered; it used to fail after charging."""
    schema = tmp_path / "adult.yaml"
    text = demo_schema_path().read_text(encoding="utf-8")
    text = text.replace("  epsilon: 1.0 ", "  epsilon: 1000 ", 1)
    text = text.replace("budget: {epsilon: 10,", "budget: {epsilon: 100000,", 1)
    schema.write_text(text, encoding="utf-8")
    database = tmp_path / "adult.duckdb"
    shutil.copy(demo_db, database)
    run = start_server(tmp_path, "--database", str(database), "--schema", str(schema))
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as con:
            con.execute("SET dpproxy.epsilon = 750")
            for sql in ("SELECT COUNT(*) FROM adult", _BY_SEX + "ORDER BY 2"):
                total = sum(row[-1] for row in con.execute(sql).fetchall())
                assert 32_000 < total < 33_000  # noise of scale 1/750
            assert "spent ε=1500" in _budget(con)
    finally:
        log = stop_server(run)
    assert "Traceback" not in log, log[-3000:]


# ------------------------------------------------------------------- the second line


@pytest.mark.parametrize(
    ("exception", "expected"), [(RecursionError(), "54001"), (ValueError("a bug"), "XX000")]
)
def test_planning_raises_only_dpproxy_errors(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, exception: Exception, expected: str
) -> None:
    """Behind the limits: whatever planning raises reaches the caller as a DPProxyError
    (RecursionError 54001, a bug XX000), before anything is charged."""

    def broken(*args: object, **kwargs: object) -> None:
        raise exception

    monkeypatch.setattr("dpproxy.engine_plans.validate", broken)
    sql = "SELECT COUNT(*) FROM adult WHERE age > 77"  # not planned (cached) before
    assert _outcome(engine, sql) == (expected, Cost.zero())


@pytest.mark.parametrize(
    ("exception", "expected"), [(RecursionError(), "54001"), (TypeError("a bug"), "XX000")]
)
def test_the_wire_session_survives_an_unexpected_exception(
    demo_db: Path,
    demo_catalog: Catalog,
    monkeypatch: pytest.MonkeyPatch,
    exception: Exception,
    expected: str,
) -> None:
    """``dpproxy serve`` answers an exception that is no DPProxyError with an ErrorResponse
    (simple and extended protocol) and the session goes on."""
    engine = Engine(demo_catalog, DuckDBBackend(demo_db))

    def broken(*args: object, **kwargs: object) -> None:
        raise exception

    monkeypatch.setattr(engine, "run", broken)
    server = Server(engine, ServerConfig(host="127.0.0.1", port=0, trust=True))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(server.start())
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        dsn = f"host=127.0.0.1 port={port} user=ana dbname=dpproxy sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as con:
            for params in (None, (40,)):  # the simple and the extended protocol
                with pytest.raises(psycopg.Error) as failed:
                    if params is None:
                        con.execute("SELECT COUNT(*) FROM adult WHERE age > 40")
                    else:
                        con.execute("SELECT COUNT(*) FROM adult WHERE age > %s", params)
                assert failed.value.sqlstate == expected
                assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        asyncio.run_coroutine_threadsafe(server.shutdown(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()
        engine.close()

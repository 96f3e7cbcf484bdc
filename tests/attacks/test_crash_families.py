"""Named attacks: make dpproxy crash, or charge for an answer it never releases.

An analyst who can crash the proxy can drop other clients' work, and one who can make a query
fail *after* it was charged can drain a victim's shared budget without learning anything — or
probe the proxy's own code paths. The rule (SECURITY.md): every input gets an answer or a
DPProxyError with a SQLSTATE, a query refused before its release spends nothing, and a wire
session survives any statement. Each family below is an attack fuzzing found
(``tests/fuzz/``), replayed embedded and, where the wire session was the victim, over the
wire; ``tests/integration/test_never_crash.py`` has every single case.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.mechanisms.base import Laplace
from dpproxy.values import Cost
from tests.integration.test_server import Running, start_server, stop_server

BUDGET = Cost(Fraction(10**6), Fraction(1, 10))


@pytest.fixture(scope="module")
def engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    e = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(BUDGET))
    try:
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("crash-families"))
    try:
        yield run
    finally:
        log = stop_server(run)
        assert "Traceback" not in log, log[-3000:]


def refusal(engine: Engine, sql: str, **kw: object) -> tuple[str | None, Cost]:
    """The SQLSTATE of the refusal (None: answered) and what the attempt spent."""
    before = engine.remaining("mallory")
    try:
        engine.run(sql, analyst="mallory", **kw)  # type: ignore[arg-type]
        state = None
    except DPProxyError as e:
        state = e.sqlstate
    return state, before - engine.remaining("mallory")


def on_the_wire(server: Running, sql: str) -> str:
    """The SQLSTATE of ``sql``'s refusal on a fresh connection, which must stay usable."""
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        before = con.execute("SHOW dpproxy.budget").fetchone()
        with pytest.raises(psycopg.Error) as refused:
            con.execute(sql)
        assert con.execute("SHOW dpproxy.budget").fetchone() == before
        (n,) = con.execute("SELECT COUNT(*) FROM adult").fetchone()  # type: ignore[misc]
        assert n > 30_000
        return str(refused.value.sqlstate)


DEEP = [
    "SELECT COUNT(*) FROM adult WHERE " + "(" * 5000 + "age > 1" + ")" * 5000,
    "SELECT COUNT(*) FROM adult WHERE " + " OR ".join(f"age = {i}" for i in range(20_000)),
    "SELECT COUNT(*) FROM adult WHERE " + "NOT (" * 1000 + "age > 1" + ")" * 1000,
    "SELECT COUNT(*) FROM adult WHERE " + "NOT " * 1000 + "age > 1",
    "SELECT " + "(" * 1000 + "1" + ")" * 1000,  # a catalog query on the wire
]


@pytest.mark.parametrize("sql", DEEP, ids=["parens", "or-chain", "not-parens", "not", "catalog"])
def test_deep_nesting(engine: Engine, server: Running, sql: str) -> None:
    """Attack: nest a statement deeper than Python's stack (5,000 parentheses, a 20,000-term
    OR, 1,000 NOTs). sqlglot's parser, or validation and planning, raised RecursionError: a
    non-DPProxyError for embedded callers, and a dropped connection on the wire. Defence:
    documented limits on length, nesting and tree depth (``sql/parse.py``), 54001 before any
    planning, nothing charged; a RecursionError that still escapes is 54001 too."""
    assert refusal(engine, sql) == ("54001", Cost.zero())
    assert on_the_wire(server, sql) == "54001"


def test_exponential_rewrite(engine: Engine, server: Running) -> None:
    """Attack: nest the functions whose portable rewrite copies its operand (ROUND four
    times, ``%`` twice). Twelve nested ROUNDs made a rewritten statement of 4¹² copies of the
    column: minutes of CPU and then out of memory, which kills the server. Defence: the guarded
    expression is built bottom-up and refused (54001) as soon as one node exceeds 50,000 nodes,
    in well under a second."""
    for sql in (
        "SELECT SUM(" + "ROUND(" * 12 + "age" + ", 1)" * 12 + ") FROM adult",
        "SELECT AVG(" + "(" * 40 + "age" + " % 7)" * 40 + ") FROM adult",
    ):
        started = time.monotonic()
        assert refusal(engine, sql) == ("54001", Cost.zero())
        assert time.monotonic() - started < 10
        assert on_the_wire(server, sql) == "54001"


POST_PROCESSING = [
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY CAST(sex AS INTEGER)", None),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING CAST(sex AS INTEGER) > 1", None),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING COUNT(*) > ''", "22P02"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING sex", "42804"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex || 1 > 0", "42883"),
    ("SELECT sex, COUNT(*) * 1e300 * 1e300 AS x FROM adult GROUP BY sex ORDER BY x", None),
]


@pytest.mark.parametrize(("sql", "expected"), POST_PROCESSING)
def test_post_processing_type_errors_after_charging(
    engine: Engine, sql: str, expected: str | None
) -> None:
    """Attack: write a HAVING or ORDER BY expression that no check types, over released keys
    and aggregates (``CAST(<text key> AS INTEGER)``, ``COUNT(*) > ''``). The proxy evaluates
    it only after the query is charged, so it raised a TypeError with the budget spent and
    the answer lost — or, for ``HAVING sex``, silently released no rows. Defence: HAVING and
    ORDER BY are typed statically like row-level expressions (refused before the data), and
    what is left is evaluated totally (NULL where there is no value)."""
    state, spent = refusal(engine, sql)
    assert state == expected
    if expected is not None:
        assert spent == Cost.zero()
    else:
        assert spent == engine.plan(sql).cost


@pytest.mark.parametrize(
    ("epsilon", "expected"),
    [("750", None), ("1000", None), ("1001", "22023"), ("1e12", "22023"), ("1e-300", "22023")],
)
def test_numeric_domain_errors_of_epsilon(
    engine: Engine, epsilon: str, expected: str | None
) -> None:
    """Attack: ask for an extreme ε. At ε ≥ 750 the discrete Laplace's e^{-1/b} underflows
    to 0 and the 95% bound took log(0) — "math domain error" after the query was charged; a
    tiny ε divided by log(1) = 0; ε = 10^12 kept the planner busy for minutes, 10^15 ran out of
    memory. Defence: the bound is computed without log(p), and ε outside [10^-9, 1000] (or a
    positive δ below 10^-300) is refused with 22023 at planning, before anything is charged."""
    eps = Fraction(epsilon)
    for sql in ("SELECT COUNT(*) FROM adult", "SELECT AVG(age), MEDIAN(age) FROM adult"):
        state, spent = refusal(engine, sql, epsilon=eps)
        assert state == expected
        assert spent.epsilon == (0 if expected else eps)
    for b in (Fraction(1, 10**6), Fraction(1, 800), Fraction(10**20)):
        width = Laplace(b).half_width(0.05, integer=True)
        assert math.isfinite(width) and width >= 0


PARSER = [
    ("SELECT #>>", "42601"),  # TypeError inside sqlglot's parser
    ("SELECT COUNT(*) FROM adult WHERE sex #>> '{a}' = 'x'", "42883"),
    ("SELECT COUNT(*) FROM adult WHERE age > 1e-'nan'", "42601"),  # 1e: no number
    ("SELECT COUNT(*) FROM adult GROUP BY 0.5", "42601"),  # ValueError in validation
    ("SELECT * FROM dpproxy.spending WHERE #>>", "42601"),  # the spending tables' parser
    ("SELECT COUNT(*) FROM adult WHERE age = - FLOOR()", "42883"),  # a call without argument
    ("SELECT COUNT(*) FROM adult WHERE age IN ()", "42601"),  # PostgreSQL's grammar has none
]


@pytest.mark.parametrize(("sql", "expected"), PARSER)
def test_parser_crashes(engine: Engine, server: Running, sql: str, expected: str) -> None:
    """Attack: feed the parser input it does not expect. sqlglot raised a TypeError on a
    bare ``#>>`` (in its JSON-path builder), reading ``1e`` as a number failed later with a
    ValueError, and so did ``GROUP BY 0.5``; on the wire the session was dropped. sqlglot also
    reads what PostgreSQL's grammar rejects: ``FLOOR()`` (an AttributeError in planning) and
    ``IN ()`` (accepted, then a syntax error of PostgreSQL after the query was charged).
    Defence: anything the parser raises is a syntax error (42601), number literals are checked
    as PostgreSQL's lexer would, calls need their arguments, IN lists are not empty, and
    positions must be integers."""
    if "dpproxy.spending" not in sql:
        assert refusal(engine, sql) == (expected, Cost.zero())
    assert on_the_wire(server, sql) == expected

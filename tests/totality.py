"""Totality of the rewrite: the oracle, the schema, adversarial databases and a query grammar.

The project's central invariant (README, "Refusals and SQLSTATEs"): **an accepted query's
rewritten SQL cannot fail on any database that satisfies the schema, on either engine.** An
error raised by the database for one row's value is an output that no noise covers (a query
that fails exactly when some row matches a condition reveals that row), so for every query
there are only two acceptable outcomes:

* :meth:`Engine.prepare` refuses it with a :class:`DPProxyError` — decided before any data is
  touched, from the SQL and the schema alone; or
* every statement of the :class:`Prepared` (the truncation statement, the main statement, the
  extra statements) runs on the backend without an exception, and :meth:`Engine.run` answers.

:func:`check_query` is that oracle for one query on one engine; it returns the violations it
saw (an empty list when the invariant holds). ``tests/property/test_totality.py`` throws
generated (database, queries) pairs at it on DuckDB and PostgreSQL, and
``tests/property/test_totality_families.py`` runs known-bad queries of each family through it.

The schema (:func:`schema_text`) has one private table ``t`` with every column kind the
rewrite treats differently, stored in the physical types a real database would use:

====== ===================== ========= =========================================
column schema                stored as notes
====== ===================== ========= =========================================
uid    integer (the unit)    INTEGER   units repeat, beyond ``max_rows_per_unit``
si     integer [-2¹⁵, 2¹⁵-1] SMALLINT  the bounds are the storage type's extremes
i32    integer               INTEGER   unbounded: int32 extremes
i64    integer, nullable     BIGINT    unbounded: int64 extremes
fb     float [-1000, 1e6]    DOUBLE    values at the bounds, -0.0, 5e-324
fu     float, nullable       DOUBLE    ±1.797e308, 5e-324, -0.0, ±inf, NaN
cat    text, nullable        TEXT      public domain (with '' and '12' in it)
note   text, nullable        TEXT      no domain: '', a few KB, '1e999', ' 12 '
flag   boolean, nullable     BOOLEAN
day    date, nullable        DATE      0001-01-01 … 9999-12-31
====== ===================== ========= =========================================

The contribution bound is drawn per example (:data:`BOUNDS`): ``max_rows_per_unit``, with
groups per unit as well, or none (the rows per unit are then chosen with DP, and the
:class:`Prepared` has a truncation statement).

Float columns may hold ±inf and NaN: ``rewrite/floats.py`` documents that the rewrite passes
them through (PostgreSQL never raises on them), so only the bounded column is kept finite and
within its bounds. Units may have more rows than the contribution bound: the bound is
*enforced* by the rewrite (schemas/README.md, "What is protected"), not assumed.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import math
import os
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import duckdb
from hypothesis import strategies as st

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine, Prepared
from dpproxy.errors import DPProxyError, StabilityTestFailed
from tests.noise import NoNoise
from tests.totality_composed import composed_query
from tests.totality_more import hinted, needs_range, statistic, to_char_key

T = TypeVar("T")

SECRET = 0x7074_A11  # a fixed secret: prepare() on a database and its neighbour must agree

# ------------------------------------------------------------------------------------ schema

SI_LO, SI_HI = -(2**15), 2**15 - 1
FB_LO, FB_HI = -1000, 1_000_000
DOMAIN = ("X", "y", "", "12", "NaN")
BOUNDS = {
    # schema-declared bound: the rewrite keeps at most 3 rows per unit
    "rows": "    max_rows_per_unit: 3\n",
    # groups × rows per group, and a row bound
    "groups": "    max_rows_per_unit: 3\n    max_groups_per_unit: 2\n"
    "    max_rows_per_group_per_unit: 2\n",
    # no bound: each query draws one with DP (a truncation statement runs first)
    "dp": "",
}

# (name, DuckDB type, PostgreSQL type, nullable)
COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("uid", "INTEGER", "integer", False),
    ("si", "SMALLINT", "smallint", False),
    ("i32", "INTEGER", "integer", False),
    ("i64", "BIGINT", "bigint", True),
    ("fb", "DOUBLE", "double precision", False),
    ("fu", "DOUBLE", "double precision", True),
    ("cat", "VARCHAR", "text", True),
    ("note", "VARCHAR", "text", True),
    ("flag", "BOOLEAN", "boolean", True),
    ("day", "DATE", "date", True),
)
NAMES = tuple(c[0] for c in COLUMNS)
NUMERIC_COLUMNS = ("si", "i32", "i64", "fb", "fu")
INTEGER_COLUMNS = ("si", "i32", "i64")
TEXT_COLUMNS = ("cat", "note")
Row = tuple[Any, ...]


def schema_text(bound: str) -> str:
    """The privacy schema, with one of the contribution bounds of :data:`BOUNDS`."""
    domain = ", ".join(f'"{v}"' for v in DOMAIN)
    return (
        "version: 1\n"
        "dataset: totality\n"
        "privacy:\n"
        "  epsilon: 1.0\n"
        "  delta: 1.0e-6\n"
        "  budget: {epsilon: 1000000000, delta: 0.5}\n"
        "tables:\n"
        "  t:\n"
        "    private: true\n"
        "    privacy_unit: uid\n"
        f"{BOUNDS[bound]}"
        "    columns:\n"
        "      uid: {type: integer}\n"
        f"      si: {{type: integer, lower: {SI_LO}, upper: {SI_HI}}}\n"
        "      i32: {type: integer}\n"
        "      i64: {type: integer, nullable: true}\n"
        f"      fb: {{type: float, lower: {FB_LO}, upper: {FB_HI}}}\n"
        "      fu: {type: float, nullable: true}\n"
        f"      cat: {{type: text, nullable: true, domain: [{domain}]}}\n"
        "      note: {type: text, nullable: true}\n"
        "      flag: {type: boolean, nullable: true}\n"
        "      day: {type: date, nullable: true}\n"
    )


_CATALOGS: dict[str, Catalog] = {}


def catalog(bound: str) -> Catalog:
    if bound not in _CATALOGS:
        _CATALOGS[bound] = parse_catalog(schema_text(bound), source=f"totality-{bound}")
    return _CATALOGS[bound]


def ddl(dialect: str, name: str = "t") -> str:
    i = 1 if dialect == "duckdb" else 2
    cols = ", ".join(f"{c[0]} {c[i]}{'' if c[3] else ' NOT NULL'}" for c in COLUMNS)
    return f"CREATE TABLE {name} ({cols})"


# ------------------------------------------------------------------------------- the oracle


@dataclass(frozen=True)
class Violation:
    """One way an accepted query failed: the step, the statement and the backend's error."""

    engine: str
    sql: str
    step: str  # "prepare" (a crash that is not a refusal), "execute <which>" or "run"
    statement: str | None
    error: str

    def __str__(self) -> str:
        text = f"[{self.engine}] {self.step} failed\n  query: {self.sql}\n"
        if self.statement is not None:
            text += f"  rewritten: {self.statement}\n"
        return text + f"  error: {self.error}"


@dataclass(frozen=True)
class Outcome:
    """What happened to one query on one engine."""

    sql: str
    sqlstate: str | None  # the refusal's SQLSTATE; None when prepare accepted the query
    statements: tuple[str, ...]  # the statements of the Prepared (empty when refused)
    violations: tuple[Violation, ...]

    @property
    def refusal(self) -> str:
        return self.sqlstate or "accepted"


def describe(e: BaseException, logged: Sequence[str] = ()) -> str:
    """An error with everything a developer needs: the backend's own message (in the
    ``log_detail`` of dpproxy's XX000, never shown to clients), the cause the engine logged for
    the operator (``logged``), and where an exception that is not dpproxy's was raised."""
    text = f"{type(e).__name__}: {e}"
    detail = getattr(e, "log_detail", None)
    if detail:
        text += f" | {detail}"
    cause = e.__cause__
    if cause is not None and not detail:
        text += f" | caused by {type(cause).__name__}: {cause}"
    for line in logged:
        text += f" | logged: {line}"
    if not isinstance(e, DPProxyError) and e.__traceback__ is not None:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        text += f" | at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"
    return " ".join(text.split())[:2000]


class _Records(logging.Handler):
    """The ERROR records of the ``dpproxy`` logger while a query runs: :meth:`Engine.run`
    logs the cause of a failure there and raises one fixed error without it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> _Records:
        logging.getLogger("dpproxy").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("dpproxy").removeHandler(self)


def _statements(prepared: Prepared) -> list[tuple[str, str]]:
    named = []
    if prepared.truncation is not None:
        named.append(("truncation", prepared.truncation))
    if prepared.sql is not None:
        named.append(("main", prepared.sql))
    named += [(f"extra {name}", s) for name, s in prepared.extra]
    return named


_analysts = itertools.count()


def check_query(
    engine: Engine,
    sql: str,
    *,
    label: str | None = None,
    secret: int = SECRET,
    run: bool = True,
) -> Outcome:
    """The totality oracle for one query on one engine (over the database it should hold).

    * :meth:`Engine.prepare` raising a :class:`DPProxyError` is a refusal: fine. Anything else it
      raises is a violation (a crash is not a refusal), and so is XX000 (an internal error that
      the engine wrapped).
    * Otherwise every statement the :class:`Prepared` holds is executed on the engine's backend:
      any exception is a violation.
    * With ``run``, :meth:`Engine.run` (use an engine with :class:`tests.noise.NoNoise`) must
      answer: the query was accepted, so a refusal now could only have come from the data. Only
      ``ZD005`` (propose-test-release found the data unstable: a documented, charged, DP
      outcome) is allowed. ``run`` uses a fresh analyst every time, so nothing is answered from
      the cache and no bound drawn earlier is reused.
    """
    where = label or engine.backend.dialect
    try:
        prepared = engine.prepare(sql, secret=secret)
    except DPProxyError as e:
        if e.sqlstate == "XX000":  # an internal error turned into a DPProxyError is a crash
            error = describe(e)
            return Outcome(sql, None, (), (Violation(where, sql, "prepare", None, error),))
        return Outcome(sql, e.sqlstate, (), ())
    except Exception as e:  # a crash of the pure pipeline is not a refusal
        return Outcome(sql, None, (), (Violation(where, sql, "prepare", None, describe(e)),))
    violations = []
    for which, statement in _statements(prepared):
        try:
            engine.backend.execute(statement)
        except Exception as e:
            violations.append(Violation(where, sql, f"execute {which}", statement, describe(e)))
    if run:
        with _Records() as records:
            try:
                engine.run(sql, analyst=f"totality-{next(_analysts)}")
            except StabilityTestFailed:
                pass
            except Exception as e:
                error = describe(e, records.lines)
                violations.append(Violation(where, sql, "run", prepared.sql, error))
    return Outcome(sql, None, prepared.statements, tuple(violations))


def _canonical(engine: Engine, sql: str) -> tuple[str, ...] | str:
    """The statements ``engine.canonical()`` prepares for ``sql``, or the refusal's SQLSTATE."""
    try:
        prepared = engine.canonical().prepare(sql, secret=SECRET)
    except DPProxyError as e:
        return e.sqlstate
    except Exception as e:  # a crash: check_query reports it
        return f"crash: {type(e).__name__}"
    # PostgreSQL names each table with the schema it was attached from (sql/qualify.py): the
    # database's and its neighbour's are two schemas of one PostgreSQL database
    schemas = {f'"{schema}".' for schema in engine.schemas.values()}
    out = []
    for _, statement in _statements(prepared):
        for qualified in schemas:
            statement = statement.replace(qualified, '"<schema>".')
        out.append(statement)
    return tuple(out)


def check_queries(
    engine: Engine,
    neighbour: Engine | None,
    queries: Sequence[str],
    *,
    label: str | None = None,
    run: bool = True,
) -> list[str]:
    """Every problem of ``queries`` on a database (``engine``) and, if given, on a neighbour
    (``neighbour``: the same database without one unit's rows): the violations of
    :func:`check_query` on either (``run`` only on the database: it repeats the statements),
    and any difference between the two in the refusal or in the canonical statements
    (``Engine.canonical``: planned without the facts a read-only file's rows prove, which only
    leave out clamps and tamings that change no value, ``backends/scanned.py``; prepare reads
    no other data, so they must be identical). The statements that run are the ones executed."""
    where = label or engine.backend.dialect
    problems: list[str] = []
    for sql in queries:
        here = check_query(engine, sql, label=where, run=run)
        problems += [str(v) for v in here.violations]
        if neighbour is None:
            continue
        there = check_query(neighbour, sql, label=f"{where}, neighbour", run=False)
        problems += [str(v) for v in there.violations]
        shown, shown_there = _canonical(engine, sql), _canonical(neighbour, sql)
        if here.refusal != there.refusal or shown != shown_there:
            problems.append(
                f"[{where}] prepare depends on the data\n  query: {sql}\n"
                f"  database: {here.refusal} {shown}\n"
                f"  neighbour: {there.refusal} {shown_there}"
            )
    return problems


# -------------------------------------------------------------------------------- databases

# Special values first: Hypothesis shrinks a sampled value towards the start of its list.
UIDS = (1, 2, 3, 0, -(2**31), 2**31 - 1)
SI_SPECIAL = (0, SI_LO, SI_HI, 1, -1, 181, 182)
I32_SPECIAL = (0, -(2**31), 2**31 - 1, 1, -1, 2_000_000_000, 46341)
I64_SPECIAL = (0, -(2**63), 2**63 - 1, 2**31, -(2**31) - 1, 3037000500, 1)
FB_SPECIAL = (0.0, float(FB_LO), float(FB_HI), -0.0, 5e-324, 0.5, -999.5)
FU_SPECIAL = (
    0.0,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    5e-324,
    -5e-324,
    -0.0,
    math.inf,
    -math.inf,
    math.nan,
    1e300,
    1e-300,
    2.0**63,
    2147483648.0,
    1.5,
)
NOTE_SPECIAL = (
    "",
    "1e999",
    " 12 ",
    "2024-02-30",
    "NaN",
    "1",
    "x" * 4096,
    "X",
    "2147483648",
    "9223372036854775808",
    "-0",
    "true",
    "t",
    "%",
    "_",
    "\\",
    "a'b",
    "Ünïcödé ✓",
    "€" * 1500,
    "2024-02-29",
    " ",
    "inf",
    "1.5",
)


class ExtremeDate(str):
    """A date beyond Python's 0001…9999 that an engine stores, written as each engine reads
    it (``str``: DuckDB's spelling; ``pg``: PostgreSQL's); loaded from text by both."""

    pg: str

    def __new__(cls, duck: str, pg: str | None = None) -> ExtremeDate:
        made = super().__new__(cls, duck)
        made.pg = pg or duck
        return made


DAY_SPECIAL: tuple[datetime.date | ExtremeDate, ...] = (
    datetime.date(2024, 2, 29),
    datetime.date(1, 1, 1),
    datetime.date(9999, 12, 31),
    datetime.date(1970, 1, 1),
    datetime.date(2000, 1, 1),
    datetime.date(1582, 10, 10),
    datetime.date(2024, 1, 31),
    datetime.date(1, 1, 31),
    datetime.date(9999, 12, 1),
    # what each engine stores beyond 0001…9999: ±infinity, PostgreSQL's minimum and
    # maximum (DuckDB stores them too), a year 10000
    ExtremeDate("infinity"),
    ExtremeDate("-infinity"),
    ExtremeDate("4713-01-01 (BC)", "4713-01-01 BC"),
    ExtremeDate("5874897-12-31"),
    ExtremeDate("10000-01-01"),
)
_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8)


def _special(values: Sequence[T], general: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    return st.one_of(st.sampled_from(values), general)


def _nullable(s: st.SearchStrategy[T]) -> st.SearchStrategy[T | None]:
    return st.one_of(st.none(), s, s)


ROWS = st.tuples(
    st.sampled_from(UIDS),
    _special(SI_SPECIAL, st.integers(SI_LO, SI_HI)),
    _special(I32_SPECIAL, st.integers(-(2**31), 2**31 - 1)),
    _nullable(_special(I64_SPECIAL, st.integers(-(2**63), 2**63 - 1))),
    _special(FB_SPECIAL, st.floats(FB_LO, FB_HI)),
    _nullable(_special(FU_SPECIAL, st.floats(allow_nan=True, allow_infinity=True))),
    _nullable(st.sampled_from(DOMAIN)),
    _nullable(_special(NOTE_SPECIAL, _TEXT)),
    _nullable(st.booleans()),
    _nullable(_special(DAY_SPECIAL, st.dates())),
)


@st.composite
def databases(draw: st.DrawFn, max_rows: int = 10) -> tuple[Row, ...]:
    """A table ``t`` that satisfies the schema: often empty or tiny, units repeated (some
    beyond the contribution bound: a copy of a row, several times), values at the extremes."""
    rows = draw(st.lists(ROWS, max_size=max_rows))
    if rows and draw(st.booleans()):
        heavy = draw(st.sampled_from(rows))
        rows += [heavy] * draw(st.integers(1, 4))
        rows = draw(st.permutations(rows))
    return tuple(rows)


def neighbour(rows: Sequence[Row], unit: int | None) -> tuple[Row, ...]:
    """The database without the rows of ``unit`` (add/remove neighbours)."""
    return tuple(r for r in rows if r[0] != unit)


def write_duckdb(con: duckdb.DuckDBPyConnection, path: Path, rows: Sequence[Row]) -> None:
    """A DuckDB file holding ``t`` with ``rows``, written through ``con`` (ATTACH is much
    cheaper than opening a database of its own)."""
    con.execute(f"ATTACH '{path}' AS w")
    try:
        con.execute(ddl("duckdb", "w.t"))
        if rows:
            marks = ", ".join("?" * len(COLUMNS))
            con.executemany(f"INSERT INTO w.t VALUES ({marks})", [list(r) for r in rows])
    finally:
        con.execute("DETACH w")


class DuckDBWorld:
    """A pair of DuckDB files (the database and its neighbour) per distinct example: a
    read-only backend sees no later writes. The last pair is kept while examples reuse its
    data (as they do while Hypothesis shrinks the queries)."""

    dialect = "duckdb"

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._n = itertools.count()
        self._open: list[Engine] = []
        self._key: str | None = None
        self._writer = duckdb.connect(":memory:")

    def engines(
        self, bound: str, portable: bool, rows: Sequence[Row], nb_rows: Sequence[Row]
    ) -> tuple[Engine, Engine]:
        key = repr((bound, portable, rows, nb_rows))  # repr: NaN equals itself, -0.0 ≠ 0.0
        if key != self._key:
            self.release()
            for data in (rows, nb_rows):
                path = self.tmp / f"t{next(self._n)}.duckdb"
                write_duckdb(self._writer, path, data)
                backend = DuckDBBackend(path, portable_hash=portable)
                self._open.append(Engine(catalog(bound), backend, noise=NoNoise()))
            self._key = key
        return self._open[0], self._open[1]

    def release(self) -> None:
        for e in self._open:
            e.close()
            p: Path = e.backend.path  # type: ignore[attr-defined]
            p.unlink(missing_ok=True)
            p.with_name(p.name + ".wal").unlink(missing_ok=True)
        self._open.clear()
        self._key = None

    def close(self) -> None:
        self.release()
        self._writer.close()


class PostgresWorld:
    """One scratch database: the table ``t`` in schema ``d`` (the database) and in schema
    ``nb`` (its neighbour), reloaded per example (TRUNCATE + COPY); one engine per schema,
    bound and hash kind, whose connections see only their schema (``search_path``)."""

    dialect = "postgres"
    SCHEMAS = ("d", "nb")

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.dsn = dsn
        self.con = psycopg.connect(dsn, autocommit=True)
        for s in self.SCHEMAS:
            self.con.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
            self.con.execute(f"CREATE SCHEMA {s}")
            self.con.execute(ddl("postgres", f"{s}.t"))
        self._engines: dict[tuple[str, bool, str], Engine] = {}
        self._loaded: str | None = None

    def _engine(self, bound: str, portable: bool, schema: str) -> Engine:
        from psycopg.conninfo import make_conninfo

        key = (bound, portable, schema)
        if key not in self._engines:
            dsn = make_conninfo(self.dsn, options=f"-c search_path={schema}")
            backend = PostgresBackend(dsn, portable_hash=portable, max_connections=2)
            self._engines[key] = Engine(catalog(bound), backend, noise=NoNoise())
        return self._engines[key]

    def engines(
        self, bound: str, portable: bool, rows: Sequence[Row], nb_rows: Sequence[Row]
    ) -> tuple[Engine, Engine]:
        key = repr((rows, nb_rows))
        if key != self._loaded:
            for schema, data in zip(self.SCHEMAS, (rows, nb_rows), strict=True):
                self.con.execute(f"TRUNCATE {schema}.t")
                if data:
                    with self.con.cursor().copy(f"COPY {schema}.t FROM STDIN") as copy:
                        for row in data:
                            copy.write_row([getattr(v, "pg", v) for v in row])
            self._loaded = key
        return self._engine(bound, portable, "d"), self._engine(bound, portable, "nb")

    def close(self) -> None:
        for e in self._engines.values():
            e.close()
        for s in self.SCHEMAS:
            self.con.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        self.con.close()


# ---------------------------------------------------------------------------------- queries

NUM_LITERALS = (
    "0",
    "1",
    "-1",
    "2",
    "0.5",
    "-0.0",
    "1e-10",
    "2147483647",
    "-2147483648",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "2000000000",
    "32767",
    "-32768",
    "1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e15",
    "3",
    "0.1234567890123456789012345678901234567",  # DuckDB: DECIMAL(38, 37)
)
BIG_INTEGERS = (
    "2147483647",
    "2000000000",
    "9223372036854775807",
    "-2147483648",
    "32767",
    "1000000000",
    "-9223372036854775808",
    "4611686018427387904",
)
TEXT_LITERALS = (
    "''",
    "'1'",
    "'X'",
    "'y'",
    "' 12 '",
    "'1e999'",
    "'2024-02-30'",
    "'NaN'",
    "'abc'",
    "'2147483648'",
    "'true'",
    "'2024-02-29'",
    "'%'",
    "'-0'",
    "'inf'",
    "'1.5'",
    "'9223372036854775808'",
)
# How often a query is one planned in parts; DPPROXY_TOTALITY_COMPOSED=100 surveys them alone.
COMPOSED_PERCENT = int(os.environ.get("DPPROXY_TOTALITY_COMPOSED", "12") or 12)
DATE_LITERALS = ("'2024-02-29'", "'0001-01-01'", "'9999-12-31'", "'1970-01-01'", "'2000-01-01'")
PATTERNS = ("'%'", "'X%'", "'_'", "''", "'%1%'", "'\\%'", "'%\\\\'", "'a%b'", "'%€%'", "'%x'")
CASTS = (
    "INTEGER",
    "BIGINT",
    "DOUBLE PRECISION",
    "TEXT",
    "DATE",
    "BOOLEAN",
    "SMALLINT",
    "REAL",
    "VARCHAR",
    "DECIMAL(4, 1)",
)
EXTRACT_FIELDS = ("YEAR", "MONTH", "DAY", "DOW", "EPOCH", "QUARTER", "HOUR", "WEEK", "DOY")
TRUNC_UNITS = ("month", "year", "week", "quarter", "day", "hour")
INTERVALS = (
    "'1' MONTH",
    "'3 months'",
    "'90' DAY",
    "'1' YEAR",
    "'1 month 1 day'",
    "'1' QUARTER",
    "'2 weeks'",
    "'9998 years'",
    "'1 hour'",
)
DAY_COUNTS = ("1", "30", "-1", "3652058", "2147483647")
COMPARE = ("=", "<>", "<", ">=", ">", "<=")
TYPES = ("num", "text", "bool", "date")


def sql_literal(v: Any) -> str | None:
    """``v`` as SQL (a string literal for dates); None for values that have no literal."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, datetime.date):
        return f"'{v.isoformat()}'"
    if isinstance(v, ExtremeDate):
        return None
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'" if len(v) <= 64 else None
    raise TypeError(v)


def pools(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Per column, literals of the values present in the data (for conditions that match)."""
    out: dict[str, list[str]] = {n: [] for n in NAMES}
    for row in rows:
        for name, v in zip(NAMES, row, strict=True):
            lit = sql_literal(v)
            if lit is not None and lit not in out[name]:
                out[name].append(lit)
    return out


class QueryGen:
    """Draws one query of the accepted subset (and its near misses), typed recursively.

    With some probability a query is built around a known-dangerous template instead (CASE
    with a large literal under arithmetic; a string literal beside a typed column in GREATEST,
    LEAST, COALESCE, NULLIF or CASE; ``IS 'x'``), and conditions are often equalities with
    values present in the data, so that rows match."""

    def __init__(self, draw: st.DrawFn, present: dict[str, list[str]]) -> None:
        self.draw = draw
        self.present = present

    def pick(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def draw_count(self, most: int) -> int:
        return self.draw(st.integers(0, most))

    # -------------------------------------------------------------------- leaves

    def num_leaf(self) -> str:
        kind = self.pick(("column", "literal", "present"))
        if kind == "column":
            return self.pick(NUMERIC_COLUMNS)
        if kind == "present":
            col = self.pick(NUMERIC_COLUMNS)
            if self.present[col]:
                return self.pick(self.present[col])
        return self.pick(NUM_LITERALS)

    def text_leaf(self) -> str:
        kind = self.pick(("column", "literal", "present"))
        if kind == "column":
            return self.pick(TEXT_COLUMNS)
        if kind == "present":
            col = self.pick(TEXT_COLUMNS)
            if self.present[col]:
                return self.pick(self.present[col])
        return self.pick(TEXT_LITERALS)

    def date_leaf(self) -> str:
        kind = self.pick(("column", "literal", "cast", "present"))
        if kind == "literal":
            return self.pick(DATE_LITERALS)
        if kind == "cast":
            return f"DATE {self.pick(DATE_LITERALS)}"
        if kind == "present" and self.present["day"]:
            return self.pick(self.present["day"])
        return "day"

    def matching(self) -> str:
        """A condition that rows of the data (if any) usually satisfy."""
        kind = self.pick(("equal", "not null", "true", "unit", "range", "flag"))
        if kind == "equal":
            col = self.pick(NAMES)
            if self.present[col]:
                return f"{col} = {self.pick(self.present[col])}"
        if kind == "unit" and self.present["uid"]:
            return f"uid = {self.pick(self.present['uid'])}"
        if kind == "range":
            return f"i32 >= {-(2**31)}"
        if kind == "flag":
            return "flag IS NOT NULL"
        if kind == "not null":
            return f"{self.pick(NAMES)} IS NOT NULL"
        return "TRUE"

    # -------------------------------------------------------------- expressions

    def expr(self, typ: str, depth: int) -> str:
        return {"num": self.num, "text": self.text, "bool": self.cond, "date": self.date}[typ](
            depth
        )

    def any_expr(self, depth: int) -> str:
        if depth > 0 and self.chance(15):
            return f"CAST({self.any_expr(depth - 1)} AS {self.pick(CASTS)})"
        return self.expr(self.pick(TYPES), depth)

    def num(self, depth: int) -> str:
        if depth <= 0:
            return self.num_leaf()
        d = depth - 1
        kind = self.pick(
            (
                "leaf",
                "arith",
                "arith",
                "neg",
                "func",
                "round",
                "case",
                "hull",
                "nullif",
                "cast",
                "length",
                "strpos",
                "extract",
                "paren",
                "overflow",
            )
        )
        if kind == "arith":
            op = self.pick(("+", "-", "*", "/", "%"))
            return f"({self.num(d)} {op} {self.num(d)})"
        if kind == "neg":
            return f"-{self.num(d)}"
        if kind == "func":
            funcs = ("ABS", "FLOOR", "CEIL", "ROUND", "SQRT", "CBRT", "LN", "LOG", "EXP", "SIGN")
            name = self.pick((*funcs, "POWER"))
            if name == "POWER":
                p = self.pick(("2", "3", "64", "0.5", "-1", "400", "-1.5", "2.5", "64.5"))
                return f"POWER({self.num(d)}, {p})"
            if name == "LOG" and self.chance(30):  # a base: valid, 1, negative or a column
                base = self.pick(("2", "0.5", "1", "-2", "1.0000001", self.num(0)))
                return f"LOG({base}, {self.num(d)})"
            if self.chance(10):  # a public bucket number, or refused (n <= 0, lo = hi)
                lo, hi = self.pick(("17", "-1e300", "0.5")), self.pick(("90", "1e300", "17"))
                n = self.pick(("8", "0", "1000", "1001"))
                return f"WIDTH_BUCKET({self.num(d)}, {lo}, {hi}, {n})"
            return f"{name}({self.num(d)})"
        if kind == "round":
            digits = self.pick(("0", "1", "2", "15", "20", "300", "400", "-1"))
            return f"ROUND({self.num(d)}, {digits})"
        if kind == "case":
            return self.case("num", d)
        if kind == "hull":
            return self.hull("num", d)
        if kind == "nullif":
            return f"NULLIF({self.num(d)}, {self.num(d) if self.chance(80) else self.text(0)})"
        if kind == "cast":
            src = self.any_expr(d)
            return f"CAST({src} AS {self.pick(('INTEGER', 'BIGINT', 'SMALLINT', 'DOUBLE PRECISION', 'REAL', 'DECIMAL(4, 1)'))})"  # noqa: E501
        if kind == "length":
            return f"LENGTH({self.text(d)})"
        if kind == "strpos":
            if self.chance(50):
                return f"POSITION({self.text(d)} IN {self.text(d)})"
            return f"STRPOS({self.text(d)}, {self.text(d)})"
        if kind == "extract":
            if self.chance(30):
                return f"DATE_PART('{self.pick(EXTRACT_FIELDS).lower()}', {self.date(d)})"
            if self.chance(20):
                return f"({self.date(d)} - {self.date(d)})"
            return f"EXTRACT({self.pick(EXTRACT_FIELDS)} FROM {self.date(d)})"
        if kind == "paren":
            return f"({self.pick(INTEGER_COLUMNS)}) {self.pick(('+', '-', '*'))} {self.num(d)}"
        if kind == "overflow":
            return self.overflow()
        return self.num_leaf()

    def text(self, depth: int) -> str:
        if depth <= 0:
            return self.text_leaf()
        d = depth - 1
        kinds = ("leaf", "func", "substring", "left", "replace", "concat", "cast", "case", "hull")
        kinds += ("nullif",)
        kind = self.pick(kinds)
        if kind == "func":
            return f"{self.pick(('LOWER', 'UPPER', 'TRIM'))}({self.text(d)})"
        if kind == "left":
            n = self.pick(("0", "1", "3", "-1", "-3", "2147483647", "-2147483647", "2147483648"))
            return f"{self.pick(('LEFT', 'RIGHT'))}({self.text(d)}, {n})"
        if kind == "replace":
            a, b = self.pick((("'1'", "''"), ("'-'", "' '"), ("''", "''"), ("'é'", "'e'")))
            return f"REPLACE({self.text(d)}, {a}, {b})"
        if kind == "substring":
            start = self.pick(("1", "2", "0", "100", "2147483647", "2147483648"))
            if self.chance(50):
                return f"SUBSTRING({self.text(d)}, {start})"
            length = self.pick(("1", "0", "3", "2147483647", "2147483648"))
            return f"SUBSTRING({self.text(d)}, {start}, {length})"
        if kind == "concat":
            return f"({self.text(d)} || {self.any_expr(d)})"
        if kind == "cast":
            return f"CAST({self.any_expr(d)} AS {self.pick(('TEXT', 'VARCHAR'))})"
        if kind == "case":
            return self.case("text", d)
        if kind == "hull":
            return self.hull("text", d)
        if kind == "nullif":
            return f"NULLIF({self.text(d)}, {self.text(0)})"
        return self.text_leaf()

    def date(self, depth: int) -> str:
        if depth <= 0:
            return self.date_leaf()
        d = depth - 1
        kind = self.pick(("leaf", "cast", "case", "hull", "trunc", "interval", "days"))
        if kind == "cast":
            return f"CAST({self.text(d)} AS DATE)"
        if kind == "trunc":
            return f"DATE_TRUNC('{self.pick(TRUNC_UNITS)}', {self.date(d)})"
        if kind == "interval":
            op = self.pick(("+", "-"))
            return f"({self.date(d)} {op} INTERVAL {self.pick(INTERVALS)})"
        if kind == "days":
            return f"({self.date(d)} {self.pick(('+', '-'))} {self.pick(DAY_COUNTS)})"
        if kind == "case":
            return self.case("date", d)
        if kind == "hull":
            return self.hull("date", d)
        return self.date_leaf()

    def case(self, typ: str, d: int) -> str:
        branches = [f"WHEN {self.cond(d)} THEN {self.branch(typ, d)}"]
        if self.chance(30):
            branches.append(f"WHEN {self.cond(d)} THEN {self.branch(typ, d)}")
        default = f" ELSE {self.branch(typ, d)}" if self.chance(80) else ""
        return f"CASE {' '.join(branches)}{default} END"

    def branch(self, typ: str, d: int) -> str:
        """A CASE result: mostly of the type, sometimes a literal of another (near misses)."""
        if self.chance(10):
            return self.pick((*TEXT_LITERALS, "NULL"))
        if typ == "num" and self.chance(40):
            return self.pick(BIG_INTEGERS + NUM_LITERALS)
        return self.expr(typ, d)

    def hull(self, typ: str, d: int) -> str:
        fn = self.pick(("GREATEST", "LEAST", "COALESCE"))
        args = [self.expr(typ, d) for _ in range(self.draw(st.integers(2, 3)))]
        if self.chance(25):
            args.insert(self.draw(st.integers(0, len(args))), self.pick(TEXT_LITERALS))
        return f"{fn}({', '.join(args)})"

    def cond(self, depth: int) -> str:
        if depth <= 0:
            kind = self.pick(("match", "flag", "compare", "null", "true"))
        else:
            kind = self.pick(
                (
                    "match",
                    "compare",
                    "compare",
                    "null",
                    "truth",
                    "distinct",
                    "is_literal",
                    "like",
                    "in",
                    "between",
                    "and",
                    "or",
                    "not",
                    "cast",
                    "flag",
                )
            )
        d = max(depth - 1, 0)
        if kind == "match":
            return self.matching()
        if kind == "flag":
            return self.pick(("flag", "NOT flag", "flag = TRUE"))
        if kind == "true":
            return self.pick(("TRUE", "FALSE"))
        if kind == "compare":
            typ = self.pick(TYPES)
            left = self.expr(typ, d)
            if self.chance(20):
                right = self.pick(TEXT_LITERALS + DATE_LITERALS)  # unknown-typed literal
            else:
                right = self.expr(typ, d)
            if typ == "bool" and self.chance(80):  # else a chain such as a = b < c
                left, right = f"({left})", f"({right})"
            return f"{left} {self.pick(COMPARE)} {right}"
        if kind == "null":
            return f"{self.any_expr(d)} IS {self.pick(('NULL', 'NOT NULL'))}"
        if kind == "truth":
            target = self.cond(d) if self.chance(80) else self.any_expr(d)
            return f"{target} IS {self.pick(('TRUE', 'NOT TRUE', 'FALSE', 'NOT FALSE'))}"
        if kind == "distinct":
            typ = self.pick(TYPES)
            op = self.pick(("IS DISTINCT FROM", "IS NOT DISTINCT FROM"))
            return f"{self.expr(typ, d)} {op} {self.expr(typ, d)}"
        if kind == "is_literal":
            return self.is_literal()
        if kind == "like":
            op = self.pick(("LIKE", "NOT LIKE", "ILIKE"))
            return f"{self.text(d)} {op} {self.pick(PATTERNS)}"
        if kind == "in":
            typ = self.pick(TYPES)
            items = [self.expr(typ, 0) for _ in range(self.draw(st.integers(1, 3)))]
            if self.chance(25):
                items.append(self.pick(TEXT_LITERALS))
            neg = "NOT " if self.chance(30) else ""
            return f"{self.expr(typ, d)} {neg}IN ({', '.join(items)})"
        if kind == "between":
            typ = self.pick(("num", "text", "date"))
            return f"{self.expr(typ, d)} BETWEEN {self.expr(typ, 0)} AND {self.expr(typ, 0)}"
        if kind in ("and", "or"):
            return f"({self.cond(d)} {kind.upper()} {self.cond(d)})"
        if kind == "not":
            return f"NOT ({self.cond(d)})"
        if kind == "cast":
            return f"CAST({self.text(d)} AS BOOLEAN)"
        return self.matching()

    # ------------------------------------------------------ the known-bad families

    def overflow(self) -> str:
        """Integer arithmetic that overflows when a row matches (or always)."""
        m = self.matching()
        big = self.pick(BIG_INTEGERS)
        big2 = self.pick((*BIG_INTEGERS, "1", "2"))
        case = f"(CASE WHEN {m} THEN {big} ELSE 0 END)"
        col = self.pick(INTEGER_COLUMNS)
        form = self.pick(
            (
                "plus",
                "times",
                "minus",
                "abs",
                "neg",
                "twice",
                "literals",
                "column",
                "hull",
            )
        )
        if form == "plus":
            return f"{case} + {big2}"
        if form == "times":
            return f"{case} * {big2}"
        if form == "minus":
            return f"{case} - {big2}"
        if form == "abs":
            return f"ABS(CASE WHEN {m} THEN {self.pick(('-2147483648', '-9223372036854775808', big))} ELSE 0 END)"  # noqa: E501
        if form == "neg":
            return f"-(CASE WHEN {m} THEN {self.pick(('-2147483648', '-9223372036854775808', big))} ELSE 0 END)"  # noqa: E501
        if form == "twice":
            return f"{case} + {case}"
        if form == "literals":
            return f"{big} {self.pick(('+', '*', '-'))} {big2}"
        if form == "column":
            return f"({col}) {self.pick(('+', '*', '-'))} {big2}"
        fn = self.pick(("GREATEST", "LEAST", "COALESCE", "NULLIF"))
        return f"{fn}({col}, 1) {self.pick(('+', '*', '-'))} {big2}"

    def type_mix(self) -> str:
        """A string literal beside a column of another type, in a construct that unifies."""
        col = self.pick((*NUMERIC_COLUMNS, "day", "flag"))
        lit = self.pick(TEXT_LITERALS)
        m = self.matching()
        form = self.pick(("greatest", "least", "coalesce", "nullif", "case", "case2"))
        if form == "greatest":
            e = f"GREATEST({lit}, {col})"
        elif form == "least":
            e = f"LEAST({col}, {lit})"
        elif form == "coalesce":
            e = f"COALESCE({col}, {lit})"
        elif form == "nullif":
            e = f"NULLIF({col}, {lit})"
        elif form == "case":
            e = f"CASE WHEN {m} THEN {lit} ELSE {col} END"
        else:
            e = f"CASE WHEN {m} THEN {col} ELSE {lit} END"
        if col in NUMERIC_COLUMNS and self.chance(60):
            return f"{e} > 0"
        return f"{e} IS NULL"

    def is_literal(self) -> str:
        col = self.pick(NAMES)
        lit = self.pick(TEXT_LITERALS)
        return f"{col} IS {'NOT ' if self.chance(30) else ''}{lit}"

    def dangerous(self) -> str:
        """A condition built around one of the known-bad families."""
        family = self.pick(("overflow", "type_mix", "is_literal"))
        if family == "overflow":
            return f"{self.overflow()} {self.pick(('>', '<>', '<'))} 0"
        if family == "type_mix":
            return self.type_mix()
        return self.is_literal()

    # ---------------------------------------------------------------- the query

    def measure(self, depth: int) -> str:
        """A SUM/AVG argument: often bounded (so the aggregate is accepted)."""
        kind = self.pick(("bounded", "case", "expr", "overflow", "type_mix"))
        if kind == "bounded":
            return self.pick(("si", "fb", "si / 2", "fb * 2", "ABS(si)", "ROUND(fb, 1)"))
        if kind == "case":
            return (
                f"CASE WHEN {self.cond(depth)} THEN {self.pick(BIG_INTEGERS + NUM_LITERALS)} "
                f"ELSE {self.pick(NUM_LITERALS)} END"
            )
        if kind == "overflow":
            return self.overflow()
        if kind == "type_mix":
            col = self.pick(("si", "fb"))
            fn = self.pick(("GREATEST", "LEAST", "COALESCE", "NULLIF"))
            return f"{fn}({col}, {self.pick(TEXT_LITERALS)})"
        return self.num(depth)

    def aggregate(self, depth: int) -> str:
        kind = self.pick(
            (
                "count",
                "sum",
                "avg",
                "count_expr",
                "count_filter",
                "sum",
                "avg",
                "var",
                "median",
                "minmax",
                "count_units",
                "statistic",
            )
        )
        if kind == "statistic":  # percentiles, CORR and its kin (tests/totality_more.py)
            return statistic(self, depth)
        if kind == "count":
            return "COUNT(*)"
        if kind == "sum":
            return f"SUM({self.measure(depth)})"
        if kind == "avg":
            return f"AVG({self.measure(depth)})"
        if kind == "count_expr":
            return f"COUNT({self.any_expr(depth)})"
        if kind == "count_filter":
            agg = self.pick(("COUNT(*)", f"SUM({self.measure(depth)})"))
            return f"{agg} FILTER (WHERE {self.cond(depth)})"
        if kind == "var":
            return f"{self.pick(('VAR_POP', 'STDDEV', 'VARIANCE'))}({self.measure(depth)})"
        if kind == "median":
            return f"MEDIAN({self.measure(depth)})"
        if kind == "minmax":
            return f"{self.pick(('MIN', 'MAX'))}({self.measure(depth)})"
        return "COUNT(DISTINCT uid)"

    def group_key(self, depth: int) -> str:
        key = self.pick(
            (
                "cat",
                "flag",
                f"CASE WHEN {self.cond(depth)} THEN 'a' ELSE 'b' END",
                "note",
                "EXTRACT(YEAR FROM day)",
                "si",
                f"CASE WHEN {self.cond(depth)} THEN 1 ELSE 2 END",
                "LOWER(cat)",
                "TO_CHAR",
            )
        )
        if key == "TO_CHAR":
            return to_char_key(self)
        return key

    def semijoin(self, depth: int) -> str:
        """A subquery filter tied to the outer row's unit (``sql/semijoins.py``): EXISTS,
        NOT EXISTS or [NOT] IN over ``t AS s`` with ``s.uid = t.uid`` and generated conditions
        inside, whose unqualified names are the subquery's columns."""
        inner = self.cond(depth)
        kind = self.pick(("EXISTS", "NOT EXISTS", "IN", "NOT IN"))
        where = f"s.uid = t.uid AND ({inner})"
        if kind.endswith("EXISTS"):
            return f"{kind} (SELECT 1 FROM t AS s WHERE {where})"
        typ = self.pick(TYPES)
        outer, inner_value = self.expr(typ, 0), self.expr(typ, depth)
        return f"{outer} {kind} (SELECT {inner_value} FROM t AS s WHERE {where})"

    def per_unit(self, depth: int) -> str:
        """A query over a per-unit subquery (``sql/perunit.py``): generated aggregates per
        ``uid`` (the database computes them on guarded values), an optional WHERE and HAVING
        inside, clamped aggregates and a CASE key outside."""
        kinds = ("COUNT(*)", "COUNT", "COUNT(DISTINCT", "SUM", "AVG", "MIN", "MAX")
        inner = []
        for i in range(self.draw(st.integers(1, 3))):
            kind = self.pick(kinds)
            if kind == "COUNT(*)":
                agg = kind
            elif kind.startswith("COUNT"):
                agg = f"{kind}({self.any_expr(depth)})" + (")" if "DISTINCT" in kind else "")
            elif kind in ("MIN", "MAX") and self.chance(25):
                agg = f"{kind}({self.date(depth)})"  # a DATE column of the derived relation
            else:
                agg = f"{kind}({self.measure(depth)})"
            inner.append(f"{agg} AS v{i}")
        sub = f"SELECT uid, {', '.join(inner)} FROM t"
        if self.chance(50):
            sub += f" WHERE {self.dangerous() if self.chance(50) else self.cond(depth)}"
        sub += " GROUP BY uid"
        if self.chance(30):
            sub += f" HAVING {self.pick(('SUM', 'MAX', 'COUNT'))}({self.measure(depth)}) > 0"
        if self.chance(30):  # arithmetic over the aggregates, computed by the outer query
            a, b = self.pick(inner).split(" AS ")[0], self.pick(inner).split(" AS ")[0]
            inner.append(f"{a} {self.pick(('+', '-', '*', '/'))} {b} AS v{len(inner)}")
        v = self.pick([f"v{i}" for i in range(len(inner))])
        outer = self.pick(
            (
                "COUNT(*)",
                f"SUM(LEAST(GREATEST({v}, 0), 10))",
                f"AVG(LEAST(GREATEST({v}, -5), 5))",
                f"SUM(CASE WHEN {v} > 1 THEN 1 ELSE 0 END)",
            )
        )
        key = self.chance(30)
        sql = f"SELECT {'CASE WHEN ' + v + ' > 2 THEN 1 ELSE 0 END, ' if key else ''}{outer} "
        sql += f"FROM ({sub}) AS x"
        if self.chance(40):
            sql += f" WHERE {v} {self.pick(('>', '<', '='))} {self.pick(NUM_LITERALS)}"
        return sql + (" GROUP BY 1" if key else "")

    def query(self) -> str:
        depth = self.draw(st.integers(1, 3))
        if self.chance(12):
            return self.per_unit(max(depth - 1, 0))
        if self.chance(COMPOSED_PERCENT):  # planned in parts (tests/totality_composed.py)
            return composed_query(self, max(depth - 1, 0))
        danger = self.chance(40)
        aggs = [self.aggregate(depth) for _ in range(self.draw(st.integers(1, 2)))]
        where = ""
        if danger and self.chance(60):
            where = self.dangerous()
            if self.chance(30):
                where = f"{self.cond(depth - 1)} {self.pick(('AND', 'OR'))} {where}"
        elif self.chance(60):
            where = self.cond(depth)
        if self.chance(15):
            semi = self.semijoin(max(depth - 1, 0))
            where = f"({where}) AND {semi}" if where else semi
        key = self.group_key(depth) if self.chance(35) else None
        select = ", ".join(([key] if key else []) + aggs)
        sql = f"SELECT {select} FROM t"
        if where:
            sql += f" WHERE {where}"
        if key:
            sql += " GROUP BY 1"
        if self.chance(70 if needs_range(sql) else 10):  # a hint (tests/totality_more.py)
            sql = hinted(self, sql)
        return sql


@dataclass(frozen=True)
class Case:
    """One example: a database, the contribution bound and hash kind, the unit removed for
    the neighbour, and the queries."""

    rows: tuple[Row, ...]
    bound: str
    portable: bool
    removed: int | None
    queries: tuple[str, ...]

    def neighbour_rows(self) -> tuple[Row, ...]:
        return neighbour(self.rows, self.removed)


@st.composite
def cases(draw: st.DrawFn, max_queries: int = 8) -> Case:
    rows = draw(databases())
    bound = draw(st.sampled_from(tuple(BOUNDS)))
    portable = draw(st.booleans())
    units = sorted({r[0] for r in rows})
    removed = draw(st.sampled_from(units)) if units else None
    gen = QueryGen(draw, pools(rows))
    queries = [gen.query() for _ in range(draw(st.integers(1, max_queries)))]
    return Case(rows, bound, portable, removed, tuple(queries))


World = DuckDBWorld | PostgresWorld


def check_case(world: World, case: Case, *, run: bool = True) -> list[str]:
    """Every problem of one example on one engine (the database and its neighbour)."""
    engine, nb = world.engines(case.bound, case.portable, case.rows, case.neighbour_rows())
    label = f"{world.dialect}, bound={case.bound}, portable_hash={case.portable}"
    return check_queries(engine, nb, case.queries, label=label, run=run)


def summarize(problems: Sequence[str], examples: int = 3) -> str:
    """Problems grouped by the failing step and the backend's error (numbers and the SQL
    excerpt the backend quotes left out), most frequent first, each with its shortest
    queries: one line per kind of violation, for a report of a whole run."""
    groups: dict[str, list[str]] = {}
    for p in problems:
        lines = p.splitlines()
        error = next((ln.split("error: ", 1)[1] for ln in lines if "error: " in ln), lines[0])
        error = re.sub(r"LINE \d+:.*", "", error)
        error = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", error)
        step = re.search(r"\] (.*?) failed|\] (prepare depends on the data)", lines[0])
        engine = lines[0][1:].split(",", 1)[0]
        what = (step.group(1) or step.group(2)) if step else "?"
        key = f"{engine} | {what} | " + re.sub(r"\d+", "N", error).strip()
        query = next((ln.split("query: ", 1)[1] for ln in lines if "query: " in ln), "")
        groups.setdefault(key, []).append(query)
    out = []
    for key, queries in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        shortest = sorted(set(queries), key=len)[:examples]
        out.append(f"{len(queries):5d}  {key}\n" + "".join(f"         {q}\n" for q in shortest))
    return "".join(out)

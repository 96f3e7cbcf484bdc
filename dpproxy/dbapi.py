"""A PEP 249 (DB-API 2.0) interface to the embedded engine.

pandas reads through it with ``dpproxy.read_sql`` (``dpproxy/notebook.py``) or through the
``dpproxy://`` SQLAlchemy dialect (``dpproxy/sqlalchemy_dialect.py``); ``pd.read_sql`` given
this connection itself warns, as it does for every DB-API connection but sqlite3's.

>>> import dpproxy
>>> con = dpproxy.connect()                       # doctest: +SKIP
>>> cur = con.cursor()                            # doctest: +SKIP
>>> cur.execute("SELECT sex, AVG(age) FROM adult GROUP BY sex")   # doctest: +SKIP
>>> cur.fetchall(), cur.privacy_cost, cur.remaining_budget, cur.error_bounds   # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpproxy import errors
from dpproxy.accounting.ledger import ledger_setting
from dpproxy.accounting.memory import BudgetStatus
from dpproxy.catalog.model import MechanismKind
from dpproxy.engine import Engine, open_engine, path_argument
from dpproxy.mechanisms.noise import NoiseSource

# PEP 249 globals, constructors and type objects (also exported by the ``dpproxy`` package,
# which defines them without importing this module: ``dpproxy/pep249.py``).
from dpproxy.pep249 import (
    BINARY,
    BOOLEAN,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    DatabaseError,
    DataError,
    Date,
    DateFromTicks,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
    Warning,
    apilevel,
    paramstyle,
    threadsafety,
)
from dpproxy.planning.hints import method_named
from dpproxy.planning.plan import Method
from dpproxy.release.public import plan_notes
from dpproxy.values import Cost, parse_privacy_number

if TYPE_CHECKING:
    from dpproxy.explain_command import ExplainStatement

# Every EXPLAIN statement matches (explain_command._HEAD starts with the word, case-insensitive
# as here): a statement that does not is answered without importing explain_command.
_MAY_EXPLAIN = re.compile("EXPLAIN", re.IGNORECASE)

__all__ = [
    "BINARY", "BOOLEAN", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary", "Connection",
    "Cursor", "DataError", "DatabaseError", "Date", "DateFromTicks", "Error", "IntegrityError",
    "InterfaceError", "InternalError", "NotSupportedError", "OperationalError",
    "ProgrammingError", "Time", "TimeFromTicks", "Timestamp", "TimestampFromTicks", "Warning",
    "apilevel", "connect", "paramstyle", "threadsafety",
]


def _quote(v: Any) -> str:
    """A SQL literal for a parameter (the query is parsed and validated afterwards anyway)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int | float | Fraction):
        return repr(float(v)) if isinstance(v, Fraction) else repr(v)
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    raise errors.InvalidParameter(f"cannot pass a parameter of type {type(v).__name__}")


def _bind(sql: str, params: Sequence[Any] | Mapping[str, Any] | None) -> str:
    if params is None:
        return sql
    try:
        if isinstance(params, Mapping):
            return sql % {k: _quote(v) for k, v in params.items()}
        return sql % tuple(_quote(v) for v in params)
    except (TypeError, ValueError, KeyError) as e:
        raise errors.UndefinedParameter(
            f"the parameters do not match the placeholders: {e}",
            hint="use %s for positional and %(name)s for named parameters; write %% for a "
            "literal percent sign",
        ) from e


class Cursor:
    """A DB-API cursor; besides rows it reports the privacy cost and 95% error bounds."""

    arraysize = 1

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.description: tuple[tuple[Any, ...], ...] | None = None
        self.rowcount = -1
        self.privacy_cost: Cost | None = None
        self.bound_note: str | None = None  # how the rows per unit were bounded, for a join
        self.error_bounds: tuple[tuple[float | None, ...], ...] = ()
        # Why a selected DP_INTERVAL_LOW/HIGH is NULL (release/intervals.py), per query.
        self.notices: list[str] = []
        self._rows: list[tuple[Any, ...]] = []
        self._pos = 0
        self._closed = False

    @property
    def remaining_budget(self) -> Cost:
        """The analyst's budget left after everything this connection has spent."""
        return self.connection.remaining_budget

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Cursor:
        """Answer one aggregate query with differential privacy (spends budget); ``EXPLAIN
        query`` returns the plan as rows of one column ``QUERY PLAN`` and spends nothing."""
        self._check()
        c = self.connection
        text = _bind(sql, params)
        if _MAY_EXPLAIN.search(text) is not None:
            from dpproxy.explain_command import parse_explain

            statement = parse_explain(text)
            if statement is not None:
                return self._explained(statement)
        answer = c.engine.run(
            text,
            analyst=c.analyst,
            epsilon=c.epsilon,
            delta=c.delta,
            mechanism=c.mechanism,
            method=c.method,
        )
        rel = answer.released
        self.description = tuple(
            (col.name, col.type, None, None, None, None, True) for col in rel.columns
        )
        self._rows = list(rel.rows)
        self.error_bounds = rel.errors
        self.rowcount = len(self._rows)
        self.privacy_cost = answer.cost
        self.cached = answer.cached
        t = answer.plan.truncation
        self.bound_note = t.describe() if t is not None else None
        self.notices = plan_notes(answer.plan)
        self._pos = 0
        return self

    def _explained(self, statement: ExplainStatement) -> Cursor:
        from dpproxy.explain_command import COLUMN, explain_rows

        c = self.connection
        self._rows = list(
            explain_rows(
                c.engine,
                statement,
                analyst=c.analyst,
                epsilon=c.epsilon,
                delta=c.delta,
                mechanism=c.mechanism,
                method=c.method,
            )
        )
        self.description = ((COLUMN, "text", None, None, None, None, False),)
        self.error_bounds = tuple((0.0,) for _ in self._rows)
        self.rowcount = len(self._rows)
        self.privacy_cost = Cost.zero()
        self.cached = False
        self.bound_note = None
        self.notices = []
        self._pos = 0
        return self

    def executemany(self, sql: str, seq: Sequence[Sequence[Any] | Mapping[str, Any]]) -> None:
        for params in seq:
            self.execute(sql, params)

    def explain(self, sql: str) -> str:
        """The plan, noise scales and cost of a query, spending nothing."""
        from dpproxy.explain import explain_text  # not needed to answer a query

        c = self.connection
        prepared = c.engine.canonical().prepare(
            sql, epsilon=c.epsilon, delta=c.delta, mechanism=c.mechanism, method=c.method
        )
        return explain_text(prepared.plan, ";\n".join(prepared.statements))

    def fetchone(self) -> tuple[Any, ...] | None:
        self._check()
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        self._check()
        n = self.arraysize if size is None else size
        rows = self._rows[self._pos : self._pos + n]
        self._pos += len(rows)
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        self._check()
        rows = self._rows[self._pos :]
        self._pos = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row

    def setinputsizes(self, sizes: object) -> None:
        pass

    def setoutputsize(self, size: object, column: object = None) -> None:
        pass

    def close(self) -> None:
        self._closed = True

    def _check(self) -> None:
        if self.connection.closed:
            raise errors.CursorClosed(
                "the connection is closed", hint="open a new one with dpproxy.connect()"
            )
        if self._closed:
            raise errors.CursorClosed("the cursor is closed", hint="open a new cursor")

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection:
    """A DB-API connection for one analyst over one engine."""

    # PEP 249's optional extension: the exceptions as connection attributes.
    Error = Error
    Warning = Warning
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(
        self,
        engine: Engine,
        analyst: str,
        epsilon: Fraction | None,
        delta: Fraction | None,
        mechanism: MechanismKind | None,
        method: Method | None = None,
    ) -> None:
        self.engine = engine
        self.analyst = analyst
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.method = method  # a forced plan for every query (None: the planner chooses)
        self.closed = False

    @property
    def remaining_budget(self) -> Cost:
        return self.engine.remaining(self.analyst)

    @property
    def budget_status(self) -> BudgetStatus:
        """Total, spent, reserved and remaining budget, and the tightest valid (ε, δ) of the
        spending (Gaussian releases composed in zCDP)."""
        return self.engine.accountant.status(self.analyst)

    def cursor(self) -> Cursor:
        if self.closed:
            raise errors.CursorClosed(
                "the connection is closed", hint="open a new one with dpproxy.connect()"
            )
        return Cursor(self)

    def commit(self) -> None:
        """Nothing to commit: dpproxy is read-only."""

    def rollback(self) -> None:
        """Nothing to roll back; spent privacy budget is never refunded."""

    def close(self) -> None:
        if not self.closed:
            self.engine.close()
            self.closed = True

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    database: str | os.PathLike[str] | None = None,
    *,
    schema: str | os.PathLike[str] | None = None,
    analyst: str = "analyst",
    epsilon: float | str | Fraction | None = None,
    delta: float | str | Fraction | None = None,
    mechanism: str | None = None,
    plan: str | None = None,
    budget_epsilon: float | str | None = None,
    budget_delta: float | str | None = None,
    noise: NoiseSource | None = None,
    statement_timeout: float | None = None,
    ledger: str | os.PathLike[str] | None = None,
    cache: str = "analyst",
) -> Connection:
    """Open a DB-API connection; with no database and schema, the bundled Adult demo.

    ``database`` is a DuckDB file or a ``postgresql://`` DSN (paths as ``str`` or
    ``pathlib.Path``, as are ``schema`` and ``ledger``); ``statement_timeout`` (seconds,
    PostgreSQL only) cancels a query that runs longer (SQLSTATE 57014, budget charged).
    ``ledger`` is a SQLite file that keeps budgets and released answers across processes and
    restarts (default ``$DPPROXY_LEDGER``, else in this process only); ``cache`` is the scope of
    the answer cache: ``analyst``, ``shared`` or ``off``.

    ``epsilon``/``delta`` are the per-query privacy parameters (default: the schema's);
    ``plan`` forces a plan for every query (gs, joint, ptr, smooth, exponential, saa; default:
    the planner picks the lowest predicted error);
    ``budget_epsilon``/``budget_delta`` the analyst's total (default: the schema's budget).
    Floats are taken at their exact binary value; pass strings such as ``"1e-6"`` for
    exact decimals.
    """
    eps = parse_privacy_number(epsilon, "epsilon") if epsilon is not None else None
    dlt = parse_privacy_number(delta, "delta", allow_zero=True) if delta is not None else None
    if dlt is not None and dlt >= 1:
        raise errors.PrivacyParameterError("delta must be below 1")
    mech = None
    if mechanism is not None:
        try:
            mech = MechanismKind(mechanism)
        except ValueError as e:
            raise errors.PrivacyParameterError(
                f"unknown mechanism {mechanism!r}", hint="use laplace or gaussian"
            ) from e
    budget = None
    if budget_epsilon is not None or budget_delta is not None:
        budget = Cost(
            parse_privacy_number(
                budget_epsilon if budget_epsilon is not None else 10, "budget epsilon"
            ),
            parse_privacy_number(
                budget_delta if budget_delta is not None else 0, "budget delta", allow_zero=True
            ),
        )
    if statement_timeout is not None and not statement_timeout > 0:
        raise errors.InvalidParameter("statement_timeout must be a positive number of seconds")
    engine = open_engine(
        database,
        schema,
        noise=noise,
        budget=budget,
        statement_timeout=statement_timeout,
        ledger=ledger_setting(path_argument(ledger, "ledger"), durable=False),
        cache=cache,
    )
    method = method_named(plan) if plan is not None else None
    return Connection(engine, analyst, eps, dlt, mech, method)

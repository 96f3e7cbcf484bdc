"""PostgreSQL backend: a psycopg 3 connection pool that runs planner-produced SQL only.

Every query runs in a READ ONLY transaction with a statement timeout. The proxy's role needs
nothing but SELECT on the exposed tables (docs/postgres.md, "A read-only role for dpproxy").

Failures are sorted by whether the query could have reached the data, because the engine
refunds the budget only when it provably did not:

* no connection could be had (server down, refusing, pool exhausted) → ``BackendUnavailable``
  (08001), refunded. The pool checks each connection before handing it out and replaces
  broken ones, so after a server restart the next query simply reconnects;
* the connection broke while the query ran → ``ConnectionLost`` (08006), charged;
* the statement timeout fired → ``QueryCanceled`` (57014), charged;
* anything else the server reports → ``InternalError`` (XX000), charged, with the server's
  message (it could quote a value) in ``log_detail`` only.

The engine then shows the analyst one fixed error for every failure but a refunded
``BackendUnavailable`` and a ``QueryCanceled`` (``engine.PrivateQueryFailed``), and logs the
cause for the operator.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import replace
from decimal import Decimal
from typing import Any

import psycopg
import psycopg_pool
from psycopg import conninfo, errors, sql
from psycopg.types.datetime import DateLoader

from dpproxy.backends import CancelToken, checks, fit
from dpproxy.backends.fardate import FarDate
from dpproxy.backends.pg_path import PathSchemas, path_array, pin_catalog
from dpproxy.backends.postgres_shapes import TYPE_JOIN, TYPE_NAME, describe_postgres
from dpproxy.catalog.draft import ColumnShape
from dpproxy.catalog.model import Catalog
from dpproxy.dsn import redact_dsn
from dpproxy.errors import (
    BackendUnavailable,
    ConnectionLost,
    InternalError,
    QueryCanceled,
    UndefinedColumn,
    UndefinedTable,
)
from dpproxy.release.noise import ExactResult
from dpproxy.sql.pgnames import spellings

log = logging.getLogger("dpproxy.postgres")

DEFAULT_STATEMENT_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0


def _plain(v: Any) -> Any:
    """numeric → int or float, as DuckDB returns them (EXTRACT and SUM can give numeric)."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() and v.is_finite() else float(v)
    return v


class PostgresBackend:
    """A pool of read-only connections to one PostgreSQL database."""

    dialect = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_connections: int = 4,
        portable_hash: bool = False,
    ) -> None:
        self.dsn = dsn
        # rewrite/dialect.py: hash_record_extended (PostgreSQL 14+) unless the portable md5
        # hash is asked for; servers before 14 get the portable hash (checked on connect).
        self.portable_hash = portable_hash
        self.name = redact_dsn(dsn)
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        try:
            kwargs = conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as e:
            raise BackendUnavailable(
                "the PostgreSQL DSN cannot be parsed",
                hint="use postgresql://user@host:port/database",
                log_detail=str(e),
            ) from e
        kwargs.setdefault("connect_timeout", max(1, round(connect_timeout)))
        kwargs.setdefault("application_name", "dpproxy")
        # One direct attempt first: a server that is down or refuses fails here at once, with
        # its reason, instead of after the pool's timeout and a log line per pool retry.
        self.server_version, self.path = self._probe(kwargs)
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = (
            psycopg_pool.ConnectionPool(
                "",
                kwargs=kwargs,
                min_size=1,
                max_size=max_connections,
                open=False,
                configure=self._configure,
                check=psycopg_pool.ConnectionPool.check_connection,
                timeout=connect_timeout,
                reconnect_timeout=connect_timeout,
                name="dpproxy",
            )
        )
        self._pool.open(wait=False)  # filled in the background; a query waits for it
        if self.server_version < 140000:
            self.portable_hash = True  # no hash_record_extended before PostgreSQL 14

    def _probe(self, kwargs: dict[str, Any]) -> tuple[int, PathSchemas]:
        """Connect once, without the pool: the server's version and the schemas of the
        configured search path (``pg_path.pin_catalog``: the catalog's tables are looked up in
        them), or 08001 with its reason."""
        try:
            with psycopg.connect(**kwargs) as conn:
                path = pin_catalog(conn, self.name)
                return conn.info.server_version, path
        except psycopg.Error as e:
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            reason = lines[0].removeprefix("connection failed: ")[:300] if lines else ""
            raise BackendUnavailable(
                f"cannot connect to PostgreSQL at {self.name}",
                hint="check that the server runs and that the DSN's host, port, user and "
                "database are right" + (f" (PostgreSQL client: {reason})" if reason else ""),
                log_detail=str(e),
            ) from e

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Session settings of every pooled connection: the search path first
        (``pg_path.pin_catalog``: pg_catalog and pg_temp only, so that no operator, function
        or type of another schema can be chosen; the tables are named with their schema)."""
        conn.adapters.register_loader("date", _TotalDateLoader)
        conn.read_only = True
        pin_catalog(conn, self.name)
        ms = max(1, round(self.statement_timeout * 1000))
        conn.execute(f"SET statement_timeout = {ms}")
        conn.execute("SET DateStyle = ISO")  # dates as text, as DuckDB writes them
        conn.execute("SET TimeZone = 'UTC'")
        conn.commit()

    def execute(self, sql_text: str, cancel: CancelToken | None = None) -> ExactResult:
        try:
            conn = self._pool.getconn(timeout=self.connect_timeout)
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as e:
            # No connection: the query was never sent, so it provably read nothing.
            raise BackendUnavailable(
                f"PostgreSQL at {self.name} is not reachable",
                hint="the query was not run and nothing was charged; try again when the "
                "server is back (dpproxy reconnects by itself)",
                log_detail=str(e),
            ) from e
        if cancel is not None:
            cancel.on_cancel(conn.cancel_safe)
        try:
            if cancel is not None:
                cancel.check()
            with conn.transaction():
                cur = conn.execute(sql_text.encode())
                rows = cur.fetchall()
                cols = tuple(d.name for d in cur.description or ())
        except psycopg.Error as e:
            raise self._translate(e, cancelled=cancel is not None and cancel.cancelled) from e
        finally:
            if cancel is not None:
                cancel.on_cancel(None)
            self._pool.putconn(conn)  # a broken connection is discarded by the pool
        return ExactResult(cols, tuple(tuple(_plain(v) for v in r) for r in rows))

    def _translate(self, e: psycopg.Error, *, cancelled: bool = False) -> Exception:
        if isinstance(e, errors.QueryCanceled) and cancelled:
            return QueryCanceled("canceling statement due to user request")
        if isinstance(e, errors.QueryCanceled):
            return QueryCanceled(
                "the query was cancelled (statement timeout)",
                hint=f"the limit is {self.statement_timeout:g} s; its budget was charged",
            )
        # The server's message can quote a value: it goes into ``log_detail`` only, which the
        # engine logs for the operator (engine.PrivateQueryFailed); here it is debug output.
        log.debug("PostgreSQL error %s: %s", e.sqlstate, e)
        if isinstance(e, psycopg.OperationalError):
            return ConnectionLost(
                f"the connection to PostgreSQL at {self.name} was lost during the query",
                hint="its budget was charged; dpproxy reconnects on the next query",
                log_detail=f"{type(e).__name__}: {e}",
            )
        return InternalError(
            "the database failed to run the query",
            log_detail=f"{type(e).__name__} ({e.sqlstate}): {e}",
        )

    def attach_catalog(self, catalog: Catalog) -> Catalog:
        """Resolve every schema table's name as PostgreSQL resolves it on the steward's search
        path (:data:`_RESOLVE`; the SQL then names it with that schema: ``pg_path``), check it
        and its columns are there, of types the schema's read (``backends/fit.py``), and
        readable; mark unit columns
        that a single-column PRIMARY KEY or UNIQUE constraint (a full, non-expression, valid
        unique index of the relation the name resolves to, not a parent of inheritance
        children, on a NOT NULL column, in its collation and its type's default operator
        class: ``checks.PG_UNIQUE``) proves unique, and the columns
        of private tables declared NOT NULL (``checks.postgres_not_null``). Reads metadata
        only."""
        spellings(catalog.tables)  # one spelling of each name, or 0A000
        path = path_array(self.path)
        names = sorted({t.name for t in catalog.tables})
        resolve_q = sql.SQL(checks.on_path(_RESOLVE, path))
        near_q = sql.SQL(checks.on_path(_NEAR, path))
        unique_q = sql.SQL(checks.on_path(checks.PG_UNIQUE, path))
        try:
            with self._pool.connection(timeout=self.connect_timeout) as conn:
                with conn.transaction():
                    # Metadata queries are not bound by the (possibly tiny) query timeout.
                    conn.execute("SET LOCAL statement_timeout = '30s'")
                    # name → the relation's oid, schema, SELECT privilege; (0, "", False)
                    # when the relation it resolves to is no table, or pg_catalog's
                    found: dict[str, tuple[int, str, bool]] = {}
                    for relname, oid, schema, usable, readable in conn.execute(
                        resolve_q, (names,)
                    ).fetchall():  # the first row of a name: what the name resolves to
                        entry = (int(oid), str(schema), bool(readable))
                        found.setdefault(str(relname), entry if usable else (0, "", False))
                    near = {  # the tables the name would find regardless of case
                        str(r).lower(): str(r)
                        for (r,) in conn.execute(near_q, ([n.lower() for n in names],))
                    }
                    oids = [oid for oid, _, _ in found.values() if oid]
                    columns = conn.execute(_COLUMNS, (oids,)).fetchall()
                    unique = set(conn.execute(unique_q).fetchall())
                    proven = checks.postgres_proven(  # CHECKs of bounded integer columns
                        catalog, lambda q, params: conn.execute(q, params).fetchall(), path
                    )
                    not_null = checks.postgres_not_null(
                        catalog, lambda q, params: conn.execute(q, params).fetchall(), path
                    )
        except psycopg_pool.PoolTimeout as e:
            raise BackendUnavailable(f"PostgreSQL at {self.name} is not reachable") from e
        except psycopg.Error as e:
            raise BackendUnavailable(
                f"cannot read the catalog of PostgreSQL at {self.name}", log_detail=str(e)
            ) from e
        present = {(int(oid), str(name)) for oid, name, _, _ in columns}
        shapes: dict[int, list[ColumnShape]] = {}
        for oid, name, sql_type, nullable in columns:
            shapes.setdefault(int(oid), []).append(ColumnShape(name, sql_type, bool(nullable)))
        described = {
            t.name: tuple(shapes.get(found.get(t.name, (0, "", False))[0], ()))
            for t in catalog.tables
        }
        wide = fit.read_wide(catalog, described)  # numeric read as DOUBLE
        real = fit.read_real(catalog, described)  # float4 read as DOUBLE
        everything = lambda: describe_postgres(self.dsn)  # noqa: E731
        fit.refuse_misfit(catalog, described, self.name, everything, exact=True)
        tables = []
        for t in catalog.tables:
            name = t.name.lower()
            oid, schema, readable = found.get(t.name, (0, "", False))
            missing = [c.name for c in t.columns if (oid, c.name) not in present]
            if not oid:
                raise UndefinedTable(
                    f'table "{t.name}" of the schema is not in the database {self.name}',
                    hint=_near(near.get(name))
                    + "check that --schema and --database belong together, and the "
                    "search_path of the DSN's user (for the demo: dpproxy demo load)",
                )
            if missing:
                spelled = {str(n).lower(): str(n) for o, n, _, _ in columns if o == oid}
                raise UndefinedColumn(
                    f'columns {", ".join(missing)} of table "{t.name}" are not in the database',
                    hint=_near(spelled.get(missing[0].lower()))
                    + "check that --schema and --database belong together",
                )
            if not readable:
                raise BackendUnavailable(
                    f'the database role of {self.name} cannot SELECT from "{t.name}"',
                    hint=f"GRANT SELECT ON {_quoted(schema)}.{_quoted(t.name)} TO the proxy's role "
                    "(docs/postgres.md: a read-only role for dpproxy)",
                )
            is_unique = t.privacy_unit is not None and (name, t.privacy_unit.lower()) in unique
            t = checks.mark(t, proven.get(name, set()))
            t = checks.mark(t, not_null.get(name, set()), "not_null")
            wide_t, real_t = wide.get(t.name, ()), real.get(t.name, ())
            t = replace(t, unit_is_unique=is_unique, schema=schema, wide=wide_t, real=real_t)
            tables.append(t)
        return replace(catalog, tables=tuple(tables))

    def close(self) -> None:
        self._pool.close()


# Each name's relations on the steward's search path and in pg_catalog (``{path}``:
# ``pg_path.path_array``), the one the unqualified name resolves to first (pg_catalog is
# searched first whether the path names it or not; then the path's order): its oid, schema,
# whether it is a table, view or the like outside pg_catalog, and whether the role may read it.
_TABLE = "c.relkind IN ('r', 'v', 'm', 'p', 'f')"
_RESOLVE = (
    "SELECT c.relname, c.oid, n.nspname, "
    f"{_TABLE} AND n.nspname <> 'pg_catalog', "
    f"CASE WHEN {_TABLE} THEN pg_catalog.has_table_privilege(c.oid, 'SELECT') END "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = ANY (%s::pg_catalog.name[]) AND (c.relnamespace = ANY ({path}) "
    "OR c.relnamespace = 'pg_catalog'::pg_catalog.regnamespace) "
    "ORDER BY pg_catalog.array_position({path}, c.relnamespace) NULLS FIRST"
)
# The spellings of the names' relations on the path regardless of case, first on the path first
_NEAR = (
    "SELECT c.relname FROM pg_catalog.pg_class c "
    f"WHERE lower(c.relname) = ANY (%s::pg_catalog.text[]) AND {_TABLE} "
    "AND c.relnamespace = ANY ({path}) "
    "ORDER BY pg_catalog.array_position({path}, c.relnamespace) DESC"
)
# The columns of the resolved relations (by oid): (oid, name, type as ``schema init`` reads
# it, nullable), in their order.
_COLUMNS = (
    f"SELECT a.attrelid::pg_catalog.int8, a.attname, {TYPE_NAME}, NOT a.attnotnull "
    f"FROM pg_catalog.pg_attribute a {TYPE_JOIN}"
    "WHERE a.attrelid = ANY (%s::pg_catalog.oid[]) AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY a.attrelid, a.attnum"
)


def _near(spelled: str | None) -> str:
    """The start of a hint naming the database's spelling of a name the schema spells
    otherwise, if there is one."""
    if spelled is None:
        return ""
    return (
        f"did you mean {_quoted(spelled)}? The schema names a table or column exactly as "
        "PostgreSQL spells it; "
    )


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _TotalDateLoader(DateLoader):
    """Dates as DuckDB's client gives them, never an error: psycopg raises DataError for a date
    Python cannot hold (±infinity, BC, beyond 9999), so a date column in a group key failed the
    whole query when one row held such a date — an error decided by one person's value. As
    DuckDB: ``infinity`` is ``date.max``, ``-infinity`` ``date.min``, any other the text the
    engine prints (DuckDB writes BC as ``(BC)``), a :class:`FarDate` that orders as a date."""

    def load(self, data: Any) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            text = bytes(data).decode("ascii", "replace")
            if text == "infinity":
                return datetime.date.max
            if text == "-infinity":
                return datetime.date.min
            return FarDate(text.replace(" BC", " (BC)"))

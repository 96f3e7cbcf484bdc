"""The DuckDB emulation database: built once per schema and process, shared, locked down.

:func:`shared_database` builds a :class:`~.model.Model` into a fresh in-memory DuckDB
database (catalog relations, hidden lookup tables, the macros of :mod:`.functions`) and hands
each session a cursor of its own; :mod:`.session_tables` adds the per-session TEMP tables.
External access is disabled and the configuration locked before any client SQL runs.
:func:`duck_error` turns a DuckDB failure into a dpproxy error without DuckDB's text.
"""

from __future__ import annotations

import re
import threading

import duckdb

from dpproxy.catalog.model import Catalog
from dpproxy.errors import (
    AmbiguousColumn,
    DPProxyError,
    GroupingError,
    InternalError,
    InvalidParameter,
    InvalidTextRepresentation,
    QueryCanceled,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.server.catalog.functions import INFO_MACROS, MACROS
from dpproxy.server.catalog.model import NAMESPACES, Model, build_model
from dpproxy.server.catalog.pgconst import VISIBLE, duck_type
from dpproxy.server.catalog.relations import SESSION_RELATIONS
from dpproxy.server.catalog.session_tables import create_session_tables, insert

_SHARED: dict[tuple[Catalog, str], tuple[Model, duckdb.DuckDBPyConnection]] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 8  # distinct (schema, database name) pairs kept per process


def shared_database(model_key: tuple[Catalog, str]) -> tuple[Model, duckdb.DuckDBPyConnection]:
    """The emulation database of a schema, built once per process (≈ 0.1 s) and shared.

    Sessions use their own cursors on it; what differs per session (settings, the session
    user) lives in each cursor's TEMP tables. The shared part is read-only to clients: only
    catalog SELECTs ever run on it.
    """
    with _SHARED_LOCK:
        entry = _SHARED.get(model_key)
        if entry is None:
            model = build_model(*model_key)
            entry = (model, _build_database(model))
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.pop(next(iter(_SHARED)))
            _SHARED[model_key] = entry
        return entry[0], entry[1].cursor()


def _build_database(model: Model) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB database holding ``model`` and nothing else, locked down."""
    con = duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 1,
            "max_memory": "256MB",
        },
    )
    con.execute("CREATE SCHEMA pgc; CREATE SCHEMA pgis")
    create_session_tables(con, model)
    tables: list[tuple[str, list[tuple[str, str]], list[tuple[object, ...]]]] = [
        (f'{schema}."{name}"', list(rel.columns), model.relations[name])
        for (schema, name), rel in model.specs.items()
        if schema != "public" and name not in SESSION_RELATIONS
    ]
    tables += _helper_tables(model)
    for table, columns, rows in tables:
        con.execute(
            f"CREATE TABLE {table} (" + ", ".join(f'"{c}" {duck_type(t)}' for c, t in columns) + ")"
        )
        insert(con, table, columns, rows)
    for name in sorted(SESSION_RELATIONS):
        con.execute(f'CREATE VIEW pgc."{name}" AS SELECT * FROM temp.main."{name}"')
    for name, body in MACROS.items():
        con.execute(f"CREATE MACRO pgc.{name}{body}")
    for name, body in INFO_MACROS.items():
        con.execute(f"CREATE MACRO pgis.{name}{body}")
    con.execute("SET lock_configuration = true")
    return con


_Rows = list[tuple[str, list[tuple[str, str]], list[tuple[object, ...]]]]


def _helper_tables(model: Model) -> _Rows:
    """Lookup tables for the macros, with column names no client query can contain."""
    out_name = {
        oid: rel if ns in ("pg_catalog", "public") else f"{ns}.{rel}"
        for (ns, rel), oid in model.regclass.items()
    }
    regclass: dict[str, int] = {f"{ns}.{rel}": oid for (ns, rel), oid in model.regclass.items()}
    for schema in ("public", "pg_catalog"):  # unqualified: pg_catalog wins, as in PostgreSQL
        regclass |= {rel: oid for (ns, rel), oid in model.regclass.items() if ns == schema}
    modkind = {"varchar": "len", "bpchar": "len", "bit": "len", "varbit": "len"}
    modkind["numeric"] = "numeric"
    return [
        (
            "pgc.__type",
            [("__oid", "oid"), ("__display", "text"), ("__modkind", "text"), ("__visible", "bool")],
            [
                (t.oid, t.display, modkind.get(t.name, ""), t.namespace in VISIBLE)
                for t in model.types
            ],
        ),
        (
            "pgc.__rel",
            [("__oid", "oid"), ("__out", "text"), ("__visible", "bool")],
            [(oid, name, "." not in name) for oid, name in out_name.items()],
        ),
        ("pgc.__regclass", [("__name", "text"), ("__oid", "oid")], list(regclass.items())),
        ("pgc.__regtype", [("__name", "text"), ("__oid", "oid")], list(model.regtype.items())),
        (
            "pgc.__ns",
            [("__oid", "oid"), ("__name", "text")],
            [(oid, name) for name, oid in NAMESPACES.items()],
        ),
        (
            "pgc.__proc",
            [("__oid", "oid"), ("__name", "text")],
            [(r[0], r[1]) for r in model.relations["pg_proc"]],
        ),
    ]


def duck_error(e: duckdb.Error) -> DPProxyError:
    """A dpproxy error for a DuckDB failure: client identifiers only, DuckDB text to the log."""
    msg, detail = str(e), f"{type(e).__name__}: {e}"
    if isinstance(e, duckdb.InterruptException):
        return QueryCanceled("canceling statement due to user request", log_detail=detail)

    def clean(name: str) -> str:
        return re.sub(r"\bpgis\.", "information_schema.", re.sub(r"\bpgc\.", "pg_catalog.", name))

    if m := re.search(r'Referenced column "([^"]+)" (?:was )?not found', msg):
        return UndefinedColumn(f'column "{m[1]}" does not exist', log_detail=detail)
    if m := re.search(r'Referenced table "([^"]+)" not found', msg):
        return UndefinedTable(f'missing FROM-clause entry for table "{m[1]}"', log_detail=detail)
    if m := re.search(r"Table with name (\S+?) does not exist", msg):
        return UndefinedTable(f'relation "{clean(m[1])}" does not exist', log_detail=detail)
    if m := re.search(r"Function with name (\S+?) does not exist", msg):
        return UndefinedFunction(f"function {clean(m[1])}() does not exist", log_detail=detail)
    if m := re.search(r'Ambiguous reference to column name "([^"]+)"', msg):
        return AmbiguousColumn(f'column reference "{m[1]}" is ambiguous', log_detail=detail)
    if m := re.search(r"Type with name (\S+?) does not exist", msg):
        return InvalidParameter(f'type "{clean(m[1])}" does not exist', log_detail=detail)
    if "GROUP BY" in msg:
        return GroupingError(
            "a column must appear in the GROUP BY clause or be used in an aggregate function",
            log_detail=detail,
        )
    if "No function matches" in msg or "Cannot compare" in msg or "No operator" in msg:
        return UndefinedFunction(
            "no function or operator matches the given argument types", log_detail=detail
        )
    if isinstance(e, duckdb.ConversionException | duckdb.InvalidInputException):
        return InvalidTextRepresentation(
            "invalid input syntax in a catalog query", log_detail=detail
        )
    if isinstance(e, duckdb.ParserException | duckdb.NotImplementedException):
        return UnsupportedQuery("this catalog query is not supported", log_detail=detail)
    return InternalError("internal error", log_detail=detail)

"""A SQLAlchemy dialect for the embedded engine: ``create_engine("dpproxy://…")``.

So pandas (``pd.read_sql(sql, engine)`` or ``pd.read_sql(sql, "dpproxy://")``), SQLAlchemy Core
the ORM's aggregate queries and JupySQL's ``%sql dpproxy://`` work over ``dpproxy.connect``
(``tests/integration/test_notebooks.py``). The URL:

* ``dpproxy://`` — the bundled Adult demo;
* ``dpproxy:///path/to/data.duckdb?schema=schemas/x.yaml`` — a DuckDB file (three slashes: a
  relative path; four: an absolute one, ``dpproxy:////srv/data.duckdb``);
* ``dpproxy:///?database=postgresql://…&schema=…`` — any ``database`` argument of ``connect``;
* further query parameters are ``connect``'s keyword arguments: ``analyst``, ``epsilon``,
  ``delta``, ``mechanism``, ``plan``, ``budget_epsilon``, ``budget_delta``, ``ledger``,
  ``cache``, ``statement_timeout``.

Registered in ``pyproject.toml`` (``[project.entry-points."sqlalchemy.dialects"]``). SQL is
compiled as PostgreSQL's (dpproxy's own dialect). Every statement goes through the engine's
parser, validator and planner like any other: this module only forwards text. Reflection
(``inspect(engine).get_table_names()``, ``get_columns``) reads the privacy schema, never the
database. dpproxy is read-only: transactions are no-ops, and spent budget is never refunded.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from sqlalchemy import types as sqltypes
from sqlalchemy.dialects.postgresql.base import PGCompiler, PGIdentifierPreparer, PGTypeCompiler
from sqlalchemy.engine import URL, default
from sqlalchemy.engine.interfaces import IsolationLevel, ReflectedPrimaryKeyConstraint

from dpproxy.catalog.model import ColumnType

_CONNECT_ARGS = {
    "schema", "analyst", "epsilon", "delta", "mechanism", "plan", "budget_epsilon",
    "budget_delta", "ledger", "cache",
}
_TYPES: dict[ColumnType, type[sqltypes.TypeEngine[Any]]] = {
    ColumnType.INTEGER: sqltypes.BigInteger,
    ColumnType.FLOAT: sqltypes.Float,
    ColumnType.TEXT: sqltypes.Text,
    ColumnType.BOOLEAN: sqltypes.Boolean,
    ColumnType.DATE: sqltypes.Date,
}


class DPProxyDialect(default.DefaultDialect):
    """``dpproxy://``: the embedded engine through ``dpproxy.dbapi``."""

    name = "dpproxy"
    driver = "embedded"
    supports_statement_cache = True
    default_paramstyle = "pyformat"
    statement_compiler = PGCompiler
    type_compiler_cls = PGTypeCompiler
    preparer = PGIdentifierPreparer
    supports_native_boolean = True
    supports_native_decimal = False
    supports_alter = False
    supports_sequences = False
    supports_default_values = False
    supports_empty_insert = False
    supports_multivalues_insert = False
    supports_sane_rowcount = False
    supports_sane_multi_rowcount = False
    postfetch_lastrowid = False
    max_identifier_length = 63

    @classmethod
    def import_dbapi(cls) -> ModuleType:
        from dpproxy import dbapi

        return dbapi

    def create_connect_args(self, url: URL) -> tuple[list[Any], dict[str, Any]]:
        # a parameter given twice arrives as a tuple: the last one wins
        query = {k: v[-1] if isinstance(v, tuple) else v for k, v in url.query.items()}
        kwargs: dict[str, Any] = {}
        database = query.pop("database", None) or url.database or None
        for key, value in query.items():
            if key == "statement_timeout":
                kwargs[key] = float(value)
            elif key in _CONNECT_ARGS:
                kwargs[key] = value
            else:
                raise ValueError(
                    f"unknown dpproxy URL parameter {key!r}; use database, "
                    + ", ".join(sorted(_CONNECT_ARGS | {"statement_timeout"}))
                )
        return [database], kwargs

    # dpproxy is read-only and has no transactions: nothing to roll back or commit.
    def do_rollback(self, dbapi_connection: Any) -> None:
        pass

    def do_commit(self, dbapi_connection: Any) -> None:
        pass

    def do_ping(self, dbapi_connection: Any) -> bool:
        return not dbapi_connection.closed

    def _get_server_version_info(self, connection: Any) -> tuple[int, ...]:
        return (15, 8)  # the PostgreSQL version dpproxy's SQL follows (server_version)

    def _get_default_schema_name(self, connection: Any) -> str:
        return "public"

    def get_isolation_level(self, dbapi_connection: Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def get_default_isolation_level(self, dbapi_conn: Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_connection: Any, level: IsolationLevel) -> None:
        pass

    def get_isolation_level_values(self, dbapi_conn: Any) -> list[IsolationLevel]:
        return ["AUTOCOMMIT"]

    # Reflection, from the privacy schema.
    @staticmethod
    def _catalog(connection: Any) -> Any:
        return connection.connection.dbapi_connection.engine.catalog

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return ["public"]

    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        if schema not in (None, "public"):
            return []
        return sorted(t.name for t in self._catalog(connection).tables)

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        return []

    def has_table(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> bool:
        return table_name in self.get_table_names(connection, schema)

    def get_columns(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[Any]:
        from sqlalchemy.exc import NoSuchTableError

        table = self._catalog(connection).table(table_name) if schema in (None, "public") else None
        if table is None:
            raise NoSuchTableError(table_name)
        return [
            {
                "name": c.name,
                "type": _TYPES[c.type](),
                "nullable": c.nullable,
                "default": None,
                "autoincrement": False,
            }
            for c in table.columns
        ]

    def get_pk_constraint(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> ReflectedPrimaryKeyConstraint:
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[Any]:
        return []

    def get_indexes(
        self, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[Any]:
        return []


dialect = DPProxyDialect

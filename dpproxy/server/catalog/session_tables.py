"""What each session stores in its own DuckDB cursor: roles, settings and open cursors.

The emulation database (:mod:`.database`) is shared by the sessions of a schema; what
differs per session lives in TEMP tables of the session's cursor: the views ``pg_settings``,
``pg_roles``, ``pg_user`` and ``pg_cursors`` read them, and the macros read the hidden
``__role`` and ``__setting`` tables. :class:`~.emulator.CatalogEmulator` rewrites them when
the session's settings change. :func:`insert` is the bulk insert both modules use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb

from dpproxy.server.catalog.model import DEFAULTS, Model
from dpproxy.server.catalog.pgconst import BOOTSTRAP_ROLE, duck_type
from dpproxy.server.catalog.relations import SESSION_RELATIONS


def insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[object]],
) -> None:
    """Insert ``rows``: one list per column, unnested side by side (far faster than VALUES)."""
    if rows:
        select = ", ".join(
            f"CAST(unnest(${i + 1}) AS {duck_type(t)})" for i, (_, t) in enumerate(columns)
        )
        con.execute(
            f"INSERT INTO {table} SELECT {select}",
            [[row[i] for row in rows] for i in range(len(columns))],
        )


def create_session_tables(con: duckdb.DuckDBPyConnection, model: Model) -> None:
    con.execute("CREATE TEMP TABLE __role (__oid UINTEGER, __name VARCHAR)")
    con.execute("CREATE TEMP TABLE __setting (__key VARCHAR, __value VARCHAR)")
    for name in sorted(SESSION_RELATIONS):
        columns = model.specs["pgc", name].columns
        con.execute(
            f'CREATE TEMP TABLE "{name}" ('
            + ", ".join(f'"{c}" {duck_type(t)}' for c, t in columns)
            + ")"
        )


def session_roles(model: Model, user: str) -> dict[int, str]:
    return {BOOTSTRAP_ROLE: "dpproxy"} | ({} if user == "dpproxy" else {model.user_oid: user})


def store_roles(con: duckdb.DuckDBPyConnection, model: Model, roles: Mapping[int, str]) -> None:
    for table in ("pg_roles", "pg_user"):
        columns = model.specs["pgc", table].columns
        rows = []
        for oid, name in roles.items():
            values: dict[str, object] = (
                {
                    "rolname": name,
                    "rolinherit": True,
                    "oid": oid,
                    "rolcanlogin": True,
                    "rolconnlimit": -1,
                    "rolpassword": "********",
                }
                if table == "pg_roles"
                else {"usename": name, "usesysid": oid, "passwd": "********"}
            )
            rows.append(tuple(values.get(c, DEFAULTS.get(t)) for c, t in columns))
        insert(con, f'temp.main."{table}"', columns, rows)
    insert(con, "temp.main.__role", [("__oid", "oid"), ("__name", "text")], list(roles.items()))


def store_settings(
    con: duckdb.DuckDBPyConnection, model: Model, settings: Mapping[str, tuple[str, str]]
) -> None:
    columns = model.specs["pgc", "pg_settings"].columns
    rows = [
        tuple(
            {
                "name": name,
                "setting": value,
                "category": "dpproxy",
                "context": "user",
                "vartype": "string",
                "source": "session",
                "boot_val": value,
                "reset_val": value,
                "pending_restart": False,
            }.get(c)
            for c, _ in columns
        )
        for name, value in settings.values()
    ]
    con.execute('DELETE FROM temp.main."pg_settings"; DELETE FROM temp.main.__setting')
    insert(con, 'temp.main."pg_settings"', columns, rows)
    keyed = [(key, value) for key, (_, value) in settings.items()]
    insert(con, "temp.main.__setting", [("__key", "text"), ("__value", "text")], keyed)


def store_cursors(
    con: duckdb.DuckDBPyConnection, model: Model, rows: Sequence[tuple[object, ...]]
) -> None:
    """pg_cursors: (name, statement, is_holdable, is_binary, is_scrollable, creation_time)."""
    con.execute('DELETE FROM temp.main."pg_cursors"')
    insert(con, 'temp.main."pg_cursors"', model.specs["pgc", "pg_cursors"].columns, list(rows))

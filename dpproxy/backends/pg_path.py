"""The search path of every PostgreSQL connection dpproxy runs its SQL on, and where its
tables are: ``pg_catalog, pg_temp`` only, every table named with its schema.

The SQL dpproxy writes (the clamps ``CASE WHEN x < lo ...``, casts, ``+ - * /``, ``NULLIF``,
``IN``, ``FLOOR``, ``COUNT(*) <= k`` of contribution bounding, the CHECK and key queries of
``checks.py``) names operators, functions and types unqualified, and PostgreSQL resolves them
through the session's search path, which the role, the database or the DSN's ``options`` may
set (``ALTER ROLE ... SET search_path = ops, pg_catalog, public``). A path that put another
schema first let an ``ops.<(float8, float8)`` that is always false remove the clamp (1,050
released where each of two units adds at most 100), and one that raises decide an error by one
row's value. pg_catalog first is not enough either: a function or operator of another schema
on the path with a built-in's name but other argument types competes with it on equal terms,
whatever the order, and can win (``ops.<(float8, integer)`` is an exact match for ``x < 0``
where the built-in needs a cast of the 0); refusing every path that held one also refused
common helpers such as a ``public.round(float8, integer)``.

:func:`pin_catalog` therefore reads, on each new connection, the schemas of the configured
path (``current_schemas(false)``: ``"$user"`` expanded, the schemas that do not exist or that
the role may not use left out, as PostgreSQL itself searches them; pg_catalog and the session's
temporary schema left out too), and then sets the path ``pg_catalog, pg_temp``:

* PostgreSQL never searches pg_temp for functions or operators, so no function or operator
  outside pg_catalog can be chosen for dpproxy's SQL, whatever the database holds: an
  overload in ``public`` (a ``public.round(float8, integer)`` helper, an always-false
  ``public.<``) is simply never considered, and the connection is not refused for it (until
  2026-11-29 such an overload on the path refused every connection, 08001). A type name
  resolves to pg_catalog's, which comes first (pg_temp could only hold types of this
  session's temporary tables, and dpproxy's read-only sessions create none);
* tables are named with their schema in every statement dpproxy sends (``sql/qualify.py``),
  and the metadata queries name the configured path's schemas by oid (:func:`path_array`).
  The schema of each table is resolved once, when the catalog is attached
  (``postgres.PostgresBackend.attach_catalog``), exactly as PostgreSQL resolves the unqualified
  name: the first schema of the configured path holding a relation of that name, of any kind
  (one that is no table, view or the like is then refused as missing, where PostgreSQL would
  fail the query). A name that a pg_catalog relation has (all of them begin with ``pg_``)
  resolves to pg_catalog's, searched first whether named or not: such a table is refused as
  missing, as before;
* a table created after the catalog was attached, in a schema that comes earlier on the
  configured path, would now hide the attached one from an unqualified name: dpproxy keeps
  reading the attached schema's table (before, its queries moved to the new one, whose CHECK,
  key and NOT NULL constraints were never read: a clamp that the attached table's CHECK let
  dpproxy leave out stayed out). Attaching again (a restart) resolves anew.

Nothing is left to refuse: the ``SHADOWS`` check of earlier versions (an overload of a built-in
on the path refused the connection) guarded unqualified names that the pinned path no longer
lets reach another schema (an extension's overloads, which it let through, are not chosen
either). What remains outside this module's reach is the steward's own: a view's body or a
column default uses what its creator chose, as the rows are the steward's data; and casts
belong to no schema (one between built-in types takes a superuser to create). The queries that
run before the path is pinned call qualified functions only and use no operator. EXPLAIN on
PostgreSQL shows the qualified names (``"public".w``); the SQL printed for DuckDB is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpproxy.errors import BackendUnavailable

PINNED = "pg_catalog, pg_temp"

# The configured path's schemas that hold tables, in path order: (oid, name).
PathSchemas = tuple[tuple[int, str], ...]


def path_array(schemas: PathSchemas) -> str:
    """The oids of ``schemas`` as an SQL ``oid[]`` literal, in path order (oids are integers:
    nothing to quote)."""
    return "'{" + ",".join(str(int(oid)) for oid, _ in schemas) + "}'::pg_catalog.oid[]"


def first_on_path(path: str, alias: str = "c") -> str:
    """The relation ``alias`` of pg_class is the one its (unqualified) name resolves to on the
    path ``path`` (:func:`path_array`): on the path, and no pg_catalog relation nor one of an
    earlier schema of the path has its name."""
    return (
        f"{alias}.relnamespace = ANY ({path}) AND NOT EXISTS (SELECT 1 FROM "
        f"pg_catalog.pg_class o WHERE o.relname = {alias}.relname AND "
        "(o.relnamespace = 'pg_catalog'::pg_catalog.regnamespace OR "
        f"pg_catalog.array_position({path}, o.relnamespace) "
        f"< pg_catalog.array_position({path}, {alias}.relnamespace)))"
    )


def pin_catalog(conn: Any, name: str) -> PathSchemas:
    """Read the schemas of ``conn``'s configured search path (a psycopg connection; see the
    module docstring), then set its session's path to :data:`PINNED` and check that pg_catalog
    comes first (else ``BackendUnavailable`` naming ``name``, the redacted DSN). The calls
    before the path is pinned are qualified and use no operator. Returns the schemas."""
    row = conn.execute("SELECT pg_catalog.current_schemas(false)").fetchone()
    configured = [str(s) for s in (row[0] if row and row[0] is not None else ())]
    conn.execute("SELECT pg_catalog.set_config('search_path', %s, false)", (PINNED,))
    first = conn.execute("SELECT (pg_catalog.current_schemas(true))[1]").fetchone()
    if first is None or first[0] != "pg_catalog":  # pragma: no cover - PostgreSQL's own rule
        raise BackendUnavailable(
            f"cannot put pg_catalog first on the search path of {name}",
            log_detail=f"search_path {PINNED!r}, first schema {first!r}",
        )
    found = conn.execute(
        "SELECT n.nspname, n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY (%s) "
        "AND n.oid <> 'pg_catalog'::pg_catalog.regnamespace "
        "AND n.oid IS DISTINCT FROM pg_catalog.pg_my_temp_schema()",
        (configured,),
    ).fetchall()
    oids = {str(n): int(o) for n, o in found}
    return _ordered(configured, oids)


def _ordered(configured: Sequence[str], oids: dict[str, int]) -> PathSchemas:
    out: list[tuple[int, str]] = []
    for s in configured:  # PostgreSQL keeps the first of repeated names; so does this
        if s in oids and all(n != s for _, n in out):
            out.append((oids[s], s))
    return tuple(out)

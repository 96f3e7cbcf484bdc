"""The search path of every PostgreSQL connection dpproxy runs its SQL on: built-in operators,
functions and types first, tables where the steward's search path finds them.

The SQL dpproxy writes (the clamps ``CASE WHEN x < lo ...``, casts, ``+ - * /``, ``NULLIF``,
``IN``, ``FLOOR``, ``COUNT(*) <= k`` of contribution bounding, the CHECK and key queries of
``checks.py``) names operators, functions and types unqualified, and PostgreSQL resolves them
through the session's search path, which the role or the database may set
(``ALTER ROLE ... SET search_path = ops, pg_catalog, public``). pg_catalog is searched first
only when the path does not name it; a path that puts another schema first let an
``ops.<(float8, float8)`` that is always false remove the clamp (1,050 released where each of
two units adds at most 100), and one that raises decide an error by one row's value.

:func:`pin_catalog` therefore sets, on each new connection, the path ``pg_catalog, <the
configured path, verbatim>, pg_temp``:

* an operator, function or type of another schema with the built-in's own name and argument
  types is never considered (the first one on the path hides the others of identical
  argument types), and a type name always resolves to pg_catalog's;
* tables resolve exactly as before for every name that pg_catalog has no relation of (all of
  its relations' names begin with ``pg_``): pg_catalog was already searched first, or came
  later and holds no such name. A schema table that a pg_catalog relation names is refused as
  missing (``PG_TABLE_SCHEMAS``, ``postgres.PostgresBackend.attach_catalog``);
* the configured text is kept as it is, so ``"$user"``, a schema that does not exist yet, one
  the role may not use, a path the DSN's ``options`` sets and an explicit pg_catalog later on
  mean what they meant (PostgreSQL keeps the first of repeated names);
* ``pg_temp`` goes last: it is searched for relations and types only, first unless named, and
  dpproxy's sessions create nothing in it (every transaction is read-only).

An overload is another matter: a function or operator of another schema on the path with the
built-in's name but other argument types competes with it on equal terms, whatever the order,
and can win (``ops.<(float8, integer)`` is an exact match for ``x < 0`` where the built-in
needs a cast of the 0). :data:`SHADOWS` finds such a function or operator, unless an extension
installed it (extensions are installed by the database's administrators, whom dpproxy
trusts), and :func:`pin_catalog` then refuses the connection. It is checked when each
connection opens: one created while a connection is pooled is seen when the next connection
opens, not by the queries of the open ones.
"""

from __future__ import annotations

from typing import Any

from dpproxy.errors import BackendUnavailable

# The schemas of the steward's search path that hold tables: the explicit ones that exist and
# may be used (current_schemas(false)), without pg_catalog, which pin_catalog puts first.
PG_TABLE_SCHEMAS = (
    "SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = ANY "
    "(pg_catalog.current_schemas(false)) AND nspname <> 'pg_catalog'"
)
# A relation c (of pg_class) that no pg_catalog relation's name hides.
PG_NOT_A_CATALOG_NAME = (
    "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class s WHERE s.relname = lower(c.relname) "
    "AND s.relnamespace = 'pg_catalog'::pg_catalog.regnamespace)"
)

_NS = "'pg_catalog'::pg_catalog.regnamespace"
_ON_PATH = (
    f"n.nspname = ANY (pg_catalog.current_schemas(false)) AND n.oid <> {_NS} "
    "AND n.oid IS DISTINCT FROM pg_catalog.pg_my_temp_schema()"
)


def _no_extension(catalog: str, alias: str) -> str:
    return (
        "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = "
        f"'pg_catalog.{catalog}'::pg_catalog.regclass AND d.objid = {alias}.oid "
        "AND d.deptype = 'e')"
    )


# A function or operator on the path, outside pg_catalog and not an extension's, with the name
# of a built-in one but not its argument types: an overload that can win against it.
SHADOWS = (
    "SELECT n.nspname, p.proname FROM pg_catalog.pg_proc p "
    "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
    f"WHERE {_ON_PATH} AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc b "
    f"WHERE b.proname = p.proname AND b.pronamespace = {_NS}) "
    "AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc b WHERE b.proname = p.proname "
    f"AND b.proargtypes = p.proargtypes AND b.pronamespace = {_NS}) "
    f"AND {_no_extension('pg_proc', 'p')} "
    "UNION ALL SELECT n.nspname, o.oprname FROM pg_catalog.pg_operator o "
    "JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace "
    f"WHERE {_ON_PATH} AND EXISTS (SELECT 1 FROM pg_catalog.pg_operator b "
    f"WHERE b.oprname = o.oprname AND b.oprnamespace = {_NS}) "
    "AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator b WHERE b.oprname = o.oprname "
    f"AND b.oprleft = o.oprleft AND b.oprright = o.oprright AND b.oprnamespace = {_NS}) "
    f"AND {_no_extension('pg_operator', 'o')} "
    "LIMIT 1"
)


def pinned_path(configured: str) -> str:
    """The search path of dpproxy's connections for the ``configured`` one (its text, as
    ``current_setting('search_path')`` gives it)."""
    middle = configured.strip()
    return f"pg_catalog, {middle}, pg_temp" if middle else "pg_catalog, pg_temp"


def pin_catalog(conn: Any, name: str) -> None:
    """Set :func:`pinned_path` on ``conn`` (a psycopg connection, for its session), check that
    pg_catalog comes first and that no overload of a built-in is on the path (:data:`SHADOWS`),
    else ``BackendUnavailable`` naming it (``name``: the redacted DSN). The calls are
    qualified: the path is not yet safe when they run."""
    row = conn.execute("SELECT pg_catalog.current_setting('search_path')").fetchone()
    path = pinned_path(str(row[0]) if row and row[0] is not None else "")
    conn.execute("SELECT pg_catalog.set_config('search_path', %s, false)", (path,))
    first = conn.execute("SELECT (pg_catalog.current_schemas(true))[1]").fetchone()
    if first is None or first[0] != "pg_catalog":  # pragma: no cover - PostgreSQL's own rule
        raise BackendUnavailable(
            f"cannot put pg_catalog first on the search path of {name}",
            log_detail=f"search_path {path!r}, first schema {first!r}",
        )
    shadow = conn.execute(SHADOWS).fetchone()
    if shadow is not None:
        schema, obj = shadow
        raise BackendUnavailable(
            f'the search path of {name} holds "{schema}".{obj}, another version of the '
            "built-in PostgreSQL operator or function of that name",
            hint="it could stand in for the built-in one in the SQL dpproxy writes (a clamp, "
            "say); move it to a schema that is not on the search path of dpproxy's role, or "
            "set that role's search_path without its schema",
        )

"""PostgreSQL: every table of the catalog named with the schema it was attached from.

dpproxy's PostgreSQL sessions search ``pg_catalog, pg_temp`` only (``backends/pg_path.py``), so
that no function, operator or type of another schema can stand in for a built-in in the SQL it
writes; the tables are found by their schema instead, resolved once when the catalog was
attached (``Table.schema``). Every statement sent to PostgreSQL goes through
:func:`qualify_tables` last: the rewrite's (``pipeline.for_dialect``: main statement, the
statements of the statistics and of the DP choice of rows per unit), the public queries'
(``planning/public.py``); the reads of public tables at attach time (``catalog/public.py``)
name them so themselves.
A reference left unqualified fails (no such relation on the pinned path): it cannot read
another schema's table.

A name that a WITH of an enclosing query defines is that CTE's, and left alone. DuckDB's SQL
comes only to :func:`read_wide_tables` (its tables have no schema), and only a table with a
column read as DOUBLE (``sql/widenum.py``) changes there.

Every table and column name of the catalog is written in double quotes with the catalog's
spelling, wherever it appears in the statement: one PostgreSQL would fold to lower case
(``"Sales"``, ``"createdAt"``: planning compares names regardless of case and may have written
it in another case), and since 2026-11-29 a lower-case one too (``"user"``, ``"order"``: bare,
the first is ``current_user`` and the second a syntax error; ``pgnames.quoted_names``).
Every identifier of that name is rewritten alike, aliases included, so that the statement's
references still meet their definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.sql.pgnames import quoted_names
from dpproxy.sql.widenum import read_as_double, total_double

T = TypeVar("T", bound=exp.Expression)
V = TypeVar("V")


class TableSchemas(dict[str, str]):
    """{lower-case table name: its schema}, with :attr:`quoted`: {lower-case name: the
    spelling written in double quotes} of every name of the catalog."""

    def __init__(
        self,
        schemas: Mapping[str, str],
        quoted: Mapping[str, str],
        wide: Mapping[str, tuple[tuple[str, str | None], ...]] | None = None,
    ) -> None:
        super().__init__(schemas)
        self.quoted = dict(quoted)
        # {lower-case table name: its columns (spelling, "numeric" when read through
        # sql/widenum.py's conversion, "real" when a float4 read as DOUBLE, else None)}, for the
        # tables with such a column (PostgreSQL and DuckDB)
        self.wide = dict(wide or {})

    def __bool__(self) -> bool:  # DuckDB's: no schema, and maybe tables read through widenum
        return bool(len(self) or self.wide)


def table_schemas(tables: Iterable[Table]) -> TableSchemas:
    """The schemas of the tables a backend attached with one (:class:`TableSchemas`)."""
    tables = tuple(tables)
    schemas = {t.name.lower(): t.schema for t in tables if t.schema is not None}

    def kind(t: Table, name: str) -> str | None:
        return "numeric" if name in t.wide else "real" if name in t.real else None

    wide = {
        t.name.lower(): tuple((c.name, kind(t, c.name.lower())) for c in t.columns)
        for t in tables
        if t.wide or t.real
    }
    return TableSchemas(schemas, quoted_names(tables) if schemas else {}, wide)


def _is_cte(table: exp.Table, name: str) -> bool:
    """Does ``name`` refer to a CTE of an enclosing WITH at ``table``? (A CTE sees the CTEs
    before it, and itself when recursive.)"""
    cte: exp.Expression | None = None  # the CTE whose body holds ``table``, if any yet
    node = table.parent
    while node is not None:
        if isinstance(node, exp.CTE):
            cte = node
        with_ = node.args.get("with_") or node.args.get("with")  # sqlglot: "with_" of late
        if isinstance(node, exp.Query) and isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            inside = next((i for i, c in enumerate(ctes) if c is cte), None)
            if inside is not None and not with_.args.get("recursive"):
                ctes = ctes[:inside]
            if any(c.alias_or_name.lower() == name for c in ctes):
                return True
        node = node.parent
    return False


def _names_schema(ident: exp.Identifier) -> bool:
    """Is ``ident`` the schema (or database) of a table reference, or a collation (the
    ``COLLATE "C"`` of ``rewrite/dialect.py``)? Neither names a table or column: renamed to a
    catalog spelling, ``"C"`` would become ``"c"`` beside a column ``c``, which PostgreSQL has
    no collation of (42704, after the charge)."""
    if isinstance(ident.parent, exp.Collate):
        return ident.arg_key == "expression"
    return isinstance(ident.parent, exp.Table) and ident.arg_key in ("db", "catalog")


def qualify_tables(tree: T, schemas: Mapping[str, str]) -> T:
    """``tree`` with the schema (quoted) set on each reference to a table of ``schemas``
    (:func:`table_schemas`) that is not a CTE's name, and every catalog name in double quotes
    (:attr:`TableSchemas.quoted`); in place. A reference the analyst wrote qualified
    (``public.w``, which ``sql/fromclause.py`` takes for the schema's table ``w``) gets the
    attached schema too: the table whose constraints were read is the one read."""
    if not schemas:
        return tree
    quoted = schemas.quoted if isinstance(schemas, TableSchemas) else {}
    if quoted:
        for ident in list(tree.find_all(exp.Identifier)):
            spelled = quoted.get(ident.this.lower()) if isinstance(ident.this, str) else None
            if spelled is not None and not _names_schema(ident):
                ident.set("this", spelled)
                ident.set("quoted", True)
    for table, schema in _references(tree, schemas):
        table.set("catalog", None)
        table.set("db", exp.Identifier(this=schema, quoted=True))
    return read_wide_tables(tree, schemas)


def read_wide_tables(
    tree: T,
    schemas: Mapping[str, str],
    convert: Callable[[exp.Expression], exp.Expression] = total_double,
) -> T:
    """``tree`` with each reference to a table of :attr:`TableSchemas.wide` that is not a
    CTE's name replaced by its derived table (``sql/widenum.read_as_double``: its wide
    columns read through ``convert``, ``total_double`` on PostgreSQL, ``duckdb_double`` on
    DuckDB); in place. PostgreSQL's references were qualified first (:func:`qualify_tables`);
    DuckDB's tables have no schema set, and only the wide tables change."""
    wide = schemas.wide if isinstance(schemas, TableSchemas) else {}
    if not wide:
        return tree
    for table, columns in _references(tree, wide):
        table.replace(read_as_double(table, columns, convert))
    return tree


def _references(tree: exp.Expression, known: Mapping[str, V]) -> list[tuple[exp.Table, V]]:
    """Each reference of ``tree`` to a table named in ``known`` (by lower-case name) that is
    not a CTE's name, with its entry (a reference qualified already is a table's)."""
    found = []
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            continue
        name = table.name.lower()
        entry = known.get(name)
        if entry is None or (table.args.get("db") is None and _is_cte(table, name)):
            continue
        found.append((table, entry))
    return found


def qualified_text(sql: str, schemas: Mapping[str, str]) -> str:
    """A hand-written PostgreSQL query with each table of ``schemas`` qualified
    (:func:`qualify_tables`): for tests and benchmarks that run their own SQL on a backend."""
    from sqlglot import parse_one

    tree = parse_one(sql, read="postgres")
    assert isinstance(tree, exp.Expression)
    return qualify_tables(tree, schemas).sql("postgres")

"""CHECK constraints that prove an integer column's values lie within its schema bounds.

A whole-number measure is clamped to the schema's bounds in the rewritten SQL
(``rewrite/wholesum.py``): nothing else keeps one person's value inside them. When the
database itself rejects every row whose value lies outside — a validated CHECK constraint
that implies ``lower ≤ x ≤ upper`` — the clamp maps every value the table can hold to
itself, and the rewrite leaves it out (``Column.in_bounds``). The sensitivity is still
derived from the schema's bounds; only the SQL is shorter.

Conservative: a constraint proves something only when its whole expression is a conjunction
(AND) of comparisons (``>=``, ``>``, ``<=``, ``<``, ``BETWEEN``, not SYMMETRIC) of the one
column, unqualified, with integer literals; anything else in it — OR, NOT, another column, a
function, a decimal or float literal — and the constraint proves nothing. Each constraint
that does gives an interval, derived exactly in integers (``x > a`` is ``x ≥ a + 1`` on an
integer column); the column's constraints hold together, so their intervals intersect.
NULL passes a CHECK, and the clamp maps NULL to NULL: no difference there. Only integer
columns (the database's type, not only the schema's): a float column may hold NaN.

DuckDB: ``DuckDBBackend._checked`` (``duckdb_constraints()``). PostgreSQL:
:func:`postgres_proven` (``pg_constraint``, validated and inherited constraints of built-in
operators only).
Reading the constraints is metadata, not data: it reveals nothing about any person.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, Literal

import sqlglot
from sqlglot import exp

from dpproxy.catalog.draft import schema_type
from dpproxy.catalog.model import Catalog, ColumnType, Table

_WHOLE = re.compile(r"^-?[0-9]+$")
_INT_TYPES = (
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.DECIMAL,  # PostgreSQL's (0)::numeric, only without a typmod
)

Bounds = tuple[int | None, int | None]  # an interval of integers; None: unbounded


def candidates(table: Table, db_types: dict[str, str]) -> tuple[str, ...]:
    """The columns of private ``table`` a CHECK could mark ``in_bounds`` (lower-case names):
    schema type ``integer`` with both bounds, and an integer type in the database
    (``db_types``: lower-case name → the database's type)."""
    if not table.private:
        return ()
    return tuple(
        c.name.lower()
        for c in table.columns
        if c.type is ColumnType.INTEGER
        and c.bounded
        and schema_type(db_types.get(c.name.lower(), "")) is ColumnType.INTEGER
    )


def interval(text: str, column: str, dialect: str) -> Bounds | None:
    """The interval a CHECK expression ``text`` confines integer column ``column`` to, or
    ``None`` when it is not a conjunction of comparisons of that column with integer
    literals. ``dialect``: ``duckdb`` (identifiers case-insensitive) or ``postgres``."""
    try:
        tree = sqlglot.parse_one(text, read=dialect)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None
    if not isinstance(tree, exp.Expression):
        return None
    return _conjunct(tree, column.lower(), dialect)


def _conjunct(node: exp.Expression, column: str, dialect: str) -> Bounds | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        left = _conjunct(node.this, column, dialect)
        right = _conjunct(node.expression, column, dialect)
        if left is None or right is None:
            return None
        return (_tighter(left[0], right[0], max), _tighter(left[1], right[1], min))
    if isinstance(node, exp.Between):
        if set(node.args) - {"this", "low", "high", "symmetric"} or node.args.get("symmetric"):
            return None
        low, high = _integer(node.args.get("low")), _integer(node.args.get("high"))
        if not _is_column(node.this, column, dialect) or low is None or high is None:
            return None
        return (low, high)
    if isinstance(node, exp.GTE | exp.GT | exp.LTE | exp.LT):
        left, right = node.this, node.expression
        if _is_column(left, column, dialect):
            value, upper = _integer(right), isinstance(node, exp.LTE | exp.LT)
        elif _is_column(right, column, dialect):  # a <= x: the column on the right
            value, upper = _integer(left), isinstance(node, exp.GTE | exp.GT)
        else:
            return None
        if value is None:
            return None
        strict = isinstance(node, exp.GT | exp.LT)
        if upper:
            return (None, value - 1 if strict else value)
        return (value + 1 if strict else value, None)
    return None


def _tighter(a: int | None, b: int | None, pick: Callable[[int, int], int]) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


def _is_column(node: exp.Expression | None, column: str, dialect: str) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column) or node.table or not isinstance(node.this, exp.Identifier):
        return False
    name = node.this.this
    if dialect == "postgres" and node.this.quoted:
        return bool(name == column)  # a quoted PostgreSQL name is matched exactly
    return bool(name.lower() == column)


def _integer(node: exp.Expression | None) -> int | None:
    """An integer literal's value: ``5``, ``-5``, ``(5)``, or PostgreSQL's ``'-5'::integer``."""
    while isinstance(node, exp.Paren):
        node = node.this
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
        while isinstance(node, exp.Paren):
            node = node.this
    if isinstance(node, exp.Cast) and not negative:
        to = node.args.get("to")
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if not isinstance(to, exp.DataType) or to.this not in _INT_TYPES or to.expressions:
            return None
        if not isinstance(inner, exp.Literal):
            return None
        node = inner
    elif not isinstance(node, exp.Literal) or node.is_string:
        return None
    text = str(node.this)
    if not _WHOLE.match(text):
        return None
    value = int(text)
    return -value if negative else value


def proven_column(table: Table, column: str, texts: Iterable[str], dialect: str) -> bool:
    """Do the CHECK expressions ``texts`` of ``table`` together prove ``column`` (a
    :func:`candidates` name) lies within its schema bounds?"""
    col = table.column(column) or next((c for c in table.columns if c.name.lower() == column), None)
    if col is None or col.lower is None or col.upper is None:
        return False
    low: int | None = None
    high: int | None = None
    for text in texts:
        bounds = interval(text, column, dialect)
        if bounds is not None:
            low, high = _tighter(low, bounds[0], max), _tighter(high, bounds[1], min)
    return (
        low is not None
        and high is not None
        and Fraction(low) >= col.lower
        and Fraction(high) <= col.upper
    )


def mark(
    table: Table,
    columns: set[str],
    flag: Literal["in_bounds", "scanned", "not_null"] = "in_bounds",
) -> Table:
    """``table`` with its columns named in ``columns`` (lower case) marked ``flag``:
    ``in_bounds`` (a CHECK constraint proves the bounds), ``scanned`` (the rows of a
    read-only file do: ``backends/scanned.py``) or ``not_null`` (the database declares the
    column NOT NULL)."""
    if not columns:
        return table
    marked = tuple(
        (
            replace(c, in_bounds=True)
            if flag == "in_bounds"
            else replace(c, scanned=True)
            if flag == "scanned"
            else replace(c, not_null=True)
        )
        if c.name.lower() in columns
        else c
        for c in table.columns
    )
    return replace(table, columns=marked)


# DuckDB's names (DESCRIBE) of the integer types whose every value a BIGINT holds.
_BIGINT_TYPES = frozenset(
    ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER")
)


def mark_bigint(table: Table, db_types: dict[str, str]) -> Table:
    """``table`` (DuckDB) with its bounded ``integer`` columns whose database type is one of
    ``_BIGINT_TYPES`` marked ``bigint`` (``db_types``: lower-case name → DESCRIBE's type):
    every value such a column holds fits BIGINT and DuckDB sums the column into HUGEINT,
    which ``rewrite/unclamp.py`` needs to sum it unclamped, exactly. HUGEINT, UBIGINT,
    UHUGEINT and DECIMAL(p, 0) columns are not marked. Metadata only, like the
    constraints."""
    if not table.private:
        return table
    marked = tuple(
        replace(c, bigint=True)
        if c.type is ColumnType.INTEGER
        and c.bounded
        and db_types.get(c.name.lower(), "").upper() in _BIGINT_TYPES
        else c
        for c in table.columns
    )
    return replace(table, columns=marked) if marked != table.columns else table


# PostgreSQL: validated (convalidated; a NOT VALID constraint proves nothing about the rows
# already there), inherited (a NO INHERIT constraint does not hold for the rows of child
# tables, which a SELECT of the parent reads) CHECK constraints of plain and partitioned tables
# (a foreign table's constraints are not enforced: neither its own nor, as a child or a
# partition, its parent's) on the steward's search path, of a table whose name no other
# relation on that path (pg_catalog included) has: the table the name was resolved to
# (backends/pg_path.py), for certain. The PostgreSQL queries here are templates whose
# ``{path}`` is ``pg_path.path_array`` of the path's schemas (the session's own path is
# ``pg_catalog, pg_temp``).
_PG_ALONE = (
    "(SELECT count(*) FROM pg_catalog.pg_class o WHERE lower(o.relname) = lower(c.relname) "
    "AND o.relkind IN ('r', 'p', 'v', 'm', 'f') AND (o.relnamespace = ANY ({path}) "
    "OR o.relnamespace = 'pg_catalog'::pg_catalog.regnamespace)) = 1"
)
# No foreign table among c's descendants, inheritance children and partitions at any depth
# (both are in pg_inherits): a foreign table holds its parent's CHECK constraints without
# enforcing them, and a SELECT of the parent reads its rows (file_fdw: a partition of a table
# with CHECK (age BETWEEN 0 AND 100) returned age = 1000, and the clamp was left out).
_PG_NO_FOREIGN = (
    "NOT EXISTS (WITH RECURSIVE d(oid) AS (SELECT inhrelid FROM pg_catalog.pg_inherits "
    "WHERE inhparent = c.oid UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i "
    "JOIN d ON i.inhparent = d.oid) SELECT 1 FROM d JOIN pg_catalog.pg_class f "
    "ON f.oid = d.oid WHERE f.relkind = 'f')"
)
# No operator or function that is not built in: pg_get_expr writes an operator unqualified
# whenever the search path finds it, so a CHECK made with an always-true ops.>= and ops.<=
# reads as (a >= 0) AND (a <= 100) where ops precedes pg_catalog (a = 1000 passed it and was
# summed unclamped). PostgreSQL records a constraint's dependencies on every operator and
# function but the built-in (pinned) ones.
_PG_BUILT_IN = (
    "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d "
    "WHERE d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND d.objid = k.oid "
    "AND d.refclassid IN ('pg_catalog.pg_operator'::pg_catalog.regclass, "
    "'pg_catalog.pg_proc'::pg_catalog.regclass))"
)
# The column a query of the schema's name reads: the schema spells it as the database does and
# the SQL dpproxy writes quotes it where PostgreSQL would fold it (sql/pgnames.py), but dpproxy
# matches these facts, and the column names inside a CHECK, to the schema's columns regardless
# of case. So a relation two of whose columns differ in case only ("UID" beside uid) proves
# nothing: the facts of one must not speak for the other (a table with "UID" PRIMARY KEY
# beside uid: 100 rows of 10 units were counted as 100 with max_rows_per_unit 1, and COUNT(a)
# as COUNT(*) by "A"'s NOT NULL). Attaching checks that the schema's spelling is the column's.
_PG_DISTINCT = (
    "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute x JOIN pg_catalog.pg_attribute y "
    "ON y.attrelid = x.attrelid AND y.attnum > x.attnum AND lower(y.attname) = lower(x.attname) "
    "WHERE x.attrelid = c.oid AND x.attnum > 0 AND NOT x.attisdropped AND NOT y.attisdropped)"
)
_PG_CHECKS = (
    "SELECT lower(c.relname), pg_catalog.pg_get_expr(k.conbin, k.conrelid) "
    "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid "
    "WHERE k.contype = 'c' AND k.convalidated AND NOT k.connoinherit "
    "AND c.relkind IN ('r', 'p') AND lower(c.relname) = ANY (%s) "
    f"AND c.relnamespace = ANY ({{path}}) AND {_PG_ALONE} "
    f"AND {_PG_NO_FOREIGN} AND {_PG_BUILT_IN} AND {_PG_DISTINCT}"
)
_PG_TYPES = (
    "SELECT lower(c.relname), lower(a.attname), pg_catalog.format_type(a.atttypid, a.atttypmod) "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    f"WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND {_PG_DISTINCT} "
    "AND lower(c.relname) = ANY (%s) AND c.relnamespace = ANY ({path})"
)


# PostgreSQL: the single NOT NULL columns of full, non-expression, valid unique indexes (a
# PRIMARY KEY or UNIQUE constraint) of the relation the name resolves to. NOT NULL: a unique
# index admits any number of NULLs, and the rows whose unit is NULL are one unit
# (``rewrite/bound.py``). Valid: a CREATE UNIQUE INDEX CONCURRENTLY that failed, on a
# duplicate say, leaves an index marked unique but not valid over rows that repeat a key. A
# plain table with inheritance children is left out: its index holds only its own rows, and
# a SELECT of it reads the children's too (the same unit in parent and child: two rows). A
# partitioned table's unique index holds across its partitions, none of which can be a
# foreign table, and so does its NOT NULL (a partition cannot drop it).
# The index must also tell values apart exactly as the column's own equality does, which the
# bounding's PARTITION BY and COUNT(DISTINCT) use: the column's collation, and the default
# operator class of the column's type (_PG_DEFAULT_EQ). A unique index in another collation
# or operator class distinguishes what the column's equality merges: on a column of a
# case-insensitive collation, an index (uid COLLATE "C") admits 'A' and 'a', one unit
# (200 rows of 100 units were counted as 200 with max_rows_per_unit 1); so does (uid
# text_ops) on a citext column. CREATE UNIQUE INDEX takes both; a constraint's index cannot.
_PG_DEFAULT_EQ = (
    # the column's type, or a domain's base type (one level: a domain of a domain fails)
    "JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid "
    "JOIN pg_catalog.pg_opclass oc ON oc.oid = i.indclass[0] "
    "WHERE i.indcollation[0] = a.attcollation AND oc.opcdefault AND ("
    "oc.opcintype = CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END "
    # no default class of its own: varchar (text's) and enums (anyenum's)
    "OR (oc.opcintype, CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END) "
    "IN (('pg_catalog.text'::pg_catalog.regtype, 'pg_catalog.varchar'::pg_catalog.regtype)) "
    "OR (oc.opcintype = 'pg_catalog.anyenum'::pg_catalog.regtype AND ty.typtype = 'e')) "
)
PG_UNIQUE = (
    "SELECT lower(c.relname), lower(a.attname) FROM pg_catalog.pg_index i "
    "JOIN pg_catalog.pg_class c ON c.oid = i.indrelid "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0] "
    f"{_PG_DEFAULT_EQ}"
    f"AND i.indisunique AND i.indisvalid AND a.attnotnull AND {_PG_DISTINCT} "
    "AND i.indnkeyatts = 1 AND i.indpred IS NULL "
    "AND i.indexprs IS NULL AND NOT (c.relkind = 'r' AND c.relhassubclass) "
    f"AND c.relnamespace = ANY ({{path}}) AND {_PG_ALONE}"
)
# PostgreSQL: the NOT NULL columns of plain tables without inheritance children, resolved as
# for the CHECK constraints above. A partitioned table or a parent is left out: before
# PostgreSQL 18 a child of plain inheritance may drop a NOT NULL its parent has, and a
# foreign table's (a partition may be one) is not enforced.
_PG_NOT_NULL = (
    "SELECT lower(c.relname), lower(a.attname) FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    f"WHERE a.attnotnull AND a.attnum > 0 AND NOT a.attisdropped AND {_PG_DISTINCT} "
    "AND c.relkind = 'r' AND NOT c.relhassubclass AND lower(c.relname) = ANY (%s) "
    f"AND c.relnamespace = ANY ({{path}}) AND {_PG_ALONE}"
)


def on_path(template: str, path: str) -> str:
    """A PostgreSQL query of this module for the path ``path`` (``pg_path.path_array``)."""
    return template.replace("{path}", path)


def postgres_not_null(
    catalog: Catalog, fetch: Callable[[str, tuple[Any, ...]], Sequence[Sequence[Any]]], path: str
) -> dict[str, set[str]]:
    """{table: its columns PostgreSQL declares NOT NULL} (lower-case names; ``_PG_NOT_NULL``)
    of the catalog's private tables: one catalog query, none without a private table."""
    wanted = [t.name.lower() for t in catalog.tables if t.private]
    out: dict[str, set[str]] = {}
    for name, column in fetch(on_path(_PG_NOT_NULL, path), (wanted,)) if wanted else ():
        out.setdefault(str(name), set()).add(str(column))
    return out


def postgres_proven(
    catalog: Catalog, fetch: Callable[[str, tuple[Any, ...]], Sequence[Sequence[Any]]], path: str
) -> dict[str, set[str]]:
    """{table: columns its PostgreSQL CHECK constraints prove within the schema bounds}
    (lower-case names). ``fetch(sql, params)``: the rows of a catalog query; ``path``: the
    steward's search path (``pg_path.path_array``). No query at all unless some private table
    has a bounded ``integer`` column; the column types only when one of those tables has CHECK
    constraints."""
    wanted = [
        t.name.lower()
        for t in catalog.tables
        if t.private and any(c.type is ColumnType.INTEGER and c.bounded for c in t.columns)
    ]
    if not wanted:
        return {}
    texts: dict[str, list[str]] = {}
    for name, text in fetch(on_path(_PG_CHECKS, path), (wanted,)):
        if text is not None:
            texts.setdefault(str(name), []).append(str(text))
    if not texts:
        return {}
    types: dict[str, dict[str, str]] = {}
    for name, column, sql_type in fetch(on_path(_PG_TYPES, path), (sorted(texts),)):
        types.setdefault(str(name), {})[str(column)] = str(sql_type)
    proven: dict[str, set[str]] = {}
    for t in catalog.tables:
        name = t.name.lower()
        if name in texts:
            proven[name] = {
                c
                for c in candidates(t, types.get(name, {}))
                if proven_column(t, c, texts[name], "postgres")
            }
    return proven

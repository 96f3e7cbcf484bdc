"""The model: every row of the emulated catalog, as Python values, from the schema alone.

:func:`build_model` is a pure function of the privacy schema (a
:class:`~dpproxy.catalog.model.Catalog`) and the database name, plus the PostgreSQL 15
constants of :mod:`.pgconst`, :mod:`.relations` and :mod:`.functions` (``pg_proc`` lists the
emulated functions). No data and no statistics go in: this is the first step of the no-leak
argument in the package docstring. :mod:`.database` loads a model into DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.server.catalog.functions import HIDDEN_MACROS, MACROS
from dpproxy.server.catalog.pgconst import (
    BOOTSTRAP_ROLE,
    DATABASE_OID,
    NS_CATALOG,
    NS_INFO,
    NS_PUBLIC,
    NS_TOAST,
    TYPE_ALIASES,
    Type,
    array_type,
    system_types,
)
from dpproxy.server.catalog.relations import (
    ALWAYS_EMPTY,
    INFORMATION_SCHEMA,
    PG_CATALOG,
    SESSION_RELATIONS,
    parse_specs,
)


@dataclass(frozen=True, slots=True)
class Relation:
    """A catalog relation or a schema table, with its columns' PostgreSQL types."""

    name: str
    schema: str  # "pgc" (pg_catalog), "pgis" (information_schema) or "public"
    oid: int
    kind: str
    columns: tuple[tuple[str, str], ...]  # (name, pg type)
    notnull: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class Model:
    """Everything the emulation database holds, as Python rows: a function of the schema."""

    relations: dict[str, list[tuple[object, ...]]]
    specs: dict[tuple[str, str], Relation]
    types: list[Type]
    regclass: dict[tuple[str, str], int]  # (namespace name, relation) → oid
    regtype: dict[str, int]  # every spelling of a type name → oid
    user_oid: int  # the session user's role (the owner, dpproxy, is 10)


NAMESPACES = {
    "pg_catalog": NS_CATALOG,
    "pg_toast": NS_TOAST,
    "public": NS_PUBLIC,
    "information_schema": NS_INFO,
}
_NS_OF_SCHEMA = {"pgc": NS_CATALOG, "pgis": NS_INFO, "public": NS_PUBLIC}
_NS_NAME = {v: k for k, v in NAMESPACES.items()}
DEFAULTS = {
    "bool": False,
    "int2": 0,
    "int4": 0,
    "int8": 0,
    "float4": 0.0,
    "oid": 0,
    "xid": 0,
    "char": "",
    "regproc": "-",
}


_SCHEMA_TYPES: Final = {
    ColumnType.FLOAT: "float8",
    ColumnType.TEXT: "text",
    ColumnType.BOOLEAN: "bool",
    ColumnType.DATE: "date",
}
_INT4 = (-(2**31), 2**31 - 1)


def _schema_pg_type(ctype: ColumnType, lower: object, upper: object) -> str:
    """integer → int4, or int8 when a declared bound does not fit in 32 bits."""
    if ctype is not ColumnType.INTEGER:
        return _SCHEMA_TYPES[ctype]
    for b in (lower, upper):
        if b is not None and not _INT4[0] <= b <= _INT4[1]:  # type: ignore[operator]
            return "int8"
    return "int4"


def build_model(catalog: Catalog, database: str) -> Model:
    """The catalog rows of ``catalog`` served as database ``database``."""
    types = system_types()
    rels: list[Relation] = []
    for schema, text in (("pgc", PG_CATALOG), ("pgis", INFORMATION_SCHEMA)):
        for name, oid, kind, cols in parse_specs(text):
            rels.append(Relation(name, schema, oid, kind, tuple(cols)))
    next_oid = DATABASE_OID + 1
    for table in catalog.tables:
        schema_cols = tuple(
            (c.name, _schema_pg_type(c.type, c.lower, c.upper)) for c in table.columns
        )
        rel = Relation(
            table.name,
            "public",
            next_oid,
            "r",
            schema_cols,
            tuple(not c.nullable for c in table.columns),
        )
        rels.append(rel)
        row_type = Type(
            oid=next_oid + 2, name=table.name, len=-1, byval=False, kind="c", category="C",
            preferred=False, elem=0, array=next_oid + 1, align="d", storage="x",
            input="record_in", collation=0, display=table.name, relid=next_oid,
            namespace=NS_PUBLIC,
        )  # fmt: skip
        types += [row_type, array_type(row_type, next_oid + 1)]
        next_oid += 3
    by_name = {t.name: t for t in types}
    rowtype = {t.relid: t.oid for t in types if t.relid}
    specs = {(r.schema, r.name): r for r in rels}
    rows: dict[str, list[dict[str, object]]] = {r.name: [] for r in rels if r.schema != "public"}

    def add(rel: str, **values: object) -> None:
        rows[rel].append(values)

    for nsp, oid in NAMESPACES.items():
        add("pg_namespace", oid=oid, nspname=nsp, nspowner=BOOTSTRAP_ROLE)
    for t in types:
        add(
            "pg_type",
            oid=t.oid,
            typname=t.name,
            typnamespace=t.namespace,
            typowner=BOOTSTRAP_ROLE,
            typlen=t.len,
            typbyval=t.byval,
            typtype=t.kind,
            typcategory=t.category,
            typispreferred=t.preferred,
            typisdefined=True,
            typdelim=",",
            typrelid=t.relid,
            typelem=t.elem,
            typarray=t.array,
            typsubscript="array_subscript_handler"
            if t.category == "A" and t.len == -1
            else "raw_array_subscript_handler"
            if t.elem
            else "-",
            typinput=t.input,
            typoutput=t.input[:-2] + "out",
            typreceive=t.input[:-2] + "recv",
            typsend=t.input[:-2] + "send",
            typalign=t.align,
            typstorage=t.storage,
            typndims=0,
            typcollation=t.collation,
            typtypmod=-1,
        )
    for rel in rels:
        ns = _NS_OF_SCHEMA[rel.schema]
        user_table = rel.schema == "public"
        add(
            "pg_class",
            oid=rel.oid,
            relname=rel.name,
            relnamespace=ns,
            reltype=rowtype.get(rel.oid, 0),
            relowner=BOOTSTRAP_ROLE,
            relam=2 if rel.kind == "r" else 0,
            relfilenode=rel.oid if rel.kind == "r" else 0,
            relpages=0,
            reltuples=-1.0,
            relallvisible=0,
            relpersistence="p",
            relkind=rel.kind,
            relnatts=len(rel.columns),
            relispopulated=True,
            relreplident="d" if user_table else "n",
            relisshared=rel.name
            in ("pg_database", "pg_tablespace", "pg_shdescription", "pg_auth_members"),
        )
        system_cols = [
            ("tableoid", "oid", -6),
            ("cmax", "cid", -5),
            ("xmax", "xid", -4),
            ("cmin", "cid", -3),
            ("xmin", "xid", -2),
            ("ctid", "tid", -1),
        ]
        numbered = [(n, t, i + 1) for i, (n, t) in enumerate(rel.columns)]
        for name, pgtype, num in (system_cols if rel.kind == "r" else []) + numbered:
            t = by_name[pgtype]
            add(
                "pg_attribute",
                attrelid=rel.oid,
                attname=name,
                atttypid=t.oid,
                attstattarget=-1,
                attlen=t.len,
                attnum=num,
                attndims=1 if t.category == "A" and t.len == -1 else 0,
                attcacheoff=-1,
                atttypmod=-1,
                attbyval=t.byval,
                attalign=t.align,
                attstorage=t.storage,
                attnotnull=num < 0 or (user_table and rel.notnull[num - 1]),
                attislocal=True,
                attcollation=t.collation,
            )
        nspname = _NS_NAME[ns]
        if rel.kind == "r" and ns != NS_INFO:
            add("pg_tables", schemaname=nspname, tablename=rel.name, tableowner="dpproxy")
        elif rel.kind == "v":
            add("pg_views", schemaname=nspname, viewname=rel.name, viewowner="dpproxy")
        add(
            "tables",
            table_catalog=database,
            table_schema=nspname,
            table_name=rel.name,
            table_type="BASE TABLE" if rel.kind == "r" else "VIEW",
            is_insertable_into="NO",
            is_typed="NO",
        )
        for name, pgtype, num in numbered:
            t = by_name[pgtype]
            add(
                "columns",
                table_catalog=database,
                table_schema=nspname,
                table_name=rel.name,
                column_name=name,
                ordinal_position=num,
                is_nullable="NO" if user_table and rel.notnull[num - 1] else "YES",
                data_type="ARRAY" if t.elem and t.len == -1 else t.display,
                numeric_precision={
                    "int2": 16,
                    "int4": 32,
                    "int8": 64,
                    "float4": 24,
                    "float8": 53,
                }.get(pgtype),
                numeric_precision_radix=2
                if pgtype in ("int2", "int4", "int8", "float4", "float8")
                else None,
                numeric_scale=0 if pgtype in ("int2", "int4", "int8") else None,
                datetime_precision=0 if pgtype == "date" else None,
                udt_catalog=database,
                udt_schema="pg_catalog",
                udt_name=pgtype,
                dtd_identifier=str(num),
                is_self_referencing="NO",
                is_identity="NO",
                is_generated="NEVER",
                is_updatable="NO",
            )
    for nsp in NAMESPACES:
        add("schemata", catalog_name=database, schema_name=nsp, schema_owner="dpproxy")
    add(
        "pg_database",
        oid=DATABASE_OID,
        datname=database,
        datdba=BOOTSTRAP_ROLE,
        encoding=6,
        datlocprovider="c",
        datallowconn=True,
        datconnlimit=-1,
        dattablespace=1663,
        datcollate="C",
        datctype="C",
    )
    for oid, name, kind in (
        (2, "heap", "t"),
        (403, "btree", "i"),
        (405, "hash", "i"),
        (783, "gist", "i"),
        (2742, "gin", "i"),
        (4000, "spgist", "i"),
        (3580, "brin", "i"),
    ):
        add("pg_am", oid=oid, amname=name, amhandler=name + "handler", amtype=kind)
    for oid, name, prov in ((100, "default", "d"), (950, "C", "c"), (951, "POSIX", "c")):
        add(
            "pg_collation",
            oid=oid,
            collname=name,
            collnamespace=NS_CATALOG,
            collowner=BOOTSTRAP_ROLE,
            collprovider=prov,
            collisdeterministic=True,
            collencoding=-1,
            collcollate=None if prov == "d" else name,
            collctype=None if prov == "d" else name,
        )
    for oid, name in ((1663, "pg_default"), (1664, "pg_global")):
        add("pg_tablespace", oid=oid, spcname=name, spcowner=BOOTSTRAP_ROLE)
    for rng, sub, multi in (
        (3904, 23, 4451),
        (3906, 1700, 4532),
        (3908, 1114, 4533),
        (3910, 1184, 4534),
        (3912, 1082, 4535),
        (3926, 20, 4536),
    ):
        add("pg_range", rngtypid=rng, rngsubtype=sub, rngmultitypid=multi)
    for i, name in enumerate(sorted(set(MACROS) - HIDDEN_MACROS)):
        add(
            "pg_proc",
            oid=8000 + i,
            proname=name,
            pronamespace=NS_CATALOG,
            proowner=BOOTSTRAP_ROLE,
            prolang=12,
            procost=1.0,
            prokind="f",
            provolatile="s",
            proparallel="s",
            prorettype=25,
            proargtypes=[],
            prosrc=name,
        )
    for oid, name in ((12, "internal"), (13, "c"), (14, "sql")):
        add("pg_language", oid=oid, lanname=name, lanowner=BOOTSTRAP_ROLE)

    out: dict[str, list[tuple[object, ...]]] = {}
    for rel in rels:
        if rel.schema == "public":
            continue
        out[rel.name] = (
            []
            if rel.name in ALWAYS_EMPTY | SESSION_RELATIONS
            else [tuple(r.get(c, DEFAULTS.get(t)) for c, t in rel.columns) for r in rows[rel.name]]
        )
    regclass = {(_NS_NAME[_NS_OF_SCHEMA[r.schema]], r.name): r.oid for r in rels}
    regtype: dict[str, int] = {}
    for t in types:
        for spelling in (t.name, t.display, "pg_catalog." + t.name):
            regtype.setdefault(spelling.lower(), t.oid)
    for alias, name in TYPE_ALIASES.items():
        regtype[alias] = by_name[name].oid
        regtype[alias + "[]"] = by_name[name].array
    return Model(out, specs, types, regclass, regtype, next_oid)

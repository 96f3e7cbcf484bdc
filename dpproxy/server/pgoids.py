"""PostgreSQL type OIDs and the emulated ``pg_type`` (one part of :mod:`dpproxy.server.pgtypes`).

The type catalogue the rest of the type layer reads: the OID constants, :class:`PgType` with
:data:`TYPES` / :data:`BY_OID` (the rows the catalog emulation answers with), :func:`oid_of`,
:func:`type_size`, :func:`type_name`, and the groups of OIDs the codecs treat alike. Data
without codec logic, which every other part imports, so it sits at the bottom of their graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# ----------------------------------------------------------------------------------- OIDs

BOOL_OID: Final = 16
BYTEA_OID: Final = 17
CHAR_OID: Final = 18
NAME_OID: Final = 19
INT8_OID: Final = 20
INT2_OID: Final = 21
INT2VECTOR_OID: Final = 22
INT4_OID: Final = 23
REGPROC_OID: Final = 24
TEXT_OID: Final = 25
OID_OID: Final = 26
XID_OID: Final = 28
OIDVECTOR_OID: Final = 30
JSON_OID: Final = 114
FLOAT4_OID: Final = 700
FLOAT8_OID: Final = 701
UNKNOWN_OID: Final = 705
BPCHAR_OID: Final = 1042
VARCHAR_OID: Final = 1043
DATE_OID: Final = 1082
TIME_OID: Final = 1083
TIMESTAMP_OID: Final = 1114
TIMESTAMPTZ_OID: Final = 1184
INTERVAL_OID: Final = 1186
NUMERIC_OID: Final = 1700
REGCLASS_OID: Final = 2205
REGTYPE_OID: Final = 2206
UUID_OID: Final = 2950
CHAR_ARRAY_OID: Final = 1002
NAME_ARRAY_OID: Final = 1003
INT2_ARRAY_OID: Final = 1005
INT4_ARRAY_OID: Final = 1007
TEXT_ARRAY_OID: Final = 1009
OID_ARRAY_OID: Final = 1028


@dataclass(frozen=True, slots=True)
class PgType:
    """One row of the emulated ``pg_type`` (all in ``pg_catalog``, ``typdelim`` ``','``)."""

    name: str  # typname
    oid: int
    typlen: int  # bytes; -1 varlena, -2 C string
    typbyval: bool
    typtype: str  # 'b' base, 'p' pseudo-type
    typcategory: str  # 'N' numeric, 'S' string, 'A' array, ...
    typelem: int  # element type of an array (or a vector), else 0
    typarray: int  # the array type of this type, else 0
    typalign: str
    sql_name: str  # format_type(oid, NULL)


def _array_of(t: PgType) -> PgType:
    align = "d" if t.typalign == "d" else "i"
    return PgType("_" + t.name, t.typarray, -1, False, "b", "A", t.oid, 0, align, t.sql_name + "[]")


_BASE = (  # as PostgreSQL 15's pg_type has them (tests/unit/test_pgtypes.py compares)
    PgType("bool", 16, 1, True, "b", "B", 0, 1000, "c", "boolean"),
    PgType("bytea", 17, -1, False, "b", "U", 0, 1001, "i", "bytea"),
    PgType("char", 18, 1, True, "b", "Z", 0, 1002, "c", '"char"'),
    PgType("name", 19, 64, False, "b", "S", 18, 1003, "c", "name"),
    PgType("int8", 20, 8, True, "b", "N", 0, 1016, "d", "bigint"),
    PgType("int2", 21, 2, True, "b", "N", 0, 1005, "s", "smallint"),
    PgType("int2vector", 22, -1, False, "b", "A", 21, 1006, "i", "int2vector"),
    PgType("int4", 23, 4, True, "b", "N", 0, 1007, "i", "integer"),
    PgType("regproc", 24, 4, True, "b", "N", 0, 1008, "i", "regproc"),
    PgType("text", 25, -1, False, "b", "S", 0, 1009, "i", "text"),
    PgType("oid", 26, 4, True, "b", "N", 0, 1028, "i", "oid"),
    PgType("xid", 28, 4, True, "b", "U", 0, 1011, "i", "xid"),
    PgType("oidvector", 30, -1, False, "b", "A", 26, 1013, "i", "oidvector"),
    PgType("json", 114, -1, False, "b", "U", 0, 199, "i", "json"),
    PgType("float4", 700, 4, True, "b", "N", 0, 1021, "i", "real"),
    PgType("float8", 701, 8, True, "b", "N", 0, 1022, "d", "double precision"),
    PgType("unknown", 705, -2, False, "p", "X", 0, 0, "c", "unknown"),
    PgType("bpchar", 1042, -1, False, "b", "S", 0, 1014, "i", "character"),
    PgType("varchar", 1043, -1, False, "b", "S", 0, 1015, "i", "character varying"),
    PgType("date", 1082, 4, True, "b", "D", 0, 1182, "i", "date"),
    PgType("time", 1083, 8, True, "b", "D", 0, 1183, "d", "time without time zone"),
    PgType("timestamp", 1114, 8, True, "b", "D", 0, 1115, "d", "timestamp without time zone"),
    PgType("timestamptz", 1184, 8, True, "b", "D", 0, 1185, "d", "timestamp with time zone"),
    PgType("interval", 1186, 16, False, "b", "T", 0, 1187, "d", "interval"),
    PgType("numeric", 1700, -1, False, "b", "N", 0, 1231, "i", "numeric"),
    PgType("regclass", 2205, 4, True, "b", "N", 0, 2210, "i", "regclass"),
    PgType("regtype", 2206, 4, True, "b", "N", 0, 2211, "i", "regtype"),
    PgType("uuid", 2950, 16, False, "b", "U", 0, 2951, "c", "uuid"),
)
TYPES: Final[tuple[PgType, ...]] = _BASE + tuple(_array_of(t) for t in _BASE if t.typarray)
BY_OID: Final[Mapping[int, PgType]] = MappingProxyType({t.oid: t for t in TYPES})

_OUTPUT_OIDS = {"integer": INT8_OID, "double": FLOAT8_OID, "text": TEXT_OID,
                "boolean": BOOL_OID, "date": DATE_OID}  # fmt: skip


def oid_of(dpproxy_type_name: str) -> int:
    """The OID of a released column type (``OutputColumn.type``); unknown names are text."""
    return _OUTPUT_OIDS.get(dpproxy_type_name, TEXT_OID)


def type_size(oid: int) -> int:
    """``typlen`` for RowDescription (-1 for types not in :data:`TYPES`)."""
    t = BY_OID.get(oid)
    return t.typlen if t else -1


def type_name(oid: int) -> str:
    """The SQL spelling of a type for ``CAST(... AS <name>)``; unspecified, unknown → text."""
    t = BY_OID.get(oid)
    return "text" if t is None or oid == UNKNOWN_OID else t.sql_name


# OID groups the codecs treat alike (the names are those of PostgreSQL's error messages)
_INTS = {INT2_OID: ("smallint", 16), INT4_OID: ("integer", 32), INT8_OID: ("bigint", 64)}
_OIDS = (OID_OID, XID_OID, REGPROC_OID, REGCLASS_OID, REGTYPE_OID)
_FLOAT_NAMES = {FLOAT4_OID: "real", FLOAT8_OID: "double precision"}
_TEXTS = (TEXT_OID, VARCHAR_OID, BPCHAR_OID, NAME_OID, JSON_OID, UNKNOWN_OID)

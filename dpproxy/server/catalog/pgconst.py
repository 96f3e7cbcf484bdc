"""PostgreSQL 15 constants: fixed OIDs, the built-in types, and type-name maps.

The bottom of the emulation: plain data, no other module of the package. :mod:`.model` builds
``pg_type`` and the rest from these; :mod:`.database` and :mod:`.rewrite` map PostgreSQL type
names to DuckDB's with :func:`duck_type`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

NS_CATALOG, NS_TOAST, NS_PUBLIC, NS_INFO = 11, 99, 2200, 13207
BOOTSTRAP_ROLE = 10  # owns every object, as in a fresh cluster
DATABASE_OID = 16384  # then relations from 16385: the OIDs a fresh cluster hands out
VISIBLE = (NS_CATALOG, NS_PUBLIC)  # the default search_path

# One line per type: oid name typlen {byval}{typtype}{category}[*preferred] typelem typarray
# {align}{storage} typinput typcollation [format_type display]. Array types are derived.
_TYPES = """
16 bool 1 tbB* 0 1000 cp boolin 0 boolean
17 bytea -1 fbU 0 1001 ix byteain 0
18 char 1 tbZ 0 1002 cp charin 0 "char"
19 name 64 fbS 18 1003 cp namein 950
20 int8 8 tbN 0 1016 dp int8in 0 bigint
21 int2 2 tbN 0 1005 sp int2in 0 smallint
22 int2vector -1 fbA 21 1006 ip int2vectorin 0
23 int4 4 tbN 0 1007 ip int4in 0 integer
24 regproc 4 tbN 0 1008 ip regprocin 0
25 text -1 fbS* 0 1009 ix textin 100
26 oid 4 tbN* 0 1028 ip oidin 0
27 tid 6 fbU 0 1010 sp tidin 0
28 xid 4 tbU 0 1011 ip xidin 0
29 cid 4 tbU 0 1012 ip cidin 0
30 oidvector -1 fbA 26 1013 ip oidvectorin 0
114 json -1 fbU 0 199 ix json_in 0
142 xml -1 fbU 0 143 ix xml_in 0
194 pg_node_tree -1 fbZ 0 0 ix pg_node_tree_in 100
600 point 16 fbG 701 1017 dp point_in 0
601 lseg 32 fbG 600 1018 dp lseg_in 0
602 path -1 fbG 0 1019 dx path_in 0
603 box 32 fbG 600 1020 dp box_in 0
604 polygon -1 fbG 0 1027 dx poly_in 0
628 line 24 fbG 701 629 dp line_in 0
650 cidr -1 fbI 0 651 im cidr_in 0
700 float4 4 tbN 0 1021 ip float4in 0 real
701 float8 8 tbN* 0 1022 dp float8in 0 double precision
705 unknown -2 fpX 0 0 cp unknownin 0
718 circle 24 fbG 0 719 dp circle_in 0
790 money 8 tbN 0 791 dp cash_in 0
829 macaddr 6 fbU 0 1040 ip macaddr_in 0
869 inet -1 fbI* 0 1041 im inet_in 0
1033 aclitem 12 fbU 0 1034 ip aclitemin 0
1042 bpchar -1 fbS 0 1014 ix bpcharin 100 character
1043 varchar -1 fbS 0 1015 ix varcharin 100 character varying
1082 date 4 tbD 0 1182 ip date_in 0
1083 time 8 tbD 0 1183 dp time_in 0 time without time zone
1114 timestamp 8 tbD 0 1115 dp timestamp_in 0 timestamp without time zone
1184 timestamptz 8 tbD* 0 1185 dp timestamptz_in 0 timestamp with time zone
1186 interval 16 fbT* 0 1187 dp interval_in 0
1266 timetz 12 fbD 0 1270 dp timetz_in 0 time with time zone
1560 bit -1 fbV 0 1561 ix bit_in 0
1562 varbit -1 fbV* 0 1563 ix varbit_in 0 bit varying
1700 numeric -1 fbN 0 1231 im numeric_in 0
1790 refcursor -1 fbU 0 2201 ix textin 0
2202 regprocedure 4 tbN 0 2207 ip regprocedurein 0
2203 regoper 4 tbN 0 2208 ip regoperin 0
2204 regoperator 4 tbN 0 2209 ip regoperatorin 0
2205 regclass 4 tbN 0 2210 ip regclassin 0
2206 regtype 4 tbN 0 2211 ip regtypein 0
2249 record -1 fpP 0 2287 dx record_in 0
2275 cstring -2 fpP 0 1263 cp cstring_in 0
2276 any 4 tpP 0 0 ip any_in 0 "any"
2277 anyarray -1 fpP 0 0 dx anyarray_in 0
2278 void 4 tpP 0 0 ip void_in 0
2279 trigger 4 tpP 0 0 ip trigger_in 0
2281 internal 8 tpP 0 0 dp internal_in 0
2283 anyelement 4 tpP 0 0 ip anyelement_in 0
2776 anynonarray 4 tpP 0 0 ip anynonarray_in 0
2950 uuid 16 fbU 0 2951 cp uuid_in 0
2970 txid_snapshot -1 fbU 0 2949 dx txid_snapshot_in 0
3220 pg_lsn 8 tbU 0 3221 dp pg_lsn_in 0
3500 anyenum 4 tpP 0 0 ip anyenum_in 0
3614 tsvector -1 fbU 0 3643 ix tsvectorin 0
3615 tsquery -1 fbU 0 3645 ip tsqueryin 0
3734 regconfig 4 tbN 0 3735 ip regconfigin 0
3769 regdictionary 4 tbN 0 3770 ip regdictionaryin 0
3802 jsonb -1 fbU 0 3807 ix jsonb_in 0
3831 anyrange -1 fpP 0 0 dx anyrange_in 0
3904 int4range -1 frR 0 3905 ix range_in 0
3906 numrange -1 frR 0 3907 ix range_in 0
3908 tsrange -1 frR 0 3909 dx range_in 0
3910 tstzrange -1 frR 0 3911 dx range_in 0
3912 daterange -1 frR 0 3913 ix range_in 0
3926 int8range -1 frR 0 3927 dx range_in 0
4072 jsonpath -1 fbU 0 4073 ix jsonpath_in 0
4089 regnamespace 4 tbN 0 4090 ip regnamespacein 0
4096 regrole 4 tbN 0 4097 ip regrolein 0
4191 regcollation 4 tbN 0 4192 ip regcollationin 0
4451 int4multirange -1 fmR 0 6150 ix multirange_in 0
4532 nummultirange -1 fmR 0 6151 ix multirange_in 0
4533 tsmultirange -1 fmR 0 6152 dx multirange_in 0
4534 tstzmultirange -1 fmR 0 6153 dx multirange_in 0
4535 datemultirange -1 fmR 0 6155 ix multirange_in 0
4536 int8multirange -1 fmR 0 6157 dx multirange_in 0
5038 pg_snapshot -1 fbU 0 5039 dx pg_snapshot_in 0
5069 xid8 8 tbU 0 271 dp xid8in 0
"""

DUCK_TYPE: Final = {
    "oid": "UINTEGER",
    "xid": "UINTEGER",
    "cid": "UINTEGER",
    "regtype": "UINTEGER",
    "regclass": "UINTEGER",
    "regnamespace": "UINTEGER",
    "regrole": "UINTEGER",
    "regproc": "VARCHAR",
    "regprocedure": "VARCHAR",
    "name": "VARCHAR",
    "text": "VARCHAR",
    "varchar": "VARCHAR",
    "bpchar": "VARCHAR",
    "char": "VARCHAR",
    "pg_node_tree": "VARCHAR",
    "aclitem": "VARCHAR",
    "tid": "VARCHAR",
    "anyarray": "VARCHAR[]",
    "bool": "BOOLEAN",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "FLOAT",
    "float8": "DOUBLE",
    "numeric": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "time": "TIME",
    "interval": "INTERVAL",
    "bytea": "BLOB",
    "json": "JSON",
    "jsonb": "JSON",
    "uuid": "UUID",
    "int2vector": "SMALLINT[]",
    "oidvector": "UINTEGER[]",
}
TYPE_ALIASES: Final = {
    "int": "int4",
    "integer": "int4",
    "smallint": "int2",
    "bigint": "int8",
    "real": "float4",
    "double": "float8",
    "double precision": "float8",
    "boolean": "bool",
    "decimal": "numeric",
    "character varying": "varchar",
    "character": "bpchar",
    "timestamp with time zone": "timestamptz",
    "timestamp without time zone": "timestamp",
    "time without time zone": "time",
    "string": "text",
}
REG_TYPES: Final = {"regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure"}
TEXT_TYPES: Final = {"text", "varchar", "name", "bpchar", "char"}


@dataclass(frozen=True, slots=True)
class Type:
    """A row of ``pg_type``: a built-in type, an array type or a schema table's row type."""

    oid: int
    name: str
    len: int
    byval: bool
    kind: str
    category: str
    preferred: bool
    elem: int
    array: int
    align: str
    storage: str
    input: str
    collation: int
    display: str
    relid: int = 0
    namespace: int = NS_CATALOG


def array_type(elem: Type, oid: int) -> Type:
    """The array type of ``elem`` (PostgreSQL's ``_elem``)."""
    return replace(
        elem, oid=oid, name="_" + elem.name, len=-1, byval=False, kind="b", category="A",
        preferred=False, elem=elem.oid, array=0, align="d" if elem.align == "d" else "i",
        storage="x", input="array_in", display=elem.display + "[]", relid=0,
    )  # fmt: skip


def system_types() -> list[Type]:
    """The base types of :data:`_TYPES` and their array types."""
    out: list[Type] = []
    for line in _TYPES.strip().splitlines():
        f = line.split(" ", 9)
        flags, storage = f[3], f[6]
        base = Type(
            oid=int(f[0]), name=f[1], len=int(f[2]), byval=flags[0] == "t", kind=flags[1],
            category=flags[2], preferred=flags.endswith("*"), elem=int(f[4]), array=int(f[5]),
            align=storage[0], storage=storage[1], input=f[7], collation=int(f[8]),
            display=f[9] if len(f) > 9 else f[1],
        )  # fmt: skip
        out.append(base)
        if base.array:
            out.append(array_type(base, base.array))
    return out


def duck_type(pg: str) -> str:
    """The DuckDB type holding values of PostgreSQL type ``pg`` (``_x``: an array of ``x``)."""
    if pg.startswith("_"):
        return duck_type(pg[1:]) + "[]"
    return DUCK_TYPE.get(pg, "VARCHAR")

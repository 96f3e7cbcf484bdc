"""Answer client introspection (``pg_catalog``, ``information_schema``, SHOW/SET) without data.

Clients introspect on connect and while browsing: psql's ``\\d``, SQLAlchemy's inspector,
pgJDBC's ``DatabaseMetaData``, asyncpg's type introspection, ``SELECT version()``. A
:class:`CatalogEmulator` answers these from the privacy schema (a
:class:`~dpproxy.catalog.model.Catalog`) alone, PostgreSQL 15 style, in a private in-memory
DuckDB database.

Why nothing about the data can leak (the no-leak argument):

1. *Nothing data-dependent goes in.* The emulation database is built by :func:`_build_model`
   from the ``Catalog`` (names, column types, nullability from the schema file), the server
   identity given to the constructor and fixed PostgreSQL 15 constants. The emulator takes
   no backend, no connection and no statistics; it cannot reach the data because it is never
   given a way to. Schema tables are *not* created in the emulation database at all: a query
   that reads one is refused (0A000) instead of getting an empty, plausible-looking answer.
2. *Every data-dependent catalog field is a constant.* ``pg_class.reltuples`` is -1 (never
   analysed) and ``relpages``/``relallvisible`` 0 for every relation; ``pg_stats``,
   ``pg_statistic``, ``pg_stat_user_tables`` and ``pg_stat_all_tables`` exist and are empty;
   ``pg_table_size``, ``pg_relation_size``, ``pg_total_relation_size``, ``pg_indexes_size``
   and ``pg_database_size`` return NULL; there are no sample values anywhere (``pg_stats``'s
   ``most_common_vals``/``histogram_bounds`` have no rows). So the answers are a pure
   function of the schema: two datasets with the same schema get identical answers.
3. *Only catalog SQL runs, and only inside the emulation database.* :meth:`is_catalog_query`
   accepts a statement only if every relation it names is an emulated ``pg_catalog`` /
   ``information_schema`` relation (or a CTE of its own) and every function is on an
   allowlist; ``SELECT ... INTO``, locking clauses, DML and DDL are refused. The DuckDB
   connection runs with external access (files, HTTP, extensions) disabled and its
   configuration locked, so even an allowlisted function cannot read a file. (A costly
   query, e.g. a huge ``generate_series``, is a denial of service, not a leak: the session
   cancels it with :meth:`CatalogEmulator.interrupt`.)
4. *Errors never carry DuckDB text.* Failures become dpproxy errors with PostgreSQL
   SQLSTATEs and messages built from the client's own identifiers; the DuckDB message goes to
   ``log_detail`` only.

The SQL clients send is PostgreSQL; it is parsed with sqlglot, rewritten (relations to the
emulation schemas ``pgc``/``pgis``, ``::regclass``-style casts resolved against the emulated
catalog, ``OPERATOR(pg_catalog.~)``, ``COLLATE``, session constants such as ``version()``
inlined, emulated functions to DuckDB macros) and run as DuckDB SQL.

Cost: the database of a schema is built once per process (≈ 0.15 s) and shared; each session
gets its own DuckDB cursor with TEMP tables for what is per session (settings, the user), ≈ 10
ms. Parsed statements and translations are cached, since clients send the same introspection
text on every connection.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Final, Generic, TypeGuard, TypeVar

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.errors import (
    AmbiguousColumn,
    DPProxyError,
    Forbidden,
    GroupingError,
    InternalError,
    InvalidParameter,
    InvalidTextRepresentation,
    QueryCanceled,
    SQLSyntaxError,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.sql.parse import parse_statements

__all__ = ["CatalogEmulator", "Result"]

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class Result:
    """An answer: ``columns`` as (name, PostgreSQL type OID), ``rows``, and the command tag.

    Values are Python values: ``str`` for text, name (19), varchar (1043) and ``"char"`` (18,
    a string of at most one character), ``int`` for integers and oid (26), ``float``, ``bool``,
    lists for arrays, None for NULL. ``reg*`` values (``c.oid::regclass``) are their names,
    typed text (25).
    """

    columns: list[tuple[str, int]]
    rows: list[tuple[object, ...]]
    tag: str


class _Postgres(Postgres):
    """PostgreSQL as sqlglot reads it, except that ``oid`` and the ``reg*`` types are ordinary
    type names: sqlglot's OBJECT_IDENTIFIER token cannot take ``[]`` (``$1::oid[]``)."""

    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            k: v
            for k, v in Postgres.Tokenizer.KEYWORDS.items()
            if v is not TokenType.OBJECT_IDENTIFIER
        }


# --------------------------------------------------------------------- PostgreSQL 15 constants

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

# pg_catalog / information_schema relations: "name oid relkind: column type, ..." with the
# columns of PostgreSQL 15 (information_schema domains as their base types).
_PG_CATALOG = """
pg_namespace 2615 r: oid oid, nspname name, nspowner oid, nspacl _aclitem
pg_class 1259 r: oid oid, relname name, relnamespace oid, reltype oid, reloftype oid, relowner oid,
    relam oid, relfilenode oid, reltablespace oid, relpages int4, reltuples float4, relallvisible
    int4, reltoastrelid oid, relhasindex bool, relisshared bool, relpersistence char, relkind char,
    relnatts int2, relchecks int2, relhasrules bool, relhastriggers bool, relhassubclass bool,
    relrowsecurity bool, relforcerowsecurity bool, relispopulated bool, relreplident char,
    relispartition bool, relrewrite oid, relfrozenxid xid, relminmxid xid, relacl _aclitem,
    reloptions _text, relpartbound pg_node_tree
pg_attribute 1249 r: attrelid oid, attname name, atttypid oid, attstattarget int4, attlen int2,
    attnum int2, attndims int4, attcacheoff int4, atttypmod int4, attbyval bool, attalign char,
    attstorage char, attcompression char, attnotnull bool, atthasdef bool, atthasmissing bool,
    attidentity char, attgenerated char, attisdropped bool, attislocal bool, attinhcount int4,
    attcollation oid, attacl _aclitem, attoptions _text, attfdwoptions _text, attmissingval
    anyarray
pg_type 1247 r: oid oid, typname name, typnamespace oid, typowner oid, typlen int2, typbyval bool,
    typtype char, typcategory char, typispreferred bool, typisdefined bool, typdelim char, typrelid
    oid, typsubscript regproc, typelem oid, typarray oid, typinput regproc, typoutput regproc,
    typreceive regproc, typsend regproc, typmodin regproc, typmodout regproc, typanalyze regproc,
    typalign char, typstorage char, typnotnull bool, typbasetype oid, typtypmod int4, typndims
    int4, typcollation oid, typdefaultbin pg_node_tree, typdefault text, typacl _aclitem
pg_proc 1255 r: oid oid, proname name, pronamespace oid, proowner oid, prolang oid, procost float4,
    prorows float4, provariadic oid, prosupport regproc, prokind char, prosecdef bool, proleakproof
    bool, proisstrict bool, proretset bool, provolatile char, proparallel char, pronargs int2,
    pronargdefaults int2, prorettype oid, proargtypes oidvector, proallargtypes _oid, proargmodes
    _char, proargnames _text, proargdefaults pg_node_tree, protrftypes _oid, prosrc text, probin
    text, prosqlbody pg_node_tree, proconfig _text, proacl _aclitem
pg_range 3541 r: rngtypid oid, rngsubtype oid, rngmultitypid oid, rngcollation oid, rngsubopc oid,
    rngcanonical regproc, rngsubdiff regproc
pg_database 1262 r: oid oid, datname name, datdba oid, encoding int4, datlocprovider char,
    datistemplate bool, datallowconn bool, datconnlimit int4, datfrozenxid xid, datminmxid xid,
    dattablespace oid, datcollate text, datctype text, daticulocale text, datcollversion text,
    datacl _aclitem
pg_cursors 12077 v: name text, statement text, is_holdable bool, is_binary bool, is_scrollable bool,
    creation_time timestamptz
pg_settings 12104 v: name text, setting text, unit text, category text, short_desc text, extra_desc
    text, context text, vartype text, source text, min_val text, max_val text, enumvals _text,
    boot_val text, reset_val text, sourcefile text, sourceline int4, pending_restart bool
pg_index 2610 r: indexrelid oid, indrelid oid, indnatts int2, indnkeyatts int2, indisunique bool,
    indnullsnotdistinct bool, indisprimary bool, indisexclusion bool, indimmediate bool,
    indisclustered bool, indisvalid bool, indcheckxmin bool, indisready bool, indislive bool,
    indisreplident bool, indkey int2vector, indcollation oidvector, indclass oidvector, indoption
    int2vector, indexprs pg_node_tree, indpred pg_node_tree
pg_constraint 2606 r: oid oid, conname name, connamespace oid, contype char, condeferrable bool,
    condeferred bool, convalidated bool, conrelid oid, contypid oid, conindid oid, conparentid oid,
    confrelid oid, confupdtype char, confdeltype char, confmatchtype char, conislocal bool,
    coninhcount int4, connoinherit bool, conkey _int2, confkey _int2, conpfeqop _oid, conppeqop
    _oid, conffeqop _oid, confdelsetcols _int2, conexclop _oid, conbin pg_node_tree
pg_description 2609 r: objoid oid, classoid oid, objsubid int4, description text
pg_shdescription 2396 r: objoid oid, classoid oid, description text
pg_roles 12000 v: rolname name, rolsuper bool, rolinherit bool, rolcreaterole bool, rolcreatedb
    bool, rolcanlogin bool, rolreplication bool, rolconnlimit int4, rolpassword text, rolvaliduntil
    timestamptz, rolbypassrls bool, rolconfig _text, oid oid
pg_user 12014 v: usename name, usesysid oid, usecreatedb bool, usesuper bool, userepl bool,
    usebypassrls bool, passwd text, valuntil timestamptz, useconfig _text
pg_auth_members 1261 r: roleid oid, member oid, grantor oid, admin_option bool
pg_stat_gssapi 12200 v: pid int4, gss_authenticated bool, principal text, encrypted bool
pg_replication_slots 12138 v: slot_name name, plugin name, slot_type text, datoid oid, database
    name, temporary bool, active bool, active_pid int4, xmin xid, catalog_xmin xid, restart_lsn
    pg_lsn, confirmed_flush_lsn pg_lsn, wal_status text, safe_wal_size int8, two_phase bool
pg_tables 12033 v: schemaname name, tablename name, tableowner name, tablespace name, hasindexes
    bool, hasrules bool, hastriggers bool, rowsecurity bool
pg_views 12028 v: schemaname name, viewname name, viewowner name, definition text
pg_matviews 12038 v: schemaname name, matviewname name, matviewowner name, tablespace name,
    hasindexes bool, ispopulated bool, definition text
pg_indexes 12043 v: schemaname name, tablename name, indexname name, tablespace name, indexdef text
pg_sequences 12048 v: schemaname name, sequencename name, sequenceowner name, data_type regtype,
    start_value int8, min_value int8, max_value int8, increment_by int8, cycle bool, cache_size
    int8, last_value int8
pg_am 2601 r: oid oid, amname name, amhandler regproc, amtype char
pg_collation 3456 r: oid oid, collname name, collnamespace oid, collowner oid, collprovider char,
    collisdeterministic bool, collencoding int4, collcollate text, collctype text, colliculocale
    text, collversion text
pg_enum 3501 r: oid oid, enumtypid oid, enumsortorder float4, enumlabel name
pg_inherits 2611 r: inhrelid oid, inhparent oid, inhseqno int4, inhdetachpending bool
pg_attrdef 2604 r: oid oid, adrelid oid, adnum int2, adbin pg_node_tree
pg_tablespace 1213 r: oid oid, spcname name, spcowner oid, spcacl _aclitem, spcoptions _text
pg_policy 3256 r: oid oid, polname name, polrelid oid, polcmd char, polpermissive bool, polroles
    _oid, polqual pg_node_tree, polwithcheck pg_node_tree
pg_statistic_ext 3381 r: oid oid, stxrelid oid, stxname name, stxnamespace oid, stxowner oid,
    stxstattarget int4, stxkeys int2vector, stxkind _char, stxexprs pg_node_tree
pg_publication 6104 r: oid oid, pubname name, pubowner oid, puballtables bool, pubinsert bool,
    pubupdate bool, pubdelete bool, pubtruncate bool, pubviaroot bool
pg_publication_namespace 6237 r: oid oid, pnpubid oid, pnnspid oid
pg_publication_rel 6106 r: oid oid, prpubid oid, prrelid oid, prqual pg_node_tree, prattrs
    int2vector
pg_sequence 2224 r: seqrelid oid, seqtypid oid, seqstart int8, seqincrement int8, seqmax int8,
    seqmin int8, seqcache int8, seqcycle bool
pg_opclass 2616 r: oid oid, opcmethod oid, opcname name, opcnamespace oid, opcowner oid, opcfamily
    oid, opcintype oid, opcdefault bool, opckeytype oid
pg_stats 12053 v: schemaname name, tablename name, attname name, inherited bool, null_frac float4,
    avg_width int4, n_distinct float4, most_common_vals anyarray, most_common_freqs _float4,
    histogram_bounds anyarray, correlation float4, most_common_elems anyarray,
    most_common_elem_freqs _float4, elem_count_histogram _float4
pg_statistic 2619 r: starelid oid, staattnum int2, stainherit bool, stanullfrac float4, stawidth
    int4, stadistinct float4, stakind1 int2, stakind2 int2, stakind3 int2, stakind4 int2, stakind5
    int2, staop1 oid, staop2 oid, staop3 oid, staop4 oid, staop5 oid, stacoll1 oid, stacoll2 oid,
    stacoll3 oid, stacoll4 oid, stacoll5 oid, stanumbers1 _float4, stanumbers2 _float4, stanumbers3
    _float4, stanumbers4 _float4, stanumbers5 _float4, stavalues1 anyarray, stavalues2 anyarray,
    stavalues3 anyarray, stavalues4 anyarray, stavalues5 anyarray
pg_stat_user_tables 12161 v: relid oid, schemaname name, relname name, seq_scan int8, seq_tup_read
    int8, idx_scan int8, idx_tup_fetch int8, n_tup_ins int8, n_tup_upd int8, n_tup_del int8,
    n_tup_hot_upd int8, n_live_tup int8, n_dead_tup int8, n_mod_since_analyze int8,
    n_ins_since_vacuum int8, last_vacuum timestamptz, last_autovacuum timestamptz, last_analyze
    timestamptz, last_autoanalyze timestamptz, vacuum_count int8, autovacuum_count int8,
    analyze_count int8, autoanalyze_count int8
pg_stat_all_tables 12142 v: relid oid, schemaname name, relname name, seq_scan int8, seq_tup_read
    int8, idx_scan int8, idx_tup_fetch int8, n_tup_ins int8, n_tup_upd int8, n_tup_del int8,
    n_tup_hot_upd int8, n_live_tup int8, n_dead_tup int8, n_mod_since_analyze int8,
    n_ins_since_vacuum int8, last_vacuum timestamptz, last_autovacuum timestamptz, last_analyze
    timestamptz, last_autoanalyze timestamptz, vacuum_count int8, autovacuum_count int8,
    analyze_count int8, autoanalyze_count int8
pg_extension 3079 r: oid oid, extname name, extowner oid, extnamespace oid, extrelocatable bool,
    extversion text, extconfig _oid, extcondition _text
pg_trigger 2620 r: oid oid, tgrelid oid, tgparentid oid, tgname name, tgfoid oid, tgtype int2,
    tgenabled char, tgisinternal bool, tgconstrrelid oid, tgconstrindid oid, tgconstraint oid,
    tgdeferrable bool, tginitdeferred bool, tgnargs int2, tgattr int2vector, tgargs bytea, tgqual
    pg_node_tree, tgoldtable name, tgnewtable name
pg_rewrite 2618 r: oid oid, rulename name, ev_class oid, ev_type char, ev_enabled char, is_instead
    bool, ev_qual pg_node_tree, ev_action pg_node_tree
pg_language 2612 r: oid oid, lanname name, lanowner oid, lanispl bool, lanpltrusted bool,
    lanplcallfoid oid, laninline oid, lanvalidator oid, lanacl _aclitem
pg_partitioned_table 3350 r: partrelid oid, partstrat char, partnatts int2, partdefid oid,
    partattrs int2vector, partclass oidvector, partcollation oidvector, partexprs pg_node_tree
pg_depend 2608 r: classid oid, objid oid, objsubid int4, refclassid oid, refobjid oid, refobjsubid
    int4, deptype char
"""
_INFORMATION_SCHEMA = """
schemata 13382 v: catalog_name name, schema_name name, schema_owner name,
    default_character_set_catalog name, default_character_set_schema name,
    default_character_set_name name, sql_path varchar
tables 13425 v: table_catalog name, table_schema name, table_name name, table_type varchar,
    self_referencing_column_name name, reference_generation varchar, user_defined_type_catalog
    name, user_defined_type_schema name, user_defined_type_name name, is_insertable_into varchar,
    is_typed varchar, commit_action varchar
columns 13295 v: table_catalog name, table_schema name, table_name name, column_name name,
    ordinal_position int4, column_default varchar, is_nullable varchar, data_type varchar,
    character_maximum_length int4, character_octet_length int4, numeric_precision int4,
    numeric_precision_radix int4, numeric_scale int4, datetime_precision int4, interval_type
    varchar, interval_precision int4, character_set_catalog name, character_set_schema name,
    character_set_name name, collation_catalog name, collation_schema name, collation_name name,
    domain_catalog name, domain_schema name, domain_name name, udt_catalog name, udt_schema name,
    udt_name name, scope_catalog name, scope_schema name, scope_name name, maximum_cardinality
    int4, dtd_identifier name, is_self_referencing varchar, is_identity varchar,
    identity_generation varchar, identity_start varchar, identity_increment varchar,
    identity_maximum varchar, identity_minimum varchar, identity_cycle varchar, is_generated
    varchar, generation_expression varchar, is_updatable varchar
views 13483 v: table_catalog name, table_schema name, table_name name, view_definition varchar,
    check_option varchar, is_updatable varchar, is_insertable_into varchar, is_trigger_updatable
    varchar, is_trigger_deletable varchar, is_trigger_insertable_into varchar
table_constraints 13411 v: constraint_catalog name, constraint_schema name, constraint_name name,
    table_catalog name, table_schema name, table_name name, constraint_type varchar, is_deferrable
    varchar, initially_deferred varchar, enforced varchar, nulls_distinct varchar
key_column_usage 13329 v: constraint_catalog name, constraint_schema name, constraint_name name,
    table_catalog name, table_schema name, table_name name, column_name name, ordinal_position
    int4, position_in_unique_constraint int4
referential_constraints 13339 v: constraint_catalog name, constraint_schema name, constraint_name
    name, unique_constraint_catalog name, unique_constraint_schema name, unique_constraint_name
    name, match_option varchar, update_rule varchar, delete_rule varchar
constraint_column_usage 13300 v: table_catalog name, table_schema name, table_name name,
    column_name name, constraint_catalog name, constraint_schema name, constraint_name name
"""
# Per session (TEMP tables behind pg_catalog views): the settings and the roles.
_SESSION_RELATIONS = frozenset({"pg_settings", "pg_roles", "pg_user", "pg_cursors"})
# Functions answered from the session alone (dpproxy serve gives the pid, the cancel hook and the
# cursors): pg_backend_pid(), pg_cancel_backend(pid), and pg_show_all_settings() in FROM.
_SESSION_FUNCTIONS = frozenset({"set_config", "pg_backend_pid", "pg_cancel_backend"})
_ALWAYS_EMPTY = frozenset(
    {"pg_stats", "pg_statistic", "pg_stat_user_tables", "pg_stat_all_tables"}
)  # statistics: data-dependent by nature, so never a row

_DUCK_TYPE: Final = {
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
_TYPE_ALIASES: Final = {
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
_REG_TYPES: Final = {"regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure"}
_TEXT_TYPES: Final = {"text", "varchar", "name", "bpchar", "char"}
_SCHEMA_TYPES: Final = {
    ColumnType.FLOAT: "float8",
    ColumnType.TEXT: "text",
    ColumnType.BOOLEAN: "bool",
    ColumnType.DATE: "date",
}
_INT4 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True, slots=True)
class _Type:
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


def _array_type(elem: _Type, oid: int) -> _Type:
    """The array type of ``elem`` (PostgreSQL's ``_elem``)."""
    return replace(
        elem, oid=oid, name="_" + elem.name, len=-1, byval=False, kind="b", category="A",
        preferred=False, elem=elem.oid, array=0, align="d" if elem.align == "d" else "i",
        storage="x", input="array_in", display=elem.display + "[]", relid=0,
    )  # fmt: skip


def _system_types() -> list[_Type]:
    """The base types of :data:`_TYPES` and their array types."""
    out: list[_Type] = []
    for line in _TYPES.strip().splitlines():
        f = line.split(" ", 9)
        flags, storage = f[3], f[6]
        base = _Type(
            oid=int(f[0]), name=f[1], len=int(f[2]), byval=flags[0] == "t", kind=flags[1],
            category=flags[2], preferred=flags.endswith("*"), elem=int(f[4]), array=int(f[5]),
            align=storage[0], storage=storage[1], input=f[7], collation=int(f[8]),
            display=f[9] if len(f) > 9 else f[1],
        )  # fmt: skip
        out.append(base)
        if base.array:
            out.append(_array_type(base, base.array))
    return out


def _specs(text: str) -> Iterator[tuple[str, int, str, list[tuple[str, str]]]]:
    """Parse :data:`_PG_CATALOG`-style text: (name, oid, relkind, [(column, pg type)])."""
    for entry in re.split(r"\n(?=\S)", text.strip()):
        head, body = entry.split(":", 1)
        name, oid, kind = head.split()
        cols = [tuple(c.split()) for c in " ".join(body.split()).split(", ")]
        yield name, int(oid), kind, [(c[0], c[1]) for c in cols]


def _duck_type(pg: str) -> str:
    if pg.startswith("_"):
        return _duck_type(pg[1:]) + "[]"
    return _DUCK_TYPE.get(pg, "VARCHAR")


# ------------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class _Relation:
    name: str
    schema: str  # "pgc" (pg_catalog), "pgis" (information_schema) or "public"
    oid: int
    kind: str
    columns: tuple[tuple[str, str], ...]  # (name, pg type)
    notnull: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class _Model:
    """Everything the emulation database holds, as Python rows: a function of the schema."""

    relations: dict[str, list[tuple[object, ...]]]
    specs: dict[tuple[str, str], _Relation]
    types: list[_Type]
    regclass: dict[tuple[str, str], int]  # (namespace name, relation) → oid
    regtype: dict[str, int]  # every spelling of a type name → oid
    user_oid: int  # the session user's role (the owner, dpproxy, is 10)


_NAMESPACES = {
    "pg_catalog": NS_CATALOG,
    "pg_toast": NS_TOAST,
    "public": NS_PUBLIC,
    "information_schema": NS_INFO,
}
_NS_OF_SCHEMA = {"pgc": NS_CATALOG, "pgis": NS_INFO, "public": NS_PUBLIC}
_NS_NAME = {v: k for k, v in _NAMESPACES.items()}
_DEFAULTS = {
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


def _schema_pg_type(ctype: ColumnType, lower: object, upper: object) -> str:
    """integer → int4, or int8 when a declared bound does not fit in 32 bits."""
    if ctype is not ColumnType.INTEGER:
        return _SCHEMA_TYPES[ctype]
    for b in (lower, upper):
        if b is not None and not _INT4[0] <= b <= _INT4[1]:  # type: ignore[operator]
            return "int8"
    return "int4"


def _build_model(catalog: Catalog, database: str) -> _Model:
    types = _system_types()
    rels: list[_Relation] = []
    for schema, text in (("pgc", _PG_CATALOG), ("pgis", _INFORMATION_SCHEMA)):
        for name, oid, kind, cols in _specs(text):
            rels.append(_Relation(name, schema, oid, kind, tuple(cols)))
    next_oid = DATABASE_OID + 1
    for table in catalog.tables:
        schema_cols = tuple(
            (c.name, _schema_pg_type(c.type, c.lower, c.upper)) for c in table.columns
        )
        rel = _Relation(
            table.name,
            "public",
            next_oid,
            "r",
            schema_cols,
            tuple(not c.nullable for c in table.columns),
        )
        rels.append(rel)
        row_type = _Type(
            oid=next_oid + 2, name=table.name, len=-1, byval=False, kind="c", category="C",
            preferred=False, elem=0, array=next_oid + 1, align="d", storage="x",
            input="record_in", collation=0, display=table.name, relid=next_oid,
            namespace=NS_PUBLIC,
        )  # fmt: skip
        types += [row_type, _array_type(row_type, next_oid + 1)]
        next_oid += 3
    by_name = {t.name: t for t in types}
    rowtype = {t.relid: t.oid for t in types if t.relid}
    specs = {(r.schema, r.name): r for r in rels}
    rows: dict[str, list[dict[str, object]]] = {r.name: [] for r in rels if r.schema != "public"}

    def add(rel: str, **values: object) -> None:
        rows[rel].append(values)

    for nsp, oid in _NAMESPACES.items():
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
    for nsp in _NAMESPACES:
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
    for i, name in enumerate(sorted(set(_MACROS) - _HIDDEN_MACROS)):
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
            if rel.name in _ALWAYS_EMPTY | _SESSION_RELATIONS
            else [tuple(r.get(c, _DEFAULTS.get(t)) for c, t in rel.columns) for r in rows[rel.name]]
        )
    regclass = {(_NS_NAME[_NS_OF_SCHEMA[r.schema]], r.name): r.oid for r in rels}
    regtype: dict[str, int] = {}
    for t in types:
        for spelling in (t.name, t.display, "pg_catalog." + t.name):
            regtype.setdefault(spelling.lower(), t.oid)
    for alias, name in _TYPE_ALIASES.items():
        regtype[alias] = by_name[name].oid
        regtype[alias + "[]"] = by_name[name].array
    return _Model(out, specs, types, regclass, regtype, next_oid)


# ------------------------------------------------------------------------- DuckDB database

# Emulated functions, as DuckDB macros in schema pgc (pgis for information_schema's). Every
# function a client may call is listed here, in _LITERALS, or in _BUILTINS/_FUNCTION_CLASSES.
_NULL_TEXT = "CAST(NULL AS VARCHAR)"


def _lookup(value: str, table: str, where: str) -> str:
    """A scalar lookup in a hidden helper table (see :func:`_helper_tables`).

    Hygiene by naming: the helper's columns (``__oid``, ``__name``...) and alias (``__x``)
    cannot occur in a client's query, so a macro argument such as ``c.oid`` or ``oid`` always
    means the caller's column, never the looked-up row's.
    """
    return f"(SELECT {value} FROM {table} __x WHERE {where})"


_MACROS: Final = {
    "format_type": "(t, m) AS CASE WHEN t IS NOT NULL THEN coalesce("
    + _lookup(
        "__x.__display || CASE WHEN __x.__modkind = 'len' AND m >= 4"
        " THEN '(' || CAST(m - 4 AS VARCHAR) || ')' WHEN __x.__modkind = 'numeric' AND m >= 4"
        " THEN '(' || CAST((m - 4) // 65536 AS VARCHAR) || ',' || CAST((m - 4) % 65536 AS"
        " VARCHAR) || ')' ELSE '' END",
        "pgc.__type",
        "__x.__oid = t",
    )
    + ", '???') END",
    "pg_get_userbyid": "(r) AS coalesce("
    + _lookup("__x.__name", "temp.main.__role", "__x.__oid = r")
    + ", 'unknown (OID=' || CAST(r AS VARCHAR) || ')')",
    "pg_table_is_visible": "(o) AS " + _lookup("__x.__visible", "pgc.__rel", "__x.__oid = o"),
    "pg_type_is_visible": "(o) AS " + _lookup("__x.__visible", "pgc.__type", "__x.__oid = o"),
    "pg_function_is_visible": "(o) AS " + _lookup("true", "pgc.__proc", "__x.__oid = o"),
    "pg_collation_is_visible": "(o) AS o IN (100, 950, 951)",
    # pg_description is empty: the privacy schema has no comments
    "obj_description": f"(o) AS {_NULL_TEXT}, (o, c) AS {_NULL_TEXT}",
    "col_description": f"(r, n) AS {_NULL_TEXT}",
    "shobj_description": f"(o, c) AS {_NULL_TEXT}",
    "pg_encoding_to_char": "(e) AS CASE e WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END",
    "has_table_privilege": "(t, p) AS contains(upper(p), 'SELECT'),"
    " (u, t, p) AS contains(upper(p), 'SELECT')",
    "has_column_privilege": "(t, c, p) AS contains(upper(p), 'SELECT'),"
    " (u, t, c, p) AS contains(upper(p), 'SELECT')",
    "has_schema_privilege": "(s, p) AS contains(upper(p), 'USAGE'),"
    " (u, s, p) AS contains(upper(p), 'USAGE')",
    "has_database_privilege": "(d, p) AS contains(upper(p), 'CONNECT'),"
    " (u, d, p) AS contains(upper(p), 'CONNECT')",
    "pg_has_role": "(r, p) AS true, (u, r, p) AS true",
    "pg_get_expr": f"(e, r) AS {_NULL_TEXT}, (e, r, p) AS {_NULL_TEXT}",
    "pg_get_indexdef": f"(i) AS {_NULL_TEXT}, (i, c, p) AS {_NULL_TEXT}",
    "pg_get_constraintdef": f"(c) AS {_NULL_TEXT}, (c, p) AS {_NULL_TEXT}",
    "pg_get_viewdef": f"(v) AS {_NULL_TEXT}, (v, p) AS {_NULL_TEXT}",
    "pg_get_triggerdef": f"(t) AS {_NULL_TEXT}, (t, p) AS {_NULL_TEXT}",
    "pg_get_ruledef": f"(r) AS {_NULL_TEXT}, (r, p) AS {_NULL_TEXT}",
    "pg_get_partkeydef": f"(o) AS {_NULL_TEXT}",
    "pg_get_function_result": f"(f) AS {_NULL_TEXT}",
    "pg_get_function_arguments": f"(f) AS {_NULL_TEXT}",
    "pg_get_function_identity_arguments": f"(f) AS {_NULL_TEXT}",
    "pg_get_statisticsobjdef_columns": f"(o) AS {_NULL_TEXT}",
    "pg_get_serial_sequence": f"(t, c) AS {_NULL_TEXT}",
    "pg_tablespace_location": f"(o) AS {_NULL_TEXT}",
    "pg_relation_is_publishable": "(o) AS false",
    "pg_is_in_recovery": "() AS false",
    "pg_is_wal_replay_paused": "() AS false",
    # sizes depend on the data: unknown (NULL), as for a relation PostgreSQL cannot see
    "pg_table_size": "(o) AS CAST(NULL AS BIGINT)",
    "pg_relation_size": "(o) AS CAST(NULL AS BIGINT), (o, f) AS CAST(NULL AS BIGINT)",
    "pg_total_relation_size": "(o) AS CAST(NULL AS BIGINT)",
    "pg_indexes_size": "(o) AS CAST(NULL AS BIGINT)",
    "pg_database_size": "(d) AS CAST(NULL AS BIGINT)",
    "pg_size_pretty": "(b) AS CASE WHEN abs(b) < 10240 THEN CAST(b AS VARCHAR) || ' bytes'"
    " WHEN abs(b) < 10485760 THEN CAST(round(b / 1024) AS BIGINT) || ' kB'"
    " ELSE CAST(round(b / 1048576) AS BIGINT) || ' MB' END",
    "current_setting": "(n) AS "
    + _lookup("__x.__value", "temp.main.__setting", "__x.__key = lower(n)")
    + ", (n, m) AS "
    + _lookup("__x.__value", "temp.main.__setting", "__x.__key = lower(n)"),
    "current_schemas": "(b) AS CASE WHEN b THEN ['pg_catalog', 'public'] ELSE ['public'] END",
    "array_upper": "(a, d) AS CASE WHEN d = 1 AND len(a) > 0 THEN len(a) END",
    "array_lower": "(a, d) AS CASE WHEN d = 1 AND len(a) > 0 THEN 1 END",
    "quote_ident": "(s) AS CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s"
    " ELSE '\"' || replace(s, '\"', '\"\"') || '\"' END",
    "to_regclass": "(t) AS " + _lookup("__x.__oid", "pgc.__regclass", "__x.__name = lower(t)"),
    "to_regtype": "(t) AS " + _lookup("__x.__oid", "pgc.__regtype", "__x.__name = lower(trim(t))"),
    "to_regnamespace": "(t) AS " + _lookup("__x.__oid", "pgc.__ns", "__x.__name = t"),
    "to_regrole": "(t) AS " + _lookup("__x.__oid", "temp.main.__role", "__x.__name = t"),
    "to_regproc": "(t) AS " + _lookup("__x.__name", "pgc.__proc", "__x.__name = t"),
    # output functions of the reg* types (the value is an oid; its text is a name)
    "regclass_out": "(o) AS CASE WHEN o = 0 THEN '-' ELSE coalesce("
    + _lookup("__x.__out", "pgc.__rel", "__x.__oid = o")
    + ", CAST(o AS VARCHAR)) END",
    "regtype_out": "(o) AS CASE WHEN o = 0 THEN '-' ELSE coalesce("
    + _lookup("__x.__display", "pgc.__type", "__x.__oid = o")
    + ", CAST(o AS VARCHAR)) END",
    "regnamespace_out": "(o) AS CASE WHEN o = 0 THEN '-' ELSE coalesce("
    + _lookup("__x.__name", "pgc.__ns", "__x.__oid = o")
    + ", CAST(o AS VARCHAR)) END",
    "regrole_out": "(o) AS CASE WHEN o = 0 THEN '-' ELSE coalesce("
    + _lookup("__x.__name", "temp.main.__role", "__x.__oid = o")
    + ", CAST(o AS VARCHAR)) END",
}
_INFO_MACROS: Final = {
    "_pg_expandarray": "(a) AS unnest(list_transform(generate_series(1, len(a)),"
    " lambda i: {'x': a[i], 'n': CAST(i AS INTEGER)}))",
}
_HIDDEN_MACROS: Final = {"regclass_out", "regtype_out", "regnamespace_out", "regrole_out"}
# Session constants, inlined as literals: (function or keyword) → settings key or attribute.
_LITERALS: Final = {
    "version": "version",
    "current_database": "database",
    "current_catalog": "database",
    "current_schema": "schema",
    "current_user": "user",
    "session_user": "user",
    "current_role": "user",
    "user": "user",
}
_LITERAL_CLASSES: Final = {
    exp.CurrentVersion: "version",
    exp.CurrentSchema: "schema",
    exp.CurrentDatabase: "database",
    exp.CurrentCatalog: "database",
    exp.CurrentUser: "user",
    exp.SessionUser: "user",
    exp.CurrentRole: "user",
}
# DuckDB functions with PostgreSQL's meaning, callable by name.
_BUILTINS: Final = frozenset(
    {
        "array_to_string",
        "generate_subscripts",
        "unnest",
        "string_agg",
        "array_length",
        "cardinality",
        "btrim",
        "ltrim",
        "rtrim",
        "lpad",
        "rpad",
        "strpos",
        "starts_with",
        "translate",
        "reverse",
        "repeat",
        "json_build_object",
        "now",
    }
)
_FUNCTION_CLASSES: Final = tuple(
    getattr(exp, n)
    for n in (
        "And",
        "Or",
        "Xor",
        "Not",
        "Cast",
        "TryCast",
        "Case",
        "If",
        "Collate",
        "Coalesce",
        "Nullif",
        "Greatest",
        "Least",
        "Count",
        "Sum",
        "Min",
        "Max",
        "Avg",
        "ArrayAgg",
        "GroupConcat",
        "LogicalAnd",
        "LogicalOr",
        "RowNumber",
        "Rank",
        "DenseRank",
        "Lower",
        "Upper",
        "Length",
        "Substring",
        "Concat",
        "ConcatWs",
        "Trim",
        "Replace",
        "StrPosition",
        "Left",
        "Right",
        "SplitPart",
        "Abs",
        "Round",
        "Floor",
        "Ceil",
        "RegexpLike",
        "RegexpILike",
        "Array",
        "ArraySize",
        "ArrayToString",
        "StringToArray",
        "Explode",
        "Unnest",
        "ExplodingGenerateSeries",
        "GenerateSeries",
        "Exists",
        "CurrentTimestamp",
        "CurrentDate",
        "CurrentTime",
        "JSONObject",
        "Struct",
        "ArrayContains",
        "Initcap",
        "Pad",
        "Repeat",
        "Reverse",
        "StartsWith",
        "Translate",
    )
    if hasattr(exp, n)
) + tuple(_LITERAL_CLASSES)
_FORBIDDEN_NODES: Final = tuple(
    getattr(exp, n)
    for n in (
        "Insert",
        "Update",
        "Delete",
        "Merge",
        "Create",
        "Drop",
        "Alter",
        "Command",
        "Set",
        "Into",
        "Lock",
        "Copy",
        "TruncateTable",
        "Grant",
        "Use",
        "Pragma",
        "Transaction",
        "Commit",
        "Rollback",
        "LoadData",
        "Attach",
        "Detach",
        "Export",
        "Install",
    )
    if hasattr(exp, n)
)


_SHARED: dict[tuple[Catalog, str], tuple[_Model, duckdb.DuckDBPyConnection]] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 8  # distinct (schema, database name) pairs kept per process


def _shared_database(model_key: tuple[Catalog, str]) -> tuple[_Model, duckdb.DuckDBPyConnection]:
    """The emulation database of a schema, built once per process (≈ 0.1 s) and shared.

    Sessions use their own cursors on it; what differs per session (settings, the session
    user) lives in each cursor's TEMP tables. The shared part is read-only to clients: only
    catalog SELECTs ever run on it.
    """
    with _SHARED_LOCK:
        entry = _SHARED.get(model_key)
        if entry is None:
            model = _build_model(*model_key)
            entry = (model, _build_database(model))
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.pop(next(iter(_SHARED)))
            _SHARED[model_key] = entry
        return entry[0], entry[1].cursor()


def _build_database(model: _Model) -> duckdb.DuckDBPyConnection:
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
    _create_session_tables(con, model)
    tables: list[tuple[str, list[tuple[str, str]], list[tuple[object, ...]]]] = [
        (f'{schema}."{name}"', list(rel.columns), model.relations[name])
        for (schema, name), rel in model.specs.items()
        if schema != "public" and name not in _SESSION_RELATIONS
    ]
    tables += _helper_tables(model)
    for table, columns, rows in tables:
        con.execute(
            f"CREATE TABLE {table} ("
            + ", ".join(f'"{c}" {_duck_type(t)}' for c, t in columns)
            + ")"
        )
        _insert(con, table, columns, rows)
    for name in sorted(_SESSION_RELATIONS):
        con.execute(f'CREATE VIEW pgc."{name}" AS SELECT * FROM temp.main."{name}"')
    for name, body in _MACROS.items():
        con.execute(f"CREATE MACRO pgc.{name}{body}")
    for name, body in _INFO_MACROS.items():
        con.execute(f"CREATE MACRO pgis.{name}{body}")
    con.execute("SET lock_configuration = true")
    return con


_Rows = list[tuple[str, list[tuple[str, str]], list[tuple[object, ...]]]]


def _helper_tables(model: _Model) -> _Rows:
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
            [(oid, name) for name, oid in _NAMESPACES.items()],
        ),
        (
            "pgc.__proc",
            [("__oid", "oid"), ("__name", "text")],
            [(r[0], r[1]) for r in model.relations["pg_proc"]],
        ),
    ]


def _insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[object]],
) -> None:
    """Insert ``rows``: one list per column, unnested side by side (far faster than VALUES)."""
    if rows:
        select = ", ".join(
            f"CAST(unnest(${i + 1}) AS {_duck_type(t)})" for i, (_, t) in enumerate(columns)
        )
        con.execute(
            f"INSERT INTO {table} SELECT {select}",
            [[row[i] for row in rows] for i in range(len(columns))],
        )


def _create_session_tables(con: duckdb.DuckDBPyConnection, model: _Model) -> None:
    con.execute("CREATE TEMP TABLE __role (__oid UINTEGER, __name VARCHAR)")
    con.execute("CREATE TEMP TABLE __setting (__key VARCHAR, __value VARCHAR)")
    for name in sorted(_SESSION_RELATIONS):
        columns = model.specs["pgc", name].columns
        con.execute(
            f'CREATE TEMP TABLE "{name}" ('
            + ", ".join(f'"{c}" {_duck_type(t)}' for c, t in columns)
            + ")"
        )


def _session_roles(model: _Model, user: str) -> dict[int, str]:
    return {BOOTSTRAP_ROLE: "dpproxy"} | ({} if user == "dpproxy" else {model.user_oid: user})


def _store_roles(con: duckdb.DuckDBPyConnection, model: _Model, roles: Mapping[int, str]) -> None:
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
            rows.append(tuple(values.get(c, _DEFAULTS.get(t)) for c, t in columns))
        _insert(con, f'temp.main."{table}"', columns, rows)
    _insert(con, "temp.main.__role", [("__oid", "oid"), ("__name", "text")], list(roles.items()))


def _store_settings(
    con: duckdb.DuckDBPyConnection, model: _Model, settings: Mapping[str, tuple[str, str]]
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
    _insert(con, 'temp.main."pg_settings"', columns, rows)
    keyed = [(key, value) for key, (_, value) in settings.items()]
    _insert(con, "temp.main.__setting", [("__key", "text"), ("__value", "text")], keyed)


def _store_cursors(
    con: duckdb.DuckDBPyConnection, model: _Model, rows: Sequence[tuple[object, ...]]
) -> None:
    """pg_cursors: (name, statement, is_holdable, is_binary, is_scrollable, creation_time)."""
    con.execute('DELETE FROM temp.main."pg_cursors"')
    _insert(con, 'temp.main."pg_cursors"', model.specs["pgc", "pg_cursors"].columns, list(rows))


# ------------------------------------------------------------------------------- settings

_REPORTED: Final = (
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_transaction_read_only",
    "in_hot_standby",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
)


def _default_settings(version: str, user: str) -> dict[str, tuple[str, str]]:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    values = {
        "server_version": version,
        "server_version_num": f"{parts[0] * 10000 + parts[1]}",
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "application_name": "",
        "DateStyle": "ISO, MDY",
        "IntervalStyle": "postgres",
        "TimeZone": "UTC",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "is_superuser": "off",
        "session_authorization": user,
        "default_transaction_read_only": "on",
        "transaction_read_only": "on",
        "in_hot_standby": "off",
        "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed",
        "search_path": '"$user", public',
        "extra_float_digits": "1",
        "jit": "off",
        "max_identifier_length": "63",
        "lc_collate": "C",
        "lc_ctype": "C",
        "lc_messages": "C",
        "default_table_access_method": "heap",
        "block_size": "8192",
        "max_index_keys": "32",
        "bytea_output": "hex",
        "statement_timeout": "0",
        "lock_timeout": "0",
        "idle_in_transaction_session_timeout": "0",
        "client_min_messages": "notice",
        "row_security": "on",
        "timezone_abbreviations": "Default",
    }
    return {k.lower(): (k, v) for k, v in values.items()}


_SHOW_RE: Final = re.compile(
    r"SHOW\s+(?P<name>ALL|TIME\s+ZONE|TRANSACTION\s+ISOLATION\s+LEVEL|SESSION\s+AUTHORIZATION"
    r'|[A-Za-z_][\w.$]*|"[^"]+")\s*;?\s*\Z',
    re.I | re.S,
)
_SET_RE: Final = re.compile(
    r"SET\s+(?:(?:SESSION|LOCAL)\s+)?(?P<name>TIME\s+ZONE|[A-Za-z_][\w.$]*|\"[^\"]+\")"
    r"\s*(?:(?:=|\bTO\b)\s*)?(?P<value>.*?)\s*;?\s*\Z",
    re.I | re.S,
)
_RESET_RE: Final = re.compile(r"RESET\s+(?P<name>ALL|[A-Za-z_][\w.$]*)\s*;?\s*\Z", re.I | re.S)
_SHOW_ALIASES: Final = {
    "time zone": "timezone",
    "transaction isolation level": "transaction_isolation",
    "session authorization": "session_authorization",
}
_VALUE_ITEM: Final = re.compile(r"\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^,\s]+)\s*(?:,|\Z)")


def _strip_comments(sql: str) -> str:
    """``sql`` without leading/trailing whitespace and leading comments."""
    text = sql.strip()
    while True:
        if text.startswith("--"):
            text = text.partition("\n")[2].lstrip()
        elif text.startswith("/*") and "*/" in text:
            text = text.split("*/", 1)[1].lstrip()
        else:
            return text


def _setting_value(raw: str) -> str | None:
    """The value of ``SET x = raw`` as SHOW prints it; None for DEFAULT."""
    if raw.upper() in ("DEFAULT", "LOCAL DEFAULT"):
        return None
    items = []
    for m in _VALUE_ITEM.finditer(raw):
        item = m.group(1)
        items.append(item[1:-1].replace("''", "'") if item.startswith("'") else item)
    return ", ".join(items)


# -------------------------------------------------------------------------- the rewriting


def _pg_type_name(dt: exp.DataType) -> str:
    """The PostgreSQL name of a cast's target type, e.g. ``int4``, ``regclass``, ``_oid``."""
    if dt.this == exp.DataType.Type.ARRAY and dt.expressions:
        inner = dt.expressions[0]
        return "_" + _pg_type_name(inner) if isinstance(inner, exp.DataType) else "_text"
    if dt.this == exp.DataType.Type.USERDEFINED:
        kind = dt.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot | exp.Identifier) else str(kind)
        return _TYPE_ALIASES.get(name.lower(), name.lower())
    text = dt.sql(dialect="postgres").lower()
    text = re.sub(r"\(.*\)$", "", text).strip()
    return _TYPE_ALIASES.get(text, text)


def _pg_array(text: str) -> list[str | None] | None:
    """The elements of a one-dimensional PostgreSQL array literal ``{a,"b c",NULL}``."""
    if not (text.startswith("{") and text.endswith("}")) or "{" in text[1:-1]:
        return None
    items: list[str | None] = []
    for m in re.finditer(r'\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|\Z)', text[1:-1]):
        if m.start() == len(text) - 2 and not m.group(1):
            break
        item = m.group(1)
        if item.startswith('"'):
            items.append(re.sub(r"\\(.)", r"\1", item[1:-1]))
        else:
            items.append(None if item.upper() == "NULL" else item)
    return [] if text[1:-1].strip() == "" else items


def _split_name(text: str) -> list[str]:
    """``public."My Table"`` → ``['public', 'My Table']`` (unquoted parts lower-cased)."""
    return [
        p[1:-1].replace('""', '"') if p.startswith('"') else p.lower()
        for p in re.findall(r'"(?:[^"]|"")*"|[^.]+', text.strip())
    ]


def _call(schema: str, name: str, *args: exp.Expression) -> exp.Dot:
    return exp.Dot(
        this=exp.to_identifier(schema), expression=exp.Anonymous(this=name, expressions=list(args))
    )


def _text_literal(node: exp.Expression) -> str | None:
    """The string of a literal, possibly under casts to a text type; else None."""
    while isinstance(node, exp.Cast) and _pg_type_name(node.to) in _TEXT_TYPES:
        node = node.this
    return node.name if isinstance(node, exp.Literal) and node.is_string else None


def _output_name(node: exp.Expression) -> str | None:
    """The column name PostgreSQL gives a select-list item (None for ``*``)."""
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star):
        return None
    return _figure_colname(node)[0]


_FUNCTION_NAMES: Final = {
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.CurrentVersion: "version",
    exp.ArraySize: "array_length",
    exp.Explode: "unnest",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.Nullif: "nullif",
}


def _figure_colname(node: exp.Expression) -> tuple[str, int]:
    """PostgreSQL's FigureColname: (name, strength); 2 a real name, 1 a type or keyword."""
    if isinstance(node, exp.Alias):
        ident = node.args.get("alias")
        quoted = isinstance(ident, exp.Identifier) and ident.quoted
        return (node.alias if quoted else node.alias.lower()), 2
    if isinstance(node, exp.Column):
        return (node.name if node.this.args.get("quoted") else node.name.lower()), 2
    if isinstance(node, exp.Dot):
        return node.expression.name.lower(), 2
    if isinstance(node, exp.Paren | exp.Bracket):
        return _figure_colname(node.this)
    if isinstance(node, exp.Cast):
        name, strength = _figure_colname(node.this)
        return (name, strength) if strength > 1 else (_pg_type_name(node.to).lstrip("_"), 1)
    if isinstance(node, exp.Boolean):
        return "bool", 1
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        items = node.this.expressions
        return _figure_colname(items[0]) if items else ("?column?", 0)
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        name, strength = _figure_colname(default) if default is not None else ("case", 1)
        return (name, strength) if strength > 1 else ("case", 1)
    if isinstance(node, exp.If):
        return "case", 1
    if isinstance(node, exp.Array):
        return "array", 2 if node.find(exp.Select) else 1
    if isinstance(node, exp.Anonymous):
        return node.name.lower(), 2
    for cls, name in _FUNCTION_NAMES.items():
        if isinstance(node, cls):
            return name, 2
    if isinstance(node, exp.Func) and not isinstance(node, exp.Connector):
        return node.sql_name().lower(), 2
    return "?column?", 0


def _first_select(tree: exp.Expression) -> exp.Select | None:
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def _result_oid(duck: str, elem_array: Mapping[int, int]) -> int:
    """PostgreSQL type OID for a DuckDB result type."""
    if duck.endswith("[]"):
        return elem_array.get(_result_oid(duck[:-2], elem_array), 1009)
    if duck.startswith("DECIMAL"):
        return 1700
    return {
        "BOOLEAN": 16,
        "TINYINT": 21,
        "SMALLINT": 21,
        "INTEGER": 23,
        "BIGINT": 20,
        "UTINYINT": 21,
        "USMALLINT": 23,
        "UINTEGER": 26,
        "UBIGINT": 1700,
        "HUGEINT": 1700,
        "FLOAT": 700,
        "DOUBLE": 701,
        "VARCHAR": 25,
        "BLOB": 17,
        "DATE": 1082,
        "TIME": 1083,
        "TIMESTAMP": 1114,
        "TIMESTAMP WITH TIME ZONE": 1184,
        "INTERVAL": 1186,
        "UUID": 2950,
        "JSON": 114,
    }.get(duck, 25)


@dataclass(frozen=True, slots=True)
class _Translation:
    """A catalog query as DuckDB SQL, with PostgreSQL's output names and type hints."""

    sql: str
    names: tuple[str | None, ...]
    hints: tuple[int | None, ...]
    session_dependent: bool


class _Cache(Generic[_K, _V]):
    """A small thread-safe LRU map: clients send the same catalog queries on every connection."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_TREES: _Cache[str, exp.Expression] = _Cache(512)
_TRANSLATIONS: _Cache[tuple[object, ...], _Translation] = _Cache(512)


def _duck_error(e: duckdb.Error) -> DPProxyError:
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


_WIRE_AS_TEXT: Final = {"name": 19, "varchar": 1043}  # same bytes as text, text or binary
_NAME_FUNCTIONS: Final = frozenset({*_LITERALS, "pg_get_userbyid", "pg_encoding_to_char"}) - {
    "version"
}
_READ_ONLY_SETTINGS: Final = frozenset(
    {
        "server_version",
        "server_version_num",
        "server_encoding",
        "is_superuser",
        "session_authorization",
        "integer_datetimes",
        "max_identifier_length",
        "block_size",
        "lc_collate",
        "lc_ctype",
        "in_hot_standby",
        "max_index_keys",
        "transaction_read_only",
        "default_transaction_read_only",
    }
)
_OPERATORS: Final[dict[str, type[exp.Expression]]] = {
    "~": exp.RegexpLike,
    "~*": exp.RegexpILike,
    "=": exp.EQ,
    "<>": exp.NEQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    ">": exp.GT,
    "<=": exp.LTE,
    ">=": exp.GTE,
    "~~": exp.Like,
    "~~*": exp.ILike,
}


class CatalogEmulator:
    """One client session's view of the catalog: tables and columns of the privacy schema.

    Built from the :class:`Catalog` alone (see the module docstring for why nothing about the
    data can leak). Holds a DuckDB cursor on the schema's shared, read-only emulation database
    plus TEMP tables of its own, so one per connection is cheap; use it from one thread at a
    time (:meth:`interrupt` excepted). Session settings (``SET``, ``set_config``) live here:
    ``settings`` are the connection's startup parameters (``application_name``,
    ``client_encoding``, ``DateStyle``, ...), which ``RESET`` returns to.

    Typical use by a session: ``is_catalog_query(sql)`` or ``is_setting_command(sql)`` to
    route, then ``execute(sql, params)``; for the extended protocol ``describe(sql)`` and
    ``parameter_types(sql)`` answer Describe without running anything; ``parameter_status()``
    gives the ParameterStatus values to send after authentication.
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        server_version: str = "15.8",
        database: str = "dpproxy",
        user: str = "analyst",
        settings: Mapping[str, str] | None = None,
        backend_pid: int = 0,
        cancel_backend: Callable[[int], bool] | None = None,
        cursors: Callable[[], Sequence[tuple[object, ...]]] | None = None,
    ) -> None:
        self.catalog = catalog
        self.backend_pid = backend_pid  # the pid of BackendKeyData: pg_backend_pid()
        self._cancel_backend = cancel_backend  # pg_cancel_backend(pid): whether it signalled
        self._cursors = cursors  # the session's open cursors: rows of pg_cursors
        self.server_version = server_version
        self.database = database
        self.user = user
        self._model_key = (catalog, database)
        self._lock = threading.RLock()  # one DuckDB cursor: one statement at a time
        self._model, self._con = _shared_database(self._model_key)
        self._roles = _session_roles(self._model, user)
        self._settings = _default_settings(server_version, user)
        for name, value in (settings or {}).items():
            self._put(name, value)
        self._startup = dict(self._settings)
        _create_session_tables(self._con, self._model)
        _store_roles(self._con, self._model, self._roles)
        _store_settings(self._con, self._model, self._settings)
        specs = self._model.specs.values()
        self._column_types: dict[str, str] = {}
        for rel in specs:
            for c, t in rel.columns:
                self._column_types.setdefault(c, t)
        self._array_of = {t.oid: t.array for t in self._model.types if t.array}

    # ------------------------------------------------------------------------- public API

    def is_catalog_query(self, tree_or_sql: exp.Expression | str) -> bool:
        """Whether the statement only reads emulated catalog relations and allowed functions.

        True for ``SELECT 1``, ``SELECT version()``, psql's ``\\d`` queries and ``SHOW``;
        false for anything that names a schema table, an unknown relation or function, or is
        not a read (``SET`` is a setting command, see :meth:`is_setting_command`).
        """
        if isinstance(tree_or_sql, str):
            text = _strip_comments(tree_or_sql)
            if _SHOW_RE.match(text):
                return True
            try:
                tree = self._parse(tree_or_sql)
            except DPProxyError:
                return False
        else:
            tree = tree_or_sql
            if isinstance(tree, exp.Command) and tree.name.upper() == "SHOW":
                return True
        return self._check(tree) is None

    def is_setting_command(self, sql: str) -> bool:
        """Whether ``sql`` is ``SET``/``RESET`` (answered by :meth:`execute`, tag ``SET``)."""
        return re.match(r"(SET|RESET)\b", _strip_comments(sql), re.I) is not None

    def execute(self, sql: str, params: Sequence[object] = ()) -> Result:
        """Answer a catalog query, ``SHOW``, ``SET`` or ``RESET``; ``params`` bind ``$1``...

        Parameters are Python values or the text of a text-format Bind value (as for an
        untyped literal). Raises a :class:`DPProxyError` with a PostgreSQL SQLSTATE. Safe to
        call from several threads (calls are serialized), though one emulator per session is
        the intended use: settings changed here are the emulator's.
        """
        with self._lock:
            return self._execute(sql, params)

    def _execute(self, sql: str, params: Sequence[object]) -> Result:
        text = _strip_comments(sql)
        if m := _SHOW_RE.match(text):
            return self._show(m["name"])
        if self.is_setting_command(text):
            return self._set(text)
        tree = self._parse(sql)
        problem = self._check(tree)
        if problem is not None:
            raise problem
        if self._cursors is not None and "pg_cursors" in text.lower():
            _store_cursors(self._con, self._model, self._cursors())
        before = dict(self._settings)
        try:
            result = self._run(sql, tree, params, apply=True)
        except BaseException:
            self._settings = before
            raise
        if self._settings != before:
            _store_settings(self._con, self._model, self._settings)
        return result

    def describe(self, sql: str) -> list[tuple[str, int]]:
        """The result columns of ``sql`` (name, type OID), without side effects.

        The statement is bound (DuckDB ``DESCRIBE``), never evaluated, with NULL for every
        parameter; ``set_config`` is not applied.
        """
        with self._lock:
            return self._describe(sql)

    def _describe(self, sql: str) -> list[tuple[str, int]]:
        text = _strip_comments(sql)
        if m := _SHOW_RE.match(text):
            return self._show(m["name"], describe=True).columns
        if self.is_setting_command(text):
            return []
        tree = self._parse(sql)
        problem = self._check(tree)
        if problem is not None:
            raise problem
        count = max(
            (int(p.name) for p in tree.find_all(exp.Parameter) if p.name.isdigit()), default=0
        )
        before = dict(self._settings)
        try:
            return self._run(sql, tree, [None] * count, apply=False).columns
        finally:
            self._settings = before

    def parameter_types(self, sql: str) -> list[int]:
        """Type OIDs for ``$1``... (ParameterDescription): from casts and compared columns."""
        text = _strip_comments(sql)
        if _SHOW_RE.match(text) or self.is_setting_command(text):
            return []
        tree = self._parse(sql)
        found: dict[int, int] = {}
        for p in tree.find_all(exp.Parameter):
            if not p.name.isdigit():
                continue
            oid, parent = 25, p.parent
            if isinstance(parent, exp.Cast):
                oid = self._model.regtype.get(_pg_type_name(parent.to).lstrip("_"), 25)
                if _pg_type_name(parent.to).startswith("_"):
                    oid = self._array_of.get(oid, 1009)
            elif isinstance(parent, exp.Binary | exp.In):
                other = parent.this if parent.this is not p else parent.args.get("expression")
                if isinstance(other, exp.Column) and other.name in self._column_types:
                    pg = self._column_types[other.name]
                    oid = self._model.regtype.get(pg, 25) if not pg.startswith("_") else 25
            found.setdefault(int(p.name), oid)
        return [found.get(i, 25) for i in range(1, max(found, default=0) + 1)]

    def parameter_status(self) -> dict[str, str]:
        """The settings a server reports in ParameterStatus messages, as now set."""
        with self._lock:
            return {name: self._settings[name.lower()][1] for name in _REPORTED}

    def setting(self, name: str) -> str | None:
        """The current value of a setting, or None if it is unknown."""
        with self._lock:
            entry = self._settings.get(name.lower())
            return entry[1] if entry else None

    def interrupt(self) -> None:
        """Cancel the statement running in :meth:`execute` (from another thread), e.g. on a
        CancelRequest or a statement timeout; that call then raises 57014."""
        self._con.interrupt()

    def close(self) -> None:
        """Release this session's cursor (the shared database stays for other sessions)."""
        with self._lock:
            self._con.close()

    # ------------------------------------------------------------------------- SHOW / SET

    def _show(self, raw: str, *, describe: bool = False) -> Result:
        key = " ".join(raw.strip('"').lower().split())
        key = _SHOW_ALIASES.get(key, key)
        if key == "all":
            rows = [
                (n, v, None) for n, v in sorted(self._settings.values(), key=lambda e: e[0].lower())
            ]
            cols = [("name", 25), ("setting", 25), ("description", 25)]
            return Result(cols, [] if describe else list(rows), "SHOW")
        entry = self._settings.get(key)
        if entry is None:
            raise InvalidParameter(f'unrecognized configuration parameter "{raw}"')
        return Result([(entry[0], 25)], [] if describe else [(entry[1],)], "SHOW")

    def _set(self, text: str) -> Result:
        if re.match(r"SET\s+(SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b", text, re.I):
            return Result([], [], "SET")  # read committed, read only: nothing to change
        if re.match(r"SET\s+((SESSION|LOCAL)\s+)?(ROLE|SESSION\s+AUTHORIZATION)\b", text, re.I):
            raise Forbidden("dpproxy does not allow changing the role")
        if m := _RESET_RE.match(text):
            name = m["name"].lower()
            if name == "all":
                self._settings = dict(self._startup)
            elif name in self._startup:
                self._check_settable(name)
                self._settings[name] = self._startup[name]
            _store_settings(self._con, self._model, self._settings)
            return Result([], [], "RESET")
        m = _SET_RE.match(text)
        if m is None or not m["value"]:
            raise SQLSyntaxError("syntax error in SET")
        name = " ".join(m["name"].strip('"').split())
        name = "TimeZone" if name.lower() == "time zone" else name
        self._check_settable(name.lower())
        value = _setting_value(m["value"])
        if value is None:
            self._settings.pop(name.lower(), None)
            if name.lower() in self._startup:
                self._settings[name.lower()] = self._startup[name.lower()]
        else:
            self._put(name, value)
        _store_settings(self._con, self._model, self._settings)
        return Result([], [], "SET")

    @staticmethod
    def _check_settable(key: str) -> None:
        if key in _READ_ONLY_SETTINGS:
            raise InvalidParameter(f'parameter "{key}" cannot be changed')

    def _put(self, name: str, value: str) -> None:
        key = name.lower()
        display = self._settings[key][0] if key in self._settings else name
        self._settings[key] = (display, value)

    def _constant(self, key: str) -> str | None:
        if key == "version":
            return f"PostgreSQL {self.server_version} (dpproxy) on x86_64-pc-linux-gnu, 64-bit"
        if key == "database":
            return self.database
        if key == "user":
            return self.user
        path = _setting_value(self._settings["search_path"][1]) or ""
        for item in path.split(","):
            schema = item.strip().strip('"')
            if schema in _NAMESPACES:
                return schema
        return None

    # ------------------------------------------------------------------------ validation

    @staticmethod
    def _parse(sql: str) -> exp.Expression:
        """One statement, parsed once per process (the tree is shared: never mutate it)."""
        tree = _TREES.get(sql)
        if tree is None:
            tree = CatalogEmulator._parse_uncached(sql)
            _TREES.put(sql, tree)
        return tree

    @staticmethod
    def _parse_uncached(sql: str) -> exp.Expression:
        trees = parse_statements(sql, _Postgres)  # within sql/parse.py's limits
        if len(trees) != 1 or not isinstance(trees[0], exp.Expression):
            raise UnsupportedQuery("send one catalog statement at a time")
        return trees[0]

    def _check(self, tree: exp.Expression) -> DPProxyError | None:
        """Why ``tree`` is not a catalog query (an error to raise), or None if it is one."""
        if not isinstance(tree, exp.Select | exp.SetOperation):
            return UnsupportedQuery("only SELECT and SHOW are answered from the catalog")
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for node in tree.walk():
            problem: DPProxyError | None = None
            if isinstance(node, _FORBIDDEN_NODES) or (
                isinstance(node, exp.Select) and (node.args.get("into") or node.args.get("locks"))
            ):
                problem = Forbidden("catalog queries may only read")
            elif isinstance(node, exp.Table):
                problem = self._check_table(node, ctes)
            elif isinstance(node, exp.Operator) and _operator_class(node) is None:
                problem = UndefinedFunction("operator does not exist in catalog queries")
            elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
                schema = node.this.name.lower() if isinstance(node.this, exp.Identifier) else ""
                fn = node.expression.name.lower()
                if schema != "pg_catalog" and not (
                    schema == "information_schema" and fn in _INFO_MACROS
                ):
                    problem = UndefinedFunction(f"function {node.sql()}() does not exist")
            elif isinstance(node, exp.Anonymous):
                name = node.name.lower()
                if name in _HIDDEN_MACROS or not (
                    name in _MACROS
                    or name in _INFO_MACROS
                    or name in _LITERALS
                    or name in _BUILTINS
                    or name in _SESSION_FUNCTIONS
                    or (name == "pg_show_all_settings" and isinstance(node.parent, exp.Table))
                ):
                    problem = UndefinedFunction(f"function {name}() does not exist")
            elif isinstance(node, exp.Func) and not isinstance(node, _FUNCTION_CLASSES):
                problem = UndefinedFunction(
                    f"function {node.sql_name().lower()}() is not available in catalog queries"
                )
            elif isinstance(node, exp.Column) and node.args.get("db") is not None:
                if node.db.lower() not in ("pg_catalog", "information_schema"):
                    problem = UnsupportedQuery("only catalog relations can be queried here")
            if problem is not None:
                return problem
        return None

    def _check_table(self, node: exp.Table, ctes: set[str]) -> DPProxyError | None:
        schema, name = node.db.lower(), node.name.lower()
        if node.catalog and node.catalog.lower() != self.database.lower():
            return UnsupportedQuery("cross-database references are not implemented")
        if isinstance(node.this, exp.Func):
            ok = schema in ("", "pg_catalog")
            return None if ok else UndefinedFunction(f"function {node.sql()} does not exist")
        if not schema and name in ctes:
            return None
        if schema in ("", "pg_catalog") and ("pgc", name) in self._model.specs:
            return None
        if schema == "information_schema" and ("pgis", name) in self._model.specs:
            return None
        if schema in ("pg_catalog", "information_schema") or name.startswith("pg_"):
            return UndefinedTable(f'relation "{node.sql(dialect="postgres")}" does not exist')
        return UnsupportedQuery("a query over schema tables is not a catalog query")

    # --------------------------------------------------------------------- running

    def _translate(
        self, tree: exp.Expression, params: Sequence[object], apply: bool
    ) -> _Translation:
        first = _first_select(tree)
        projections = first.expressions if first is not None else []
        sources = self._sources(first) if first is not None else {}
        rewrite = _Rewrite(self, params, apply)
        rewritten = rewrite.tree(tree.copy())
        try:
            sql = rewritten.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
        except SqlglotError as e:
            raise UnsupportedQuery(
                "this catalog query is not supported", log_detail=str(e)
            ) from None
        return _Translation(
            sql,
            tuple(_output_name(p) for p in projections),
            tuple(self._type_hint(p.unalias(), sources) for p in projections),
            rewrite.session_dependent,
        )

    def _run(
        self, text: str, tree: exp.Expression, params: Sequence[object], *, apply: bool
    ) -> Result:
        key = (self._model_key, text, repr(list(params)), apply)
        translation = _TRANSLATIONS.get(key)
        if translation is None:
            translation = self._translate(tree, params, apply)
            if not translation.session_dependent:
                _TRANSLATIONS.put(key, translation)
        sql, names, hints = translation.sql, translation.names, translation.hints
        try:
            if apply:
                cursor = self._con.execute(sql)
                rows = cursor.fetchall()
                description = [(d[0], d[1]) for d in cursor.description or []]
            else:  # describe: bind only, evaluate nothing
                rows = []
                bound = self._con.execute("DESCRIBE " + sql).fetchall()
                description = [(r[0], r[1]) for r in bound]
        except duckdb.Error as e:
            raise _duck_error(e) from None
        stars = None in names or len(names) != len(description)
        columns: list[tuple[str, int]] = []
        for i, d in enumerate(description):
            oid = _result_oid(str(d[1]), self._array_of)
            name = str(d[0]) if stars else names[i] or str(d[0])
            # through * only the hints that travel as text either way (name, varchar)
            hint = _WIRE_AS_TEXT.get(self._column_types.get(name, "")) if stars else hints[i]
            if hint and (oid == 25 or (oid == 1009 and hint in (1002, 1003))):
                oid = hint
            columns.append((name, oid))
        return Result(columns, [tuple(r) for r in rows], f"SELECT {len(rows)}")

    def _sources(self, select: exp.Select) -> dict[str, _Relation]:
        """The catalog relations in ``select``'s FROM and JOINs, by alias."""
        out: dict[str, _Relation] = {}
        joins = select.args.get("joins") or []
        for source in (select.args.get("from_") or select.args.get("from"), *joins):
            table = source.this if isinstance(source, exp.From | exp.Join) else None
            if isinstance(table, exp.Table) and not isinstance(table.this, exp.Func):
                schema = "pgis" if table.db.lower() == "information_schema" else "pgc"
                rel = self._model.specs.get((schema, table.name.lower()))
                if rel is not None:
                    out[table.alias_or_name.lower()] = rel
        return out

    def _type_hint(self, node: exp.Expression, sources: Mapping[str, _Relation]) -> int | None:
        """The PostgreSQL type of a text result DuckDB only knows as VARCHAR: a catalog column
        of type name, "char" or varchar, a function returning name, or arrays of names."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Dot) and _is_function(node.expression):
            node = node.expression
        if isinstance(node, exp.Column):
            name = node.name.lower()
            if not node.table and name in _LITERALS:
                return 19  # the keywords user, current_user, ...
            rel = (
                sources.get(node.table.lower())
                if node.table
                else next(
                    (r for r in sources.values() if any(c == name for c, _ in r.columns)), None
                )
            )
            types = dict(rel.columns) if rel is not None else self._column_types
            return {"char": 18, **_WIRE_AS_TEXT}.get(types.get(name, ""))
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
            inner = node.this
            first = inner.expressions[0].unalias() if inner.expressions else None
            return self._type_hint(first, self._sources(inner)) if first is not None else None
        if isinstance(node, exp.Array | exp.ArrayAgg):
            sub = node.find(exp.Select)
            if isinstance(node, exp.ArrayAgg):
                hint = self._type_hint(node.this, sources)
            elif sub is not None and sub.expressions:
                hint = self._type_hint(sub.expressions[0].unalias(), self._sources(sub))
            else:
                hint = None
            return {19: 1003, 18: 1002}.get(hint or 0)
        if (
            isinstance(node, tuple(_LITERAL_CLASSES)) and not isinstance(node, exp.CurrentVersion)
        ) or (isinstance(node, exp.Anonymous) and node.name.lower() in _NAME_FUNCTIONS):
            return 19
        return None

    def _regclass(self, text: str) -> int:
        parts = _split_name(text)
        if parts and len(parts) == 3 and parts[0] == self.database.lower():
            parts = parts[1:]
        candidates: list[tuple[str, str]] = (
            [(parts[0], parts[1])]
            if len(parts) == 2
            else [("pg_catalog", parts[0]), ("public", parts[0])]
            if len(parts) == 1
            else []
        )
        for key in candidates:
            if key in self._model.regclass:
                return self._model.regclass[key]
        raise UndefinedTable(f'relation "{text}" does not exist')


def _is_function(node: object) -> TypeGuard[exp.Expression]:
    """A function call node (sqlglot 30's Func is not an Expression subclass, its calls are)."""
    return isinstance(node, exp.Func) and isinstance(node, exp.Expression)


def _value(v: object) -> exp.Expression:
    """A SQL literal for a bound parameter (text-format values behave as untyped literals)."""
    if v is None:
        return exp.Null()
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, int | float):
        return exp.Literal.number(v)
    if isinstance(v, bytes | bytearray):
        return exp.Literal.string(bytes(v).decode("utf-8", "replace"))
    if isinstance(v, list | tuple):
        return exp.Array(expressions=[_value(x) for x in v])
    return exp.Literal.string(str(v))


class _Rewrite:
    """One PostgreSQL catalog query → a DuckDB query over the emulation schemas."""

    def __init__(self, em: CatalogEmulator, params: Sequence[object], apply: bool) -> None:
        self.em = em
        self.params = params
        self.apply = apply  # whether set_config changes the session's settings
        self.session_dependent = False  # whether the result used settings or the user
        self.ctes: set[str] = set()

    def tree(self, tree: exp.Expression) -> exp.Expression:
        self.ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        out = self._walk(tree)
        # A reg* value in the final select list prints as a name, as PostgreSQL's output
        # function does; everywhere else it stays an oid (comparisons, joins).
        pending = [out]
        while pending:
            node = pending.pop()
            if isinstance(node, exp.SetOperation):
                pending += [node.this, node.expression]
            elif isinstance(node, exp.Subquery):
                pending.append(node.this)
            elif isinstance(node, exp.Select):
                for item in node.expressions:
                    inner = item.this if isinstance(item, exp.Alias) else item
                    reg = inner.meta.get("reg")
                    if reg in ("regclass", "regtype", "regnamespace", "regrole"):
                        inner.replace(_call("pgc", f"{reg}_out", inner.copy()))
        return out

    def _walk(self, node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Dot)
            and isinstance(node.this, exp.Identifier)
            and _is_function(node.expression)
            and node.this.name.lower() in ("pg_catalog", "information_schema")
        ):
            node = node.expression  # pg_catalog.f(...) → f(...)
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, self._walk(value))
            elif isinstance(value, list):
                node.set(
                    key, [self._walk(v) if isinstance(v, exp.Expression) else v for v in value]
                )
        return self._node(node)

    def _node(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            return self._param(node)
        if isinstance(node, exp.Collate):
            inner: exp.Expression = node.this
            return inner
        if isinstance(node, exp.Operator):
            return _operator(node)
        if isinstance(node, exp.Table):
            return self._table(node)
        if isinstance(node, exp.Unnest):
            _name_single_column(node)
            return node
        if isinstance(node, exp.Column):
            return self._column(node)
        for cls, key in _LITERAL_CLASSES.items():
            if isinstance(node, cls):
                return self._literal(key)
        if isinstance(node, exp.Anonymous):
            return self._function(node)
        if isinstance(node, exp.Cast):
            return self._cast(node)
        if isinstance(node, exp.EQ | exp.NEQ):
            return self._array_compare(node)
        if isinstance(node, exp.Any | exp.All):
            return self._untyped_array(node)
        return node

    def _literal(self, key: str) -> exp.Expression:
        self.session_dependent = True
        value = self.em._constant(key)
        return exp.Null() if value is None else exp.Literal.string(value)

    def _param(self, node: exp.Parameter) -> exp.Expression:
        n = int(node.name) if node.name.isdigit() else 0
        if not 1 <= n <= len(self.params):
            raise InvalidParameter(f"there is no parameter ${node.name}")
        return _value(self.params[n - 1])

    def _table(self, node: exp.Table) -> exp.Expression:
        if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == (
            "pg_show_all_settings"
        ):  # the function behind the view pg_settings: the session's settings
            self.session_dependent = True
            node.set("this", exp.to_identifier("pg_settings"))
            node.set("db", exp.to_identifier("pgc"))
            node.set("catalog", None)
            return node
        if isinstance(node.this, exp.Func):  # a set-returning function in FROM
            node.set("db", None)
            node.set("catalog", None)
            _name_single_column(node)
            return node
        name = node.name.lower()
        if not node.db and name in self.ctes:
            return node
        schema = "pgis" if node.db.lower() == "information_schema" else "pgc"
        node.set("this", exp.to_identifier(name))
        node.set("db", exp.to_identifier(schema))
        node.set("catalog", None)
        return node

    def _column(self, node: exp.Column) -> exp.Expression:
        if node.args.get("db") is not None:
            schema = "pgis" if node.db.lower() == "information_schema" else "pgc"
            node.set("db", exp.to_identifier(schema))
            node.set("catalog", None)
        elif (
            not node.table
            and not node.this.args.get("quoted")
            and node.name.lower()
            in (
                "user",
                "current_user",
                "session_user",
                "current_role",
                "current_catalog",
                "current_schema",
            )
        ):
            return self._literal(_LITERALS[node.name.lower()])  # keywords, not columns
        return node

    def _function(self, node: exp.Anonymous) -> exp.Expression:
        name, args = node.name.lower(), node.expressions
        if name in _LITERALS:
            return self._literal(_LITERALS[name])
        if name == "current_setting" and args and (key := _text_literal(args[0])) is not None:
            self.session_dependent = True
            entry = self.em._settings.get(key.lower())
            if entry is not None:
                return exp.Literal.string(entry[1])
            if len(args) > 1 and isinstance(args[1], exp.Boolean) and args[1].this is True:
                return exp.Null()
            raise InvalidParameter(f'unrecognized configuration parameter "{key}"')
        if name == "set_config":
            self.session_dependent = True
            key = _text_literal(args[0]) if len(args) == 3 else None
            value = _text_literal(args[1]) if key is not None else None
            if not self.apply:  # describe: only the type matters
                return exp.Cast(this=exp.Null(), to=exp.DataType.build("VARCHAR", dialect="duckdb"))
            if key is None or (value is None and not isinstance(args[1], exp.Null)):
                raise UnsupportedQuery("set_config takes constant arguments here")
            self.em._check_settable(key.lower())
            if value is None:  # NULL: back to the session's startup value
                self.em._settings.pop(key.lower(), None)
                if key.lower() in self.em._startup:
                    self.em._settings[key.lower()] = self.em._startup[key.lower()]
                value = self.em.setting(key) or ""
            else:
                self.em._put(key, value)
            return exp.Literal.string(value)
        if name == "pg_backend_pid":
            self.session_dependent = True
            return exp.Cast(
                this=exp.Literal.number(self.em.backend_pid),
                to=exp.DataType.build("INTEGER", dialect="duckdb"),
            )
        if name == "pg_cancel_backend":
            return self._cancel_backend(args)
        if name == "json_build_object":
            return exp.Anonymous(this="json_object", expressions=args)
        if name in _MACROS:
            return _call("pgc", name, *args)
        if name in _INFO_MACROS:
            return _call("pgis", name, *args)
        return node

    def _cancel_backend(self, args: list[exp.Expression]) -> exp.Expression:
        """``pg_cancel_backend(pid)``: true when that session's query was signalled (it
        belongs to the same user), false when there is no such session."""
        self.session_dependent = True
        boolean = exp.DataType.build("BOOLEAN", dialect="duckdb")
        if len(args) != 1:
            raise UndefinedFunction("function pg_cancel_backend() takes one pid")
        if not self.apply:  # describe: only the type matters
            return exp.Cast(this=exp.Null(), to=boolean)
        arg = args[0].unnest()
        while isinstance(arg, exp.Cast | exp.Paren):  # pg_backend_pid(), rewritten
            arg = arg.this
        if isinstance(arg, exp.Null):
            return exp.Cast(this=exp.Null(), to=boolean)
        if not (isinstance(arg, exp.Literal) and arg.name.lstrip("-").isdigit()):
            raise UnsupportedQuery("pg_cancel_backend takes a constant pid here")
        hook = self.em._cancel_backend
        done = hook(int(arg.name)) if hook is not None else False
        return exp.Boolean(this=done)

    def _untyped_array(self, node: exp.Expression) -> exp.Expression:
        """``relkind = ANY('{r,p}')``: an untyped array literal, typed as the compared column's
        array (text elements otherwise), as PostgreSQL resolves the unknown literal."""
        inner = node.this.unnest() if isinstance(node.this, exp.Expression) else None
        if not (isinstance(inner, exp.Literal) and inner.is_string):
            return node
        items = _pg_array(inner.name)
        if items is None:
            raise InvalidTextRepresentation(f'malformed array literal: "{inner.name}"')
        parent = node.parent
        other = parent.this if isinstance(parent, exp.Binary) else None
        pg = (
            self.em._column_types.get(other.name.lower(), "text")
            if isinstance(other, exp.Column)
            else "text"
        )
        pg = "text" if pg.startswith("_") or pg in ("int2vector", "oidvector") else pg
        array = exp.Array(
            expressions=[exp.Null() if i is None else exp.Literal.string(i) for i in items]
        )
        node.set(
            "this",
            exp.Cast(this=array, to=exp.DataType.build(_duck_type("_" + pg), dialect="duckdb")),
        )
        return node

    def _cast(self, node: exp.Cast) -> exp.Expression:
        target, inner = _pg_type_name(node.to), node.this
        if target in _REG_TYPES:
            return self._reg(inner, target)
        reg = inner.meta.get("reg")
        if reg in ("regclass", "regtype", "regnamespace", "regrole") and target in _TEXT_TYPES:
            return _call("pgc", f"{reg}_out", inner)
        literal = inner.unnest()  # a bound parameter arrives as ('{23,25}')::oid[]
        if target.startswith("_") and isinstance(literal, exp.Literal) and literal.is_string:
            items = _pg_array(literal.name)
            if items is not None:
                node.set(
                    "this",
                    exp.Array(
                        expressions=[
                            exp.Null() if i is None else exp.Literal.string(i) for i in items
                        ]
                    ),
                )
        base = target[1:] if target.startswith("_") else target
        if base in _DUCK_TYPE:
            node.set("to", exp.DataType.build(_duck_type(target), dialect="duckdb"))
        return node

    def _reg(self, inner: exp.Expression, target: str) -> exp.Expression:
        """``x::regclass`` and friends: an oid (a name for regproc), resolved here if constant."""
        text = _text_literal(inner)
        if target in ("regproc", "regprocedure"):
            if text is not None:
                return exp.Literal.string(re.sub(r"\(.*$", "", text).split(".")[-1].strip())
            return exp.Cast(this=inner, to=exp.DataType.build("VARCHAR", dialect="duckdb"))
        value: exp.Expression
        if text is not None:
            value = exp.Literal.number(
                int(text) if text.strip().isdigit() else self._resolve(text, target)
            )
        elif isinstance(inner, exp.Dot | exp.Anonymous | exp.DPipe | exp.Concat):
            value = _call("pgc", f"to_{target}", inner)  # a name computed at run time
        else:
            value = inner
        out = exp.Cast(this=value, to=exp.DataType.build("UINTEGER", dialect="duckdb"))
        out.meta["reg"] = target
        return out

    def _resolve(self, text: str, target: str) -> int:
        self.session_dependent |= target == "regrole"
        model = self.em._model
        if target == "regclass":
            return self.em._regclass(text)
        key = " ".join(text.strip().lower().split())
        found = {
            "regtype": model.regtype.get(key.removeprefix("pg_catalog.")),
            "regnamespace": _NAMESPACES.get(text.strip()),
            "regrole": {n: o for o, n in self.em._roles.items()}.get(text.strip()),
        }.get(target)
        if found is None:
            what = {"regtype": "type", "regnamespace": "schema", "regrole": "role"}[target]
            raise InvalidParameter(f'{what} "{text}" does not exist')
        return found

    def _array_compare(self, node: exp.Expression) -> exp.Expression:
        """``polroles = '{0}'``: a PostgreSQL array literal compared with an array column."""
        for lit, other in (
            (node.this, node.args.get("expression")),
            (node.args.get("expression"), node.this),
        ):
            if not (
                isinstance(lit, exp.Literal) and lit.is_string and isinstance(other, exp.Column)
            ):
                continue
            pg = self.em._column_types.get(other.name.lower(), "")
            items = _pg_array(lit.name)
            if items is not None and (pg.startswith("_") or pg in ("int2vector", "oidvector")):
                lit.replace(
                    exp.Cast(
                        this=exp.Array(
                            expressions=[
                                exp.Null() if i is None else exp.Literal.string(i) for i in items
                            ]
                        ),
                        to=exp.DataType.build(_duck_type(pg), dialect="duckdb"),
                    )
                )
        return node


def _operator_class(node: exp.Operator) -> tuple[type[exp.Expression], bool] | None:
    """The comparison class of ``OPERATOR(pg_catalog.~)`` and whether it is negated."""
    op = node.args.get("operator")
    text = op if isinstance(op, str) else op.name if isinstance(op, exp.Expression) else str(op)
    symbol = text.rsplit(".", 1)[-1]
    negate = symbol.startswith("!") and symbol != "!="
    cls = _OPERATORS.get(symbol[1:] if negate else symbol)
    return None if cls is None else (cls, negate)


def _operator(node: exp.Operator) -> exp.Expression:
    """``a OPERATOR(pg_catalog.~) b`` → ``a ~ b``."""
    found = _operator_class(node)
    if found is None:
        raise UndefinedFunction("operator does not exist in catalog queries")
    cls, negate = found
    out = cls(this=node.this, expression=node.expression)
    return exp.Not(this=out) if negate else out


def _name_single_column(node: exp.Expression) -> None:
    """``FROM unnest(x) AS u``: PostgreSQL names the one column after the alias; DuckDB not."""
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.name and not alias.columns:
        alias.set("columns", [exp.to_identifier(alias.name)])

"""The ``pg_catalog`` and ``information_schema`` relations of PostgreSQL 15, as spec text.

Data, not code: one entry per relation, ``name oid relkind: column type, ...``, read by
:func:`parse_specs`. :mod:`.model` turns the specs into rows, :mod:`.database` into DuckDB
tables (the per-session relations, :data:`SESSION_RELATIONS`, into TEMP tables of each
session's cursor, see :mod:`.session_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# pg_catalog / information_schema relations: "name oid relkind: column type, ..." with the
# columns of PostgreSQL 15 (information_schema domains as their base types).
PG_CATALOG = """
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
INFORMATION_SCHEMA = """
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
SESSION_RELATIONS = frozenset({"pg_settings", "pg_roles", "pg_user", "pg_cursors"})
ALWAYS_EMPTY = frozenset(
    {"pg_stats", "pg_statistic", "pg_stat_user_tables", "pg_stat_all_tables"}
)  # statistics: data-dependent by nature, so never a row


def parse_specs(text: str) -> Iterator[tuple[str, int, str, list[tuple[str, str]]]]:
    """Parse :data:`PG_CATALOG`-style text: (name, oid, relkind, [(column, pg type)])."""
    for entry in re.split(r"\n(?=\S)", text.strip()):
        head, body = entry.split(":", 1)
        name, oid, kind = head.split()
        cols = [tuple(c.split()) for c in " ".join(body.split()).split(", ")]
        yield name, int(oid), kind, [(c[0], c[1]) for c in cols]

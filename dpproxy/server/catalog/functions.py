"""The functions and operators a catalog query may call, and how each is answered.

Emulated functions are DuckDB macros (:data:`MACROS` in schema ``pgc``, :data:`INFO_MACROS` in
``pgis``) created by :mod:`.database`; session constants (:data:`LITERALS`) are inlined by
:mod:`.rewrite`; :data:`BUILTINS` and :data:`FUNCTION_CLASSES` are DuckDB's own functions with
PostgreSQL's meaning. :mod:`.validate` refuses any function or operator not listed here.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

# Emulated functions, as DuckDB macros in schema pgc (pgis for information_schema's). Every
# function a client may call is listed here, in LITERALS, or in BUILTINS/FUNCTION_CLASSES.
_NULL_TEXT = "CAST(NULL AS VARCHAR)"


def _lookup(value: str, table: str, where: str) -> str:
    """A scalar lookup in a hidden helper table (see :func:`.database._helper_tables`).

    Hygiene by naming: the helper's columns (``__oid``, ``__name``...) and alias (``__x``)
    cannot occur in a client's query, so a macro argument such as ``c.oid`` or ``oid`` always
    means the caller's column, never the looked-up row's.
    """
    return f"(SELECT {value} FROM {table} __x WHERE {where})"


MACROS: Final = {
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
INFO_MACROS: Final = {
    "_pg_expandarray": "(a) AS unnest(list_transform(generate_series(1, len(a)),"
    " lambda i: {'x': a[i], 'n': CAST(i AS INTEGER)}))",
}
HIDDEN_MACROS: Final = {"regclass_out", "regtype_out", "regnamespace_out", "regrole_out"}
# Session constants, inlined as literals: (function or keyword) → settings key or attribute.
LITERALS: Final = {
    "version": "version",
    "current_database": "database",
    "current_catalog": "database",
    "current_schema": "schema",
    "current_user": "user",
    "session_user": "user",
    "current_role": "user",
    "user": "user",
}
LITERAL_CLASSES: Final = {
    exp.CurrentVersion: "version",
    exp.CurrentSchema: "schema",
    exp.CurrentDatabase: "database",
    exp.CurrentCatalog: "database",
    exp.CurrentUser: "user",
    exp.SessionUser: "user",
    exp.CurrentRole: "user",
}
# DuckDB functions with PostgreSQL's meaning, callable by name.
BUILTINS: Final = frozenset(
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
FUNCTION_CLASSES: Final = tuple(
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
) + tuple(LITERAL_CLASSES)

# Functions answered from the session alone (dpproxy serve gives the pid, the cancel hook and the
# cursors): pg_backend_pid(), pg_cancel_backend(pid), and pg_show_all_settings() in FROM.
SESSION_FUNCTIONS = frozenset({"set_config", "pg_backend_pid", "pg_cancel_backend"})

# The operators a client may spell OPERATOR(pg_catalog.x), as the comparisons they are.
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


def operator_class(node: exp.Operator) -> tuple[type[exp.Expression], bool] | None:
    """The comparison class of ``OPERATOR(pg_catalog.~)`` and whether it is negated."""
    op = node.args.get("operator")
    text = op if isinstance(op, str) else op.name if isinstance(op, exp.Expression) else str(op)
    symbol = text.rsplit(".", 1)[-1]
    negate = symbol.startswith("!") and symbol != "!="
    cls = _OPERATORS.get(symbol[1:] if negate else symbol)
    return None if cls is None else (cls, negate)

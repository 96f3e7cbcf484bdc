"""A privacy schema drafted from a table's metadata, and a schema checked against the data's.

Pure: the shapes (table and column names, SQL types, NOT NULL, primary keys) are read by
``backends/shapes.py``; nothing here sees a row. A draft holds only what metadata proves:
names, types, nullability, and the primary key as the privacy unit (one row per unit). Every
decision that needs knowledge of the data's meaning is left to the data steward, marked ``TODO``:

- ``privacy_unit: TODO`` (a value) when no primary key names the unit: the draft does not load
  until it is replaced by a column, and ``schema check`` says so;
- ``# TODO`` comments for bounds (numeric columns), domains (text columns) and the rows per
  unit: the draft loads without them (a SUM over a column without bounds is refused, a GROUP BY
  over one without a domain selects its groups with DP), and ``schema check`` lists them.

Bounds and domains are never read from the data: publishing a bound computed from the data
would leak it (schemas/README.md). Those that ``schema init --dp-bounds`` released with DP
(``backends/steward.py``) are passed in and written with a comment saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.catalog.model import Catalog, ColumnType

TODO = "TODO"


@dataclass(frozen=True, slots=True)
class ColumnShape:
    """A column as the database declares it: its SQL type and whether it may hold NULL."""

    name: str
    sql_type: str
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class TableShape:
    """A table or view as the database declares it; ``primary_key`` only when it has a
    single-column PRIMARY KEY (or UNIQUE NOT NULL) constraint. ``exact``: the database
    compares names exactly (PostgreSQL: ``sql/pgnames.py``), not regardless of case."""

    name: str
    columns: tuple[ColumnShape, ...]
    primary_key: str | None = None
    exact: bool = False

    def column(self, name: str) -> ColumnShape | None:
        if self.exact:
            return next((c for c in self.columns if c.name == name), None)
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    def near(self, name: str) -> str:
        """`` (did you mean "X"?)`` for a column spelled otherwise, or ''."""
        return _near([c.name for c in self.columns], name) if self.exact else ""


def _near(names: list[str], name: str) -> str:
    low = name.lower()
    found = next((n for n in names if n.lower() == low), None)
    return f' (did you mean "{found}"?)' if found is not None and found != name else ""


def double_readable(catalog: Catalog) -> set[tuple[str, str]]:
    """(table, column), lower case, of the ``float`` columns of private tables that are read
    as DOUBLE (``sql/widenum.py``) when PostgreSQL or DuckDB types them :func:`wide_numeric`:
    not a unit column nor a key a unit is reached by (two values the conversion reads as
    one, 1e400 and 2e400, or 2^127 - 1 and 2^127 - 2, would be one unit)."""
    keys = {
        (t.name.lower(), c.lower())
        for t in catalog.tables
        for c in (t.privacy_unit, *t.unit_columns, t.unit_via.column if t.unit_via else None)
        if c
    } | {(t.unit_via.table.lower(), t.unit_via.key.lower()) for t in catalog.tables if t.unit_via}
    return {
        (t.name.lower(), c.name.lower())
        for t in catalog.tables
        if t.private
        for c in t.columns
        if c.type is ColumnType.FLOAT and (t.name.lower(), c.name.lower()) not in keys
    }


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One disagreement between the schema and the database, with its SQLSTATE."""

    sqlstate: str  # 42P01 undefined table, 42703 undefined column, 42804 datatype mismatch
    path: str  # the schema key path, as load.py reports it
    text: str


_INTEGER = re.compile(
    r"^(U?(TINYINT|SMALLINT|INTEGER|BIGINT)|INT[248]?|SERIAL|BIGSERIAL"
    r"|SMALLSERIAL|LONG|SHORT)$"
)
_FLOAT = re.compile(r"^(DOUBLE( PRECISION)?|FLOAT[48]?|REAL)(\(\d+\))?$")
_DECIMAL = re.compile(r"^(NUMERIC|DECIMAL)(\((\d+)(,\s*(-?\d+))?\))?$")
#: The digits of a DECIMAL(p, s) whose every value a REAL (and so a double) holds, nearly
#: exactly, and that PostgreSQL converts to one: ``numeric_float8`` and ``numeric_float4``
#: parse the decimal text and raise 22003 beyond the type's range (±1.8e308, ±3.4e38) or for
#: a nonzero value that rounds to 0 (1e-400; 1e-46 for REAL). PostgreSQL unifies a numeric
#: and a ``real`` column (a schema ``float`` may be stored as one) as REAL: in
#: ``CASE WHEN c THEN r ELSE n END`` over a numeric(300, 0) ``n`` one unit's 1e300 failed,
#: charged. Here |v| < 10^(p − s) ≤ 1e38 and |v| = 0 or ≥ 10^(−s) ≥ 1e-37.
DECIMAL_INTEGER_DIGITS = 38
DECIMAL_SCALE = 37
#: DuckDB (which spells the type DECIMAL; PostgreSQL's format_type spells it numeric): it
#: compares or unifies a DECIMAL(p, s) with an integer, a literal or another DECIMAL in
#: DECIMAL(max(p − s) + max(s), max(s)) when that has at most 38 digits and otherwise in
#: DECIMAL(38, max s), casting every operand to it, which fails for one row's value too wide
#: for it. With at most 20 digits before the point (UBIGINT's) and 18 after it on every
#: operand (integer columns, ``CAST(… AS DECIMAL(p, s))``: ``sql/casts.py``; a literal: at
#: most 19 before and 18 after, else a DOUBLE: ``rewrite/nodes.double_text``) the type holds
#: every value of every operand. HUGEINT and UHUGEINT (39 digits) are left out for the same
#: reason: ``h = -1`` over a UHUGEINT failed for a value beyond 2^63, ``h = 1.5`` over a
#: HUGEINT for one beyond 10^37.
DUCKDB_INTEGER_DIGITS = 20
DUCKDB_SCALE = 18
_WIDE = re.compile(r"^(U?HUGEINT|DECIMAL\(.*\))$")


def _decimal_type(t: str) -> ColumnType | None:
    """A NUMERIC/DECIMAL type: INTEGER when its scale is 0 or below, else FLOAT; None without
    a precision (PostgreSQL's ``numeric``: up to 131,072 digits, 1e400 and 1e-400 among
    them) or with one that reaches beyond a double's range. The rewrite computes a number
    column as DOUBLE (``rewrite/guard.py``) and reads it into Python floats, so on
    PostgreSQL one value such as 1e400 made every query that computed with the column fail,
    22003, charged, where its neighbour without that row was answered. DuckDB's DECIMAL
    also within :data:`DUCKDB_INTEGER_DIGITS` and :data:`DUCKDB_SCALE`."""
    m = _DECIMAL.match(t)
    if m is None:
        return None
    if m.group(2) is None:
        return None
    precision, scale = int(m.group(3)), int(m.group(5) or 0)
    if precision - scale > DECIMAL_INTEGER_DIGITS or scale > DECIMAL_SCALE:
        return None
    if m.group(1) == "DECIMAL" and (  # DuckDB's spelling: its limits too
        precision - scale > DUCKDB_INTEGER_DIGITS or scale > DUCKDB_SCALE
    ):
        return None
    return ColumnType.INTEGER if scale <= 0 else ColumnType.FLOAT


_TEXT = re.compile(r"^(VARCHAR|TEXT|STRING|CHAR|BPCHAR|CHARACTER( VARYING)?|NAME)(\(\d+\))?$")


def wide_numeric(sql_type: str) -> bool:
    """Is ``sql_type`` a number type that no schema type fits because its values are too
    wide: a PostgreSQL ``numeric`` whose values may lie beyond a double's range (no
    precision, or too wide one), or DuckDB's HUGEINT, UHUGEINT or a DECIMAL beyond
    :data:`DUCKDB_INTEGER_DIGITS` and :data:`DUCKDB_SCALE`? A private table's ``float``
    column of such a type is read as DOUBLE: ``sql/widenum.total_double`` on PostgreSQL,
    ``sql/widenum.duckdb_double`` on DuckDB."""
    t = sql_type.strip().upper()
    if _WIDE.match(t) and not t.startswith("DECIMAL"):
        return True  # HUGEINT, UHUGEINT
    m = _DECIMAL.match(t)
    return m is not None and _decimal_type(t) is None


def schema_type(sql_type: str) -> ColumnType | None:
    """The schema type of a DuckDB or PostgreSQL column type, or None when none fits
    (timestamps, lists, blobs...: such a column is left out of a draft)."""
    t = sql_type.strip().upper()
    if _INTEGER.match(t):
        return ColumnType.INTEGER
    if _DECIMAL.match(t):
        return _decimal_type(t)
    if _FLOAT.match(t):
        return ColumnType.FLOAT
    if _TEXT.match(t):
        return ColumnType.TEXT
    if t in ("BOOLEAN", "BOOL"):
        return ColumnType.BOOLEAN
    if t == "DATE":
        return ColumnType.DATE
    return None


def _fits(declared: ColumnType, actual: ColumnType | None) -> bool:
    """May a column the database types ``actual`` be declared ``declared``? Only the same type,
    and ``float`` over an integer column (every integer is a number)."""
    if actual is declared:
        return True
    return declared is ColumnType.FLOAT and actual is ColumnType.INTEGER


def check_against(catalog: Catalog, shapes: tuple[TableShape, ...]) -> tuple[Mismatch, ...]:
    """Every table and column of the schema that the database lacks, and every column whose
    database type does not fit its schema type, in schema order."""
    exact = any(s.exact for s in shapes)  # PostgreSQL: names compare exactly
    found = {s.name if exact else s.name.lower(): s for s in shapes}
    readable = double_readable(catalog)
    out: list[Mismatch] = []
    for table in catalog.tables:
        shape = found.get(table.name if exact else table.name.lower())
        path = f"tables.{table.name}"
        if shape is None:
            have = ", ".join(sorted(s.name for s in shapes)) or "none"
            near = _near([s.name for s in shapes], table.name) if exact else ""
            out.append(
                Mismatch(
                    "42P01",
                    path,
                    f'table "{table.name}" is not in the database{near} (its tables: {have})',
                )
            )
            continue
        for col in table.columns:
            cpath = f"{path}.columns.{col.name}"
            actual = shape.column(col.name)
            if actual is None:
                out.append(
                    Mismatch(
                        "42703",
                        cpath,
                        f'column "{col.name}" is not in table "{shape.name}" of the database'
                        + shape.near(col.name),
                    )
                )
                continue
            wide = wide_numeric(actual.sql_type)  # read as DOUBLE (sql/widenum.py)
            if wide and (table.name.lower(), col.name.lower()) in readable:
                continue
            if not _fits(col.type, schema_type(actual.sql_type)):
                want = schema_type(actual.sql_type)
                fix = f"; write type: {want.value}" if want is not None else ""
                if want is None and _WIDE.match(actual.sql_type.strip().upper()):
                    fix = (
                        ", whose values are too wide for DuckDB to compare with an integer "
                        f"or a literal: at most {DUCKDB_INTEGER_DIGITS} digits before the "
                        f"point and {DUCKDB_SCALE} after it (DECIMAL(38, 18), BIGINT, "
                        "UBIGINT) or DOUBLE (a private table's float column, other than a unit "
                        "or its key, is read as DOUBLE)"
                    )
                elif want is None and _DECIMAL.match(actual.sql_type.strip().upper()):
                    fix = (
                        ", whose values may lie beyond a REAL's range (1e300, 1e-300): "
                        f"give it a precision, numeric(p, s) with p - s <= "
                        f"{DECIMAL_INTEGER_DIGITS} and s <= {DECIMAL_SCALE}, or make it "
                        "double precision"
                    )
                out.append(
                    Mismatch(
                        "42804",
                        f"{cpath}.type",
                        f"the schema says {col.type.value} but the database column "
                        f"is {actual.sql_type}{fix}",
                    )
                )
    return tuple(out)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def plain_name(name: str) -> bool:
    """Is ``name`` a plain identifier (ASCII letters, digits and _), the only column names a
    draft writes? (``backends/steward.py`` releases nothing about the others.)"""
    return _IDENT.fullmatch(name) is not None


def _quote(name: str) -> str:
    return name if _IDENT.fullmatch(name) else f'"{name}"'


def draft_schema(
    dataset: str,
    shapes: tuple[TableShape, ...],
    *,
    source: str,
    bounds: Mapping[tuple[str, str], tuple[Fraction, Fraction, str]] | None = None,
    units: Mapping[str, str] | None = None,
    domains: Mapping[tuple[str, str], tuple[tuple[str, ...], str]] | None = None,
) -> str:
    """The YAML text of a draft privacy schema for ``shapes`` (see the module docstring).

    ``bounds``: (table, column) → (lower, upper, note) released with DP by ``schema init
    --dp-bounds`` (``mechanisms/dp_bounds.py``); written as bounds, with the note beside them.
    ``domains``: (table, column) → (values, note) released with DP (``mechanisms/dp_domains.py``);
    written as the domain (none when empty), with the note beside it.
    """
    values = domains or {}
    chosen = bounds or {}
    given = units or {}  # table → the unit column the steward named (schema init --unit)
    lines = [
        f"# Draft privacy schema for {source}, written by `dpproxy schema init`.",
        "# Everything here is PUBLIC. Replace each TODO with facts from the data's documentation",
        "# (never computed from the data), then run `dpproxy schema check`. See schemas/README.md.",
        "version: 1",
        f"dataset: {_quote(dataset)}",
        "privacy:",
        "  epsilon: 1.0               # default ε per query",
        "  delta: 1.0e-6              # default δ per query (grouping without a domain needs it)",
        "  budget: {epsilon: 10, delta: 1.0e-5}   # each analyst's starting budget",
        "tables:",
    ]
    for shape in shapes:
        lines.append(f"  {_quote(shape.name)}:")
        lines.append("    private: true")
        if shape.primary_key is not None:
            lines.append(
                f"    privacy_unit: {_quote(shape.primary_key)}"
                "   # the primary key: one row per unit"
            )
            lines.append("    max_rows_per_unit: 1")
        elif shape.name in given:
            lines.append(f"    privacy_unit: {_quote(given[shape.name])}   # given with --unit")
        else:
            lines.append(
                "    privacy_unit: TODO   # the column naming one person (the protected individual)"
            )
            lines.append("    # TODO max_rows_per_unit: the most rows one person has, if known")
        lines.append("    columns:")
        for col in shape.columns:
            dp = chosen.get((shape.name, col.name))
            unit = col.name in (shape.primary_key, given.get(shape.name))
            dom = values.get((shape.name, col.name))
            lines.append("      " + _draft_column(col, unit=unit, dp=dp, dom=dom))
    return "\n".join(lines) + "\n"


def _number(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f'"{v.numerator}/{v.denominator}"'


def _draft_column(
    col: ColumnShape,
    *,
    unit: bool,
    dp: tuple[Fraction, Fraction, str] | None = None,
    dom: tuple[tuple[str, ...], str] | None = None,
) -> str:
    ctype = schema_type(col.sql_type)
    name = _quote(col.name)
    if not _IDENT.fullmatch(col.name):
        return (
            f"# {name}: left out, not a plain identifier (letters, digits and _): rename it "
            "in the data to use it"
        )
    wide = ctype is None and wide_numeric(col.sql_type)
    if wide and unit:
        return (
            f"# {name}: left out, its type {col.sql_type} is too wide to name a unit exactly "
            "(two of its values could read as one): use another column as the unit"
        )
    if wide:  # read as DOUBLE (sql/widenum.py), as schema check accepts for a private table
        ctype = ColumnType.FLOAT
    elif ctype is None:
        return (
            f"# {name}: left out, its type {col.sql_type} has no schema type "
            "(integer, float, text, boolean, date)"
        )
    fields = [f"type: {ctype.value}"]
    if col.nullable:
        fields.append("nullable: true")
    todo = ""
    if ctype is ColumnType.BOOLEAN:
        fields.append("domain: [true, false]")
    elif unit:
        pass
    elif ctype.numeric and dp is not None:
        fields += [f"lower: {_number(dp[0])}", f"upper: {_number(dp[1])}"]
        todo = f"  # {dp[2]}"
    elif ctype.numeric:
        todo = "  # TODO lower, upper: public bounds (SUM and AVG need them)"
    elif ctype is ColumnType.TEXT and dom is not None:
        if dom[0]:
            fields.append(f"domain: [{', '.join(_text_value(v) for v in dom[0])}]")
        todo = f"  # {dom[1]}"
    elif ctype is ColumnType.TEXT:
        todo = "  # TODO domain: the public list of values, if any"
    if wide:
        todo += f"  ({col.sql_type}: read as a double)"
    return f"{name}: {{{', '.join(fields)}}}{todo}"


def _text_value(v: str) -> str:
    """``v`` as a YAML double-quoted scalar: ``"`` and ``\\`` escaped, ``#`` and every character
    that is not printable as ``\\uXXXX`` or ``\\UXXXXXXXX`` (YAML reads both), so that it loads back
    as ``v`` whatever it holds."""
    out = []
    for ch in v:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ch != "#":  # no "#": find_todos reads one as a comment
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


@dataclass(frozen=True, slots=True)
class Todo:
    """A TODO left in a schema file: its line, the key path it belongs to, and its text."""

    line: int
    path: str
    text: str
    blocking: bool  # a TODO value (the schema cannot load) rather than a comment


_KEY = re.compile(r"^(\s*)(\"[^\"]+\"|'[^']+'|[^\s:#][^:#]*?)\s*:(\s|$)")


def find_todos(text: str) -> tuple[Todo, ...]:
    """The TODOs of a schema file, each with the key path of the line it is on (or of the
    mapping it sits in, for a comment line), found from the indentation."""
    stack: list[tuple[int, str]] = []
    out: list[Todo] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        m = _KEY.match(raw)
        indent = len(raw) - len(raw.lstrip())
        if m is not None and not raw.lstrip().startswith("#"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, m.group(2).strip("\"'")))
            here = ".".join(k for _, k in stack)
        else:
            if not raw.strip():
                continue
            here = ".".join(k for i, k in stack if i < indent) or "<root>"
        code, _, comment = raw.partition("#")
        value = code.split(":", 1)[1].strip() if ":" in code else ""
        if value == TODO:
            out.append(Todo(number, here, _clean(comment) or "replace TODO", True))
        elif comment.strip().startswith(TODO):
            out.append(Todo(number, here, _clean(comment), False))
    return tuple(out)


def _clean(comment: str) -> str:
    return comment.strip().removeprefix("TODO:").removeprefix("TODO").strip(" :")

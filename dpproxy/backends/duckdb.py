"""Embedded DuckDB backend: a read-only connection that runs planner-produced SQL only."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

try:
    # DuckDB's engine module itself (the ``_duckdb`` extension the ``duckdb`` package
    # re-exports): the same connection, exception and result types without the package's
    # relation and expression builders, which this backend never calls and which cost about
    # 0.08 s of CPU to import, a sixth of a small ``dpproxy query`` (benchmarks/STARTUP.md).
    import _duckdb as duckdb
except ImportError:  # pragma: no cover - a DuckDB whose engine module is duckdb.duckdb
    import duckdb  # type: ignore[no-redef]

from dpproxy.backends import CancelToken, checks, fit, light
from dpproxy.backends import scanned as data_bounds
from dpproxy.backends.fardate import FarDate
from dpproxy.catalog.draft import ColumnShape
from dpproxy.catalog.model import Catalog
from dpproxy.errors import (
    BackendUnavailable,
    InternalError,
    QueryCanceled,
    SchemaError,
    UndefinedTable,
)
from dpproxy.release.noise import ExactResult

PARSED_KEPT = 256  # parsed statements kept (DuckDBBackend._parsed)
SEEN_KEPT = 4096  # hashes of the texts seen once
KEEP_AT_FIRST = False  # tests: parse (and decide backends/light.py) a text at its first run


class DuckDBBackend:
    """One read-only DuckDB database. Every thread runs its queries on a cursor of its own (a
    connection to the same database instance), so queries from several threads run
    concurrently and an interrupt stops one query only; a DuckDB connection itself must not be
    shared by threads running queries at once.

    A thread's cursor is kept for its next query (opening one costs about 0.05 ms, a sixth of a
    COUNT over 1,000 rows): a thread runs one query at a time, so its cursor is never shared,
    and an interrupt of an idle cursor does not touch the query after it. A cursor whose query
    failed or was interrupted is closed and replaced. Closing the backend closes the
    connection, and with it every cursor (DuckDB closes a connection's cursors with it). A
    thread has a second cursor, without the optimizer, for the repeated statements that read
    small tables (``backends/light.py``)."""

    dialect = "duckdb"

    def __init__(self, path: str | Path, *, portable_hash: bool = False) -> None:
        # DuckDB's native hash by default; the portable md5 hash keeps exactly the rows
        # PostgreSQL keeps (differential tests), at about 3x the bounding cost.
        self.portable_hash = portable_hash
        p = Path(path)
        if not p.exists():
            raise BackendUnavailable(
                f"database file {p} does not exist",
                hint="pass --database with a DuckDB file, or omit it to use the bundled demo",
            )
        try:
            self._con = duckdb.connect(str(p), read_only=True)
        except duckdb.Error as e:
            raise BackendUnavailable(f"cannot open DuckDB database {p}", log_detail=str(e)) from e
        # DuckDB rewrites "ROW_NUMBER() OVER (PARTITION BY u ORDER BY one key) <= k" into a
        # top-N aggregate that is several times slower than its window sort for the
        # contribution bounding of rewrite/bound.py (benchmarks/RESULTS.md). The setting is
        # per database instance, i.e. it also holds for other connections of this process.
        self._con.execute("SET disabled_optimizers = 'top_n_window_elimination'")
        self._lock = threading.Lock()
        self._local = threading.local()  # .cursor: this thread's cursor, kept between queries
        # see _parsed: a text run again → its parsed statement, and whether it is light.plain
        self._statements: OrderedDict[str, tuple[duckdb.Statement, bool]] = OrderedDict()
        self._small: frozenset[str] = frozenset()  # stored tables of at most light.LIGHT_ROWS
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._parsed_lock = threading.Lock()
        self.path = p

    def _cursor(self, plain: bool = False) -> duckdb.DuckDBPyConnection:
        """This thread's cursor, or its cursor without the optimizer (``backends/light.py``)."""
        name = "plain" if plain else "cursor"
        cur = getattr(self._local, name, None)
        if cur is None:
            with self._lock:
                cur = self._con.cursor()
            if plain:
                cur.execute("PRAGMA disable_optimizer")  # this connection only
            setattr(self._local, name, cur)
        return cur

    def _parsed(self, sql: str) -> tuple[duckdb.Statement | str, bool]:
        """``sql`` as DuckDB's parsed statement when it was run before, else the text.

        A repeated query whose plan needs no secret runs the very same SQL every time
        (``Engine._plan`` keeps it), and DuckDB parses it afresh each time: 0.1-0.5 ms of a
        0.3-2.5 ms statement over 1,000 rows. A parsed statement is kept for a text seen a
        second time (so the SQL of plans drawn with a fresh secret, run once each, does not
        crowd it out) and run again: DuckDB executes a copy of it, bound and planned as the
        text would be; it holds no data. Up to :data:`PARSED_KEPT` statements, the least
        recently used dropped first; the texts seen once are remembered by hash only. With it,
        whether the statement runs without the optimizer (``light.plain``: decided once, when
        the text is kept; a text run once is planned as before)."""
        with self._parsed_lock:
            parsed = self._statements.get(sql)
            if parsed is not None:
                self._statements.move_to_end(sql)
                return parsed
            h = hash(sql)
            if h not in self._seen and not KEEP_AT_FIRST:
                self._seen[h] = None
                if len(self._seen) > SEEN_KEPT:
                    self._seen.popitem(last=False)
                return sql, False
        try:
            statements = self._cursor().extract_statements(sql)
        except duckdb.Error:  # run as text: execute reports the error as any other
            return sql, False
        if len(statements) != 1:
            return sql, False
        kept = statements[0], light.plain(sql, self._small)
        with self._parsed_lock:
            self._statements[sql] = kept
            if len(self._statements) > PARSED_KEPT:
                self._statements.popitem(last=False)
        return kept

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        statement, plain = self._parsed(sql)
        cur = self._cursor(plain)
        ok = False
        try:
            if cancel is not None:
                cancel.on_cancel(cur.interrupt)
            try:
                if cancel is not None:
                    cancel.check()
                cur.execute(statement)
                rows = cur.fetchall()
                cols = tuple(d[0] for d in cur.description or ())
                rows = _far_dates(rows, cur.description or ())
                ok = True
            finally:
                if cancel is not None:
                    cancel.on_cancel(None)
        except duckdb.InterruptException as e:
            raise QueryCanceled("canceling statement due to user request") from e
        except duckdb.Error as e:
            # Never show the database's message: it could quote a value.
            raise InternalError(
                "the database failed to run the query", log_detail=f"{type(e).__name__}: {e}"
            ) from e
        finally:
            if not ok:  # never reuse a cursor whose query failed or was interrupted
                setattr(self._local, "plain" if plain else "cursor", None)
                cur.close()
        return ExactResult(cols, tuple(rows))

    def attach_catalog(self, catalog: Catalog) -> Catalog:
        """Check the schema fits the database (``backends/fit.py``: every table and column
        there, each of a type the schema's reads, refused at once otherwise); mark unit columns
        that are provably unique.

        Uniqueness comes from a PRIMARY KEY or UNIQUE constraint on exactly the unit column
        of a stored table, the column NOT NULL as well (a UNIQUE column admits any number of
        NULLs, and the rows whose unit is NULL are one unit: ``rewrite/bound.py``): metadata,
        not data, so reading it reveals nothing about any person. No key of a table with a
        collated column counts: DuckDB's key ignores the collation that bounding compares with.
        A view's ``DESCRIBE`` does not count: it shows the key and the NOT NULL of the table
        it reads however it joins it (``SELECT t.* FROM t JOIN u ON true`` shows t's key,
        each unit |u| times; a LEFT JOIN's missing side shows NOT NULL). The columns of
        stored private tables that ``DESCRIBE`` shows NOT NULL are marked ``not_null``. Bounded
        integer columns of private tables whose CHECK constraints prove them within the
        schema's bounds are marked ``in_bounds`` (``backends/checks.py``); in a file opened
        read-only, the other such columns whose rows all lie within the bounds are marked
        ``scanned`` (``backends/scanned.py``: a fact about the rows, which EXPLAIN does not
        show). A generated column is never marked ``scanned`` nor ``bigint`` (DuckDB computes
        it at each read), and a schema column generated by a volatile expression is refused
        (:meth:`_volatile`: no clamp holds it).

        ``DESCRIBE`` per table rather than ``duckdb_columns()`` and ``duckdb_constraints()``
        over the whole database: the first call of those table functions costs ~10-20 ms of
        CPU (a thirtieth of a small ``dpproxy query``), ``DESCRIBE`` under 1 ms. Its ``key``
        column says ``PRI``/``UNI`` for any column in a key, composite keys included. A table
        has one primary key, so a unit column that is the table's only ``PRI`` column is that
        key alone: unique, without reading the constraints. Only a unit column in some other
        key (``UNI``, or one ``PRI`` column of several) needs the exact single-column test of
        ``duckdb_constraints()``. Likewise CHECK constraints are read from it only when
        ``duckdb_tables()`` (≈ 0.1 ms) counts some on a table with a bounded integer column.
        """
        described: dict[str, dict[str, str | None]] = {}
        generated: dict[str, dict[str, str]] = {}
        types: dict[str, dict[str, str]] = {}
        not_null: dict[str, set[str]] = {}  # DESCRIBE's ``null`` is NO: declared NOT NULL
        shapes: dict[str, tuple[ColumnShape, ...]] = {}  # for the fit (backends/fit.py)
        with self._lock:
            for t in catalog.tables:
                try:
                    rows = self._con.execute(f"DESCRIBE {_quote(t.name)}").fetchall()
                except duckdb.CatalogException:
                    rows = []
                except duckdb.Error as e:  # e.g. a view over a file that is gone
                    raise BackendUnavailable(
                        f'cannot read table "{t.name}" of the schema in {self.path}',
                        hint="check that the files the database's views read still exist",
                        log_detail=str(e),
                    ) from e
                described[t.name] = {str(r[0]).lower(): r[3] for r in rows}
                shapes[t.name] = tuple(
                    ColumnShape(str(r[0]), str(r[1]), r[2] != "NO") for r in rows
                )
                types[t.name] = {str(r[0]).lower(): str(r[1]) for r in rows}
                not_null[t.name] = {str(r[0]).lower() for r in rows if r[2] == "NO"}
            fit.refuse_misfit(catalog, shapes, str(self.path), lambda: fit.duckdb_shapes(self._con))
            wide = fit.read_wide(catalog, shapes)  # read as DOUBLE (sql/widenum.py)
            stored, made, collated, sizes = self._stored_tables()  # made: that may generate
            # the stored tables a statement may read without the optimizer (backends/light.py)
            names = {t.name.lower() for t in catalog.tables} & sizes.keys()
            self._small = frozenset(n for n in names if sizes[n] <= light.LIGHT_ROWS)
            with self._parsed_lock:
                self._statements.clear()  # decided against the catalog attached before
            generated = self._generated() if made else {}
            for t in catalog.tables:
                computed = generated.get(t.name.lower(), {})
                for c in t.columns:
                    expression = computed.get(c.name.lower())
                    if expression is not None and self._volatile(expression):
                        raise SchemaError(
                            f'column "{c.name}" of table "{t.name}" is generated by an '
                            "expression that may change from one read to the next",
                            hint="DuckDB computes a generated column at each reference to it, "
                            "so no clamp holds it: store its values, or leave it out of the "
                            "schema",
                        )
            unique: set[tuple[str, str]] = set()
            keyed = False  # a unit column in a key that DESCRIBE alone cannot tell is its own
            for t in catalog.tables:
                if t.privacy_unit is None:
                    continue
                keys = described[t.name]
                unit = t.privacy_unit.lower()
                if keys.get(unit) == "PRI" and list(keys.values()).count("PRI") == 1:
                    unique.add((t.name.lower(), unit))  # the primary key is this column alone
                elif keys.get(unit) in ("PRI", "UNI"):
                    keyed = True
            if keyed:
                unique |= {
                    (r[0].lower(), r[1][0].lower())
                    for r in self._con.execute(
                        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
                        "WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE') "
                        "AND database_name = current_database() "
                        "AND schema_name = current_schema()"
                    ).fetchall()
                    if len(r[1]) == 1
                }
            bounded = {t.name.lower(): checks.candidates(t, types[t.name]) for t in catalog.tables}
            # Only a stored table's DESCRIBE speaks for its rows: a view's shows the key and
            # NOT NULL of the table it reads, through a join that repeats or misses its rows
            # (``SELECT t.* FROM t JOIN u ON true`` shows t's PRIMARY KEY: each unit |u| times).
            not_null = {n: cs for n, cs in not_null.items() if n.lower() in stored}
            # A UNIQUE column holds any number of NULLs, and rows whose unit is NULL form one
            # unit (``rewrite/bound.py`` ranks them together): unique only when NOT NULL too
            # (a PRIMARY KEY is); 500 NULL-unit rows were once counted with sensitivity 1.
            declared = {n.lower(): cs for n, cs in not_null.items()}
            # DuckDB's key (its ART index) compares the bytes, without the column's collation,
            # while PARTITION BY and COUNT(DISTINCT) compare with it: a VARCHAR COLLATE NOCASE
            # PRIMARY KEY holds 'A' and 'a', one unit (200 rows of 100 units were counted as
            # 200 with max_rows_per_unit 1). DuckDB shows a column's collation only in the
            # table's CREATE statement: any COLLATE there, and no unit of it is unique.
            unique = {(n, u) for n, u in unique if n in stored and u in declared.get(n, ())}
            unique = {(n, u) for n, u in unique if n not in collated}
            proven = self._checked(catalog, {n: cs for n, cs in bounded.items() if cs}, stored)
            # the other bounded columns, proved by the rows of a file no one can write
            # A generated column is computed as it is read (a volatile one is refused above),
            # and may read the clock: a scan at opening proves nothing about the values a later
            # query reads (a = CASE WHEN epoch(now()) >= T THEN 1000 ELSE 50 END passed a scan
            # for [0, 100] before T, and SUM(a) over 10 units released 10000 unclamped after).
            # Nor is it marked bigint: rewrite/unclamp.py's two sums would be two reads.
            # Nor is a column read as DOUBLE (sql/widenum.py): the statements read the cast's
            # value, not the stored one the scan would compare (its clamp stays).
            wide_low = {t.name.lower(): set(wide.get(t.name, ())) for t in catalog.tables}
            skip = {
                n: proven.get(n, set()) | set(generated.get(n, {})) | wide_low.get(n, set())
                for n in proven.keys() | generated.keys() | wide_low.keys()
            }
            scanned = (
                data_bounds.proven(self._con, catalog, bounded, stored, skip, _quote)
                if stored and data_bounds.read_only(self._con)
                else {}
            )
            least = data_bounds.magnitudes(self._con, catalog, scanned, _quote)
        tables = []
        for t in catalog.tables:
            present = described[t.name]
            if not present:
                raise UndefinedTable(
                    f'table "{t.name}" of the schema is not in the database {self.path}',
                    hint="check that --schema and --database belong together",
                )
            missing = [c.name for c in t.columns if c.name.lower() not in present]
            if missing:
                raise UndefinedTable(
                    f'columns {", ".join(missing)} of table "{t.name}" are not in the database',
                    hint="check that --schema and --database belong together",
                )
            is_unique = (
                t.privacy_unit is not None and (t.name.lower(), t.privacy_unit.lower()) in unique
            )
            t = checks.mark(t, proven.get(t.name.lower(), set()))
            t = checks.mark(t, scanned.get(t.name.lower(), set()), "scanned")
            if t.private:
                t = checks.mark(t, not_null.get(t.name, set()), "not_null")
            t = data_bounds.with_magnitudes(t, least.get(t.name.lower(), {}))
            if t.name.lower() in stored:  # a view over a CSV file has no zone maps to skip
                computed = generated.get(t.name.lower(), {})  # generated: two sums, two reads
                t = checks.mark_bigint(
                    t, {c: ty for c, ty in types.get(t.name, {}).items() if c not in computed}
                )
            tables.append(replace(t, unit_is_unique=is_unique, wide=wide.get(t.name, ())))
        return replace(catalog, tables=tuple(tables))

    def _stored_tables(self) -> tuple[dict[str, int], set[str], set[str], dict[str, int]]:
        """{lower-case name: its number of CHECK constraints} of the tables stored in the
        current database and schema (where the schema's unqualified names resolve), views not
        included; and of those, the names of the tables whose CREATE statement says
        ``GENERATED`` (:meth:`_generated`) and ``COLLATE`` (a column's collation shows nowhere
        else; the word elsewhere, in a name or a default, only costs the optimisation); the
        caller holds the lock. One query. Only stored tables are marked ``bigint`` for
        ``rewrite/unclamp.py``: its correction is a second scan that DuckDB skips by the row
        groups' zone maps, and a view, e.g. over a CSV file (``dpproxy query --database
        data.csv``), has none, so the file would be read twice (1 M rows: ≈ 0.17 → 0.21 s).
        Last, each one's number of rows (DuckDB's count, for ``backends/light.py``)."""
        rows = self._con.execute(
            "SELECT lower(table_name), check_constraint_count, contains(sql, 'GENERATED'), "
            "contains(lower(sql), 'collate'), estimated_size FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = current_schema()"
        ).fetchall()
        return (
            {str(r[0]): int(r[1]) for r in rows},
            {str(r[0]) for r in rows if r[2] is not False},  # NULL: unknown, so maybe
            {str(r[0]) for r in rows if r[3] is not False},
            {str(r[0]): int(r[4]) for r in rows if r[4] is not None},
        )

    def _generated(self) -> dict[str, dict[str, str]]:
        """{lower-case table name: {its generated column (lower case): its expression}} of the
        stored tables of the current database and schema; the caller holds the lock and asks
        only when :meth:`_stored_tables` shows a table that may have one."""
        where = "database_name = current_database() AND schema_name = current_schema()"
        out: dict[str, dict[str, str]] = {}
        for table, column, expression in self._con.execute(
            "SELECT table_name, column_name, generation_expression FROM duckdb_columns() "
            f"WHERE {where} AND is_generated"
        ).fetchall():
            out.setdefault(str(table).lower(), {})[str(column).lower()] = str(expression)
        return out

    def _volatile(self, expression: str) -> bool:
        """Might generated column ``expression`` give another value at each read (a VOLATILE
        function: random(), nextval(), current_query(); a macro, whose body may call one; a
        function DuckDB does not list; anything its parser does not take)? DuckDB computes a
        generated column at every reference to it, and the clamp refers to the column three
        times: ``CASE WHEN a > 100 THEN 100 ELSE a END`` compared one draw and returned
        another (a = CASE WHEN random() < 0.5 THEN 1000 ELSE 50 END: 1000 passed the clamp).
        Functions fixed within a query, such as now(), do not count. The caller holds the
        lock."""
        try:
            row = self._con.execute(
                "SELECT json_serialize_sql($1)", ["SELECT " + expression]
            ).fetchone()
            tree = json.loads(str(row[0])) if row is not None else {"error": True}
        except (duckdb.Error, ValueError):
            return True
        if tree.get("error", True):
            return True
        names: set[str] = set()
        stack: list[object] = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("class") == "FUNCTION":
                    if node.get("schema") or node.get("catalog"):
                        return True  # another schema's function: a macro, maybe
                    names.add(str(node.get("function_name")))
                elif node.get("class") in ("SUBQUERY", "WINDOW"):
                    return True
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        if not names:
            return False
        stable = {
            str(r[0])
            for r in self._con.execute(
                "SELECT function_name FROM duckdb_functions() WHERE function_name = ANY ($1) "
                "GROUP BY function_name HAVING bool_and(coalesce(stability <> 'VOLATILE', false))",
                [sorted(names)],
            ).fetchall()
        }
        return bool(names - stable)

    def _checked(
        self, catalog: Catalog, bounded: dict[str, tuple[str, ...]], stored: dict[str, int]
    ) -> dict[str, set[str]]:
        """{table: its ``bounded`` columns that CHECK constraints prove within their schema
        bounds} (lower-case names; ``stored``: :meth:`_stored_tables`; the caller holds the
        lock). Tables and constraints of the current database and schema only: where the
        schema's unqualified names resolve."""
        if not {name for name, n in stored.items() if n > 0} & bounded.keys():
            return {}
        where = "database_name = current_database() AND schema_name = current_schema()"
        texts: dict[str, list[str]] = {}
        for name, expression in self._con.execute(
            "SELECT table_name, expression FROM duckdb_constraints() "
            f"WHERE {where} AND constraint_type = 'CHECK'"
        ).fetchall():
            if expression is not None:
                texts.setdefault(str(name).lower(), []).append(str(expression))
        proven: dict[str, set[str]] = {}
        for t in catalog.tables:
            name = t.name.lower()
            proven[name] = {
                c
                for c in bounded.get(name, ())
                if checks.proven_column(t, c, texts.get(name, ()), "duckdb")
            }
        return proven

    def close(self) -> None:
        with self._lock:
            self._con.close()


def _quote(name: str) -> str:
    """A DuckDB identifier for ``name`` (case-insensitive, like the catalog's lookups)."""
    return '"' + name.replace('"', '""') + '"'


def _far_dates(rows: list[Any], description: Any) -> list[Any]:
    """A DATE value the client gives as text (a date beyond 0001…9999) as a :class:`FarDate`,
    which orders among the dates (``backends/fardate.py``)."""
    dates = [i for i, d in enumerate(description) if str(d[1]) == "DATE"]
    if not dates:
        return rows
    out = []
    for row in rows:
        if any(isinstance(row[i], str) for i in dates):
            row = tuple(
                FarDate(v) if i in dates and isinstance(v, str) else v for i, v in enumerate(row)
            )
        out.append(row)
    return out

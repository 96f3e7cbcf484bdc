"""``dpproxy data copy``: CSV and Parquet files copied into a DuckDB file, when asked.

``--database people.csv`` copies nothing: every query reads the file through a view
(``backends/file_views.py``). For a big file read by many queries a DuckDB copy is cheaper (a
1M-row, 22 MB CSV: about 1.2 s of CPU a query through the view, 0.7 s from a copy). This module
makes the copy:

- each source becomes one table, read by the same ``read_csv``/``read_parquet`` expression as
  the view (every row read to type a CSV), so the table has exactly the types the view has;
- a PRIMARY KEY only when the user declares one (``--primary-key``): DuckDB checks it while it
  inserts, and a duplicate or NULL key refuses the copy (23505, 23502). Then ``schema init``
  drafts that column as the privacy unit, and a unit known to be unique lets queries skip
  contribution bounding;
- NOT NULL only on the columns the user names (``--not-null``): DuckDB checks each row as it
  inserts, and a NULL refuses the copy (23502). ``schema init`` then drafts those columns
  without ``nullable: true``, and the counts of such columns are one ``COUNT(*)`` released
  once (``planning/builder.PrimitiveBuilder._count``): a VARIANCE and a STDDEV of two of
  them cost five noisy values instead of six;
- the copy is written to a temporary file beside the target and renamed over it only once
  every table is in, so a failed copy leaves no half-written database; an existing target is
  refused unless ``force``.

Error messages never quote a value of the data (DuckDB's own message, which names the
duplicate key, goes to the log detail only).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpproxy.backends.files import Source, file_sources
from dpproxy.errors import (
    BadFileFormat,
    InvalidParameter,
    NotNullViolation,
    UndefinedColumn,
    UniqueViolation,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Copied:
    """One table written: its name, source, row count and columns (name, DuckDB type)."""

    table: str
    source: str
    rows: int
    columns: tuple[tuple[str, str], ...]
    primary_key: str | None
    not_null: tuple[str, ...] = ()


def _unreadable(given: str, what: str, e: Exception) -> BadFileFormat:
    """DuckDB could not read ``given`` as ``what`` (CSV or Parquet): its first line as the hint."""
    first = str(e).strip().splitlines()[0][:300]
    return BadFileFormat(
        f"cannot read {given} as {what}", hint=f"DuckDB says: {first}", log_detail=str(e)
    )


def plan_copy(sources_text: str, table: str | None) -> tuple[Source, ...]:
    """The sources of ``sources_text`` (as ``--database`` reads them), renamed to ``table``
    when given (one source only)."""
    sources = file_sources(sources_text)
    if sources is None:
        raise InvalidParameter(
            f"{sources_text!r} is not a CSV or Parquet file",
            hint="data copy reads CSV (.csv, .tsv, .csv.gz) and Parquet (.parquet) files or "
            "globs; a DuckDB database or a URL is used as it is with --database",
        )
    if table is not None:
        if len(sources) != 1:
            raise InvalidParameter(
                f"--table names one table, but {len(sources)} sources were given",
                hint="copy the sources one at a time, or drop --table: each source's table is "
                "named after its file",
            )
        if not _NAME.match(table):
            raise InvalidParameter(
                f"--table {table!r} is not a plain SQL name",
                hint="use letters, digits and _ (not first a digit), e.g. --table people",
            )
        sources = (Source(table.lower(), sources[0].kind, sources[0].files, sources[0].given),)
    return sources


def copy_sources(
    sources: tuple[Source, ...],
    target: Path,
    *,
    primary_key: str | None = None,
    not_null: tuple[str, ...] = (),
    force: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[Copied, ...]:
    """Copy ``sources`` into the DuckDB file ``target`` (see the module docstring)."""
    import duckdb

    from dpproxy.backends.file_views import _ident, _reader

    if target.exists() and not force:
        raise InvalidParameter(
            f"{target} exists", hint="pass --force to replace it, or give another --to file"
        )
    if target.is_dir():
        raise InvalidParameter(
            f"--to {target} is a directory", hint="name a file, e.g. data.duckdb"
        )
    if not target.parent.is_dir():
        raise InvalidParameter(
            f"the directory of --to {target} does not exist", hint="create it first"
        )
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        leftover.unlink(missing_ok=True)
    done: list[Copied] = []
    try:
        try:
            con = duckdb.connect(str(tmp))
            try:
                con.execute("SET enable_progress_bar = true")  # for query_progress (_Percent)
                con.execute("SET enable_progress_bar_print = false")  # ... never on stdout
                for source in sources:
                    size = sum(f.stat().st_size for f in source.files)
                    progress(
                        f"copying {source.given} ({_size(size)}, {len(source.files)} file(s)) "
                        f"into table {source.name}"
                    )
                    keys = _Keys(primary_key, not_null)
                    done.append(_copy_one(con, source, keys, _ident, _reader(source), progress))
                    progress(f"  {done[-1].rows:,} rows, {len(done[-1].columns)} columns")
                con.execute("CHECKPOINT")
            finally:
                con.close()
            os.replace(tmp, target)
        except (OSError, duckdb.Error) as e:  # the target's side: a full disk, no permission
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            raise InvalidParameter(
                f"cannot write {target}",
                hint=f"{first}; check the directory's space and permissions",
                log_detail=str(e),
            ) from e
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return tuple(done)


class _Percent:
    """While the copy runs, a line every ``every`` seconds with DuckDB's estimate of how much
    of the source it has read (``query_progress``, asked from a second thread; DuckDB's own
    progress bar writes to standard output, so it stays off). A small file is done before the
    first line."""

    def __init__(self, con: Any, progress: Callable[[str], None], every: float = 2.0) -> None:
        self.con, self.progress, self.every = con, progress, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dpproxy-copy-progress", daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        shown = 0
        while not self.stop.wait(self.every):
            try:
                done = int(self.con.query_progress())
            except Exception:  # progress is a courtesy: the copy itself decides
                return
            if done > shown:
                shown = done
                self.progress(f"  {done}% read")


@dataclass(frozen=True, slots=True)
class _Keys:
    """The constraints the user asked for: ``--primary-key`` and ``--not-null`` columns."""

    primary_key: str | None
    not_null: tuple[str, ...]


def _column(columns: tuple[tuple[str, str], ...], name: str, option: str, given: str) -> str:
    """The source's column called ``name`` (case-insensitively), or 42703 naming them all."""
    found = next((c for c, _ in columns if c.lower() == name.lower()), None)
    if found is None:
        raise UndefinedColumn(
            f'{option} {name}: no such column in "{given}"',
            hint="its columns: " + ", ".join(c for c, _ in columns),
        )
    return found


def _copy_one(
    con: Any,
    source: Source,
    keys: _Keys,
    ident: Callable[[str], str],
    reader: str,
    progress: Callable[[str], None],
) -> Copied:
    import duckdb

    what = "CSV" if source.kind == "csv" else "Parquet"
    try:
        columns = tuple(
            (str(r[0]), str(r[1]))
            for r in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
        )
    except duckdb.Error as e:
        raise _unreadable(source.given, what, e) from e
    key = None
    if keys.primary_key is not None:
        key = _column(columns, keys.primary_key, "--primary-key", source.given)
    required = tuple(
        dict.fromkeys(_column(columns, n, "--not-null", source.given) for n in keys.not_null)
    )
    body = ", ".join(f"{ident(c)} {t}" + (" NOT NULL" if c in required else "") for c, t in columns)
    if key is not None:
        body += f", PRIMARY KEY ({ident(key)})"
    con.execute(f"CREATE TABLE {ident(source.name)} ({body})")
    try:
        with _Percent(con, progress):
            con.execute(f"INSERT INTO {ident(source.name)} SELECT * FROM {reader}")
    except duckdb.ConstraintException as e:
        if "NOT NULL" in str(e):
            # DuckDB names the column ("NOT NULL constraint failed: t.c"): metadata, no value
            failed = str(e).rsplit(".", 1)[-1].strip().lower()
            if key is None or failed != key.lower():
                named = [c for c in required if c.lower() == failed] or list(required)
                raise NotNullViolation(
                    f"--not-null {','.join(named)}: the column is NULL on some row of "
                    f"{source.given}",
                    hint="copy without --not-null for that column, and give it nullable: true "
                    "in the schema",
                    log_detail=str(e),
                ) from e
            raise NotNullViolation(
                f"--primary-key {key}: the column is NULL on some row of {source.given}",
                hint="a primary key names every row; choose another column, or copy without "
                "--primary-key (queries then bound each unit's contribution)",
                log_detail=str(e),
            ) from e
        raise UniqueViolation(
            f"--primary-key {key}: some value occurs on more than one row of {source.given}",
            hint="the column does not name one row per unit; copy without --primary-key "
            "(queries then bound each unit's contribution) and give the schema's "
            "max_rows_per_unit instead",
            log_detail=str(e),
        ) from e
    except duckdb.Error as e:
        raise _unreadable(source.given, what, e) from e
    row = con.execute(f"SELECT COUNT(*) FROM {ident(source.name)}").fetchone()
    return Copied(source.name, source.given, int(row[0]) if row else 0, columns, key, required)


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} bytes"
    value, units = n / 1000, ["KB", "MB", "GB", "TB"]
    while value >= 1000 and len(units) > 1:
        value, units = value / 1000, units[1:]
    return f"{value:.1f} {units[0]}"

"""CSV and Parquet files as a database: an in-memory DuckDB with one view per file (or glob).

``--database`` takes a DuckDB file, a ``postgresql://`` URL, or data files: ``people.csv``,
``visits.parquet``, a glob such as ``'sales/*.parquet'``, or several of them separated by
commas. Nothing is copied (unless asked: ``dpproxy data copy``, ``backends/file_copy.py``): each
source becomes a view over ``read_csv``/``read_parquet``, and every query reads the files afresh
(a glob is expanded once, when the database is opened). A
CSV file's column types are detected from all its rows when it is opened, not from a sample.

View names: a file's view is named after its stem (``people.csv`` → ``people``, lower case,
characters other than letters, digits and ``_`` replaced by ``_``); a glob's view after the
fixed part of its last name, else after its directory (``sales_*.parquet`` → ``sales``,
``events/*.parquet`` → ``events``): all the files of a glob are one table. When there is one
source and the schema has exactly one table, the view also answers to that table's name.

The connection may read those files and nothing else (DuckDB's ``allowed_paths`` with external
access disabled, configuration locked), so even SQL the planner did not write could not reach
another file. Every bad input is an error with a SQLSTATE and what to do next: a missing file or
a glob matching nothing (58P01), an unknown extension or a directory (22023), a file DuckDB
cannot read as CSV or Parquet (22P04).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dpproxy.dsn import is_postgres_url
from dpproxy.errors import BadFileFormat, InvalidParameter, UndefinedFile

__all__ = ["BadFileFormat", "Source", "UndefinedFile", "file_sources", "view_name"]

CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")
DUCKDB_SUFFIXES = (".duckdb", ".ddb", ".db")
_SUPPORTED = "CSV (.csv, .tsv, .csv.gz), Parquet (.parquet) or a DuckDB database (.duckdb)"


@dataclass(frozen=True, slots=True)
class Source:
    """One view: a name, a format and the files it reads (several for a glob)."""

    name: str
    kind: str  # "csv" | "parquet"
    files: tuple[Path, ...]
    given: str  # as the user wrote it, for messages


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:(//|[A-Za-z])")  # scheme:// or spark+local[N]


def _suffix_kind(path: str) -> str | None:
    low = path.lower()
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return None


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _duckdb_file(path: Path) -> bool:
    """DuckDB's file header carries the magic bytes ``DUCK`` at offset 8."""
    try:
        with path.open("rb") as f:
            return f.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def view_name(given: str) -> str:
    """The view name for a file or glob (see the module docstring)."""
    if _is_glob(given):
        fixed = re.split(r"[*?\[]", given, maxsplit=1)[0]
        head, _, tail = fixed.rpartition("/")
        stem = tail.strip("_-. ") or Path(head or ".").resolve().name
    else:
        stem = Path(given).name
        for suffix in CSV_SUFFIXES + PARQUET_SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem).lower() or "data"
    return f"t_{name}" if name[0].isdigit() else name


def file_sources(database: str) -> tuple[Source, ...] | None:
    """The views ``database`` asks for, or None when it is a DuckDB database or a URL."""
    if is_postgres_url(database) or _URL.match(database) or database.startswith("spark+"):
        return None  # a URL (postgresql://, spark://, spark+local[N]...): backends.open_backend
    whole = Path(database)
    parts = [database] if whole.exists() or "," not in database else database.split(",")
    parts = [p.strip() for p in parts if p.strip()]
    if len(parts) == 1 and _suffix_kind(parts[0]) is None and not _is_glob(parts[0]):
        path = Path(parts[0])
        if path.is_dir():
            raise InvalidParameter(
                f"--database {path} is a directory",
                hint=f"give its files with a glob, e.g. --database '{path}/*.parquet', "
                f"or one file: {_SUPPORTED}",
            )
        if path.exists() and not _duckdb_file(path) and path.suffix.lower() not in DUCKDB_SUFFIXES:
            raise InvalidParameter(
                f"cannot tell what kind of data {path} holds from its name",
                hint=f"dpproxy reads {_SUPPORTED}; name the file after its format, or "
                "export it to CSV or Parquet",
            )
        return None  # a DuckDB database (backends/duckdb.py reports a missing one)
    sources: list[Source] = []
    for part in parts:
        kind = _suffix_kind(part)
        if kind is None:
            raise InvalidParameter(
                f"cannot tell what kind of data {part!r} holds from its name",
                hint="with several sources or a glob, each must be CSV (.csv, .tsv, .csv.gz) or "
                "Parquet (.parquet), e.g. 'data/*.csv'; a DuckDB database is given alone",
            )
        if _is_glob(part):
            import glob as globbing  # file globs only (fast start)

            files = tuple(
                Path(f).resolve()
                for f in sorted(globbing.glob(part, recursive=True))
                if Path(f).is_file()
            )
            if not files:
                raise UndefinedFile(
                    f"no file matches {part!r}",
                    hint=f"check the pattern from the current directory ({Path.cwd()}); quote it "
                    "so that the shell does not expand it",
                )
        else:
            path = Path(part)
            if not path.is_file():
                raise UndefinedFile(
                    f"data file {part} does not exist"
                    if not path.exists()
                    else f"data file {part} is not a regular file",
                    hint=f"check the path (relative to {Path.cwd()})",
                )
            if path.stat().st_size == 0:
                raise BadFileFormat(
                    f"data file {part} is empty",
                    hint="a CSV file needs at least a header row naming its columns",
                )
            files = (path.resolve(),)
        sources.append(Source(view_name(part), kind, files, part))
    names = [s.name for s in sources]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidParameter(
            f"two sources would both be the table {twice[0]!r}",
            hint="rename one of the files: a view is named after its file (people.csv → people)",
        )
    return tuple(sources)

"""The DuckDB side of ``backends/files.py``: an in-memory connection with one view per source,
confined to the sources' files, and the table shapes of a DuckDB connection (metadata only)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import duckdb

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.files import Source
from dpproxy.backends.fit import duckdb_shapes
from dpproxy.errors import BadFileFormat

__all__ = ["FileBackend", "connect_sources", "duckdb_shapes"]

_FORMAT = {"csv": "CSV", "parquet": "Parquet"}


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _reader(source: Source) -> str:
    files = "[" + ", ".join(_literal(f) for f in source.files) + "]"
    if source.kind == "csv":
        # Types from every row: by default DuckDB sniffs a sample of rows and then rounds a
        # later 1.5 into a column it typed BIGINT, silently. Reading it all costs one pass at open.
        return f"read_csv({files}, union_by_name = true, sample_size = -1)"
    return f"read_parquet({files}, union_by_name = true)"


def connect_sources(
    sources: tuple[Source, ...], tables: tuple[str, ...] = ()
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views (``tables``: the schema's table names, for
    the alias of a single source), confined to the sources' files."""
    con = duckdb.connect(":memory:")
    try:
        for source in sources:
            try:
                con.execute(f"CREATE VIEW {_ident(source.name)} AS SELECT * FROM {_reader(source)}")
            except duckdb.Error as e:
                first = str(e).strip().splitlines()[0][:300]
                raise BadFileFormat(
                    f"cannot read {source.given} as {_FORMAT[source.kind]}",
                    hint=f"DuckDB says: {first}. "
                    + (
                        "A CSV file needs a header row and one delimiter throughout."
                        if source.kind == "csv"
                        else "Check that it is a complete Parquet file."
                    ),
                    log_detail=str(e),
                ) from e
        if len(sources) == 1 and len(tables) == 1 and tables[0].lower() != sources[0].name:
            con.execute(
                f"CREATE VIEW {_ident(tables[0])} AS SELECT * FROM {_ident(sources[0].name)}"
            )
        allowed = ", ".join(_literal(f) for s in sources for f in s.files)
        # As backends/duckdb.py: the window sort beats DuckDB's top-N rewrite for bounding.
        con.execute("SET disabled_optimizers = 'top_n_window_elimination'")
        con.execute(f"SET allowed_paths = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


class FileBackend(DuckDBBackend):
    """The DuckDB backend over views of CSV and Parquet files (see the module docstring); its
    schema's fit to the files is checked as any DuckDB database's (``backends/fit.py``)."""

    def __init__(
        self,
        sources: tuple[Source, ...],
        tables: tuple[str, ...] = (),
        *,
        portable_hash: bool = False,
    ) -> None:
        self.portable_hash = portable_hash
        self._con = connect_sources(sources, tables)
        self._lock = threading.Lock()
        self._local = threading.local()  # DuckDBBackend._cursor's per-thread cursor (8420982)
        # DuckDBBackend._parsed's statements (10e2224): without them every query failed (XX000)
        self._statements: OrderedDict[str, tuple[duckdb.Statement, bool]] = OrderedDict()
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._small = frozenset()  # views only: every statement keeps the optimizer
        self._parsed_lock = threading.Lock()
        self.path = Path(", ".join(s.given for s in sources))
        self.sources = sources

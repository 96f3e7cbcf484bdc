"""The bundled demo: the UCI Adult dataset as a DuckDB file, and its privacy schema.

dpproxy ships ``dpproxy/data/adult.csv.gz`` (32,561 people, made by
``benchmarks/make_demo_data.py``) and ``dpproxy/data/adult.yaml`` (its privacy schema, a copy of
``schemas/adult.yaml``). :func:`demo_database_path` turns the CSV into a DuckDB database once,
in the user's cache directory, and returns its path on every later call.

The database file is named after the package version and a hash of the CSV bytes, so a new
release or new data gets a new file instead of a stale one. It is built under a temporary name
in the same directory and moved into place with :func:`os.replace`, which is atomic: a crash
or a concurrent process never leaves a half-built file under the final name. Two processes
that start at once may both build; each result is complete and identical, so whichever
replace lands last is as good as the first.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import os
import secrets
import sys
import time
import tomllib
from importlib.resources import files
from pathlib import Path

import duckdb

TABLE = "adult"

# (column, DuckDB type, nullable): the order of the CSV, after the person_id added here.
# The nullable columns are exactly those where the source has "?" (see schemas/adult.yaml).
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("person_id", "INTEGER", False),
    ("age", "INTEGER", False),
    ("workclass", "VARCHAR", True),
    ("fnlwgt", "INTEGER", False),
    ("education", "VARCHAR", False),
    ("education_num", "INTEGER", False),
    ("marital_status", "VARCHAR", False),
    ("occupation", "VARCHAR", True),
    ("relationship", "VARCHAR", False),
    ("race", "VARCHAR", False),
    ("sex", "VARCHAR", False),
    ("capital_gain", "INTEGER", False),
    ("capital_loss", "INTEGER", False),
    ("hours_per_week", "INTEGER", False),
    ("native_country", "VARCHAR", True),
    ("income_class", "VARCHAR", False),
)


def _resource(name: str) -> Path:
    """The path of a file packaged in ``dpproxy/data``.

    Raises ``FileNotFoundError`` if the package is not installed as plain files (for example
    from a zip archive), where no stable path exists.
    """
    res = files("dpproxy") / "data" / name
    if not isinstance(res, Path):
        raise FileNotFoundError(f"dpproxy/data/{name} is not available as a file on disk")
    return res


def demo_schema_path() -> Path:
    """The path of the packaged privacy schema of the demo dataset, ``dpproxy/data/adult.yaml``."""
    return _resource("adult.yaml")


def demo_csv_path() -> Path:
    """The path of the packaged demo data, ``dpproxy/data/adult.csv.gz`` (gzip, with a header)."""
    return _resource("adult.csv.gz")


def cache_dir() -> Path:
    """The directory for built demo databases (not created here).

    ``$DPPROXY_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/dpproxy``, else ``~/.cache/dpproxy``.
    """
    explicit = os.environ.get("DPPROXY_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "dpproxy"
    return Path.home() / ".cache" / "dpproxy"


def _version() -> str:
    """The dpproxy version, for the cache file name.

    The package's ``__version__``, else the installed distribution's metadata, else (in an
    uninstalled source checkout) ``project.version`` of the ``pyproject.toml`` beside the
    package, else ``0+unknown``.
    """
    import dpproxy

    version = getattr(dpproxy, "__version__", None)
    if isinstance(version, str) and version:
        return version
    try:
        return importlib.metadata.version("dpproxy")
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    found = project.get("version") if project.get("name") == "dpproxy" else None
    return found if isinstance(found, str) and found else "0+unknown"


def demo_database_name(csv_bytes: bytes) -> str:
    """The cache file name for the given CSV bytes, e.g. ``adult-0.1.0-1a2b3c4d.duckdb``."""
    digest = hashlib.sha256(csv_bytes).hexdigest()[:8]
    return f"{TABLE}-{_version()}-{digest}.duckdb"


def demo_database_path(progress: bool = True) -> Path:
    """The path of the demo DuckDB database, building it first if it is not in the cache.

    The database holds one table, ``adult``: ``person_id INTEGER PRIMARY KEY`` (1..32561 in
    file order) followed by the 15 Adult columns. With ``progress`` a line on stderr reports
    the build and its duration; a cached file is returned silently.
    """
    target = cache_dir() / demo_database_name(demo_csv_path().read_bytes())
    if target.is_file():
        return target
    started = time.perf_counter()
    if progress:
        print("building the demo database … ", end="", file=sys.stderr, flush=True)
    try:
        build_demo_database(target)
    except BaseException:
        if progress:
            print("failed", file=sys.stderr, flush=True)
        raise
    if progress:
        elapsed = time.perf_counter() - started
        print(f"done in {elapsed:.1f} s ({target})", file=sys.stderr, flush=True)
    return target


def _sql_string(text: str) -> str:
    """A SQL string literal for ``text``."""
    return "'" + text.replace("'", "''") + "'"


def build_demo_database(target: Path) -> None:
    """Build the demo DuckDB database at ``target`` atomically, replacing any file there.

    The packaged CSV is decompressed with a ``person_id`` column (1, 2, … in file order)
    prepended, written to a temporary CSV beside ``target``, and loaded with DuckDB's
    ``read_csv`` and explicit column types (empty fields, the source's ``?``, become NULL).
    The database is written under a temporary name in the same directory, checkpointed,
    closed, and then moved onto ``target`` with :func:`os.replace`. On any failure the
    temporary files are removed and ``target`` is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    stem = f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}"
    tmp_db = target.parent / f"{stem}.tmp"
    tmp_csv = target.parent / f"{stem}.csv"
    try:
        _write_numbered_csv(demo_csv_path(), tmp_csv)
        _load(tmp_csv, tmp_db)
        os.replace(tmp_db, target)
    finally:
        for leftover in (tmp_csv, tmp_db, tmp_db.with_name(tmp_db.name + ".wal")):
            leftover.unlink(missing_ok=True)


def _write_numbered_csv(source: Path, dest: Path) -> None:
    """Decompress ``source`` into ``dest`` with a ``person_id`` column in front (1-based)."""
    with gzip.open(source, "rt", encoding="utf-8", newline="") as src:
        lines = src.read().splitlines()
    if not lines or not lines[0].startswith("age,"):
        raise ValueError(f"{source}: expected a header row starting with 'age,'")
    out = ["person_id," + lines[0]]
    out.extend(f"{i},{line}" for i, line in enumerate(lines[1:], start=1) if line)
    dest.write_text("\n".join(out) + "\n", encoding="utf-8")


def _load(csv_path: Path, db_path: Path) -> None:
    """Create table ``adult`` in a new DuckDB file ``db_path`` from the numbered CSV."""
    ddl = ",\n  ".join(
        f"{name} {kind}"
        + (" PRIMARY KEY" if name == "person_id" else "")
        + ("" if nullable or name == "person_id" else " NOT NULL")
        for name, kind, nullable in COLUMNS
    )
    types = ", ".join(f"{_sql_string(name)}: {_sql_string(kind)}" for name, kind, _ in COLUMNS)
    con = duckdb.connect(str(db_path))
    try:
        con.execute(f"CREATE TABLE {TABLE} (\n  {ddl}\n)")
        con.execute(
            f"INSERT INTO {TABLE} SELECT * FROM read_csv({_sql_string(str(csv_path))}, "
            f"header = true, delim = ',', quote = '\"', escape = '\"', nullstr = '', "
            f"auto_detect = false, columns = {{{types}}}) ORDER BY person_id"
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()

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

:func:`load_demo_postgres` loads the same rows into a PostgreSQL database instead (``dpproxy demo
load``), in one transaction, with psycopg 3, which is imported only there.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dpproxy.dsn import is_postgres_url, redact_dsn
from dpproxy.errors import (
    BackendUnavailable,
    DPProxyError,
    Forbidden,
    InternalError,
    InvalidParameter,
)

if TYPE_CHECKING:
    import psycopg

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
    import tomllib  # an uninstalled source checkout only

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
    with _progress(progress, "building the demo database", f"done in {{elapsed:.1f}} s ({target})"):
        build_demo_database(target)
    return target


@contextlib.contextmanager
def _progress(enabled: bool, doing: str, done: str) -> Iterator[dict[str, Any]]:
    """On stderr: ``doing …`` before the block, then ``failed`` or ``done`` formatted with
    ``elapsed`` (seconds) and whatever the block put in the yielded dict."""
    started = time.perf_counter()
    if enabled:
        print(f"{doing} … ", end="", file=sys.stderr, flush=True)
    facts: dict[str, Any] = {}
    try:
        yield facts
    except BaseException:
        if enabled:
            print("failed", file=sys.stderr, flush=True)
        raise
    if enabled:
        elapsed = time.perf_counter() - started
        print(done.format(elapsed=elapsed, **facts), file=sys.stderr, flush=True)


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


def _numbered_lines(source: Path) -> list[str]:
    """The lines of the gzipped CSV ``source`` with a ``person_id`` column in front (1-based).

    The first line is the header; empty lines are dropped (after numbering, so ``person_id``
    is the 1-based position of the row in the file).
    """
    import gzip  # building the demo only, not opening it (fast start)

    with gzip.open(source, "rt", encoding="utf-8", newline="") as src:
        lines = src.read().splitlines()
    if not lines or not lines[0].startswith("age,"):
        raise ValueError(f"{source}: expected a header row starting with 'age,'")
    out = ["person_id," + lines[0]]
    out.extend(f"{i},{line}" for i, line in enumerate(lines[1:], start=1) if line)
    return out


def _write_numbered_csv(source: Path, dest: Path) -> None:
    """Decompress ``source`` into ``dest`` with a ``person_id`` column in front (1-based)."""
    dest.write_text("\n".join(_numbered_lines(source)) + "\n", encoding="utf-8")


def _load(csv_path: Path, db_path: Path) -> None:
    """Create table ``adult`` in a new DuckDB file ``db_path`` from the numbered CSV."""
    ddl = ",\n  ".join(
        f"{name} {kind}"
        + (" PRIMARY KEY" if name == "person_id" else "")
        + ("" if nullable or name == "person_id" else " NOT NULL")
        for name, kind, nullable in COLUMNS
    )
    types = ", ".join(f"{_sql_string(name)}: {_sql_string(kind)}" for name, kind, _ in COLUMNS)
    import duckdb  # here, not at import: a PostgreSQL-backed engine never needs DuckDB

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


# ------------------------------------------------------------------------------ PostgreSQL

# DuckDB type of COLUMNS → PostgreSQL type.
_PG_TYPES = {"INTEGER": "integer", "VARCHAR": "text"}

# A table name: lower-case, unquoted-identifier style (what `FROM adult` resolves to), with an
# optional schema. Quoting would allow more, but a mixed-case name could not be queried unquoted.
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?")

_DSN_HINT = (
    "check the host, port, user, password and database name: "
    "postgresql://USER:PASSWORD@HOST:5432/DBNAME (a password can also come from PGPASSWORD or "
    "~/.pgpass)"
)


def _scrub(text: str, passwords: tuple[str, ...]) -> str:
    """``text`` on one line, with every occurrence of a password replaced by ``***``."""
    text = " ".join(text.split())
    for password in passwords:
        if password:
            text = text.replace(password, "***")
    return text


def load_demo_postgres(
    dsn: str, *, table: str = TABLE, replace: bool = False, progress: bool = False
) -> int:
    """Load the bundled Adult demo into PostgreSQL at ``dsn``; return the number of rows loaded.

    The table (``person_id integer PRIMARY KEY`` and the 15 Adult columns, ``integer`` or
    ``text``, ``NOT NULL`` except where the source has missing values) is created and filled
    with ``COPY … FROM STDIN`` in one transaction, so a failure at any point leaves the
    database as it was. An existing table of that name is an error (:class:`InvalidParameter`)
    unless ``replace``, which drops it inside the same transaction: readers see the old table
    or the new one, never an empty or partial one. No ``ANALYZE`` and no ``GRANT`` are run.

    ``dsn`` is a ``postgresql://`` or ``postgres://`` URL or a libpq ``key=value`` string;
    ``table`` a lower-case name, optionally schema-qualified (``demo.adult``). Connection
    failures raise :class:`BackendUnavailable`. Messages never contain the password. With
    ``progress`` a line on stderr reports the load, its row count and its duration.
    """
    if not _TABLE_NAME.fullmatch(table):
        raise InvalidParameter(
            f"invalid table name {table!r}",
            hint="use a lower-case name of letters, digits and _, optionally with a schema: "
            "adult or demo.adult",
        )
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        raise BackendUnavailable(
            "loading into PostgreSQL needs psycopg 3, which is not installed",
            hint="pip install 'psycopg[binary]'",
        ) from None
    try:
        params = conninfo_to_dict(dsn) if is_postgres_url(dsn) or "=" in dsn else None
    except psycopg.Error:
        params = None
    if params is None:
        raise InvalidParameter(
            "the demo can only be loaded into PostgreSQL: give a postgresql:// URL "
            "(or a libpq key=value connection string)",
            hint="the DuckDB demo needs no loading: it is built automatically on first use "
            "(`dpproxy demo path` prints where)",
        )
    if is_postgres_url(dsn):
        shown = redact_dsn(dsn)
    else:
        shown = make_conninfo("", **{k: v for k, v in params.items() if k != "password"})
    try:
        in_url = urlsplit(dsn).password
    except ValueError:
        in_url = None
    passwords = tuple(str(p) for p in (params.get("password"), in_url) if p)
    doing = f"loading the demo into {table} at {shown}"
    with _progress(progress, doing, "{rows} rows in {elapsed:.1f} s") as facts:
        facts["rows"] = _load_postgres(dsn, params, shown, passwords, table, replace)
    rows: int = facts["rows"]
    return rows


def _load_postgres(
    dsn: str,
    params: dict[str, Any],
    shown: str,
    passwords: tuple[str, ...],
    table: str,
    replace: bool,
) -> int:
    """Connect, create ``table`` and COPY the numbered CSV into it, in one transaction."""
    import psycopg

    lines = _numbered_lines(demo_csv_path())
    expected = [name for name, _, _ in COLUMNS]
    if lines[0].split(",") != expected:
        raise ValueError(f"{demo_csv_path()}: the header does not match {expected}")
    extra: dict[str, Any] = {}
    if "connect_timeout" not in params:
        extra["connect_timeout"] = 10
    if "application_name" not in params:
        extra["application_name"] = "dpproxy demo load"
    try:
        conn = psycopg.connect(dsn, **extra)
    except psycopg.Error as e:
        raise _connect_error(str(e), params, shown, passwords) from None
    try:
        with conn:  # commits if the block succeeds, rolls back if not; closes in both cases
            return _copy(conn, table, replace, lines)
    except psycopg.Error as e:
        raise _load_error(e, shown, table, passwords) from None


def _copy(
    conn: psycopg.Connection[tuple[object, ...]], table: str, replace: bool, lines: list[str]
) -> int:
    """Create ``table`` (dropping it first if ``replace``) and COPY ``lines`` (CSV) into it."""
    from psycopg import sql

    name = sql.Identifier(*table.split("."))
    ddl = sql.SQL(",\n  ").join(
        sql.SQL("{} {}{}").format(
            sql.Identifier(column),
            sql.SQL(_PG_TYPES[kind]),
            sql.SQL(" PRIMARY KEY" if column == "person_id" else "" if nullable else " NOT NULL"),
        )
        for column, kind, nullable in COLUMNS
    )
    columns = sql.SQL(", ").join(sql.Identifier(column) for column, _, _ in COLUMNS)
    chunk = 4096
    with conn.cursor() as cur:
        if replace:
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        cur.execute(sql.SQL("CREATE TABLE {} (\n  {}\n)").format(name, ddl))
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv, HEADER true)")
        with cur.copy(copy_sql.format(name, columns)) as copy:
            for start in range(0, len(lines), chunk):
                copy.write("".join(line + "\n" for line in lines[start : start + chunk]))
        rows = cur.rowcount
    if rows != len(lines) - 1:
        raise InternalError(
            "the demo load copied an unexpected number of rows",
            log_detail=f"COPY reported {rows} rows, the CSV has {len(lines) - 1}",
        )
    return rows


# The server's message when the database named in the startup packet does not exist (SQLSTATE
# 3D000, invalid_catalog_name). libpq reports a failed connection without its SQLSTATE, so the
# message (English, PostgreSQL's default lc_messages) is the only evidence.
_NO_DATABASE = re.compile(r'database "((?:[^"]|"")+)" does not exist')


def _connect_error(
    text: str, params: dict[str, Any], shown: str, passwords: tuple[str, ...]
) -> BackendUnavailable:
    """The dpproxy error for a failed connection; a missing database gets a ``createdb`` hint."""
    detail = _scrub(text, passwords)
    missing = _NO_DATABASE.search(text)
    if missing is None:
        return BackendUnavailable(f"cannot connect to {shown}: {detail}", hint=_DSN_HINT)
    import shlex

    name = missing.group(1).replace('""', '"')
    where = [
        f"{flag} {shlex.quote(str(params[key]))}"
        for flag, key in (("-h", "host"), ("-p", "port"), ("-U", "user"))
        if params.get(key)
    ]
    createdb = " ".join(["createdb", *where])
    return BackendUnavailable(
        f'cannot connect to {shown}: database "{name}" does not exist (PostgreSQL error '
        "3D000); nothing was loaded",
        hint=f"create it first, then run this command again: {createdb} {shlex.quote(name)} "
        f"(or CREATE DATABASE in psql as a role allowed to create databases)",
    )


def _load_error(
    e: psycopg.Error, shown: str, table: str, passwords: tuple[str, ...]
) -> DPProxyError:
    """The dpproxy error for a PostgreSQL error raised while loading (nothing was loaded)."""
    import psycopg
    from psycopg import errors as pg

    detail = _scrub(e.diag.message_primary or str(e), passwords)
    unchanged = "nothing was changed"
    if isinstance(e, pg.DuplicateTable):
        return InvalidParameter(
            f"table {table} already exists at {shown}; {unchanged}",
            hint="pass --replace to drop it and load it anew (in one transaction)",
        )
    if isinstance(e, pg.InsufficientPrivilege):
        return Forbidden(
            f"the role may not create or replace {table} at {shown}: {detail}; {unchanged}",
            hint="load as a role that may create tables in the schema (the table's owner for "
            "--replace); dpproxy itself should then connect as a read-only role",
        )
    if isinstance(e, pg.DependentObjectsStillExist):
        return InvalidParameter(
            f"cannot replace {table} at {shown}: {detail}; {unchanged}",
            hint="drop the views or other objects that depend on the table first",
        )
    if isinstance(e, pg.InvalidSchemaName):
        return InvalidParameter(
            f"cannot create {table} at {shown}: {detail}; {unchanged}",
            hint="create the schema first, or give a table name without a schema",
        )
    if isinstance(e, psycopg.OperationalError):
        return BackendUnavailable(
            f"the connection to {shown} failed while loading: {detail}; {unchanged}",
            hint=_DSN_HINT,
        )
    return InternalError(
        f"loading the demo into {table} at {shown} failed "
        f"(PostgreSQL SQLSTATE {e.sqlstate}): {detail}; {unchanged}"
    )

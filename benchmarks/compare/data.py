"""The data files of the peer comparison, under ``benchmarks/compare/work/data/`` (git-ignored).

* ``pums.csv``: the 1,000-row PUMS sample of SmartNoise SQL's tests
  (``../shared/data/pums/PUMS_pid.csv``), columns in ``workload.COLUMNS`` order; income as an
  integer, the text columns (sex, educ, race, married) as their digit strings.
* ``adult.csv``: UCI Adult (``../shared/data/adult/adult.data``, 32,561 rows) in the same
  columns and codes as PUMS, so every query and adapter runs on it unchanged: pid the row
  number, age as is, educ the education number ("1".."16", PUMS's coding), sex "0" male /
  "1" female, race "1".."5" (White, Black, Asian-Pac-Islander, Amer-Indian-Eskimo, Other),
  married "1" for every "Married-*" status, and income the capital gain (0..99,999): Adult has
  no income amount, only the >50K label, and capital gain is its one money column.
* ``synthetic_1m.csv``: 1,000,000 rows with the same columns drawn from a fixed seed: ages like
  PUMS's (bootstrapped and jittered, within 0..100), educ "1".."16" and race "1".."6" with
  PUMS's frequencies (smoothed so every level occurs), sex and married 0/1, income skewed
  (12% zeros, a log-normal body with a median near 25,000, clamped to [0, 500000]); pid 1..N.
* ``tpch/``: TPC-H at scale ``workload.TPCH_SCALE`` (1), generated offline by ``tpchgen-cli``:
  ``tpch.duckdb`` (``dpproxy.tpch.generate_tpch``: typed columns, primary keys, the scale in
  ``tpch_meta``), one Parquet file per table exported from it with DuckDB's ``COPY ... (FORMAT
  parquet)`` (``customer.parquet``, ``orders.parquet``, ``lineitem.parquet`` and the public
  tables), and the eight tables in PostgreSQL, schema ``compare_tpch`` of ``$QRLEW_PG_URL``
  (default ``postgresql://postgres@127.0.0.1:5432/postgres``; ``dpproxy.tpch.load_tpch_postgres``),
  where Qrlew runs its SQL. ``$COMPARE_TPCH_DUCKDB`` may name a DuckDB file that
  ``generate_tpch`` already made at the same scale: it is copied instead of generating anew.
  A PostgreSQL server that cannot be reached is reported and skipped (only Qrlew needs it).

Idempotent: a CSV with the right header and row count, a DuckDB file that records scale 1, a
Parquet file and a PostgreSQL table with the DuckDB table's row count are kept. Progress on
stderr. Usage: ``python benchmarks/compare/data.py [--data-dir DIR] [--datasets pums,tpch]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402

REPO = HERE.parents[1]
DATA_DIR = HERE / "work" / "data"
PUMS_SOURCE = REPO.parent / "shared" / "data" / "pums" / "PUMS_pid.csv"
ADULT_SOURCE = REPO.parent / "shared" / "data" / "adult" / "adult.data"
ADULT_RACES = ("White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other")
SEED = 20240611
HEADER = [c.name for c in workload.COLUMNS]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _rows_in(path: Path) -> int | None:
    """Data rows of a CSV written by this script, or None when missing or of another shape."""
    if not path.is_file():
        return None
    with path.open("rb") as f:
        header = f.readline().decode().strip()
        if header != ",".join(HEADER):
            return None
        return sum(1 for _ in f)


def _pums_rows(source: Path) -> list[list[str]]:
    with source.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for r in reader:
            rec = dict(r)
            rec["income"] = str(int(float(rec["income"])))
            rec["age"] = str(int(float(rec["age"])))
            rows.append([rec[name] for name in HEADER])
    return rows


def _write_shared(data_dir: Path, name: str, source: Path,
                  read: Callable[[Path], list[list[str]]]) -> Path:
    """``<name>.csv`` from a data set of ../shared/data (``read`` turns it into rows), unless a
    CSV with the right header and row count is there already."""
    path = data_dir / f"{name}.csv"
    want = workload.DATASETS[name]
    if _rows_in(path) == want:
        progress(f"data: {path.name} present ({want:,} rows)")
        return path
    rows = read(source)
    if len(rows) != want:
        raise SystemExit(f"{source}: {len(rows)} rows, expected {want}")
    _write(path, rows)
    progress(f"data: wrote {path.name} ({len(rows):,} rows) from {source}")
    return path


def write_pums(data_dir: Path, source: Path = PUMS_SOURCE) -> Path:
    return _write_shared(data_dir, "pums", source, _pums_rows)


def _adult_rows(source: Path) -> list[list[str]]:
    """adult.data (no header; ``, `` separated) in workload.COLUMNS order and PUMS's codes."""
    rows = []
    with source.open(newline="") as f:
        for line in csv.reader(f, skipinitialspace=True):
            if len(line) < 15:
                continue  # the blank last line
            age, education_num, marital, race, sex, gain = (
                line[0], line[4], line[5], line[8], line[9], line[10])
            rec = {
                "pid": str(len(rows) + 1),
                "age": str(int(age)),
                "sex": {"Male": "0", "Female": "1"}[sex],
                "educ": str(int(education_num)),
                "race": str(ADULT_RACES.index(race) + 1),
                "income": str(int(gain)),
                "married": "1" if marital.startswith("Married") else "0",
            }
            rows.append([rec[name] for name in HEADER])
    return rows


def write_adult(data_dir: Path, source: Path = ADULT_SOURCE) -> Path:
    return _write_shared(data_dir, "adult", source, _adult_rows)


def synthetic_columns(n: int, source: Path = PUMS_SOURCE, seed: int = SEED) -> dict[str, list]:
    """The synthetic table as columns of Python values (ints, and digit strings for text)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pums = _pums_rows(source)
    col = {name: [r[i] for r in pums] for i, name in enumerate(HEADER)}

    ages = np.array([int(a) for a in col["age"]])
    age = rng.choice(ages, n) + rng.integers(-3, 4, n)
    age = np.clip(age, 0, 100)

    def categorical(name: str, levels: list[str]) -> np.ndarray:
        counts = np.array([col[name].count(v) for v in levels], dtype=float) + 2.0
        return rng.choice(np.array(levels), n, p=counts / counts.sum())

    educ = categorical("educ", [str(i) for i in range(1, 17)])
    race = categorical("race", [str(i) for i in range(1, 7)])
    sex = rng.integers(0, 2, n).astype(str)
    married = np.where((age >= 18) & (rng.random(n) < 0.6), "1", "0")
    # Income: zero for 12% (and for most children), a log-normal body rising with education.
    body = rng.lognormal(mean=np.log(25_000), sigma=1.0, size=n)
    body *= 0.7 + 0.04 * educ.astype(int)
    zero = (rng.random(n) < 0.12) | ((age < 16) & (rng.random(n) < 0.95))
    income = np.where(zero, 0, np.clip(np.round(body, -2), 0, 500_000)).astype(np.int64)
    pid = np.arange(1, n + 1)
    return {
        "pid": pid.tolist(),
        "age": age.tolist(),
        "sex": sex.tolist(),
        "educ": educ.tolist(),
        "race": race.tolist(),
        "income": income.tolist(),
        "married": married.tolist(),
    }


def write_synthetic(data_dir: Path, n: int | None = None) -> Path:
    path = data_dir / "synthetic_1m.csv"
    want = n or workload.DATASETS["synthetic_1m"]
    if _rows_in(path) == want:
        progress(f"data: {path.name} present ({want:,} rows)")
        return path
    started = time.perf_counter()
    cols = synthetic_columns(want)
    _write(path, zip(*(cols[name] for name in HEADER), strict=True))
    progress(f"data: wrote {path.name} ({want:,} rows, seed {SEED}) "
             f"in {time.perf_counter() - started:.1f} s")
    return path


def _write(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    tmp.replace(path)


# ---------------------------------------------------------------------------- TPC-H

TPCH_DB = "tpch.duckdb"
PG_URL = os.environ.get("QRLEW_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _tpch_db(data_dir: Path) -> Path:
    """tpch/tpch.duckdb at scale workload.TPCH_SCALE: kept, copied or generated."""
    from dpproxy.tpch import generate_tpch, recorded_scale

    scale = workload.TPCH_SCALE
    path = data_dir / "tpch" / TPCH_DB
    if recorded_scale(path) == scale:
        progress(f"data: {path.relative_to(data_dir)} present (scale {scale:g})")
        return path
    source = os.environ.get("COMPARE_TPCH_DUCKDB")
    if source and recorded_scale(Path(source)) == scale:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        started = time.perf_counter()
        shutil.copyfile(source, tmp)
        tmp.replace(path)
        progress(f"data: copied {source} (scale {scale:g}, $COMPARE_TPCH_DUCKDB) to {path} in "
                 f"{time.perf_counter() - started:.1f} s")
        return path
    if source:
        progress(f"data: $COMPARE_TPCH_DUCKDB={source} does not hold scale {scale:g}: ignored")
    progress(f"data: generating TPC-H scale {scale:g} with tpchgen-cli into {path} (≈ 30 s)")
    return generate_tpch(path, scale, progress=True)


def _parquet_rows(path: Path) -> int | None:
    import duckdb

    if not path.is_file():
        return None
    try:
        row = duckdb.connect().execute(
            "SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row else None


def table_rows(db: Path) -> dict[str, int]:
    """{table: rows} of the eight TPC-H tables in the DuckDB file."""
    import duckdb

    from dpproxy.tpch import TABLE_NAMES

    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
                for t in TABLE_NAMES}
    finally:
        con.close()


def _tpch_parquet(db: Path, rows: dict[str, int]) -> None:
    """One Parquet file per table next to the DuckDB file (kept when its row count matches)."""
    import duckdb

    out = db.parent
    todo = [t for t in rows if _parquet_rows(out / f"{t}.parquet") != rows[t]]
    if not todo:
        progress(f"data: tpch/*.parquet present ({len(rows)} tables)")
        return
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SET enable_progress_bar = false")
        for t in todo:
            started = time.perf_counter()
            target = out / f"{t}.parquet"
            tmp = out / f".{t}.parquet.tmp"
            quoted = "'" + str(tmp).replace("'", "''") + "'"
            con.execute(f"COPY {t} TO {quoted} (FORMAT parquet)")
            tmp.replace(target)
            progress(f"data: wrote tpch/{target.name} ({rows[t]:,} rows) in "
                     f"{time.perf_counter() - started:.1f} s")
    finally:
        con.close()


def postgres_rows(dsn: str, schema: str, tables: list[str]) -> dict[str, int | None]:
    """{table: rows} in that PostgreSQL schema (None for a table that does not exist)."""
    import psycopg

    out: dict[str, int | None] = {}
    with psycopg.connect(dsn, connect_timeout=10) as conn, conn.cursor() as cur:
        for t in tables:
            cur.execute("SELECT to_regclass(%s)", [f"{schema}.{t}"])
            found = cur.fetchone()
            if not found or found[0] is None:
                out[t] = None
                continue
            cur.execute(f'SELECT count(*) FROM "{schema}"."{t}"')
            row = cur.fetchone()
            out[t] = int(row[0]) if row else None
    return out


def _tpch_postgres(db: Path, rows: dict[str, int], dsn: str = PG_URL) -> bool:
    """The tables in PostgreSQL schema workload.TPCH_PG_SCHEMA; False if the server is not
    reachable (reported, not fatal: only Qrlew reads them)."""
    from dpproxy.dsn import redact_dsn
    from dpproxy.tpch import load_tpch_postgres

    schema = workload.TPCH_PG_SCHEMA
    shown = redact_dsn(dsn)
    try:
        have = postgres_rows(dsn, schema, list(rows))
    except Exception as e:  # no server, no role, ...
        progress(f"data: PostgreSQL at {shown} not reachable ({type(e).__name__}: "
                 f"{' '.join(str(e).split())[:200]}): TPC-H not loaded there (Qrlew needs it)")
        return False
    if have == rows:
        progress(f"data: PostgreSQL {schema} at {shown} present (scale "
                 f"{workload.TPCH_SCALE:g} row counts)")
        return True
    progress(f"data: loading TPC-H into PostgreSQL schema {schema} at {shown} (≈ 1 min)")
    load_tpch_postgres(db, dsn, schema=schema, progress=True)
    return True


def write_tpch(data_dir: Path, postgres: bool = True) -> Path:
    """tpch/: the DuckDB file, the Parquet files and (if reachable) the PostgreSQL copy;
    returns the directory."""
    db = _tpch_db(data_dir)
    rows = table_rows(db)
    _tpch_parquet(db, rows)
    if postgres:
        _tpch_postgres(db, rows)
    return db.parent


def prepare(data_dir: Path = DATA_DIR, datasets: list[str] | None = None,
            postgres: bool = True) -> dict[str, Path]:
    """The data of ``datasets`` (default: all of workload.DATASETS), written if missing;
    {dataset: path} (a file, or the directory tpch/). ``postgres=False`` skips the PostgreSQL
    copy of TPC-H (only Qrlew reads it)."""
    writers = {
        "pums": write_pums,
        "adult": write_adult,
        "synthetic_1m": write_synthetic,
        "tpch": lambda d: write_tpch(d, postgres=postgres),
    }
    out = {}
    for name in datasets or list(workload.DATASETS):
        if name not in writers:
            raise SystemExit(f"unknown data set {name!r}: one of {', '.join(writers)}")
        out[name] = writers[name](data_dir)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--datasets", default=",".join(workload.DATASETS),
                        help="comma-separated (default: all)")
    args = parser.parse_args()
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for name, path in prepare(args.data_dir, names).items():
        print(f"{name}\t{path}")


if __name__ == "__main__":
    main()

"""The data files of the peer comparison, under ``benchmarks/compare/work/data/`` (git-ignored).

* ``pums.csv``: the 1,000-row PUMS sample of SmartNoise SQL's tests
  (``../shared/data/pums/PUMS_pid.csv``), columns in ``workload.COLUMNS`` order; income as an
  integer, the text columns (sex, educ, race, married) as their digit strings.
* ``synthetic_1m.csv``: 1,000,000 rows with the same columns drawn from a fixed seed: ages like
  PUMS's (bootstrapped and jittered, within 0..100), educ "1".."16" and race "1".."6" with
  PUMS's frequencies (smoothed so every level occurs), sex and married 0/1, income skewed
  (12% zeros, a log-normal body with a median near 25,000, clamped to [0, 500000]); pid 1..N.

Idempotent: a file with the right header and row count is kept. Progress on stderr.
Usage: ``python benchmarks/compare/data.py [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402

REPO = HERE.parents[1]
DATA_DIR = HERE / "work" / "data"
PUMS_SOURCE = REPO.parent / "shared" / "data" / "pums" / "PUMS_pid.csv"
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


def write_pums(data_dir: Path, source: Path = PUMS_SOURCE) -> Path:
    path = data_dir / "pums.csv"
    want = workload.DATASETS["pums"]
    if _rows_in(path) == want:
        progress(f"data: {path.name} present ({want:,} rows)")
        return path
    rows = _pums_rows(source)
    if len(rows) != want:
        raise SystemExit(f"{source}: {len(rows)} rows, expected {want}")
    _write(path, rows)
    progress(f"data: wrote {path.name} ({len(rows):,} rows) from {source}")
    return path


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


def prepare(data_dir: Path = DATA_DIR) -> dict[str, Path]:
    """Both data files, written if missing; {dataset: path}."""
    return {"pums": write_pums(data_dir), "synthetic_1m": write_synthetic(data_dir)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    for name, path in prepare(args.data_dir).items():
        print(f"{name}\t{path}")


if __name__ == "__main__":
    main()

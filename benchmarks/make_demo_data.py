"""Regenerate ``dpproxy/data/adult.csv.gz``, the demo dataset shipped with dpproxy.

The source is the UCI Adult training file (32,561 rows, no header, ``", "``-separated,
``?`` for a missing value). This script:

* trims every value and drops blank lines (the source ends with one);
* writes ``?`` as an empty field, so that DuckDB's ``read_csv`` loads it as NULL;
* renames the label column ``income_class`` (values ``>50K`` / ``<=50K``) and writes a
  header row of snake_case column names;
* gzips at level 9 with a zero timestamp and no embedded file name, so the output is
  byte-for-byte reproducible (the demo database's cache name contains a hash of it).

Usage, from the repository root::

    python benchmarks/make_demo_data.py [path/to/adult.data]

Without an argument it reads ``../shared/data/adult/adult.data`` relative to the repository.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "adult" / "adult.data"
TARGET = REPO / "dpproxy" / "data" / "adult.csv.gz"

COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income_class",
)


def clean_rows(text: str) -> list[list[str]]:
    """Split the raw Adult text into trimmed rows; ``?`` becomes the empty string.

    Raises ``ValueError`` on a non-blank line that does not have exactly 15 fields.
    """
    rows: list[list[str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(COLUMNS):
            raise ValueError(f"line {number}: expected {len(COLUMNS)} fields, got {len(fields)}")
        rows.append(["" if f == "?" else f for f in fields])
    return rows


def to_csv_gz(rows: list[list[str]]) -> bytes:
    """Render rows as a headed CSV and gzip it deterministically (level 9, mtime 0)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    raw = buf.getvalue().encode("utf-8")
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=out, mtime=0) as gz:
        gz.write(raw)
    return out.getvalue()


def main(argv: list[str]) -> int:
    """Read the source given on the command line (or the default) and write ``TARGET``."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.split("Usage, from the repository root::")[1].strip(), file=sys.stderr)
        return 0 if len(argv) == 2 else 2
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as e:
        print(f"make_demo_data: cannot read {source}: {e.strerror}", file=sys.stderr)
        return 1
    rows = clean_rows(text)
    data = to_csv_gz(rows)
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(data)
    print(f"wrote {TARGET} ({len(rows):,} rows, {len(data):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

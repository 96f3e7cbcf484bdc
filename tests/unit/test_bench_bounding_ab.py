"""``benchmarks/bounding_ab.py``: a smoke run on a real PostgreSQL with 1,000 rows (both forms
of the bounding keep the same rows), and docs/performance.md quotes the committed run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bounding_ab.py"
RUN = REPO / "benchmarks" / "BOUNDING_AB_PG.json"


def test_smoke_run(tmp_path: Path, pg_server: object, pg_dsn: str) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_embedded import dataset
    from bench_postgres import database_url, load
    from psycopg.conninfo import conninfo_to_dict

    db, _ = dataset(1000)
    name = str(conninfo_to_dict(pg_dsn)["dbname"])
    admin = pg_server.admin_dsn  # type: ignore[attr-defined]
    load(admin, name, db, 1000, keep=False)
    out = tmp_path / "ab.json"
    args = ["--dsn", database_url(admin, name), "--rows", "1000", "--runs", "1"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert len(data["classes"]) == 6
    for r in data["classes"].values():
        assert r["same_rows"] and r["ranked"] > 0 and r["split"] > 0
    assert "| events (~10 rows a unit) | sum |" in done.stdout


def test_a_dsn_without_the_rows_says_how_to_load_them(pg_dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dsn", pg_dsn],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "bench_postgres.py" in done.stderr


def test_the_committed_run_is_quoted() -> None:
    """Every class's two times, on both tables, as docs/performance.md and the changelog's
    figures quote them; the same rows kept by both forms."""
    data = json.loads(RUN.read_text(encoding="utf-8"))
    doc = " ".join((REPO / "docs" / "performance.md").read_text(encoding="utf-8").split())
    assert data["meta"]["rows"] == 1_000_000
    for key, r in data["classes"].items():
        assert r["same_rows"], key
        table, name = key.split(":")
        assert f"{table} {name} {r['split'] / 1000:.2f} s against {r['ranked'] / 1000:.2f} s" in doc

"""``benchmarks/sql_ab.py``: a smoke run (this checkout as its own baseline) times every class
with the same SQL on both sides, and docs/performance.md quotes the committed run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "sql_ab.py"
RUN = REPO / "benchmarks" / "SQL_AB_ROUNDING.json"


def test_smoke_run(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", str(REPO), "--runs", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sql_ab: var_stddev base" in done.stderr  # progress goes to stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert len(data["classes"]) == 10 and data["meta"]["rows"] == 1000
    for r in data["classes"].values():
        assert r["same_sql"] and r["raw"] > 0 and r["base"] > 0 and r["now"] > 0
    assert data["sql"]["base"] == data["sql"]["now"]
    assert "| var_stddev (same SQL) |" in done.stdout


def test_rows_must_be_positive(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", str(REPO), "--rows", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--rows must be at least 1" in done.stderr


def test_a_dsn_without_the_rows_says_how_to_load_them(pg_dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", str(REPO), "--runs", "2", "--dsn", pg_dsn],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "no table people there" in done.stderr and "bench_postgres.py" in done.stderr


def test_smoke_run_on_postgresql(tmp_path: Path, pg_server: object, pg_dsn: str) -> None:
    """``--dsn``: the 1,000 rows loaded as ``bench_postgres.py`` loads them, every class's SQL
    prepared for PostgreSQL by both sides and run there."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_embedded import dataset
    from bench_postgres import database_url, load
    from psycopg.conninfo import conninfo_to_dict

    db, _ = dataset(1000)
    name = str(conninfo_to_dict(pg_dsn)["dbname"])
    admin = pg_server.admin_dsn  # type: ignore[attr-defined]
    load(admin, name, db, 1000, keep=False)
    url = database_url(admin, name)  # a postgresql:// URL, as dpproxy takes one
    out = tmp_path / "ab.json"
    args = ["--base", str(REPO), "--runs", "2", "--dsn", url, "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["meta"]["engine"] == "postgres" and len(data["classes"]) == 10
    assert all(r["same_sql"] and r["now"] > 0 for r in data["classes"].values())
    assert "DOUBLE PRECISION" in data["sql"]["now"]["sum"]  # PostgreSQL's SQL, not DuckDB's


def test_a_base_that_is_not_a_checkout_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "is not a dpproxy checkout" in done.stderr


def test_the_rounding_run_is_quoted() -> None:
    """The paragraph on the fixed-point rounding quotes ``benchmarks/SQL_AB_ROUNDING.json``:
    every changed class's SQL time before and after, and the unchanged classes' range; the
    run compared exactly the FLOOR form with the cast."""
    data = json.loads(RUN.read_text(encoding="utf-8"))
    doc = " ".join((REPO / "docs" / "performance.md").read_text(encoding="utf-8").split())
    rows = data["classes"]
    changed = [k for k, r in rows.items() if not r["same_sql"]]
    assert changed == [
        "sum",
        "avg_grouped",
        "var_stddev",
        "having_order_limit",
        "cte",
        "expression_aggregates",
    ]
    for k in changed:
        assert "FLOOR(" in data["sql"]["base"][k] and "FLOOR(" not in data["sql"]["now"][k]
        assert (
            data["sql"]["base"][k].replace("FLOOR(", "").replace(" + 0.5)", "")
            == (data["sql"]["now"][k])
        )
        r = rows[k]
        assert (
            f"{k} {r['base']:.3f} → {r['now']:.3f} ms ({r['base'] / r['raw']:.2f}× → "
            f"{r['now'] / r['raw']:.2f}× raw)" in doc
        )
    same = [rows[k]["now"] / rows[k]["base"] for k in rows if rows[k]["same_sql"]]
    assert f"the four classes whose SQL did not change took {min(same):.2f}–{max(same):.2f}" in doc


def test_the_ranges_runs_are_quoted() -> None:
    """docs/performance.md's paragraph on arithmetic over clamped columns quotes the two
    1 M-row runs (DuckDB and PostgreSQL): the commits compared, the changed class's SQL time
    before and after, and the unchanged classes' range; only expression_aggregates changed."""
    doc = " ".join((REPO / "docs" / "performance.md").read_text(encoding="utf-8").split())
    for name, engine in (
        ("SQL_AB_RANGES_1M.json", "duckdb"),
        ("SQL_AB_RANGES_PG_1M.json", "postgres"),
    ):
        data = json.loads((REPO / "benchmarks" / name).read_text(encoding="utf-8"))
        meta, rows = data["meta"], data["classes"]
        assert (meta["rows"], meta["engine"]) == (1_000_000, engine)
        assert (
            f"`{meta['base_commit'][:7]}` against `{meta['commit'][:7]}`, {meta['runs']} runs"
            in doc
        )
        changed = [k for k, r in rows.items() if not r["same_sql"]]
        assert changed == ["expression_aggregates"]
        r = rows["expression_aggregates"]
        assert (
            f"`benchmarks/{name}`): expression_aggregates {r['base']:.3f} → {r['now']:.3f} ms "
            f"({r['base'] / r['raw']:.2f}× → {r['now'] / r['raw']:.2f}× raw); the other nine "
            in doc
        )
        same = [r["now"] / r["base"] for r in rows.values() if r["same_sql"]]
        assert f"the other nine {min(same):.2f}–{max(same):.2f}" in doc

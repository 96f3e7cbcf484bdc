"""TPC-H data (dpproxy.tpch) against its privacy schema (schemas/tpch.yaml) and the specification.

Scale factor 0.01 is generated once for the module with ``tpchgen-cli``. The data must respect
every public fact the schema states (bounds, domains, types, the eight tables and all of their
columns), the primary and foreign keys must hold, and the row counts must be those of the TPC-H
specification (Clause 4.2.5). The schema is read with plain ``yaml.safe_load``, so these tests do
not depend on the catalog loader. The PostgreSQL copy is compared with the DuckDB file.
"""

from __future__ import annotations

import datetime as dt
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from dpproxy import tpch
from tests import pg

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "schemas" / "tpch.yaml"
SCHEMA: dict[str, Any] = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
SCALE = 0.01

# Clause 4.2.5: SF × 150,000 customers, SF × 1,500,000 orders, SF × 200,000 parts,
# SF × 10,000 suppliers, SF × 800,000 partsupp rows, 25 nations and 5 regions.
EXACT_ROWS = {
    "customer": 1_500,
    "orders": 15_000,
    "part": 2_000,
    "supplier": 100,
    "partsupp": 8_000,
    "nation": 25,
    "region": 5,
}
# About SF × 6,000,000 line items: 1 to 7 per order, 4 on average.
LINEITEM_ROWS = (57_000, 63_000)

STARTDATE = dt.date(1992, 1, 1)  # Clause 4.2.2.12
ENDDATE = dt.date(1998, 12, 31)

# schema type → the DuckDB types dpproxy.tpch stores it as.
DUCKDB_TYPES = {
    "integer": {"BIGINT", "INTEGER"},
    "float": {"DOUBLE"},
    "text": {"VARCHAR"},
    "date": {"DATE"},
}


def columns_where(predicate: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(table, column, definition) for every schema column satisfying ``predicate``."""
    return [
        (table, column, spec)
        for table, tdef in SCHEMA["tables"].items()
        for column, spec in tdef["columns"].items()
        if predicate(spec)
    ]


BOUNDED = columns_where(lambda c: "lower" in c or "upper" in c)
WITH_DOMAIN = columns_where(lambda c: "domain" in c)
DATES = columns_where(lambda c: c["type"] == "date")


def _ids(cases: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    return [f"{t}.{c}" for t, c, _ in cases]


@pytest.fixture(scope="module")
def tpch_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scale-0.01 TPC-H DuckDB file, generated once for the module."""
    path = tmp_path_factory.mktemp("tpch") / "sf001.duckdb"
    return tpch.generate_tpch(path, SCALE)


@pytest.fixture(scope="module")
def con(tpch_db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect(str(tpch_db), read_only=True)
    try:
        yield c
    finally:
        c.close()


def scalar(con: duckdb.DuckDBPyConnection, query: str) -> Any:
    row = con.execute(query).fetchone()
    assert row is not None
    return row[0]


# ------------------------------------------------------------------------------- the schema


def test_schema_shape() -> None:
    assert SCHEMA["version"] == 1
    assert SCHEMA["dataset"] == "tpch"
    assert SCHEMA["privacy"] == {
        "neighbouring": "add_remove",
        "epsilon": 1.0,
        "delta": 1.0e-6,
        "mechanism": "laplace",
        "budget": {"epsilon": 10, "delta": 1.0e-5},
    }
    tables = SCHEMA["tables"]
    assert set(tables) == set(tpch.TABLE_NAMES)
    assert tables["customer"]["private"] is True
    assert tables["customer"]["privacy_unit"] == "c_custkey"
    assert tables["customer"]["max_rows_per_unit"] == 1
    assert tables["orders"]["private"] is True
    assert tables["orders"]["privacy_unit"] == "o_custkey"
    assert "max_rows_per_unit" not in tables["orders"]
    assert tables["lineitem"]["private"] is True
    assert tables["lineitem"]["privacy_unit"] == {
        "via": "l_orderkey",
        "references": "orders.o_orderkey",
    }
    assert "max_rows_per_unit" not in tables["lineitem"]
    for public in ("nation", "region", "part", "supplier", "partsupp"):
        assert tables[public]["private"] is False
        assert set(tables[public]) == {"private", "columns"}


def test_schema_bounds_from_the_specification() -> None:
    cols = {(t, c): spec for t, c, spec in columns_where(lambda c: True)}
    expected = {
        ("lineitem", "l_quantity"): (1, 50),
        ("lineitem", "l_discount"): (0, 0.10),
        ("lineitem", "l_tax"): (0, 0.08),
        ("lineitem", "l_extendedprice"): (0, 50 * 2099),
        ("orders", "o_totalprice"): (0, 7 * 104950 * 1.08),
        ("customer", "c_acctbal"): (-999.99, 9999.99),
    }
    for key, (lower, upper) in expected.items():
        assert cols[key]["lower"] == pytest.approx(lower), key
        assert cols[key]["upper"] == pytest.approx(upper), key
    for key in [("customer", "c_custkey"), ("orders", "o_orderkey"), ("orders", "o_custkey")]:
        assert "lower" not in cols[key] and "upper" not in cols[key], key
    for key in [("lineitem", "l_orderkey"), ("lineitem", "l_partkey"), ("lineitem", "l_suppkey")]:
        assert "lower" not in cols[key] and "upper" not in cols[key], key
    assert len(cols[("nation", "n_name")]["domain"]) == 25
    assert len(cols[("region", "r_name")]["domain"]) == 5
    for (table, column), spec in cols.items():
        assert spec["type"] in DUCKDB_TYPES, (table, column)
        if column.endswith("comment"):  # random text: no domain (o_comment: 79 characters)
            want = {"type": "text", "max_length": 79} if column == "o_comment" else {"type": "text"}
            assert spec == want, (table, column)


def test_schema_lists_every_column_with_its_stored_type(con: duckdb.DuckDBPyConnection) -> None:
    for table in tpch.TABLES:
        stored = {
            name: kind
            for name, kind in con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position",
                [table.name],
            ).fetchall()
        }
        declared = SCHEMA["tables"][table.name]["columns"]
        assert list(declared) == list(stored), table.name
        for column, spec in declared.items():
            assert stored[column] in DUCKDB_TYPES[spec["type"]], (table.name, column)
            assert not spec.get("nullable", False), (table.name, column)
        nulls = " + ".join(f"count(*) - count({c})" for c in stored)
        assert scalar(con, f"SELECT {nulls} FROM {table.name}") == 0, table.name


# ---------------------------------------------------------------------------------- the data


@pytest.mark.parametrize(("table", "column", "spec"), BOUNDED, ids=_ids(BOUNDED))
def test_values_within_bounds(
    con: duckdb.DuckDBPyConnection, table: str, column: str, spec: dict[str, Any]
) -> None:
    row = con.execute(f"SELECT min({column}), max({column}) FROM {table}").fetchone()
    assert row is not None
    low, high = row
    assert spec["lower"] <= low <= high <= spec["upper"], (low, high)


@pytest.mark.parametrize(("table", "column", "spec"), WITH_DOMAIN, ids=_ids(WITH_DOMAIN))
def test_values_within_domain(
    con: duckdb.DuckDBPyConnection, table: str, column: str, spec: dict[str, Any]
) -> None:
    seen = {v for (v,) in con.execute(f"SELECT DISTINCT {column} FROM {table}").fetchall()}
    assert seen <= set(spec["domain"]), sorted(seen - set(spec["domain"]))
    # The generator is deterministic and scale 0.01 happens to use every value of every domain:
    # a domain value spelt differently from the generator's would show up here.
    assert seen == set(spec["domain"]), sorted(set(spec["domain"]) - seen)


@pytest.mark.parametrize(("table", "column", "spec"), DATES, ids=_ids(DATES))
def test_dates_within_the_specification(
    con: duckdb.DuckDBPyConnection, table: str, column: str, spec: dict[str, Any]
) -> None:
    row = con.execute(f"SELECT min({column}), max({column}) FROM {table}").fetchone()
    assert row is not None
    assert STARTDATE <= row[0] <= row[1] <= ENDDATE


def test_row_counts(con: duckdb.DuckDBPyConnection) -> None:
    for table, rows in EXACT_ROWS.items():
        assert scalar(con, f"SELECT count(*) FROM {table}") == rows, table
    lines = scalar(con, "SELECT count(*) FROM lineitem")
    assert LINEITEM_ROWS[0] <= lines <= LINEITEM_ROWS[1]
    per_order = "SELECT count(*) AS n FROM lineitem GROUP BY l_orderkey"
    assert scalar(con, f"SELECT min(n) FROM ({per_order})") >= 1
    assert scalar(con, f"SELECT max(n) FROM ({per_order})") <= 7
    assert scalar(con, "SELECT scale_factor FROM tpch_meta") == SCALE


def test_primary_keys_hold_and_are_declared(con: duckdb.DuckDBPyConnection) -> None:
    for table in tpch.TABLES:
        key = ", ".join(table.primary_key)
        total = scalar(con, f"SELECT count(*) FROM {table.name}")
        distinct = scalar(con, f"SELECT count(*) FROM (SELECT DISTINCT {key} FROM {table.name})")
        assert total == distinct, table.name
        declared = con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table.name],
        ).fetchall()
        assert [tuple(cols) for (cols,) in declared] == [table.primary_key], table.name
    assert {t.name: t.primary_key for t in tpch.TABLES} == {
        "customer": ("c_custkey",),
        "orders": ("o_orderkey",),
        "lineitem": ("l_orderkey", "l_linenumber"),
        "nation": ("n_nationkey",),
        "region": ("r_regionkey",),
        "part": ("p_partkey",),
        "supplier": ("s_suppkey",),
        "partsupp": ("ps_partkey", "ps_suppkey"),
    }


@pytest.mark.parametrize(
    ("child", "parent", "on"),
    [
        ("lineitem", "orders", "l_orderkey = o_orderkey"),
        ("orders", "customer", "o_custkey = c_custkey"),
        ("lineitem", "partsupp", "l_partkey = ps_partkey AND l_suppkey = ps_suppkey"),
        ("partsupp", "part", "ps_partkey = p_partkey"),
        ("partsupp", "supplier", "ps_suppkey = s_suppkey"),
        ("customer", "nation", "c_nationkey = n_nationkey"),
        ("supplier", "nation", "s_nationkey = n_nationkey"),
        ("nation", "region", "n_regionkey = r_regionkey"),
    ],
    ids=lambda v: v if v.isidentifier() else "on",
)
def test_foreign_keys_hold(
    con: duckdb.DuckDBPyConnection, child: str, parent: str, on: str
) -> None:
    assert scalar(con, f"SELECT count(*) FROM {child} ANTI JOIN {parent} ON {on}") == 0


def test_every_order_has_line_items_and_customers_follow_the_specification(
    con: duckdb.DuckDBPyConnection,
) -> None:
    no_lines = "SELECT count(*) FROM orders ANTI JOIN lineitem ON o_orderkey = l_orderkey"
    assert scalar(con, no_lines) == 0
    # Clause 4.2.3: customers whose key is a multiple of 3 place no orders.
    assert scalar(con, "SELECT count(*) FROM orders WHERE o_custkey % 3 = 0") == 0
    # o_totalprice is the sum over the order's line items (Clause 4.2.3). The generator rounds
    # each line's charge to the cent twice (after the discount and after the tax), so up to 7
    # lines differ from the exact sum by less than 7 × 2 cents.
    worst = scalar(
        con,
        "SELECT max(abs(o_totalprice - t)) FROM orders JOIN (SELECT l_orderkey, "
        "sum(l_extendedprice * (1 + l_tax) * (1 - l_discount)) AS t FROM lineitem "
        "GROUP BY l_orderkey) ON o_orderkey = l_orderkey",
    )
    assert worst < 0.14


# ------------------------------------------------------------------------ generate_tpch itself


def test_an_existing_file_of_the_same_scale_is_reused(tpch_db: Path) -> None:
    before = tpch_db.stat().st_mtime_ns
    started = time.perf_counter()
    assert tpch.generate_tpch(tpch_db, SCALE) == tpch_db
    assert time.perf_counter() - started < 5
    assert tpch_db.stat().st_mtime_ns == before


def test_another_scale_replaces_the_file(tmp_path: Path, tpch_db: Path) -> None:
    path = tmp_path / "t.duckdb"
    path.write_bytes(tpch_db.read_bytes())
    tpch.generate_tpch(path, 0.02)
    assert tpch.recorded_scale(path) == 0.02
    c = duckdb.connect(str(path), read_only=True)
    try:
        assert scalar(c, "SELECT count(*) FROM customer") == 3_000
    finally:
        c.close()
    assert [p.name for p in tmp_path.iterdir()] == ["t.duckdb"]  # no temporary leftovers


def test_a_scale_too_small_for_the_keys_is_refused_clearly(tmp_path: Path) -> None:
    # At scale 0.001 (10 suppliers) the specification's formula for ps_suppkey repeats a
    # supplier for some parts, so partsupp's primary key cannot hold.
    path = tmp_path / "t.duckdb"
    with pytest.raises(ValueError, match=r"partsupp.*primary key.*scale 0\.001"):
        tpch.generate_tpch(path, 0.001)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_generator_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="pip install tpchgen-cli"):
        tpch.generate_tpch(tmp_path / "x.duckdb", SCALE)
    assert not (tmp_path / "x.duckdb").exists()


@pytest.mark.parametrize("scale", [0, -1, float("nan"), float("inf")])
def test_invalid_scales_are_refused(tmp_path: Path, scale: float) -> None:
    with pytest.raises(ValueError, match="scale factor"):
        tpch.generate_tpch(tmp_path / "x.duckdb", scale)


# -------------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_schema(pg_server: pg.Server) -> Iterator[tuple[str, str]]:
    """(DSN, schema name): a fresh schema ``tpch_test_<8 hex>`` on the test server, dropped
    afterwards with everything in it."""
    import psycopg
    from psycopg import sql

    name = f"tpch_test_{secrets.token_hex(4)}"
    try:
        yield pg_server.admin_dsn, name
    finally:
        with psycopg.connect(pg_server.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_load_into_postgres_matches_duckdb(
    tpch_db: Path, con: duckdb.DuckDBPyConnection, pg_schema: tuple[str, str]
) -> None:
    import psycopg

    dsn, schema = pg_schema
    tpch.load_tpch_postgres(tpch_db, dsn, schema=schema)
    # Loading again drops and recreates the tables.
    tpch.load_tpch_postgres(tpch_db, dsn, schema=schema)
    checks = {
        "sum_extendedprice": "SELECT sum(l_extendedprice) FROM lineitem",
        "distinct_custkeys": "SELECT count(DISTINCT o_custkey) FROM orders",
        "sum_acctbal": "SELECT sum(c_acctbal) FROM customer",
        "last_shipdate": "SELECT max(l_shipdate) FROM lineitem",
        "urgent": "SELECT count(*) FROM orders WHERE o_orderpriority = '1-URGENT'",
    }
    with psycopg.connect(dsn, options=f"-c search_path={schema}") as conn:
        for table in tpch.TABLES:
            row = conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()
            assert row is not None
            assert row[0] == scalar(con, f"SELECT count(*) FROM {table.name}"), table.name
        for what, query in checks.items():
            row = conn.execute(query).fetchone()
            assert row is not None
            expected = scalar(con, query)
            if isinstance(expected, float):
                assert row[0] == pytest.approx(expected, rel=1e-12), what
            else:
                assert row[0] == expected, what
        keys = dict(
            conn.execute(
                "SELECT c.conrelid::regclass::text, array_agg(a.attname::text ORDER BY k.i) "
                "FROM pg_constraint c CROSS JOIN unnest(c.conkey) WITH ORDINALITY AS k(n, i) "
                "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n "
                "WHERE c.contype = 'p' AND c.connamespace = %s::regnamespace "
                "GROUP BY c.conrelid",
                (schema,),
            ).fetchall()
        )
        assert {t: tuple(cols) for t, cols in keys.items()} == {
            t.name: t.primary_key for t in tpch.TABLES
        }
        # ANALYZE ran: every table has planner statistics (pg_stats is transactional, unlike
        # the asynchronous pg_stat_user_tables.last_analyze).
        analysed = conn.execute(
            "SELECT count(DISTINCT tablename) FROM pg_stats WHERE schemaname = %s", (schema,)
        ).fetchone()
        assert analysed == (len(tpch.TABLES),)


def test_load_into_postgres_refuses_a_bad_schema_name(tpch_db: Path) -> None:
    with pytest.raises(ValueError, match="invalid schema name"):
        tpch.load_tpch_postgres(tpch_db, "postgresql://nobody@127.0.0.1:1/x", schema="A; drop")


def test_load_into_postgres_needs_a_tpch_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a TPC-H database"):
        tpch.load_tpch_postgres(tmp_path / "none.duckdb", "postgresql://nobody@127.0.0.1:1/x")

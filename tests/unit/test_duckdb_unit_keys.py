"""Which privacy-unit columns a DuckDB database proves unique (``DuckDBBackend.attach_catalog``).

``DESCRIBE`` decides a unit column that is its table's only ``PRI`` column; any other unit
column in a key is decided by ``duckdb_constraints()``. Each case is checked against the
constraints themselves: unique exactly when one PRIMARY KEY or UNIQUE constraint holds the unit
column alone and the column is NOT NULL (a UNIQUE column admits any number of NULLs, and the
rows whose unit is NULL are one unit).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog

# (the columns and constraints of table t, after "CREATE TABLE t(")
CASES = [
    "x INTEGER PRIMARY KEY, y INTEGER, z INTEGER",
    "x INTEGER, y INTEGER, z INTEGER, PRIMARY KEY (x, y)",
    "x INTEGER UNIQUE, y INTEGER, z INTEGER",
    "x INTEGER UNIQUE NOT NULL, y INTEGER, z INTEGER",
    "x INTEGER NOT NULL, y INTEGER NOT NULL, z INTEGER, UNIQUE (x, y)",
    "x INTEGER, y INTEGER, z INTEGER, UNIQUE (x, y)",
    "x INTEGER PRIMARY KEY, y INTEGER UNIQUE, z INTEGER",
    "x INTEGER PRIMARY KEY, y INTEGER UNIQUE NOT NULL, z INTEGER",
    "x INTEGER, y INTEGER, z INTEGER, PRIMARY KEY (x, y), UNIQUE (x)",
    "x INTEGER UNIQUE, y INTEGER, z INTEGER, PRIMARY KEY (x, y)",
    "x INTEGER PRIMARY KEY, y INTEGER, z INTEGER, UNIQUE (x, y)",
    "x INTEGER, y INTEGER PRIMARY KEY, z INTEGER, UNIQUE (x, z)",
    "x INTEGER, y INTEGER, z INTEGER",
]


def _schema(unit: str) -> str:
    return f"""\
version: 1
dataset: keys
privacy: {{neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}}
tables:
  t:
    private: true
    privacy_unit: {unit}
    columns:
      x: {{type: integer}}
      y: {{type: integer}}
      z: {{type: integer}}
  other:
    private: true
    privacy_unit: x
    columns:
      x: {{type: integer}}
"""


@pytest.mark.parametrize("ddl", CASES)
@pytest.mark.parametrize("unit", ["x", "y", "z"])
def test_a_unit_column_is_unique_exactly_when_a_key_holds_it_alone(
    ddl: str, unit: str, tmp_path: Path
) -> None:
    path = tmp_path / "keys.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE t({ddl})")
        con.execute("CREATE TABLE other(x INTEGER, y INTEGER, PRIMARY KEY (x, y))")
        keys = con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = 't' AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
        ).fetchall()
        not_null = {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM duckdb_columns() "
                "WHERE table_name = 't' AND NOT is_nullable"
            ).fetchall()
        }
    expected = [unit] in [list(k[0]) for k in keys] and unit in not_null
    backend = DuckDBBackend(path)
    try:
        catalog = backend.attach_catalog(parse_catalog(_schema(unit)))
    finally:
        backend.close()
    t, other = catalog.table("t"), catalog.table("other")
    assert t is not None and other is not None
    assert t.unit_is_unique is expected
    assert other.unit_is_unique is False  # x is one of two PRI columns: not a key alone

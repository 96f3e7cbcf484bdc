"""The bundled demo behind an :class:`Engine` on either engine, for tests that run one query
set on DuckDB and on PostgreSQL (``tests/attacks``, ``tests/fuzz``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.model import Catalog
from dpproxy.demo import load_demo_postgres
from dpproxy.engine import Engine
from dpproxy.values import Cost
from tests import pg


@contextlib.contextmanager
def demo_engine(
    kind: str,
    request: pytest.FixtureRequest,
    demo_db: Path,
    demo_catalog: Catalog,
    budget: Cost,
) -> Iterator[Engine]:
    """The demo on DuckDB (the bundled file) or on PostgreSQL (loaded into a fresh database
    of the ``pg_server`` fixture), with an in-memory ``budget``; closed afterwards."""
    accountant = MemoryAccountant(budget)
    if kind == "duckdb":
        engine = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=accountant)
        try:
            yield engine
        finally:
            engine.close()
        return
    server: pg.Server = request.getfixturevalue("pg_server")
    with pg.temporary_database(server.admin_dsn) as dsn:
        load_demo_postgres(dsn)
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        url = (
            f"postgresql://{info.get('user', 'postgres')}@{info.get('host', '127.0.0.1')}:"
            f"{info.get('port', 5432)}/{info['dbname']}"
        )
        engine = Engine(demo_catalog, PostgresBackend(url), accountant=accountant)
        try:
            yield engine
        finally:
            engine.close()

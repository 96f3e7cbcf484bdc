"""Hand-written SQL on an engine's own backend, for tests that compare it with dpproxy's.

dpproxy's PostgreSQL sessions search ``pg_catalog, pg_temp`` only (``backends/pg_path.py``): a
table is found by the schema the engine attached it from, which dpproxy's SQL names
(``sql/qualify.py``). :func:`backend_sql` names them so in a test's own SQL too.
"""

from __future__ import annotations

from dpproxy.engine import Engine
from dpproxy.release.noise import ExactResult
from dpproxy.sql.qualify import qualified_text


def backend_sql(engine: Engine, sql: str) -> str:
    """``sql`` as ``engine``'s backend runs it: unchanged but on PostgreSQL, where each table
    of the catalog gets its schema."""
    if engine.backend.dialect != "postgres":
        return sql
    return qualified_text(sql, engine.schemas)


def run_raw(engine: Engine, sql: str) -> ExactResult:
    """Run the hand-written ``sql`` on ``engine``'s backend (:func:`backend_sql`)."""
    return engine.backend.execute(backend_sql(engine, sql))

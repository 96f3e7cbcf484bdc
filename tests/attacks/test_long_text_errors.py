"""Named attack: one person's very long text decides whether PostgreSQL raises.

PostgreSQL stores up to 1 GB in one ``text`` value but refuses any single allocation of 1 GB
or more ("invalid memory alloc request size", "out of memory"). ``UPPER``/``LOWER`` copy their
text to wide characters (4 bytes a character), ``TRIM`` builds arrays per character, ``ILIKE``
lowers its text, ``||`` builds the result and a regular expression (the guard of a cast to
DATE) copies its text at 4 bytes a character: on a text of 280 MB each of these raised, so
``WHERE CASE WHEN uid = 12345 THEN UPPER(note) END = ''`` failed exactly when that person's
note was long — one exact bit per query that no noise covers. ``rewrite/textsize.py`` now
reads a text column under these operations as NULL beyond 262,144 characters, refuses (54001)
an operand that could still exceed 16 MB, and the cast guards test the length before the
pattern.

The database here has one unit with a note of 280,000,000 bytes; every query must be answered
(the oracle of ``tests/totality.py``) on it and on its neighbour without that unit. Its
character type is ``C.UTF-8`` where the server has it, as a production database's would be
(under the test databases' ``C``, UPPER, LOWER and ILIKE copy bytes and did not fail; TRIM,
``||`` and the cast did). PostgreSQL only: DuckDB computed all of these on such a text (its
strings reach 4 GB).
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from dpproxy.engine import Engine
from tests import pg
from tests.totality import PostgresWorld, check_query, neighbour

LONG = 280_000_000  # bytes: beyond 2^30 / 4, so a 4-bytes-a-character copy passes 1 GB
ROWS = (
    (1, 0, 0, 0, 0.0, 0.0, "X", "x" * LONG, True, datetime.date(2024, 1, 1)),
    (2, 1, 1, 1, 1.0, 1.0, "y", "2024-02-29", False, datetime.date(2024, 1, 2)),
    (3, 2, 2, 2, 2.0, 2.0, "X", " A ", None, None),
)

QUERIES = (
    "SELECT COUNT(*) FROM t WHERE UPPER(note) = ''",
    "SELECT COUNT(*) FROM t WHERE LOWER(note) = 'a'",
    "SELECT COUNT(*) FROM t WHERE TRIM(note) = 'A'",
    "SELECT COUNT(*) FROM t WHERE note ILIKE '%a%'",
    "SELECT COUNT(*) FROM t WHERE note || note || note || note = ''",
    "SELECT COUNT(*) FROM t WHERE CAST(note AS DATE) IS NULL",
    "SELECT COUNT(*) FROM t WHERE CASE WHEN uid = 1 THEN UPPER(note) END = ''",
    "SELECT LOWER(note) AS k, COUNT(*) FROM t GROUP BY 1",
)


@pytest.fixture(scope="module")
def engines(pg_server: pg.Server) -> Iterator[tuple[Engine, Engine]]:
    """The database and its neighbour, in a database whose LC_CTYPE is C.UTF-8 (or C)."""
    name = f"dpproxy_long_text_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server.admin_dsn, autocommit=True) as conn:
        for ctype in ("C.UTF-8", "C"):
            try:
                conn.execute(
                    sql.SQL(
                        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' "
                        "LC_COLLATE 'C' LC_CTYPE {}"
                    ).format(sql.Identifier(name), sql.Literal(ctype))
                )
                break
            except psycopg.Error:  # no such locale on this server
                continue
    world = PostgresWorld(make_conninfo(pg_server.admin_dsn, dbname=name))
    try:
        yield world.engines("rows", False, ROWS, neighbour(ROWS, 1))
    finally:
        world.close()
        pg.drop_database(pg_server.admin_dsn, name)


@pytest.mark.parametrize("sql", QUERIES)
def test_a_long_text_makes_no_error(engines: tuple[Engine, Engine], sql: str) -> None:
    outcomes = [check_query(e, sql) for e in engines]
    for o in outcomes:
        assert not o.violations, "\n\n".join(str(v) for v in o.violations)
    assert outcomes[0].refusal == outcomes[1].refusal == "accepted"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM t WHERE UPPER(UPPER(UPPER(UPPER(note)))) = ''",
        "SELECT COUNT(*) FROM t WHERE " + " || ".join(["note"] * 17) + " = ''",
    ],
)
def test_an_operand_that_could_pass_the_bound_is_refused(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    assert check_query(engines[0], sql, run=False).sqlstate == "54001"

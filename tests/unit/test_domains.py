"""Public GROUP BY domains narrowed by the query's own WHERE clause (``sql/domains.py``).

Groups that the WHERE clause excludes by its text are not released as zero rows; what cannot
be read exactly (an OR, another expression, a cast value) narrows nothing. The released rows of
a narrowed query are exactly the exact answer's groups (noise off)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import Cost
from tests.noise import NoNoise

SEXES = ("Female", "Male")


def domain(catalog: Catalog, sql: str) -> tuple[Any, ...] | None:
    return validate(parse(sql), catalog, sql).keys[0].domain


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("sex = 'Male'", ("Male",)),
        ("'Male' = sex", ("Male",)),
        ("sex <> 'Male'", ("Female",)),
        ("NOT sex = 'Male'", ("Female",)),
        ("sex IN ('Male', 'Alien')", ("Male",)),
        ("sex NOT IN ('Male')", ("Female",)),
        ("sex NOT IN ('Male', NULL)", ()),
        ("sex IN ('Alien')", ()),
        ("sex = NULL", ()),
        ("sex IS NOT NULL", SEXES),
        ("age > 30 AND (sex = 'Female')", ("Female",)),
        ("sex = 'Male' OR age > 80", SEXES),  # an OR narrows nothing
        ("UPPER(sex) = 'MALE'", SEXES),  # another expression narrows nothing
        ("sex = 'Male' AND sex = 'Female'", ()),
    ],
)
def test_the_where_clause_narrows_the_domain(
    demo_catalog: Catalog, where: str, expected: tuple[Any, ...]
) -> None:
    sql = f"SELECT sex, COUNT(*) FROM adult WHERE {where} GROUP BY sex"
    assert domain(demo_catalog, sql) == expected


def test_a_nullable_key_loses_its_null_group(demo_catalog: Catalog) -> None:
    full = domain(demo_catalog, "SELECT workclass, COUNT(*) FROM adult GROUP BY workclass")
    assert full is not None and None in full
    narrowed = domain(
        demo_catalog,
        "SELECT workclass, COUNT(*) FROM adult WHERE workclass IS NOT NULL GROUP BY workclass",
    )
    assert narrowed == tuple(v for v in full if v is not None)
    only_null = domain(
        demo_catalog,
        "SELECT workclass, COUNT(*) FROM adult WHERE workclass IS NULL GROUP BY workclass",
    )
    assert only_null == (None,)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT workclass, AVG(hours_per_week) FROM adult "
        "WHERE workclass IN ('Private', 'Self-emp-inc', 'Self-emp-not-inc') GROUP BY workclass",
        "SELECT occupation, COUNT(*) FROM adult WHERE occupation IS NOT NULL AND age > 30 "
        "GROUP BY occupation",
        "SELECT sex, race, COUNT(*) FROM adult WHERE sex = 'Female' AND race <> 'White' "
        "GROUP BY sex, race",
    ],
)
def test_released_groups_are_the_exact_groups(
    demo_db: Path, demo_catalog: Catalog, sql: str
) -> None:
    engine = Engine(
        demo_catalog,
        DuckDBBackend(demo_db),
        accountant=MemoryAccountant(Cost(Fraction(100)), cache="off"),
        noise=NoNoise(),
    )
    try:
        released = engine.run(sql, analyst="t").released.rows
    finally:
        engine.close()
    con = duckdb.connect(str(demo_db), read_only=True)
    try:
        exact = con.execute(sql).fetchall()
    finally:
        con.close()
    keys = len(exact[0]) - 1
    assert sorted(r[:keys] for r in released) == sorted(r[:keys] for r in exact)

"""An analyst corpus: queries written the way a data analyst writes them, over the Adult demo
(``dpproxy/data/adult.yaml``, one row per person) and TPC-H at scale 0.01 (``schemas/tpch.yaml``,
the customer as privacy unit), in ``tests/corpus/analyst/*.sql`` (the format of
``tests/fixtures.py``, one statement per case).

Each case says what dpproxy does with it today, in its headers:

* ``-- expect: answered``: the query is answered as written (the engine draws its own bound on
  rows per unit), and once more with a ``max_rows`` hint that never binds and ε = 1000, with
  the noise off (so that private groups of a few units pass the selection threshold); every
  row released by the second run equals a row of the exact answer of the same SQL run directly
  on DuckDB (the LIMIT removed, since private groups are selected with noise before the LIMIT
  applies; numbers to 1e-9 relative), and when no group was selected with noise and there is no
  LIMIT, every exact row is released too. ``-- compare: keys N`` compares only the released
  rows whose first N columns (the group keys) occur in the exact answer: the other rows are
  groups of a public domain released zero-filled, which the exact SQL has no row for.
  ``-- compare: none`` skips the comparison where it does not apply (a statistic released
  through a DP selection or sample-and-aggregate even with the noise off, or windows that rank
  zero-filled groups too). A comment line in the case says why.
* ``-- expect: <SQLSTATE>`` with ``-- reason:``: the query is refused with that SQLSTATE, and
  the message and hint name no internal construct (a ``__`` name, a sqlglot class, a function
  name the analyst did not write). ``-- bug:`` marks a refusal whose message is known to name
  one; the check is then expected to fail, and fails the test once it passes.

The marks are a ratchet: a query whose outcome changes fails here until its mark is updated,
so docs/sql.md's count ("analyst queries") stays what this test measures.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.values import Cost
from tests.corpus.exact import exact_rows, matches
from tests.fixtures import Case, parse_cases
from tests.noise import NoNoise

HERE = Path(__file__).parent / "analyst"
HUGE = Cost(Fraction(10**6), Fraction(1, 2))
HINT = "/*+ dpproxy max_rows=1000 */ "  # a unit has fewer rows than this in both datasets
LOUD = Fraction(1000)  # the largest ε per query: private groups of a few units pass τ
ANSWERED = "answered"
SQLSTATE = re.compile(r"^[0-9A-Z]{5}$")
COMPARE = re.compile(r"^(none|keys ([1-9]))$")

CASES: list[Case] = [
    case
    for path in sorted(HERE.glob("*.sql"))
    for case in parse_cases(path.read_text(encoding="utf-8"), path.name)
]
BY_ID = {case.id: case for case in CASES}

# Internal names: Python dunders, tracebacks, sqlglot's own names of what the analyst wrote.
INTERNAL = re.compile(r"__|Traceback|sqlglot|<class |\bexp\.|timestamp_trunc|time_to_str", re.I)
# "function f() ...", "the aggregate F ...", "the window function F ...": F must be the
# analyst's own word, not sqlglot's normalized name for it (STRPOS read as str_position).
NAMED = re.compile(r"function (\w+)\(\)|the (?:aggregate|window function) ([A-Z][A-Z0-9_]*)\b")
CAMEL = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b")  # GroupConcat, TimestampTrunc


def _internal_names(text: str, sql: str) -> list[str]:
    """The internal names in a refusal's ``text`` (message and hint) for the query ``sql``."""
    found = [m.group(0) for m in INTERNAL.finditer(text)]
    lowered = sql.lower()
    for m in NAMED.finditer(text):
        name = m.group(1) or m.group(2)
        if name.lower() not in lowered:
            found.append(name)
    found += [w for w in CAMEL.findall(text) if w.lower() not in lowered]
    return found


def test_the_corpus_is_large_enough_and_well_formed() -> None:
    assert len(BY_ID) == len(CASES), "two cases of one file share a title"
    for case in CASES:
        assert len(case.statements) == 1, case.id
        assert case.get("schema") in {"adult", "tpch"}, case.id
        expect = case.get("expect") or ""
        assert expect == ANSWERED or SQLSTATE.match(expect), case.id
        if expect != ANSWERED:
            assert case.get("reason"), f"{case.id}: a refusal needs a -- reason:"
            assert case.get("compare") is None, case.id
        assert COMPARE.match(case.get("compare") or "none"), case.id
        assert case.get("bug") is None or expect != ANSWERED, case.id
    schemas = [case.get("schema") for case in CASES]
    assert len(CASES) >= 150
    assert schemas.count("adult") >= 90
    assert schemas.count("tpch") >= 60


@pytest.fixture(scope="module")
def engines(demo_db: Path, demo_catalog: Catalog, tpch_db: Any) -> Iterator[dict[str, Any]]:
    made = {
        "adult": (
            demo_db,
            Engine(
                demo_catalog,
                DuckDBBackend(demo_db),
                accountant=MemoryAccountant(HUGE, cache="off"),
                noise=NoNoise(),
            ),
        ),
        "tpch": (
            tpch_db.path,
            Engine(
                tpch_db.catalog(),
                DuckDBBackend(tpch_db.path),
                accountant=MemoryAccountant(HUGE, cache="off"),
                noise=NoNoise(),
            ),
        ),
    }
    yield made
    for _, engine in made.values():
        engine.close()








@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_analyst_query(case_id: str, engines: dict[str, Any]) -> None:
    case = BY_ID[case_id]
    sql, expect = case.statements[0], case.get("expect")
    path, engine = engines[case.get("schema") or ""]
    if expect != ANSWERED:
        with pytest.raises(DPProxyError) as refused:
            engine.run(sql, analyst="t")
        error = refused.value
        assert error.sqlstate == expect, error
        leaked = _internal_names(error.message + " " + (error.hint or ""), sql)
        if case.get("bug"):
            assert leaked, f"fixed: remove the -- bug: header of {case_id}"
            pytest.xfail(f"{case.get('bug')}: {leaked}")
        assert not leaked, (leaked, error.message, error.hint)
        return
    engine.run(sql, analyst="t")  # as written: answered
    answer = engine.run(HINT + sql, analyst="t", epsilon=LOUD)
    compare = COMPARE.match(case.get("compare") or "")
    if compare and compare.group(1) == "none":
        return
    released = [tuple(r) for r in answer.released.rows]
    exact = exact_rows(path, sql)
    if compare:  # keys N: the rows of groups the exact answer has
        keys = int(compare.group(2))
        released = [r for r in released if matches(r[:keys], [e[:keys] for e in exact])]
        assert released, "no released group occurs in the exact answer"
    missing = [r for r in released if not matches(r, exact)]
    assert not missing, (missing[:3], exact[:3])
    limited = sqlglot.parse_one(sql, read="postgres").args.get("limit") is not None
    if getattr(answer.plan, "selection", None) is None and not limited:
        assert len(released) >= len(exact), (released[:3], exact[:3])


def test_the_readme_states_the_measured_count() -> None:
    answered = sum(case.get("expect") == ANSWERED for case in CASES)
    sql_doc = (Path(__file__).parents[2] / "docs" / "sql.md").read_text(encoding="utf-8")
    claim = f"**{answered} of {len(CASES)} analyst queries**"
    assert claim in sql_doc, f"docs/sql.md must say {claim}"

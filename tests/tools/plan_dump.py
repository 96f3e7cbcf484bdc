"""Every corpus query's plan, rewritten SQL, drawn laws and refusals, written to one text file:
run it before and after a change that must not change any of them (a speed-up, a refactor) and
compare the two files byte for byte::

    PLAN_DUMP=/tmp/before.txt python -m pytest -q tests/tools/plan_dump.py
    # ... the change ...
    PLAN_DUMP=/tmp/after.txt python -m pytest -q tests/tools/plan_dump.py
    cmp /tmp/before.txt /tmp/after.txt

Not part of the suite (its name is not ``test_*``; given on the command line, pytest runs it):
it asserts nothing, it records. The queries: every rewrite and refusal fixture, the analyst
and TPC-H corpora and ``benchmarks/bench_plan.py``'s classes, each prepared on the four
fixture schemas (Adult, the visits tables by rows and by groups, TPC-H) by the canonical engine
and by the one that reads the DuckDB file's scanned bounds, with the secret fixed; for each
canonical plan also its repr, its SQL for PostgreSQL and Spark and the laws its noise is
drawn from (``release/noise``), or the refusal's SQLSTATE and message. About 15 s.
"""

from __future__ import annotations

import os
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.release.noise import drawn
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.values import Cost
from tests.fixtures import FIXTURES, parse_cases
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
TESTS = Path(__file__).resolve().parents[1]
SECRET = 12345


def queries() -> list[str]:
    """The texts dumped, in a fixed order."""
    out: list[str] = []
    for sub in ("rewrite", "reject"):
        for path in sorted((FIXTURES / sub).glob("*.sql")):
            out += [c.statements[0] for c in parse_cases(path.read_text("utf-8"), str(path))]
    for path in sorted((TESTS / "corpus" / "analyst").glob("*.sql")):
        out += [s for c in parse_cases(path.read_text("utf-8"), str(path)) for s in c.statements]
    for path in sorted((TESTS / "corpus" / "tpch").glob("*.sql")):
        out.append(path.read_text("utf-8").strip().rstrip(";"))
    sys.path.insert(0, str(TESTS.parent / "benchmarks"))
    from bench_plan import QUERIES

    return out + list(QUERIES.values())


def _refused(err: DPProxyError) -> str:
    return f"ERR {err.sqlstate} {err}"


def _canonical(plan: Any) -> list[str]:
    """A canonical plan's repr, its SQL on the other dialects and its drawn laws."""
    lines = [f"  plan {plan!r}"]
    for dialect in ("postgres", "spark"):
        try:
            lines.append(f"  {dialect}: {rewrite(plan, SECRET, dialect)!r}")
        except DPProxyError as err:
            lines.append(f"  {dialect}: {_refused(err)}")
    try:
        lines.append(f"  drawn {[drawn(plan, r).mechanism for r in plan.releases]!r}")
    except DPProxyError as err:
        lines.append(f"  drawn {_refused(err)}")
    return lines


def test_dump(demo_db: Any, demo_catalog: Any, multi_db: Any, tpch_db: Any) -> None:
    def engine(catalog: Any, path: Any) -> Engine:
        return Engine(catalog, DuckDBBackend(path), accountant=MemoryAccountant(HUGE),
                      noise=NoNoise())  # fmt: skip

    engines = {"adult": engine(demo_catalog, demo_db)}
    for name in ("visits_rows", "visits_groups"):
        engines[name] = engine(multi_db.catalog(name), multi_db.path)
    engines["tpch"] = engine(tpch_db.catalog(), tpch_db.path)
    texts = queries()
    lines: list[str] = []
    try:
        for name, made in engines.items():
            for variant, e in (("canon", made.canonical()), ("run", made)):
                for sql in texts:
                    head = f"{name}|{variant}|{sql}\n  => "
                    try:
                        prepared = e.prepare(sql, secret=SECRET)
                    except DPProxyError as err:
                        lines.append(head + _refused(err))
                        continue
                    lines.append(head + repr(prepared.statements))
                    if variant == "canon" and hasattr(prepared.plan, "primitives"):
                        lines += _canonical(prepared.plan)
    finally:
        for made in engines.values():
            made.close()
    out = Path(os.environ.get("PLAN_DUMP", "plan_dump.txt"))
    out.write_text(re.sub(r" at 0x[0-9a-f]+", "", "\n".join(lines)) + "\n", encoding="utf-8")
    print(f"{len(texts)} queries, {len(lines)} lines: {out}")

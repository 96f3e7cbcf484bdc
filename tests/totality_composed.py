"""Queries planned in parts, for the totality property (``tests/totality.py``).

A query planned in parts (``planning/scalars.py``, ``planning/relations.py``, ``union.py``)
releases its parts first and then runs an outer query with the released values written in.
Every defect of that kind found so far (a released value beyond ±1e308 after arithmetic, an
outer query over a released relation that casts or divides, a charge for an outer query that
fails on every database) came from hand-built cases, because the generator of
``tests/totality.py`` never wrote such a query. These shapes close that gap:

* **scalar subqueries in a private query's WHERE**: ``… WHERE <num> < (SELECT AGG(m) FROM t)``,
  the released value often post-processed (``* 1e308``, ``/ 0``, ``CAST … AS INTEGER``) inside
  the subquery, in a CASE around it, or (a near miss) outside it;
* **scalar subqueries in a query with no table** (``SELECT (SELECT SUM(m) FROM t) * 2``): the
  outer query is public post-processing of released numbers;
* **released relations**: an outer aggregate, filter or expression over a grouped private
  subquery (``SELECT SUM(v) FROM (SELECT cat, SUM(si) AS v FROM t GROUP BY cat) AS x``),
  held by ``planning/released.py`` to a total subset, so many of these are refused (0A000) —
  near misses on purpose;
* **UNION ALL** of two generated queries (``union.py``: each branch a query of its own).

The oracle is the same (``tests.totality.check_queries``): refused before the data, or every
prepared statement runs (for a composed query the parts', then the outer query's over an empty
stand-in for the released values) and :meth:`Engine.run` answers with the noise off, and the
refusal and the parts' statements are the same on the database and on its neighbour. The outer
query's values differ between the two by design (they are the released numbers), so only the
run on the database checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.totality import QueryGen

# Post-processing of a released number: harmless, huge, dividing, casting, or non-finite.
POST = (
    "{}",
    "{} * 2",
    "{} * 1e308",
    "{} * 1e308 * 1e308",
    "{} / 0",
    "{} / 3",
    "-{}",
    "CAST({} AS INTEGER)",
    "CAST({} AS BIGINT)",
    "ROUND({}, 2)",
    "ABS({})",
    "COALESCE({}, 0)",
    "SQRT({})",
    "LN({})",
    "{} % 2",
    "CASE WHEN {} > 0 THEN 1 ELSE 0 END",
)
INNER_AGGREGATES = ("SUM", "AVG", "MIN", "MAX", "COUNT")
OUTER_AGGREGATES = ("SUM", "AVG", "MIN", "MAX", "COUNT")
RELATION_KEYS = ("cat", "flag", "si", "EXTRACT(YEAR FROM day)")


def composed_query(gen: QueryGen, depth: int) -> str:
    """One query planned in parts (module docstring), drawn with ``gen``'s strategies."""
    kind = gen.pick(("scalar_where", "scalar_where", "scalar_select", "released", "union"))
    if kind == "scalar_where":
        return scalar_where(gen, depth)
    if kind == "scalar_select":
        return scalar_select(gen, depth)
    if kind == "released":
        return released_relation(gen, depth)
    return union_all(gen, depth)


def scalar(gen: QueryGen, depth: int) -> str:
    """An uncorrelated scalar subquery over ``t``, its value often post-processed: inside the
    subquery (``SELECT SUM(m) * 1e308 FROM t``), in a CASE around it, or (refused: a scalar
    subquery must be one side of a comparison) outside it."""
    agg = gen.pick(INNER_AGGREGATES)
    arg = "*" if agg == "COUNT" and gen.chance(50) else gen.measure(depth)
    value = f"{agg}({arg})"
    if gen.chance(40):
        value = gen.pick(POST).format(value)
    sub = f"(SELECT {value} FROM t"
    if gen.chance(40):
        sub += f" WHERE {gen.cond(max(depth - 1, 0))}"
    sub += ")"
    if gen.chance(15):
        return f"CASE WHEN {sub} > {gen.pick(('0', '1e308', '-1'))} THEN 1 ELSE 0 END"
    return gen.pick(POST).format(sub) if gen.chance(15) else sub


def scalar_where(gen: QueryGen, depth: int) -> str:
    """A private aggregate filtered by a comparison with a released scalar."""
    cmp = gen.pick(("<", ">", "=", "<>", ">=", "<="))
    where = f"{gen.num(max(depth - 1, 0))} {cmp} {scalar(gen, depth)}"
    if gen.chance(30):
        where = f"{gen.cond(max(depth - 1, 0))} AND {where}"
    return f"SELECT {gen.aggregate(depth)} FROM t WHERE {where}"


def scalar_select(gen: QueryGen, depth: int) -> str:
    """Released scalars combined by a query with no table."""
    first = scalar(gen, depth)
    if gen.chance(40):
        op = gen.pick(("+", "-", "*", "/"))
        return f"SELECT {first} {op} {scalar(gen, max(depth - 1, 0))}"
    return f"SELECT {first}"


def released_relation(gen: QueryGen, depth: int) -> str:
    """An outer query over a grouped private subquery released first."""
    key = gen.pick(RELATION_KEYS)
    agg = gen.pick(INNER_AGGREGATES)
    arg = "*" if agg == "COUNT" else gen.measure(max(depth - 1, 0))
    inner = f"SELECT {key} AS k, {agg}({arg}) AS v FROM t"
    if gen.chance(30):
        inner += f" WHERE {gen.cond(max(depth - 1, 0))}"
    inner += " GROUP BY 1"
    value = gen.pick(POST).format("v") if gen.chance(40) else "v"
    outer_agg = gen.pick(OUTER_AGGREGATES)
    select = "COUNT(*)" if outer_agg == "COUNT" and gen.chance(50) else f"{outer_agg}({value})"
    grouped = gen.chance(25)
    sql = f"SELECT {'k, ' if grouped else ''}{select} FROM ({inner}) AS x"
    if gen.chance(35):
        sql += f" WHERE v {gen.pick(('>', '<', '='))} {gen.pick(('0', '1', '-1', '1e308', '0.5'))}"
    return sql + (" GROUP BY k" if grouped else "")


def union_all(gen: QueryGen, depth: int) -> str:
    """Two single-aggregate queries over ``t`` under UNION ALL (``union.py``)."""
    d = max(depth - 1, 0)
    branches = []
    for _ in range(2):
        branch = f"SELECT {gen.aggregate(d)} FROM t"
        if gen.chance(50):
            branch += f" WHERE {gen.cond(d)}"
        branches.append(branch)
    return " UNION ALL ".join(branches)

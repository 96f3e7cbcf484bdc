"""Which of dpproxy's statements DuckDB runs without its optimizer: those that read small
stored tables, without a join or an ``EXISTS``.

Why. Over 1,000 rows DuckDB spends about 0.15 ms of a 0.3-0.7 ms aggregate in its optimizer
(binding the plan once more, statistics, some fifty passes), more than the passes save on so few
rows: a cursor with ``PRAGMA disable_optimizer`` ran the rewritten ``VARIANCE`` + ``STDDEV`` of
``benchmarks/bench_issue21.py`` 0.17 ms faster, the grouped ``AVG`` 0.15 ms and a filtered
``COUNT`` 0.12 ms (paired runs, 1,000 rows; 0.13-0.17 ms at 10,000 rows), and the statements
with contribution bounding (a window over the rows) 0.4-0.9 ms faster at 1,000 and 5,000 rows.
At 10,000 rows the bounded ones broke even (−0.23 to +0.08 ms of 7-9 ms); at 20,000 a bounded
grouped ``AVG`` lost 1.1 ms of 9.6, and from 50,000 rows the statistics the optimizer
propagates (integer group keys, sums of narrow integers) win more than they cost in unbounded
ones too. Disabling the passes one by one saved nothing measurable: the cost is the optimizer
as a whole. So a statement runs on the thread's unoptimised cursor (``DuckDBBackend``) when
:func:`plain` holds for it and every stored table it reads holds at most :data:`LIGHT_ROWS` rows
by DuckDB's own count (``duckdb_tables().estimated_size``, read once when the catalog is
attached; the file is read-only, so it cannot change while it is open). The decision parses
the statement with sqlglot once, when ``DuckDBBackend`` keeps it at its second run (0.2 ms for
a COUNT, 1.1-1.4 ms for a statement with contribution bounding); a text run once is planned
as before.

Why the answers are the same. An optimizer rewrites a plan into an equivalent one; the values
of dpproxy's statements do not depend on the plan: its sums are fixed-point BIGINTs added exactly
(``rewrite/fixed.py``), its counts, MIN/MAX and keys are exact, and every row expression is a
deterministic function of its row. Nor can the unoptimised plan fail where the optimised one
does not: every expression of the rewritten SQL is total on every row of a database that
satisfies the schema, whatever the order in which conditions are evaluated (the optimizer may
reorder them, so the totality argument never relied on an order), and an unoptimised plan
evaluates exactly the expressions the statement writes, on the rows the statement reads (a
CASE still evaluates a branch only for the rows that select it). The differential test
``tests/integration/test_light_statements.py`` runs the statements of the totality families and
of generated cases on both cursors and compares the rows; ``tests/property/test_totality.py``
checks totality on the unoptimised cursor as well.

Why no join. Without the optimizer nothing pushes a WHERE equality into a join: ``FROM a, b
WHERE a.k = b.k`` (how ``sql/joins.py`` prints a join) would be a cross product. Nor ``EXISTS``,
whose dependent join the optimizer simplifies. A derived table (``FROM (SELECT …)``), a CTE, a
``UNION ALL`` and the ``IN (SELECT …)`` of contribution bounding (``rewrite/bound.py``) are
planned as written: the ``IN`` is a hash (mark) join on its own column, made by DuckDB's
planner, not its optimizer.

What it reveals. The choice depends on the number of rows of the tables (a fact of the data, as
is the scan of ``backends/scanned.py``), and changes only how long a statement takes, never its
rows nor whether it fails: a timing difference, on which SECURITY.md says what dpproxy does and
does not claim.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

#: Largest stored table (rows, DuckDB's count) read by a statement run without the optimizer.
LIGHT_ROWS = 10_000


def plain(sql: str, small: Collection[str]) -> bool:
    """Does ``sql`` (dpproxy's own DuckDB SQL) read only tables named in ``small`` (lower case),
    with no join, no ``EXISTS`` and no subquery but in a FROM, a WITH, a ``UNION ALL`` or the
    list of an ``IN``? False for anything else, and for a text sqlglot does not parse."""
    if not small:
        return False
    try:
        tree = parse_one(sql, read="duckdb")
    except (SqlglotError, RecursionError, ValueError):
        return False
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in tree.walk():
        if isinstance(node, exp.Join | exp.Exists | exp.Lateral):
            return False
        if isinstance(node, exp.Union) and node.args.get("distinct") is not False:
            return False  # UNION ALL only
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.In):
            return False
        if isinstance(node, exp.Select) and node is not tree:
            if not isinstance(node.parent, exp.Subquery | exp.CTE | exp.Union):
                return False
        if isinstance(node, exp.Table):
            name = node.name.lower()
            if name not in ctes and (name not in small or node.args.get("db")):
                return False
    return True

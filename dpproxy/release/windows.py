"""Window functions over the released rows (``sql/windows.py`` says what is accepted and why
it is post-processing).

:func:`compute_windows` runs after HAVING and before ORDER BY and LIMIT, as SQL does, on the
environments of the rows that survived HAVING (their keys, noisy aggregates and interval ends),
and stores each window's value in the environment as ``__win_<i>``. Semantics are PostgreSQL's:

* rows are partitioned by the PARTITION BY values (NULLs form one partition) and sorted by the
  window's ORDER BY (ASC puts NULLs last, DESC first, unless NULLS FIRST/LAST says otherwise);
  rows that sort equal are *peers*;
* ``ROW_NUMBER`` numbers the sorted rows from 1 (peers in the order of the released groups);
  ``RANK`` is 1 + the rows before the first peer, ``DENSE_RANK`` 1 + the distinct peer groups
  before, ``PERCENT_RANK`` (rank − 1) / (rows − 1) (0 for one row), ``CUME_DIST`` the fraction
  of rows up to the last peer; ``NTILE(n)`` splits the sorted rows into n buckets numbered
  from 1 whose sizes differ by at most one, the larger ones first (peers may fall in different
  buckets, in the order of the released groups), as PostgreSQL does;
* ``SUM``/``AVG``/``COUNT``/``MIN``/``MAX`` cover the partition, or with an ORDER BY the rows up
  to the current row's last peer (SQL's default frame); NULL arguments are skipped, and SUM, AVG,
  MIN and MAX of no value are NULL, COUNT of none is 0;
* ``LAG``/``LEAD(x, k, d)`` take x of the row k rows before/after in the partition's order, or
  d (NULL when not given) beyond its ends.

Total: every step is defined on every input; an undefined value (a sum that overflows to ±∞ is
still a value) is NULL, never an error, since the query is already charged when this runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: sql/windows.py is imported by a query with a window
    from dpproxy.sql.windows import WindowItem

Env = dict[str, Any]
Evaluate = Callable[[Any, Env], Any]


def compute_windows(windows: Sequence[WindowItem], envs: Sequence[Env], evaluate: Evaluate) -> None:
    """Set ``env["__win_<i>"]`` in every env of ``envs`` (the released rows, in their order)."""
    for i, w in enumerate(windows):
        name = f"__win_{i}"
        partitions: dict[tuple[Any, ...], list[int]] = {}
        for r, env in enumerate(envs):
            key = tuple(_hashable(evaluate(p, env)) for p in w.partition)
            partitions.setdefault(key, []).append(r)
        for rows in partitions.values():
            ordered = _sorted(w, rows, envs, evaluate)
            for r, value in zip(ordered, _values(w, ordered, envs, evaluate), strict=True):
                envs[r][name] = value


def _hashable(v: Any) -> Any:
    return ("float", float(v)) if isinstance(v, int | float) and not isinstance(v, bool) else v


def _sort_key(w: WindowItem, env: Env, evaluate: Evaluate) -> tuple[Any, ...]:
    parts: list[Any] = []
    for item in w.order:
        v = evaluate(item.expr, env)
        # NULL first or last (after the flip a descending sort makes), then the value
        null_rank = 0 if item.nulls_first else 2
        parts.append((null_rank, 0) if v is None else (1, _Desc(v) if item.desc else v))
    return tuple(parts)


class _Desc:
    """Reverses the order of one value inside an ascending sort key."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return bool(other.v < self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and bool(self.v == other.v)

    def __hash__(self) -> int:
        return hash(self.v)


def _sorted(w: WindowItem, rows: list[int], envs: Sequence[Env], evaluate: Evaluate) -> list[int]:
    if not w.order:
        return rows
    return sorted(rows, key=lambda r: _sort_key(w, envs[r], evaluate))  # stable: ties in order


def _values(
    w: WindowItem, ordered: list[int], envs: Sequence[Env], evaluate: Evaluate
) -> list[Any]:
    n = len(ordered)
    keys = [_sort_key(w, envs[r], evaluate) for r in ordered]
    # peer group of each position: [first, last] positions of the rows that sort equal
    first, last = [0] * n, [0] * n
    start = 0
    for pos in range(1, n + 1):
        if pos == n or keys[pos] != keys[start]:
            for p in range(start, pos):
                first[p], last[p] = start, pos - 1
            start = pos
    if w.function == "row_number":
        return list(range(1, n + 1))
    if w.function == "rank":
        return [first[p] + 1 for p in range(n)]
    if w.function == "dense_rank":
        dense, out, seen = 0, [], -1
        for p in range(n):
            if first[p] != seen:
                dense, seen = dense + 1, first[p]
            out.append(dense)
        return out
    if w.function == "percent_rank":
        return [0.0 if n == 1 else first[p] / (n - 1) for p in range(n)]
    if w.function == "cume_dist":
        return [(last[p] + 1) / n for p in range(n)]
    if w.function == "ntile":
        return _ntile(n, w.buckets)
    args = [None if w.argument is None else evaluate(w.argument, envs[r]) for r in ordered]
    if w.function in ("lag", "lead"):
        step = -w.offset if w.function == "lag" else w.offset
        shifted: list[Any] = []
        for p in range(n):
            q = p + step
            if 0 <= q < n:
                shifted.append(args[q])
            else:
                d = None if w.default is None else evaluate(w.default, envs[ordered[p]])
                shifted.append(d)
        return shifted
    if not w.order:  # the whole partition
        whole = _aggregate(w, args, n)
        return [whole] * n
    return [_aggregate(w, args[: last[p] + 1], last[p] + 1) for p in range(n)]


def _ntile(rows: int, buckets: int) -> list[int]:
    """PostgreSQL's NTILE over ``rows`` sorted rows: ``rows // buckets`` rows per bucket, one
    more in each of the first ``rows % buckets`` buckets (so with fewer rows than buckets, row
    i is in bucket i).

    >>> _ntile(10, 4)
    [1, 1, 1, 2, 2, 2, 3, 3, 4, 4]
    >>> _ntile(2, 5)
    [1, 2]
    """
    per, extra = divmod(rows, buckets)
    out: list[int] = []
    for bucket in range(1, buckets + 1):
        out += [bucket] * (per + (1 if bucket <= extra else 0))
    return out


def _aggregate(w: WindowItem, args: list[Any], rows: int) -> Any:
    if w.function == "count":
        return rows if w.argument is None else sum(v is not None for v in args)
    values = [v for v in args if v is not None]
    if not values:
        return None
    if w.function == "sum":
        return sum(values)
    if w.function == "avg":
        return sum(float(v) for v in values) / len(values)
    try:
        return min(values) if w.function == "min" else max(values)
    except TypeError:  # unreachable: the argument is typed statically (one type)
        return None

"""``dpproxy.read_sql``: a DP answer as a pandas DataFrame, with its 95% intervals and its cost.

>>> import dpproxy
>>> df = dpproxy.read_sql("SELECT sex, AVG(age) AS age FROM adult GROUP BY sex")  # doctest: +SKIP
>>> list(df.columns)                                                            # doctest: +SKIP
['sex', 'age', 'age_low', 'age_high']
>>> df.attrs["privacy_cost"], df.attrs["epsilon"]                               # doctest: +SKIP
(Cost(epsilon=Fraction(1, 1), ...), 1.0)

pandas is imported here, at the first call, never by ``import dpproxy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpproxy.dbapi import Connection, Cursor, connect

if TYPE_CHECKING:
    import pandas as pd

LOW, HIGH = "_low", "_high"


def read_sql(
    sql: str,
    con: Connection | None = None,
    *,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    intervals: bool = True,
    **connect_args: Any,
) -> pd.DataFrame:
    """Answer one query with differential privacy and return it as a DataFrame.

    ``con`` is a ``dpproxy.connect()`` connection (it stays open); without one, a connection
    is opened with ``connect_args`` (the arguments of ``dpproxy.connect``; none: the demo) and
    closed afterwards. ``params`` are bound as by ``cursor.execute`` (``%s``, ``%(name)s``).

    With ``intervals``, each noisy column ``c`` is followed by ``c_low`` and ``c_high``: the
    released value ∓ its 95% error bound (``cursor.error_bounds``), an interval that holds the
    noiseless value with probability ≥ 95% (NULL where no bound is known, as for the
    exponential mechanism). Group keys and exact columns get none.

    ``df.attrs`` holds ``privacy_cost`` (the exact ``Cost``), ``epsilon`` and ``delta`` (floats),
    ``remaining_budget``, ``cached`` (answered again from the ledger at no cost),
    ``notices`` and ``sql``. Nothing is charged for a query that is refused.
    """
    import pandas as pd

    if con is not None and connect_args:
        raise TypeError("pass either a connection or the arguments of dpproxy.connect, not both")
    own = con is None
    connection = connect(**connect_args) if con is None else con
    try:
        cur = connection.cursor().execute(sql, params)
        frame = pd.DataFrame(cur.fetchall(), columns=_names(cur))
        if intervals:
            frame = _with_intervals(frame, cur)
        cost = cur.privacy_cost
        frame.attrs.update(
            sql=sql,
            privacy_cost=cost,
            epsilon=float(cost.epsilon) if cost is not None else 0.0,
            delta=float(cost.delta) if cost is not None else 0.0,
            remaining_budget=cur.remaining_budget,
            cached=bool(getattr(cur, "cached", False)),
            notices=list(cur.notices),
            confidence=0.95,
        )
        return frame
    finally:
        if own:
            connection.close()


def _names(cur: Cursor) -> list[str]:
    return [d[0] for d in cur.description or ()]


def _with_intervals(frame: pd.DataFrame, cur: Cursor) -> pd.DataFrame:
    """``c_low``/``c_high`` after every column whose error bound is not 0 in every row."""
    import pandas as pd

    bounds = cur.error_bounds
    parts: list[pd.Series] = []
    taken = set(frame.columns)
    for i, name in enumerate(frame.columns):
        parts.append(frame.iloc[:, i])
        cells = [row[i] for row in bounds]
        if not cells or all(e == 0.0 for e in cells):
            continue
        low, high = f"{name}{LOW}", f"{name}{HIGH}"
        if low in taken or high in taken:
            continue  # never hide a column the query selected
        values = frame.iloc[:, i].tolist()
        for end, sign in ((low, -1), (high, +1)):
            parts.append(
                pd.Series(_ends(values, cells, sign), index=frame.index, dtype="Float64", name=end)
            )
    if not parts:
        return frame
    return pd.concat(parts, axis=1)


def _ends(values: list[Any], bounds: list[float | None], sign: int) -> list[float | None]:
    out: list[float | None] = []
    for v, e in zip(values, bounds, strict=True):
        if e is None or v is None or isinstance(v, bool) or not isinstance(v, int | float):
            out.append(None)
        else:
            out.append(float(v) + sign * e)
    return out

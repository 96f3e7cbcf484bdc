"""``dpproxy schema init --dp-bounds``: the data steward's DP release of clamping bounds and
text domains.

The mechanisms and their privacy arguments are in ``mechanisms/dp_bounds.py`` and
``mechanisms/dp_domains.py`` (which also says how the cost is shared). This is the shell
around it: it opens the data before any budget is held, reserves the whole cost on the steward's
account in the ledger, reads the counts, commits the cost (a failure once the data was read is
charged too, as for any query), then draws the choices with OpenDP's sampler.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from dpproxy.backends.opener import (
    bounds_sql,
    count_for_bounds,
    count_for_domain,
    domain_sql,
    open_for_bounds,
)
from dpproxy.catalog.draft import TableShape, plain_name, schema_type
from dpproxy.catalog.model import ColumnType
from dpproxy.errors import InternalError, InvalidParameter, UndefinedColumn
from dpproxy.mechanisms.dp_bounds import candidates, choose_bounds
from dpproxy.mechanisms.dp_domains import ChosenDomain, choose_domain, split
from dpproxy.mechanisms.noise import NoiseSource, OpenDPNoise
from dpproxy.planning.public import MAX_KEYS
from dpproxy.values import Cost

DEFAULT_DELTA = Fraction(1, 10**6)  # --delta: the draft's δ per query (catalog/draft.py)


class Charges(Protocol):
    """What is needed of the ledger (``accounting.ledger.Ledger``)."""

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Any: ...

    def commit(self, r: Any, *, failed: str | None = None) -> None: ...


def bounded_columns(shape: TableShape, unit: str) -> list[str]:
    """The columns that get DP bounds: numeric, plain identifiers, not the unit."""
    out = []
    for c in shape.columns:
        t = schema_type(c.sql_type)
        if t is not None and t.numeric and plain_name(c.name) and c.name != unit:
            out.append(c.name)
    return out


def domain_columns(shape: TableShape, unit: str) -> list[str]:
    """The columns that get a DP domain: text, plain identifiers, not the unit."""
    return [
        c.name
        for c in shape.columns
        if schema_type(c.sql_type) is ColumnType.TEXT and plain_name(c.name) and c.name != unit
    ]


@dataclass(frozen=True, slots=True)
class DraftReleases:
    """What ``schema init --dp-bounds`` released, in the forms ``catalog.draft`` takes."""

    bounds: dict[tuple[str, str], tuple[Fraction, Fraction, str]]
    domains: dict[tuple[str, str], tuple[tuple[str, ...], str]]
    cost: Cost


def parse_delta(text: str | None) -> Fraction:
    """``--delta``: the total δ of the domains, exactly; 10⁻⁶ (the draft's δ per query) when
    not given, 0 to leave the domains as TODOs."""
    if text is None:
        return DEFAULT_DELTA
    try:
        delta = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        delta = Fraction(-1)
    if not 0 <= delta < 1:
        raise InvalidParameter(
            f"--delta must be a number in [0, 1), not {text!r}",
            hint="the total δ spent on the text columns' domains, e.g. --delta 1e-6 (0: none)",
        )
    return delta


def estimate_bounds(
    database: str,
    shape: TableShape,
    unit: str,
    epsilon: Fraction,
    ledger: Charges,
    steward: str,
    record: Any = None,
    noise: NoiseSource | None = None,
    delta: Fraction = Fraction(0),
) -> DraftReleases:
    """DP bounds for every numeric column of ``shape`` and, when ``delta`` > 0, DP domains for
    every text column, at a total cost of (ε, δ) (δ = 0 without a text column) charged to
    ``steward`` (``mechanisms/dp_domains.py``, *Composition*)."""
    if shape.column(unit) is None:
        raise UndefinedColumn(
            f'column "{unit}" is not in table "{shape.name}"',
            hint="--unit names the column identifying one person",
        )
    columns = bounded_columns(shape, unit)
    texts = domain_columns(shape, unit) if delta else []
    if not columns and not texts:
        raise InvalidParameter(
            f'table "{shape.name}" has no numeric or text column besides the unit: '
            "nothing to release",
            hint="draft the schema without --dp-bounds (--delta 0 leaves the domains out)",
        )
    share = split(epsilon, delta, len(columns), len(texts))
    cost = Cost(epsilon, delta if texts else Fraction(0))
    con = open_for_bounds(database)  # before any budget is held: failing here costs nothing
    try:
        grids = {c: candidates(integer=not _is_float(shape, c)) for c in columns}
        sqls = {c: bounds_sql(shape.name, unit, c, grids[c]) for c in columns}
        held = ledger.reserve(steward, cost, record)
        try:
            counts = {c: count_for_bounds(con, sqls[c], len(grids[c])) for c in columns}
            values = {c: count_for_domain(con, domain_sql(shape.name, unit, c)) for c in texts}
        except Exception as e:
            ledger.commit(held, failed=InternalError.sqlstate)  # the data was read: charged
            raise InternalError(
                "the database failed while the bounds and domains were computed; the attempt "
                "was charged",
                log_detail=f"{type(e).__name__}: {e}",
            ) from e
        ledger.commit(held)
    finally:
        con.close()
    source = noise or OpenDPNoise()
    out = {}
    each = share.bound_each
    for c in columns:
        n = counts[c]
        chosen = choose_bounds(grids[c], n.below, n.above, n.units, each, source)
        note = f"DP bounds (ε = {_show(each)} each, charged to {steward}): check them"
        out[(shape.name, c)] = (chosen.lower, chosen.upper, note)
    domains = {}
    for c in texts:
        eps, dlt = share.domain_epsilon, share.domain_delta
        dom = choose_domain(values[c], eps, dlt, source, MAX_KEYS)
        domains[(shape.name, c)] = (dom.values, _domain_note(dom, c, eps, dlt, steward))
    return DraftReleases(out, domains, cost)


def _domain_note(dom: ChosenDomain, column: str, eps: Fraction, dlt: Fraction, who: str) -> str:
    paid = f"(ε = {_show(eps)}, δ = {_show(dlt)}, charged to {who})"
    if not dom.values:
        return f"TODO domain: no value passed the DP threshold {paid}: too few units per value"
    most = f", the {MAX_KEYS:,} most frequent" if dom.capped else ""
    return (
        f"DP domain {paid}: values more than about {dom.threshold} units hold{most}; rarer ones "
        f"are missing, and a GROUP BY {column} leaves out their rows"
    )


def _is_float(shape: TableShape, column: str) -> bool:
    col = shape.column(column)
    return col is not None and schema_type(col.sql_type) is ColumnType.FLOAT


def _show(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"

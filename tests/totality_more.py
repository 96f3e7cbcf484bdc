"""Statistics, date keys and plan hints, for the totality property (``tests/totality.py``).

Constructs the generator of ``tests/totality.py`` did not write until 2026-11-29, each with a
plan of its own and so SQL of its own:

* **order statistics with a fraction**: ``PERCENTILE_CONT(q)`` / ``PERCENTILE_DISC(q) WITHIN
  GROUP (ORDER BY m)``, q inside [0, 1] or not (a near miss);
* **statistics without a usable sensitivity** (sample-and-aggregate): ``CORR``, ``COVAR_POP``,
  ``COVAR_SAMP``, ``REGR_SLOPE``, ``REGR_INTERCEPT`` of two measures;
* **TO_CHAR of a date** as a group key, with valid and refused templates;
* **plan hints**: ``/*+ dpproxy … */`` forcing a mechanism (ptr, smooth, exponential, saa,
  joint, gs) and its parameters (``ptr_bound``, ``saa_chunks``, ``saa_lower``/``saa_upper``,
  ``bins``, ``max_rows``, ``coverage``), at ordinary and extreme values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.totality import QueryGen

FRACTIONS = ("0.5", "0.9", "0", "1", "0.25", "0.999", "1.5", "-0.1")
TWO_MEASURES = ("CORR", "COVAR_POP", "COVAR_SAMP", "REGR_SLOPE", "REGR_INTERCEPT")
TEMPLATES = ("'YYYY-MM'", "'YYYY'", "'MM'", "'YYYY-MM-DD'", "'DD'", "'HH24'", "''")
METHODS = ("ptr", "smooth", "exponential", "saa", "joint", "gs")
HINT_VALUES = {
    "ptr_bound": ("0.5", "1", "1e-300", "1e100", "1000000"),
    "saa_chunks": ("2", "10", "1000", "1000000000000"),
    "saa_lower": ("-1e100", "0", "-1", "-32768"),
    "saa_upper": ("1e100", "1", "100", "32767"),
    "bins": ("2", "16", "1000"),
    "max_rows": ("1", "3", "1000"),
    "coverage": ("0.5", "0.9", "0.999"),
}


BOUNDED = ("si", "fb", "si / 2", "fb * 2", "ABS(si)", "CASE WHEN flag THEN si ELSE 0 END")


def statistic(gen: QueryGen, depth: int) -> str:
    """A percentile or a two-measure statistic, of bounded columns mostly (so that many are
    accepted) and of generated measures otherwise."""

    def measure() -> str:
        return gen.pick(BOUNDED) if gen.chance(60) else gen.measure(depth)

    if gen.chance(50):
        fn = gen.pick(("PERCENTILE_CONT", "PERCENTILE_DISC"))
        return f"{fn}({gen.pick(FRACTIONS)}) WITHIN GROUP (ORDER BY {measure()})"
    return f"{gen.pick(TWO_MEASURES)}({measure()}, {measure()})"


def to_char_key(gen: QueryGen) -> str:
    """``TO_CHAR`` of the date column (or of a date expression) with a template."""
    day = "day" if gen.chance(70) else gen.date(1)
    return f"TO_CHAR({day}, {gen.pick(TEMPLATES)})"


def needs_range(sql: str) -> bool:
    """Does ``sql`` ask for a statistic that sample-and-aggregate answers only with an output
    range (``saa_lower``/``saa_upper``)?"""
    return any(f"{name}(" in sql for name in TWO_MEASURES[1:])


def hinted(gen: QueryGen, sql: str) -> str:
    """``sql`` with a plan hint after its first SELECT: a mechanism and 0 to 3 parameters,
    with an output range where a statistic needs one (mostly)."""
    pairs = []
    if gen.chance(80):
        pairs.append(f"mechanism={gen.pick(METHODS)}")
    keys = {gen.pick(tuple(HINT_VALUES)) for _ in range(gen.draw_count(3))}
    if needs_range(sql) or keys & {"saa_lower", "saa_upper"}:  # both or neither (22023)
        keys |= {"saa_lower", "saa_upper"} if gen.chance(90) else set()
    for key in sorted(keys):
        pairs.append(f"{key}={gen.pick(HINT_VALUES[key])}")
    if not pairs:
        return sql
    return sql.replace("SELECT ", f"SELECT /*+ dpproxy {' '.join(pairs)} */ ", 1)

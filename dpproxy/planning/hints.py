"""Per-query plan hints: a ``/*+ dpproxy key=value ... */`` comment anywhere in the SQL.

>>> o = parse_hints("SELECT /*+ dpproxy mechanism=ptr ptr_bound=0.005 */ AVG(age) FROM adult")
>>> o.method, o.ptr_bound, o.max_rows
(<Method.PTR: 'ptr'>, Fraction(1, 200), None)

Keys: ``mechanism`` (gs, joint, ptr, smooth, exponential, saa), ``ptr_bound`` (the proposed
local-sensitivity bound), ``saa_chunks`` (k), ``saa_lower``/``saa_upper`` (the clipping range
of the chunk statistics) and ``bins`` (cells of the exponential mechanism over a real range);
for the rows a unit keeps (``planning/truncation.py``): ``max_rows`` (a fixed bound),
``max_groups`` with ``max_rows_per_group`` (a bound by groups), ``max_rows_cap`` and
``coverage`` (the candidates and the target of the DP choice) and ``join_rows`` (T of
DropExcess in a join of two units' rows).
Anything else is refused (22023), so a typo never silently changes a plan. A hint is public
input: it decides how noise is calibrated, never how much budget is spent.
"""

from __future__ import annotations

import re
from fractions import Fraction

from dpproxy.errors import InvalidParameter
from dpproxy.planning.methods import MethodOptions
from dpproxy.planning.plan import Method
from dpproxy.values import to_fraction

_HINT = re.compile(r"/\*\+\s*dpproxy\b(.*?)\*/", re.DOTALL | re.IGNORECASE)
_PAIR = re.compile(r"([A-Za-z_]+)\s*=\s*('[^']*'|\"[^\"]*\"|[^\s,]+)")
METHOD_NAMES = ", ".join(m.value for m in Method)


def method_named(value: str) -> Method:
    try:
        return Method(value.strip().strip("'\"").lower())
    except ValueError:
        raise InvalidParameter(f"unknown plan {value!r}", hint=f"one of {METHOD_NAMES}") from None


LARGEST = Fraction(10**100)  # a hint's magnitude: the planner's floats hold it and its errors
LARGEST_COUNT = 10**12  # a count hint (rows, chunks, bins): the planner converts it to a float
# SAA's chunks and the exponential mechanism's cells are lists the release builds after the
# data was read, per group: 10^12 of them failed there (XX000, charged) and 10^7 cells took
# 171 s and 3 GB. 10^5 (100× the defaults of 100 and 1,000) takes about a second per group.
LARGEST_CELLS = 10**5


def _number(key: str, text: str) -> Fraction:
    try:
        value = to_fraction(text.strip("'\""))
    except (ValueError, ZeroDivisionError, TypeError):
        raise InvalidParameter(f"hint {key} needs a number, not {text!r}") from None
    if abs(value) > LARGEST:  # 1e400 overflowed a float while planning: XX000
        raise InvalidParameter(f"hint {key} must be within ±1e100")
    return value


def _count(key: str, text: str, smallest: int, largest: int = LARGEST_COUNT) -> int:
    value = _number(key, text)
    if value.denominator != 1 or not smallest <= value <= largest:
        most = "10^12" if largest == LARGEST_COUNT else f"{largest:,}"
        raise InvalidParameter(
            f"hint {key} needs a whole number of at least {smallest} and at most {most}"
        )
    return int(value)


def parse_hints(sql: str, method: Method | None = None) -> MethodOptions:
    """The options of ``sql``'s hints; ``method`` (the session's) applies unless a hint says."""
    fields: dict[str, object] = {"method": method}
    for body in _HINT.findall(sql):
        rest = _PAIR.sub("", body).strip(" \t\r\n,")
        if rest:
            raise InvalidParameter(
                f"cannot read the dpproxy hint {body.strip()!r}",
                hint="write key=value pairs, e.g. /*+ dpproxy mechanism=ptr ptr_bound=0.01 */",
            )
        for key, value in _PAIR.findall(body):
            k = key.lower()
            if k in ("mechanism", "method"):
                fields["method"] = method_named(value)
            elif k == "ptr_bound":
                bound = _number(k, value)
                if bound <= 0:
                    raise InvalidParameter("hint ptr_bound must be positive")
                fields["ptr_bound"] = bound
            elif k == "saa_chunks":
                fields["saa_chunks"] = _count(k, value, 2, LARGEST_CELLS)
            elif k in ("saa_lower", "saa_upper"):
                fields[k] = _number(k, value)
            elif k == "bins":
                fields["bins"] = _count(k, value, 1, LARGEST_CELLS)
            elif k in ("max_rows", "max_rows_cap", "join_rows", "max_groups", "max_rows_per_group"):
                fields[k] = _count(k, value, 1)
            elif k == "coverage":
                share = _number(k, value)
                if not 0 < share < 1:
                    raise InvalidParameter("hint coverage must be strictly between 0 and 1")
                fields["coverage"] = share
            else:
                raise InvalidParameter(
                    f"unknown dpproxy hint {key!r}",
                    hint="mechanism, ptr_bound, saa_chunks, saa_lower, saa_upper, bins, "
                    "max_rows, max_rows_cap, max_groups, max_rows_per_group, coverage or join_rows",
                )
    if ("max_groups" in fields) != ("max_rows_per_group" in fields):
        raise InvalidParameter(
            "hints max_groups and max_rows_per_group go together",
            hint="/*+ dpproxy max_groups=3 max_rows_per_group=10 */",
        )
    return MethodOptions(**fields)  # type: ignore[arg-type]

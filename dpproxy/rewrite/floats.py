"""Row-level float arithmetic that cannot raise, on any backend.

DuckDB turns a float overflow into ±inf and an underflow into 0. PostgreSQL raises ``value
out of range: overflow`` (or ``underflow``) instead — for ``float8`` ``*`` and ``/`` whenever
finite, non-zero operands give an infinite or zero result, and for ``+``/``-`` on overflow.
Such an error is decided by one row's value, and no noise covers it: an analyst could ask
``WHERE income * 1e300 > 0`` and learn from the error alone whether anyone earns more than
about 10⁸. So every arithmetic expression evaluated per row is made provably finite:

1. **Magnitudes.** :class:`Magnitudes` bounds, in decimal exponents, the largest and the
   smallest non-zero finite magnitude each sub-expression can take: integer values lie in
   [1, 10¹⁹] (``BIGINT``), literals are known, and float values — a ``FLOAT`` column, a text
   cast to double — are *tamed* to [10⁻ᴸ, 10ᴸ] (or 0, ±inf, NaN, on which PostgreSQL never
   raises). ``*`` adds exponents, ``/`` subtracts them, ``+``/``−`` may add one bit at the top
   and lose up to 52 bits at the bottom (cancellation).
2. **The largest safe L.** Binary search for the largest L ≤ 150 under which every ``*``,
   ``/``, ``+`` and ``−`` stays within [10⁻³⁰⁰, 10³⁰⁰] (double precision reaches about
   10^±308). If even L = 1 fails — because of a literal such as ``1e300`` — the query is
   refused with 0A000 on every backend.
3. **Taming.** Each float leaf under arithmetic becomes
   ``CASE WHEN |v| < 10⁻ᴸ THEN 0 WHEN 10ᴸ < v ≤ max THEN 10ᴸ WHEN −max ≤ v < −10ᴸ THEN −10ᴸ
   ELSE v END``, on every backend alike (the differential tests compare them). With L ≥ 50
   for any expression of a few factors, only absurd values change. A leaf that is the ELSE
   of a clamp to bounds within ±10ᴸ/2 lies within them there: its taming is the first
   branch alone, the same value on every row (:func:`_clamped_within`).

Comparisons of a bare column (``WHERE x > 1e200``) involve no arithmetic and are untouched.
Nor is a value cast to REAL, whose magnitudes lie within [2⁻¹⁴⁹, 3.4·10³⁸] whatever its
operand (``rewrite/real.py``): it has that span, and what is inside it needs no taming.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Sequence
from typing import NamedTuple

from sqlglot import exp

from dpproxy.catalog.model import ColumnType, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.rewrite.noop_clamps import NOOP, taming_is_identity
from dpproxy.rewrite.real import real_span, rounded_operand
from dpproxy.sql.buckets import literal_number
from dpproxy.sql.mathargs import log_base
from dpproxy.sql.types import clone

LIMIT = 300.0  # |exponent| every intermediate result must stay within
MAX_L = 150
INTEGER_TOP = math.log10(2.0**63)  # BIGINT
CARRY = math.log10(2.0)  # a sum can double the larger operand
CANCEL = 52 * math.log10(2.0)  # a difference keeps at least one of 52 fraction bits
MAX_DOUBLE = "1.7976931348623157e308"

_INTEGER_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
}
_FLOAT_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div)
_PASS = (exp.Paren, exp.Neg, exp.Abs)
_HULL = (exp.Coalesce, exp.Greatest, exp.Least)


class Span(NamedTuple):
    """Decimal exponents of the largest (``hi``) and smallest non-zero (``lo``) magnitude.

    A named tuple: a frozen dataclass's ``__init__`` costs several times as much, and
    :meth:`Magnitudes.span` makes one per node it spans."""

    hi: float
    lo: float

    def hull(self, other: Span | None) -> Span:
        if other is None:
            return self
        return Span(max(self.hi, other.hi), min(self.lo, other.lo))


# Magnitudes of SQRT, LN, LOG (of any double in their domains: 5e-324 … 1.8e308; ln of the
# double nearest 1 below it is -1.1e-16) and of EXP (on its guarded domain |x| <= 345).
_OF_ANY_DOUBLE: dict[type[exp.Expression], Span] = {
    exp.Sqrt: Span(154.2, -161.7),
    exp.Ln: Span(math.log10(745.0), -16.0),
    exp.Log: Span(math.log10(324.0), -16.4),
    exp.Exp: Span(149.9, -149.9),
    exp.Pow: Span(150.0, -150.0),  # |x^p| is 0 or within [1e-150, 1e150] (rewrite/domains.py)
    exp.Cbrt: Span(102.8, -108.0),  # cbrt of 1.8e308 is 5.6e102, of 4.9e-324 is 1.7e-108
}


def _hull(spans: list[Span | None]) -> Span | None:
    out: Span | None = None
    for s in spans:
        if s is not None:
            out = s if out is None else out.hull(s)
    return out


def is_float_leaf(node: exp.Expression, table: Table) -> bool:
    """A value that can hold any double: a FLOAT column, or text cast to a double."""
    if isinstance(node, exp.Column):
        c = table.column(node.name)
        return c is not None and c.type is ColumnType.FLOAT
    if isinstance(node, exp.Cast) and node.to.this in _FLOAT_TYPES:  # TryCast too
        inner = node.this
        if isinstance(inner, exp.Column):
            c = table.column(inner.name)
            return c is None or c.type is not ColumnType.INTEGER
        return (isinstance(inner, exp.Literal) and inner.is_string) or _is_text(inner, table)
    return False


def _is_text(node: exp.Expression, table: Table) -> bool:
    if isinstance(node, exp.Column):
        c = table.column(node.name)
        return c is not None and c.type is ColumnType.TEXT
    text = exp.Lower | exp.Upper | exp.Trim | exp.Substring | exp.DPipe
    return isinstance(node, text | exp.Left | exp.Right | exp.Replace)


class Magnitudes:
    """Exponent spans of a row-level expression, with float leaves tamed to [10⁻ᴸ, 10ᴸ]."""

    def __init__(
        self, table: Table, tame_exponent: float, clamps: frozenset[int] = frozenset()
    ) -> None:
        self.table = table
        self.L = tame_exponent
        self.violations: list[exp.Expression] = []
        # ids of rewrite/clamps.clamp_values' CASEs (held by the caller): their conditions
        # compare a CAST column with numbers, so only their values' spans are needed.
        self.clamps = clamps

    def span(self, node: exp.Expression) -> Span | None:
        """``None``: the expression is never a non-zero finite number (NULL, 0, non-numeric)."""
        kind = type(node)
        case = _CASES.get(kind)
        if case is None:
            case = _CASES[kind] = _case_of(kind)
        return case(self, node)

    # The cases of :meth:`span`, in the order they are tried (:func:`_case_of` picks a node
    # class's first one; a case that does not apply to a particular node passes it on).

    def _leaf(self, node: exp.Expression) -> Span | None:  # a Column or a Cast
        if (operand := rounded_operand(node)) is not None:  # CAST(... AS REAL): rewrite/real.py
            self.span(operand)
            return Span(*real_span())
        if is_float_leaf(node, self.table):
            return Span(self.L, -self.L)
        if isinstance(node, exp.Column):
            c = self.table.column(node.name)
            if c is not None and c.type is ColumnType.INTEGER:
                return Span(INTEGER_TOP, 0.0)
            return None
        to = typing.cast(exp.Cast, node).to.this
        if to in _INTEGER_TYPES:
            return Span(INTEGER_TOP, 0.0)
        if to in _FLOAT_TYPES or to is exp.DataType.Type.DECIMAL:
            return self.span(node.this)
        return None

    def _literal(self, node: exp.Expression) -> Span | None:
        if node.is_string:
            return None
        v = abs(float(node.name))
        if v == 0 or math.isinf(v) or math.isnan(v):
            return None
        e = math.log10(v)
        return Span(e, e)

    def _integer(self, node: exp.Expression) -> Span | None:
        return Span(INTEGER_TOP, 0.0)

    def _pass(self, node: exp.Expression) -> Span | None:
        return self.span(node.this)

    def _sign(self, node: exp.Expression) -> Span | None:
        self.span(node.this)
        return Span(0.0, 0.0)

    def _pi(self, node: exp.Expression) -> Span | None:
        return Span(math.log10(math.pi), math.log10(math.pi))

    def _log(self, node: exp.Expression) -> Span | None:
        if (base := log_base(typing.cast(exp.Log, node))) is not None:
            self.span(node.expression)  # LOG(b, x) = LN(x) / LN(b): LN's span over |ln b|
            shift = math.log10(abs(math.log(base)))
            ln = _OF_ANY_DOUBLE[exp.Ln]
            return Span(ln.hi - shift + 0.01, ln.lo - shift - 0.01)
        return self._of_any_double(node)

    def _of_any_double(self, node: exp.Expression) -> Span | None:
        self.span(node.this)  # whatever its argument (rewrite/guard.py)
        return _OF_ANY_DOUBLE[type(node)]

    def _rounded(self, node: exp.Expression) -> Span | None:  # FLOOR, CEIL, TRUNC
        inner = self.span(node.this)
        return None if inner is None else Span(max(inner.hi, 0.0), 0.0)

    def _case(self, node: exp.Expression) -> Span | None:
        ifs = node.args.get("ifs") or []
        if id(node) not in self.clamps:  # a clamp's conditions hold no arithmetic
            for branch in ifs:
                self.span(branch.this)  # conditions are checked, their value is boolean
        values = [self.span(b.args["true"]) for b in ifs]
        default = node.args.get("default")
        if default is not None:
            values.append(self.span(default))
        return _hull(values)

    def _nullif(self, node: exp.Expression) -> Span | None:
        self.span(node.expression)
        return self.span(node.this)

    def _hull_of(self, node: exp.Expression) -> Span | None:  # COALESCE, GREATEST, LEAST
        return _hull([self.span(node.this), *(self.span(e) for e in node.expressions)])

    def _anonymous(self, node: exp.Expression) -> Span | None:
        if str(node.this).upper() in ("LEAST", "GREATEST"):
            return _hull([self.span(e) for e in node.expressions])
        return self._children(node)

    def _children(self, node: exp.Expression) -> Span | None:
        for child in node.iter_expressions():  # comparisons, AND/OR, string functions, ...
            self.span(child)
        return None

    def _arith(self, node: exp.Expression) -> Span | None:
        a = self.span(node.this)
        b = self.span(node.expression)
        if isinstance(node, exp.Mul):
            out = None if a is None or b is None else Span(a.hi + b.hi, a.lo + b.lo)
        elif isinstance(node, exp.Div):
            out = None if a is None or b is None else Span(a.hi - b.lo, a.lo - b.hi)
        else:
            both = _hull([a, b])
            out = None if both is None else Span(both.hi + CARRY, both.lo - CANCEL)
        if out is not None:
            low_ok = isinstance(node, exp.Add | exp.Sub) or out.lo >= -LIMIT
            if out.hi > LIMIT or not low_ok:
                self.violations.append(node)
        return out


_SPECIFIC: tuple[type[exp.Expression], ...] = (
    exp.Column,
    exp.Cast,
    exp.Literal,
    exp.Length,
    exp.Extract,
    exp.StrPosition,
    *_PASS,
    exp.Sign,
    exp.Pi,
    exp.Log,
    *_OF_ANY_DOUBLE,
    exp.Floor,
    exp.Ceil,
    exp.Trunc,
    exp.Case,
    exp.Nullif,
    *_HULL,
    exp.Anonymous,
    *_ARITH,
)
_Case = Callable[[Magnitudes, exp.Expression], "Span | None"]


def _case_of(kind: type) -> _Case:
    """The case of :meth:`Magnitudes.span` for nodes of this class: the first of its tests,
    in their order, that a node of the class can pass. Only a Column or a Cast can be a float
    leaf (:func:`is_float_leaf`); LOG without a known base and an anonymous function other
    than LEAST/GREATEST pass the node on to the next case that applies to it."""
    if not issubclass(kind, _SPECIFIC):  # only its children are checked
        return Magnitudes._children
    if issubclass(kind, exp.Column | exp.Cast):
        return Magnitudes._leaf
    if issubclass(kind, exp.Literal):
        return Magnitudes._literal
    if issubclass(kind, exp.Length | exp.Extract | exp.StrPosition):
        return Magnitudes._integer
    if issubclass(kind, _PASS):
        return Magnitudes._pass
    if issubclass(kind, exp.Sign):
        return Magnitudes._sign
    if issubclass(kind, exp.Pi):
        return Magnitudes._pi
    if issubclass(kind, exp.Log):
        return Magnitudes._log
    if issubclass(kind, tuple(_OF_ANY_DOUBLE)):
        return Magnitudes._of_any_double
    if issubclass(kind, exp.Floor | exp.Ceil | exp.Trunc):
        return Magnitudes._rounded
    if issubclass(kind, exp.Case):
        return Magnitudes._case
    if issubclass(kind, exp.Nullif):
        return Magnitudes._nullif
    if issubclass(kind, _HULL):
        return Magnitudes._hull_of
    if issubclass(kind, exp.Anonymous):
        return Magnitudes._anonymous
    if issubclass(kind, _ARITH):
        return Magnitudes._arith
    return Magnitudes._children


_CASES: dict[type, _Case] = {}  # by node class: its case of Magnitudes.span (found once)


def _feeds_arithmetic(node: exp.Expression, root: exp.Expression) -> bool:
    """Does the value of ``node`` reach a ``+ - * /`` through nodes that pass magnitudes on?"""
    child, n = node, node.parent
    while n is not None and n is not root:
        if isinstance(n, _ARITH):
            return True
        # a REAL, within a fixed span whatever is inside it (rewrite/real.py)
        if rounded_operand(typing.cast(exp.Expression, n)) is not None:
            return False
        passes = (
            isinstance(n, (*_PASS, *_HULL, exp.Floor, exp.Ceil, exp.Trunc))
            or (isinstance(n, exp.Cast) and n.to.this in _FLOAT_TYPES)
            or (isinstance(n, exp.If) and child is n.args.get("true"))
            or (isinstance(n, exp.Case) and child is n.args.get("default"))
            or isinstance(n, exp.Case)  # reached through an If's value
            or (isinstance(n, exp.Nullif) and child is n.this)
        )
        if not passes:
            return False
        child, n = n, n.parent  # type: ignore[assignment]
    return False


def _float_clamp(case: exp.Expression, table: Table) -> bool:
    """Does a clamp CASE clamp a FLOAT column (its ELSE, ``CAST(column AS DOUBLE)``, is then
    a float leaf)? Anything not of that shape counts as one (it is walked as usual)."""
    default = case.args.get("default")
    if not isinstance(default, exp.Cast) or not isinstance(default.this, exp.Column):
        return True
    column = table.column(default.this.name)
    return column is None or column.type is not ColumnType.INTEGER


def _safe(
    node: exp.Expression, table: Table, L: float, clamps: frozenset[int] = frozenset()
) -> bool:
    m = Magnitudes(table, L, clamps)
    m.span(node)
    return not m.violations


def _clamped_within(leaf: exp.Expression, L: int) -> bool:
    """Is ``leaf`` the ELSE of a clamp, ``CASE WHEN v < a THEN … WHEN v > b THEN … ELSE v
    END`` with ``v`` the leaf itself (``clamps.clamp`` writes them, and copies of them), whose
    bounds a and b lie within ±10^L / 2?

    Then in that ELSE v is NULL, NaN or a double in [a, b]: ±inf and every v beyond a bound
    took a WHEN (NaN, which compares above every number on DuckDB, PostgreSQL and Spark, took
    the second). Neither ``1e L < v`` nor ``v < −1e L`` holds for such a v, and for NaN,
    were it to get there, the taming's ``v ≤ max`` and ``−max ≤ v`` fail: :func:`_tame`'s two
    branches for large magnitudes never apply there, and the taming without them gives every
    row the same value. Decided from the tree alone (a CASE of that shape, whoever built it):
    half the comparisons of the taming per row, on every engine."""
    case = leaf.parent
    if not isinstance(case, exp.Case) or leaf.arg_key != "default":
        return False
    ifs = case.args.get("ifs") or []
    if len(ifs) != 2:  # a half-bounded clamp: the other side is not bounded
        return False
    low, high = ifs[0].this, ifs[1].this
    if type(low) is not exp.LT or type(high) is not exp.GT:
        return False
    limit = 10.0**L / 2
    for condition in (low, high):
        bound = literal_number(condition.expression)  # how nodes.number writes a bound
        if bound is None or not abs(bound) <= limit or condition.this != leaf:
            return False
    return True


def _tame(v: exp.Expression, L: int, within: bool = False) -> exp.Expression:
    """The taming of float leaf ``v`` at L (module docstring); ``within``: ``v`` lies within
    ±10^L where it is evaluated (:func:`_clamped_within`), so only the first branch, for
    tiny magnitudes, can apply and only that one is written."""

    def lit(text: str) -> exp.Literal:
        return exp.Literal(this=text, is_string=False)

    def neg(text: str) -> exp.Expression:
        return exp.Neg(this=lit(text))

    big, tiny = f"1e{L}", f"1e-{L}"
    first = exp.If(this=exp.LT(this=exp.Abs(this=clone(v)), expression=lit(tiny)), true=lit("0.0"))
    if within:
        return exp.Case(ifs=[first], default=v)
    return exp.Case(
        ifs=[
            first,
            exp.If(
                this=exp.And(
                    this=exp.GT(this=clone(v), expression=lit(big)),
                    expression=exp.LTE(this=clone(v), expression=lit(MAX_DOUBLE)),
                ),
                true=lit(big),
            ),
            exp.If(
                this=exp.And(
                    this=exp.LT(this=clone(v), expression=neg(big)),
                    expression=exp.GTE(this=clone(v), expression=neg(MAX_DOUBLE)),
                ),
                true=neg(big),
            ),
        ],
        default=v,
    )


def finite_arithmetic(
    node: exp.Expression, table: Table, clamps: Sequence[exp.Expression] = ()
) -> exp.Expression:
    """``node`` (guarded, modified in place) with its float leaves under arithmetic tamed.

    ``clamps``: CASEs of ``rewrite/clamps.clamp_values`` in ``node`` (held by the caller, so
    their ids are theirs). Their conditions hold no arithmetic (a CAST column compared with
    numbers) and, for a column that is not FLOAT, nothing holds a float leaf or arithmetic:
    such a CASE is not walked into for leaves, and no clamp's conditions are spanned.

    Raises ``UnsupportedQuery`` (0A000) when no taming can make the arithmetic finite.
    """
    ids = frozenset(id(c) for c in clamps)
    opaque = {id(c) for c in clamps if not _float_clamp(c, table)}
    # listed once: nothing below changes the tree before taming
    nodes = list(node.dfs(prune=lambda n: id(n) in opaque)) if opaque else list(node.dfs())
    if not any(isinstance(n, _ARITH) for n in nodes):
        return node
    root = exp.Paren(this=node)
    leaves = [
        n
        for n in nodes
        if isinstance(n, exp.Expression) and is_float_leaf(n, table) and _feeds_arithmetic(n, root)
    ]
    # Outermost leaves only: a leaf inside another (a cast of a FLOAT column) is tamed with it.
    leaves = [
        n for n in leaves if not any(o is not n and any(d is n for d in o.dfs()) for o in leaves)
    ]
    if not _safe(node, table, 1, ids):
        raise UnsupportedQuery(
            "this arithmetic could overflow the range of double precision",
            hint="use smaller constants; every intermediate value must stay within ±1e300",
        )
    if not leaves:
        return node
    lo, hi = 1, MAX_L
    while lo < hi:  # the largest L that is safe (safety is monotone in L)
        mid = (lo + hi + 1) // 2
        if _safe(node, table, mid, ids):
            lo = mid
        else:
            hi = mid - 1
    for leaf in leaves:
        parent, key, index = leaf.parent, leaf.arg_key, leaf.index
        assert parent is not None and key
        tamed = _tame(leaf, lo, _clamped_within(leaf, lo))
        if taming_is_identity(leaf, table, lo):  # the rows need no taming: left out at the end
            tamed.meta[NOOP] = True  # (rewrite/noop_clamps.py, which has the argument)
        parent.set(key, tamed, index)
    result: exp.Expression = root.this
    return result

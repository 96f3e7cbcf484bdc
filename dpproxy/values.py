"""Exact value objects: intervals, privacy costs, and conservative rounding helpers.

Privacy arithmetic is done in :class:`fractions.Fraction`. Where an irrational function
is unavoidable (square roots, logarithms) the helpers here return a rational that is
provably on the safe side: ``*_up`` never under-estimates, ``*_down`` never over-estimates.
Floats appear only when a value is handed to the sampler or shown to a user.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.errors import InternalError, InvalidParameter, PrivacyParameterError

Number = int | Fraction


def to_fraction(value: object) -> Fraction:
    """Exact conversion of an int, float, decimal string or Fraction (floats are exact binary)."""
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers here")
    if isinstance(value, int | Fraction):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Fraction(value)
    if isinstance(value, str):
        return Fraction(value.strip())
    raise TypeError(f"not a number: {value!r}")


def float_up(x: Fraction) -> float:
    """The smallest float that is >= x."""
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def float_down(x: Fraction) -> float:
    """The largest float that is <= x."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _isqrt_scaled(x: Fraction) -> tuple[int, int, bool]:
    """(r, q, exact) with r/q ≤ √x < (r+1)/q, to about 100 significant bits."""
    n, d = x.numerator, x.denominator
    m = n * d  # √(n/d) = √(n·d)/d
    shift = max(0, (200 - m.bit_length()) // 2 + 1)
    scaled = m << (2 * shift)
    r = math.isqrt(scaled)
    return r, d << shift, r * r == scaled


def sqrt_up(x: Fraction) -> Fraction:
    """A rational upper bound on sqrt(x) (relative error below 2^-90), exact for squares."""
    if x < 0:
        raise InternalError("square root of a negative number")
    if x == 0:
        return Fraction(0)
    r, q, exact = _isqrt_scaled(x)
    return Fraction(r if exact else r + 1, q)


def sqrt_down(x: Fraction) -> Fraction:
    """A rational lower bound on sqrt(x) (relative error below 2^-90)."""
    if x <= 0:
        return Fraction(0)
    r, q, _ = _isqrt_scaled(x)
    return Fraction(r, q)


def _ln(x: Fraction) -> float:
    """ln(x) in floating point without cancellation near x = 1 or overflow for huge terms.

    On the integers p/q of x in lowest terms: |x − 1| < ½ is 2|p − q| < q, and x − 1 is
    (p − q)/q in lowest terms too, so ``(p - q) / q`` is ``float(x - 1)`` (both are Python's
    correctly rounded integer division) without building Fractions."""
    p, q = x.numerator, x.denominator
    if 2 * abs(p - q) < q:
        return math.log1p((p - q) / q)
    f = p / q if abs(p).bit_length() - q.bit_length() < 1000 else 0.0
    if f > 0 and math.isfinite(f) and f > 1e-300:
        return math.log(f)
    return math.log(p) - math.log(q)


_LN_MARGIN = 10**9  # ln_up/ln_down: a relative margin of 10⁻⁹ ...
_LN_FLOOR = 10**300  # ... plus an absolute one of 10⁻³⁰⁰


def _ln_bound(x: Fraction, up: bool) -> Fraction:
    """v ± |v|/10⁹ ± 1/10³⁰⁰ for v = :func:`_ln` (x), as one Fraction.

    With v = n/d (d a power of two) the sum is (n·10³⁰⁰ ± (|n|·10²⁹¹ + d))/(d·10³⁰⁰), reduced
    once: the same rational as adding the three terms as Fractions (issue 21: two additions
    of 1,000-bit Fractions cost more than the rest of the bound)."""
    if x <= 0:
        raise InternalError("logarithm of a non-positive number")
    n, d = _ln(x).as_integer_ratio()
    extra = abs(n) * (_LN_FLOOR // _LN_MARGIN) + d
    return Fraction(n * _LN_FLOOR + (extra if up else -extra), d * _LN_FLOOR)


def ln_up(x: Fraction) -> Fraction:
    """A rational upper bound on ln(x) for x > 0 (float log plus a relative margin)."""
    return _ln_bound(x, True)


def ln_down(x: Fraction) -> Fraction:
    """A rational lower bound on ln(x) for x > 0."""
    return _ln_bound(x, False)


@dataclass(frozen=True, slots=True)
class Interval:
    """A closed interval of reals with exact endpoints; ``None`` means unbounded on that side.

    >>> Interval(Fraction(-2), Fraction(3)) * Interval(Fraction(1), Fraction(2))
    Interval(lo=Fraction(-4, 1), hi=Fraction(6, 1))
    """

    lo: Fraction | None
    hi: Fraction | None

    def __post_init__(self) -> None:
        lo, hi = self.lo, self.hi  # lo > hi, cross-multiplied (denominators are positive)
        if (
            lo is not None
            and hi is not None
            and lo.numerator * hi.denominator > (hi.numerator * lo.denominator)
        ):
            raise InternalError(f"empty interval [{self.lo}, {self.hi}]")

    @classmethod
    def point(cls, v: Number) -> Interval:
        f = v if type(v) is Fraction else Fraction(v)  # Fractions are immutable: shared
        return cls(f, f)

    @classmethod
    def unbounded(cls) -> Interval:
        return cls(None, None)

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def max_abs(self) -> Fraction:
        if self.lo is None or self.hi is None:
            raise InternalError("max_abs of an unbounded interval")
        lo, hi = self.lo, self.hi  # max(|lo|, |hi|), compared cross-multiplied: one abs made
        if abs(hi.numerator) * lo.denominator > abs(lo.numerator) * hi.denominator:
            return abs(hi)
        return abs(lo)

    def width(self) -> Fraction:
        if self.lo is None or self.hi is None:
            raise InternalError("width of an unbounded interval")
        return self.hi - self.lo

    def hull(self, other: Interval) -> Interval:
        lo = None if self.lo is None or other.lo is None else min(self.lo, other.lo)
        hi = None if self.hi is None or other.hi is None else max(self.hi, other.hi)
        return Interval(lo, hi)

    def contains_zero(self) -> bool:
        return (self.lo is None or self.lo <= 0) and (self.hi is None or self.hi >= 0)

    def __add__(self, o: Interval) -> Interval:
        lo = None if self.lo is None or o.lo is None else self.lo + o.lo
        hi = None if self.hi is None or o.hi is None else self.hi + o.hi
        return Interval(lo, hi)

    def __neg__(self) -> Interval:
        return Interval(
            None if self.hi is None else -self.hi, None if self.lo is None else -self.lo
        )

    def __sub__(self, o: Interval) -> Interval:
        """self + (−o), each end one subtraction (not a negation and an addition)."""
        lo = None if self.lo is None or o.hi is None else self.lo - o.hi
        hi = None if self.hi is None or o.lo is None else self.hi - o.lo
        return Interval(lo, hi)

    def __mul__(self, o: Interval) -> Interval:
        """The hull of the four products of the ends, which are compared as unreduced integer
        pairs (n, d), d > 0, cross-multiplied: only the least and the greatest become Fractions
        (normalised, so the same ones as the Fraction products' min and max)."""
        if not (self.bounded and o.bounded):
            if self == Interval.point(0) or o == Interval.point(0):
                return Interval.point(0)
            return Interval.unbounded()
        assert self.lo is not None and self.hi is not None and o.lo is not None and o.hi is not None
        least = most = (0, 0)
        for a in (self.lo, self.hi):
            for b in (o.lo, o.hi):
                n, d = a.numerator * b.numerator, a.denominator * b.denominator
                if not least[1]:
                    least = most = (n, d)
                elif n * least[1] < least[0] * d:
                    least = (n, d)
                elif n * most[1] > most[0] * d:
                    most = (n, d)
        return Interval(Fraction(*least), Fraction(*most))

    def reciprocal(self) -> Interval:
        """1/x over the interval; unbounded when it contains zero."""
        if self.contains_zero() or not self.bounded:
            if self.lo is not None and self.lo > 0:
                return Interval(Fraction(0), 1 / self.lo)
            if self.hi is not None and self.hi < 0:
                return Interval(1 / self.hi, Fraction(0))
            return Interval.unbounded()
        assert self.lo is not None and self.hi is not None
        return Interval(min(1 / self.lo, 1 / self.hi), max(1 / self.lo, 1 / self.hi))

    def clamp(self, lo: Fraction | None, hi: Fraction | None) -> Interval:
        """The interval of GREATEST(LEAST(x, hi), lo) for x in self."""
        new_lo = self.lo
        new_hi = self.hi
        if lo is not None:
            new_lo = lo if new_lo is None else max(new_lo, lo)
            new_hi = None if new_hi is None else max(new_hi, lo)
        if hi is not None:
            new_hi = hi if new_hi is None else min(new_hi, hi)
            new_lo = None if new_lo is None else min(new_lo, hi)
        return Interval(new_lo, new_hi)

    def __str__(self) -> str:
        def show(v: Fraction | None, inf: str) -> str:
            if v is None:
                return inf
            return str(v.numerator) if v.denominator == 1 else f"{float(v):g}"

        return f"[{show(self.lo, '-inf')}, {show(self.hi, 'inf')}]"


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """How far one neighbour can move the released vector, in three norms."""

    l1: Fraction
    l2: Fraction  # a rational upper bound
    linf: Fraction

    def __post_init__(self) -> None:
        # signs by numerator (a Fraction's denominator is positive; ``< 0`` on a Fraction
        # goes through numbers.Rational's ABC check, and planning builds dozens of these)
        if self.l1.numerator < 0 or self.l2.numerator < 0 or self.linf.numerator < 0:
            raise InternalError("negative sensitivity")

    def scaled(self, k: Fraction) -> Sensitivity:
        return Sensitivity(self.l1 * k, self.l2 * k, self.linf * k)


_ZERO = Fraction(0)


def at_most(a: Number, b: Number) -> bool:
    """a ≤ b, cross-multiplied (denominators are positive): ``<=`` between Fractions, or with
    an int, passes an ABC isinstance check first (issue 21: twice as slow).

    >>> at_most(Fraction(1, 3), Fraction(2, 6)), at_most(Fraction(1, 2), 0), at_most(-1, 0)
    (True, False, True)
    """
    return a.numerator * b.denominator <= b.numerator * a.denominator


def _plus(a: Fraction, b: Fraction) -> Fraction:
    """a + b, exactly; a zero term (δ of a pure-ε cost, ρ without Gaussian noise: most of them)
    adds nothing, and skipping Python's Fraction addition saves microseconds a term, several
    times per query (the accountant adds and subtracts costs at every reservation)."""
    if not b:
        return a
    if not a:
        return b
    return a + b


def _less(a: Fraction, b: Fraction) -> Fraction:
    """max(0, a − b), exactly (a itself when b is zero)."""
    if not b:
        return a if a > 0 else _ZERO
    d = a - b
    return d if d > 0 else _ZERO


@dataclass(frozen=True, slots=True, order=True)
class Cost:
    """An (ε, δ) privacy cost under basic composition; δ = 0 is pure ε-DP.

    ``rho`` records the zero-concentrated cost for Gaussian releases (0 when none),
    used only for display; composition here is basic (ε and δ add).
    """

    epsilon: Fraction
    delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        # δ may exceed 1 in a sum of costs (a request never does: the planner checks δ < 1).
        if self.epsilon.numerator < 0 or self.delta.numerator < 0 or self.rho.numerator < 0:
            raise PrivacyParameterError(
                f"invalid privacy cost ε={float(self.epsilon):g}, δ={float(self.delta):g}"
            )

    @classmethod
    def zero(cls) -> Cost:
        return cls(Fraction(0))

    def __add__(self, o: Cost) -> Cost:
        return Cost(
            _plus(self.epsilon, o.epsilon), _plus(self.delta, o.delta), _plus(self.rho, o.rho)
        )

    def __sub__(self, o: Cost) -> Cost:
        """Term by term, clamped at zero."""
        return Cost(
            _less(self.epsilon, o.epsilon), _less(self.delta, o.delta), _less(self.rho, o.rho)
        )

    def covers(self, o: Cost) -> bool:
        """True when a budget of ``self`` can pay for ``o``."""
        return at_most(o.epsilon, self.epsilon) and at_most(o.delta, self.delta)

    def __str__(self) -> str:
        text = f"ε={float(self.epsilon):.6g}"
        if self.delta:
            text += f", δ={float(self.delta):.3g}"
        return text


# The per-query ε and δ dpproxy plans with; outside, 22023 before anything runs. Beyond
# ε = 1000 a query protects nothing (a likelihood ratio of e^1000), while the exact arithmetic
# of smooth sensitivity and PTR grows with ε (at 10^12 a plan takes minutes, at 10^15 memory
# runs out); below ε = 10^-9 or δ = 10^-300 the noise scales and logarithms leave floating
# point. More than MAX_PRIVACY_BITS bits in a numerator or denominator is refused too.
MAX_EPSILON = Fraction(1000)
MIN_EPSILON = Fraction(1, 10**9)
MIN_DELTA = Fraction(1, 10**300)
MAX_PRIVACY_BITS = 2000


def check_privacy_parameters(eps: Fraction, dlt: Fraction) -> None:
    """A requested (ε, δ) that dpproxy can plan with (see :data:`MAX_EPSILON`)."""
    # signs and ranges by numerators (denominators are positive): no ABC check per comparison
    if eps.numerator <= 0:
        raise PrivacyParameterError("ε must be positive")
    if not 0 <= dlt.numerator < dlt.denominator:
        raise PrivacyParameterError("δ must be in [0, 1)")
    for name, v in (("ε", eps), ("δ", dlt)):
        if max(v.numerator.bit_length(), v.denominator.bit_length()) > MAX_PRIVACY_BITS:
            raise InvalidParameter(f"{name} has too many digits", hint="give it in decimal")
    if not (at_most(MIN_EPSILON, eps) and at_most(eps, MAX_EPSILON)):
        raise InvalidParameter(
            f"ε = {float(eps):g} is outside the range dpproxy plans with, "
            f"[{float(MIN_EPSILON):g}, {MAX_EPSILON}] per query",
            hint="above ε = 1000 a query protects nothing",
        )
    if dlt.numerator and not at_most(MIN_DELTA, dlt):
        raise InvalidParameter(
            f"δ = {float(dlt):g} is below the smallest positive δ dpproxy plans with, "
            f"{float(MIN_DELTA):g}",
            hint="use δ = 0 for pure ε-DP",
        )


def parse_privacy_number(value: object, name: str, *, allow_zero: bool = False) -> Fraction:
    """Parse a user-given ε or δ; raise ZD003 with a clear message if it is invalid."""
    try:
        f = to_fraction(value)
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise PrivacyParameterError(f"{name} must be a finite number, got {value!r}") from e
    if f < 0 or (f == 0 and not allow_zero):
        raise PrivacyParameterError(
            f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}"
        )
    return f


_EXP_DIRECT = 700  # |x| ≤ 700: e^x is a normal float, math.exp is used directly
_EXP_LIMIT = 10**6  # beyond: monotonicity gives a bound (up) or 0 / the limit's bound (down)
_EXP_BITS = 96  # significant bits kept when squaring


def _exp_bound(x: Fraction, up: bool) -> Fraction:
    """A rational bound on e^x: above when ``up``, else below (see :func:`exp_up`)."""
    if x == 0:
        return Fraction(1)
    if x > _EXP_LIMIT:
        if up:
            raise InternalError("exponential out of range")
        x = Fraction(_EXP_LIMIT)  # e^x ≥ e^limit
    if x < -_EXP_LIMIT:
        if not up:
            return Fraction(0)
        x = Fraction(-_EXP_LIMIT)  # e^x ≤ e^-limit
    halvings = 0
    while abs(x) > _EXP_DIRECT:
        x /= 2
        halvings += 1
    v = Fraction(math.exp(float(x)))
    margin = Fraction(1, 10**9)
    b = v * (1 + margin) if up else v * (1 - margin)
    for _ in range(halvings):  # e^(2y) = (e^y)²; a positive bound squared stays a bound
        b = b * b
        n, d = b.numerator, b.denominator
        shift = _EXP_BITS - (n.bit_length() - d.bit_length())
        q, r = divmod(n << shift, d) if shift >= 0 else divmod(n, d << -shift)
        q += 1 if up and r else 0
        b = Fraction(q, 1 << shift) if shift >= 0 else Fraction(q << -shift)
    return b


def exp_up(x: Fraction) -> Fraction:
    """A rational upper bound on e^x (relative error about 10^-9; exact at 0).

    The float exponential is within an ulp or two of e^float(x), and float(x) is within
    |x|·2^-53 of x; for |x| ≤ 700 both together stay far below the 10^-9 margin. Larger |x| is
    halved until it is in range and the bound squared back, rounding up, so the margin doubles
    per halving but the result stays an upper bound. Raises for x > 10^6.

    >>> exp_up(Fraction(0))
    Fraction(1, 1)
    >>> Fraction(27182818284, 10**10) < exp_up(Fraction(1)) < Fraction(27182818313, 10**10)
    True
    >>> 0 < exp_up(Fraction(-2000)) < Fraction(1, 10**868)  # e^-2000 ≈ 3.8·10^-869
    True
    """
    return _exp_bound(Fraction(x), up=True)


def exp_down(x: Fraction) -> Fraction:
    """A rational lower bound on e^x (0 only for x < -10^6; relative error about 10^-9).

    >>> exp_down(Fraction(0))
    Fraction(1, 1)
    >>> Fraction(27182818257, 10**10) < exp_down(Fraction(1)) < Fraction(27182818285, 10**10)
    True
    >>> exp_down(Fraction(-2000)) < exp_up(Fraction(-2000))
    True
    """
    return _exp_bound(Fraction(x), up=False)

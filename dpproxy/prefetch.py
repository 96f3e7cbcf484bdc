"""Noise drawn while the database runs: OpenDP's Laplace draws for a plan that has run before,
made on a worker thread during the query's SQL and added when the exact values arrive.

Why. OpenDP's exact samplers cost 5–7.5 µs a value whatever the scale (7.5 on an AMD EPYC in
benchmarks/small_floor.py): a grouped mean of 50 groups draws 100 values, over half a
millisecond, about as long as DuckDB takes for the whole ``GROUP BY`` of 1,000 rows. The noise
of an additive mechanism does not depend on the data, so it need not wait for it: OpenDP's call
releases the GIL (ctypes), and the draw runs on the second core while the database computes the
exact values.

What is drawn ahead. The engine remembers, per prepared statement, the Laplace draws its last
run asked for (:attr:`Prefetched.asked`: the law and the number of values), and at the next run
submits the same draws to one worker thread before it sends the SQL (:class:`Prefetcher`), when
they number at least :data:`MIN_AHEAD` values. It also draws them once more for the run after
(the *stock*: a second worker thread, at most :data:`STOCK_VALUES` values a statement for the
:data:`STOCKED` statements run last): the next run of the statement then finds its noise drawn
while the previous one released its answer or while the connection was idle, instead of
waiting for the worker when the draw takes longer than the SQL (a grouped query of 50 groups
draws 100 values, about 0.7 ms, against 0.4-0.7 ms of SQL at 1,000 rows).
Three laws qualify, all from OpenDP's integer sampler (``make_laplace`` over ``Vec<i64>``):

* integer Laplace (counts): D with P(D = d) ∝ e^{-|d|/b}, b the plan's scale rounded up;
* the lattice Laplace of :meth:`~dpproxy.mechanisms.noise.OpenDPNoise.laplace_lattice` (sums,
  JOINT means): 2^k·D with P(D = d) ∝ e^{-|d|·2^k/b}, which is the integer Laplace of scale
  s = b·2^-k (exact: a power of two), drawn this way when s ≤ 2^56;
* the staircase of ``mechanisms/staircase.py`` (SUM releases drawn from it): 2^k·D with D
  drawn by its exact sampler, ``draw_units`` (OpenDP's integer Laplace and the CSPRNG), the
  same function its release-time draw calls.

Privacy argument. A release is x + Z with Z independent of x and of everything else released,
of the law the planner calibrated (the same as OpenDP's ``make_laplace`` applied to x):

* Z is drawn by OpenDP's sampler on a vector of zeros (a staircase's D by ``draw_units`` from
  OpenDP's draws and the CSPRNG), before the data is read, and each drawn
  value is used at most once, then dropped with the query. A stocked draw is handed to exactly
  one run: it is taken out of the stock under the prefetcher's lock before it is read, and
  whatever that run leaves unused is dropped with it (never served to another run; a forked
  child, whose copy of the stock its parent may serve too, ignores it and starts with none).
  Which values serve a release depends only on the plan and on how many values the statement's
  earlier runs drew, never on a value drawn or on the data, so the values used are independent
  draws of the law.
* OpenDP saturates its i64 output, so a drawn v with |v| < T = 2^62 is D exactly; v ≥ T means
  exactly D ≥ T, and then D = T + G with G geometric, P(G = j) = (1 − r)·r^j, r = e^{-1/s}
  (the discrete Laplace's tail is memoryless: P(D = T + j | D ≥ T) ∝ r^j). G is drawn as the
  first non-negative value of further OpenDP draws of the same law (P(L = j | L ≥ 0) =
  (1 − r)·r^j), completed the same way if it is ≥ T itself; v ≤ −T by symmetry
  (:func:`discrete_laplace`). So D has exactly the discrete Laplace law, without the bound.
  At s ≤ 2^56, P(|D| ≥ T) ≤ e^{-64} per value: the completion exists for exactness.
* x + Z is computed exactly (Python integers), then rounded to a double (the lattice) or
  converted to one (counts), as OpenDP's own mechanism does: post-processing. A value off
  the lattice or outside 64 bits is an internal error, as it is for OpenDP's call.

The engine draws ahead only with the production noise source, never in a one-shot ``dpproxy``
command (its single query has no last run), and falls back to drawing at release time, through
OpenDP as before, whenever nothing fitting was drawn ahead (a first run, another law, more
values than drawn, a worker that has not started yet or failed).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpproxy.errors import InternalError
from dpproxy.mechanisms import noise as _noise
from dpproxy.mechanisms.noise import discrete_laplace, lattice_double
from dpproxy.mechanisms.staircase import draw_units

if TYPE_CHECKING:  # concurrent.futures is imported with the worker (not by a one-shot command)
    from concurrent.futures import Future, ThreadPoolExecutor

    from dpproxy.mechanisms.staircase import Staircase

log = logging.getLogger("dpproxy")

#: The largest integer scale drawn ahead (P(|D| ≥ T) ≤ e^{-64} a value).
MAX_SCALE = 2.0**56
_I64 = 2**63
#: The fewest values worth drawing ahead: below it, OpenDP's call (about 15 µs for one value)
#: costs no more than handing the draw to the worker, and the second thread disturbs the
#: database's own (a 1 M-row COUNT(*) ran 0.2 ms slower with one value drawn ahead). From 4
#: values on it pays at 1,000 rows, where DuckDB binds and plans on one thread: VARIANCE +
#: STDDEV (6 values) 0.19 ms faster with 4 than with 16, SUM + AVG + COUNT (4 values) 0.12 ms;
#: at 1 M rows a grouped AVG (4 values) and a HAVING over 6 groups moved by +0.07 and −0.12 ms
#: of 7-10 ms (``benchmarks/min_ahead_ab.py``, ``benchmarks/MIN_AHEAD_AB.json``).
MIN_AHEAD = 4
#: Prepared statements whose draws are remembered (the oldest is forgotten first).
REMEMBERED = 256
#: Statements whose next run's draws are kept drawn (the stock; the oldest is dropped first).
STOCKED = 32
#: The most values a statement's stocked draw holds (a run drawing more draws at its start
#: only): with :data:`STOCKED`, at most 131,072 integers held, a few MB.
STOCK_VALUES = 4096

#: ("int", b) or ("lattice", b, k): b the float scale the measurement is built with.
Law = tuple[Any, ...]
#: A stocked draw: the process that submitted it, the demand and the worker's future.
_Stocked = tuple[int, dict[Law, int], "Future[dict[Law, list[int]]]"]


def integer_scale(law: Law) -> float | None:
    """The scale of the integer Laplace a law is drawn as, or None if it is not drawn ahead."""
    if law[0] == "stair":
        return None
    try:
        s = law[1] if law[0] == "int" else math.ldexp(law[1], -law[2])
    except OverflowError:  # far beyond 2^56
        return None
    return s if 0 < s <= MAX_SCALE else None


def drawn_ahead(law: Law) -> bool:
    """Is a law drawn ahead: an integer or lattice Laplace of :func:`integer_scale`, or a
    staircase (``("stair", law)``: its integer D, ``mechanisms/staircase.py``)?"""
    return law[0] == "stair" or integer_scale(law) is not None


def draw(demand: dict[Law, int]) -> dict[Law, list[int]]:
    """Every law's values of a demand (the worker's job)."""
    out: dict[Law, list[int]] = {}
    for law, n in demand.items():
        if n <= 0:
            continue
        if law[0] == "stair":
            out[law] = draw_units(law[1], n, discrete_laplace)
            continue
        s = integer_scale(law)
        if s is not None:
            out[law] = discrete_laplace(s, n)
    return out


def lattice_units(v: float, k: int) -> int:
    """v·2^-k as an exact integer; a value off the lattice 2^k·ℤ (or not finite) is an internal
    error, as it is for :meth:`~dpproxy.mechanisms.noise.OpenDPNoise.laplace_lattice`."""
    try:
        p, q = float(v).as_integer_ratio()  # q a power of two
    except (ValueError, OverflowError):
        raise InternalError("a value off the noise lattice") from None
    num, den = (p << -k, q) if k <= 0 else (p, q << k)
    units, rest = divmod(num, den)
    if rest:
        raise InternalError("a value off the noise lattice")
    return units


def lattice_units_many(values: Sequence[float], k: int) -> list[int]:
    """:func:`lattice_units` of each value. For k ≤ 0, ``math.ldexp(v, -k)`` multiplies by a
    power of two ≥ 1, which is exact for a finite double or raises OverflowError: when every
    product is integral (NaN and ±inf are not), its ``int`` is v·2^-k exactly, in one pass of
    C-level maps; any other vector goes value by value, which refuses what is off the lattice."""
    scaled = _noise.scaled_to_lattice(values, k) if k <= 0 else None
    if scaled is not None:
        return list(map(int, scaled))
    return [lattice_units(v, k) for v in values]


class Prefetched:
    """A :class:`~dpproxy.mechanisms.noise.NoiseSource` for one query: the production source,
    with the Laplace draws its plan made last time drawn ahead (module docstring). Records the
    draws asked for (:attr:`asked`), for the next run."""

    def __init__(
        self,
        source: Any,
        future: Future[dict[Law, list[int]]] | None,
        owner: Prefetcher | None = None,
        key: str = "",
    ) -> None:
        self.source = source
        self._owner, self._key = owner, key
        self.asked: dict[Law, int] = {}
        self.served = 0  # values served from the draws made ahead (for the tests and logs)
        self._future = future
        self._pid = os.getpid()
        self._ready: dict[Law, list[int]] | None = None
        self._told = False

    def _take(self, law: Law, n: int) -> list[int] | None:
        asked = self.asked
        asked[law] = asked.get(law, 0) + n
        if self._owner is not None and not self._told:  # drawn ahead of the next run
            self._told = True
            self._owner.remember(self._key, asked)  # the dict itself: it sees later draws
        if self._ready is None:
            # a forked child (mid-query) has no worker: its copy of the future never ends
            same = self._pid == os.getpid()
            self._ready = _collect(self._future if same else None)
            self._future = None
        pool = self._ready.get(law)
        if pool is None or len(pool) < n:
            return None
        taken = pool[:n]
        del pool[:n]  # used once
        self.served += n
        if self._owner is not None:
            self._owner.count_served(n)
        return taken

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        if not integer or not values or scale <= 0:
            return self.source.laplace(values, scale, integer=integer)  # type: ignore[no-any-return]
        drawn = self._take(("int", _noise._scale_up(scale)), len(values))
        if drawn is None:
            return self.source.laplace(values, scale, integer=True)  # type: ignore[no-any-return]
        exact = [int(v) for v in values]
        if not all(-_I64 <= x < _I64 for x in exact):
            raise InternalError("a value beyond 64 bits for the integer noise")
        return [float(x + z) for x, z in zip(exact, drawn, strict=True)]

    def laplace_lattice(self, values: Sequence[float], scale: Fraction, k: int) -> list[float]:
        if not values or scale <= 0:
            return self.source.laplace_lattice(values, scale, k)  # type: ignore[no-any-return]
        drawn = self._take(("lattice", _noise._scale_up(scale), k), len(values))
        if drawn is None:
            return self.source.laplace_lattice(values, scale, k)  # type: ignore[no-any-return]
        units = lattice_units_many(values, k)
        return [lattice_double(u + z, k) for u, z in zip(units, drawn, strict=True)]

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        return self.source.gaussian(values, sigma, integer=integer)  # type: ignore[no-any-return]

    def staircase(self, values: Sequence[float], law: Staircase) -> list[float]:
        """x + 2^k·D with D drawn ahead by :func:`~dpproxy.mechanisms.staircase.draw_units`
        (the sampler OpenDPNoise.staircase calls), in exact integers, then rounded to a double
        as that call does; else drawn now through it."""
        if not values:
            return self.source.staircase(values, law)  # type: ignore[no-any-return]
        drawn = self._take(("stair", law), len(values))
        if drawn is None:
            return self.source.staircase(values, law)  # type: ignore[no-any-return]
        k = law.k
        units = lattice_units_many(values, k)
        return [lattice_double(u + d, k) for u, d in zip(units, drawn, strict=True)]

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        return self.source.noisy_min_index(scores, scale)  # type: ignore[no-any-return]


def _collect(future: Future[dict[Law, list[int]]] | None) -> dict[Law, list[int]]:
    """The draws made ahead: none if there were none, if the worker had not started them (they
    are cancelled: drawing now costs no more than waiting) or if it failed (logged for the
    operator: the release draws through OpenDP as before, so no answer depends on it)."""
    if future is None or future.cancel():
        return {}
    try:
        return future.result()
    except Exception as e:
        log.warning("noise drawn ahead failed; drawn at release time instead", exc_info=e)
        return {}


def prefetcher_for(source: Any) -> Prefetcher | None:
    """The engine's prefetcher: only with OpenDP's own source, never in a one-shot command."""
    if type(source) is not _noise.OpenDPNoise or _noise.ONE_SHOT_PROCESS:
        return None
    return Prefetcher()


class Prefetcher:
    """The draws each prepared statement made last time (:attr:`Prefetched.asked`), and the
    worker thread that draws them again ahead of the next run (module docstring)."""

    def __init__(self) -> None:
        self._demands: OrderedDict[str, dict[Law, int]] = OrderedDict()
        # the stock: per statement, (process, demand, its draw for the next run)
        self._stock: OrderedDict[str, _Stocked] = OrderedDict()
        self._lock = threading.Lock()
        self.served = 0  # values drawn ahead and released, over every run

    def start(self, sql: str | None, extra: Sequence[tuple[str, str]], source: Any) -> Prefetched:
        """A noise source for one run of a prepared statement (its main SQL and its extra
        statements: a function of the plan), its last run's draws submitted to the worker:
        only the laws drawn ahead (:func:`drawn_ahead`)."""
        key = "\n".join([sql or "", *(statement for _, statement in extra)])
        with self._lock:
            asked = self._demands.get(key)
            if asked is not None:
                self._demands.move_to_end(key)
            stocked = self._stock.pop(key, None)  # this run's alone from here on
        future = None
        if asked:
            try:  # list(): a copy in one step, while that run may still be drawing
                laws = list(asked.items())
            except RuntimeError:  # it added a law meanwhile (a thread switch in a GC pass)
                laws = []
            demand = {law: n for law, n in laws if drawn_ahead(law)}
            total = sum(demand.values())
            if total >= MIN_AHEAD:
                pid = os.getpid()
                if stocked is not None and stocked[0] == pid and stocked[1] == demand:
                    future, stocked = stocked[2], None
                else:
                    future = _worker().submit(draw, demand)
                if total <= STOCK_VALUES:
                    self._keep(key, (pid, demand, _worker(STOCK).submit(draw, demand)))
        if stocked is not None:  # drawn for another demand, or by a parent process
            stocked[2].cancel()
        return Prefetched(source, future, self, key)

    def _keep(self, key: str, stocked: _Stocked) -> None:
        """Stock a draw for the next run of ``key``; the oldest statement's is dropped beyond
        :data:`STOCKED` (its draw cancelled if not started: its values are never used)."""
        dropped = []
        with self._lock:
            old = self._stock.pop(key, None)  # a concurrent run of the statement stocked one
            if old is not None:
                dropped.append(old)
            self._stock[key] = stocked
            while len(self._stock) > STOCKED:
                dropped.append(self._stock.popitem(last=False)[1])
        for _, _, future in dropped:
            future.cancel()

    def close(self) -> None:
        """Drop the stock (the engine is closing): draws not started are cancelled."""
        with self._lock:
            dropped = list(self._stock.values())
            self._stock.clear()
        for _, _, future in dropped:
            future.cancel()

    def count_served(self, n: int) -> None:
        with self._lock:
            self.served += n

    def remember(self, key: str, asked: dict[Law, int]) -> None:
        """What a run draws (:attr:`Prefetched.asked`, which it goes on filling), for the
        next run of the same statement; a run that fails leaves what it drew until then, a
        hint like any other."""
        with self._lock:
            self._demands[key] = asked
            self._demands.move_to_end(key)
            while len(self._demands) > REMEMBERED:
                self._demands.popitem(last=False)


#: The two workers: the draws of runs under way, and the stock (for next runs), each one
#: thread, so that a run's own draw never waits behind another statement's stock.
NOW, STOCK = "noise", "noise-stock"
_WORKERS: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_WORKER_LOCK = threading.Lock()


def _forget_in_child() -> None:
    """After a fork: the parent's threads and lock (which another thread may have held) are
    not the child's."""
    global _WORKERS, _WORKER_LOCK
    _WORKERS, _WORKER_LOCK = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def _worker(name: str = NOW) -> ThreadPoolExecutor:
    """One worker thread of each kind per process, started at its first draw; a forked child
    starts its own (a parent's thread does not survive a fork, and its draws are not the
    child's)."""
    pid = os.getpid()
    with _WORKER_LOCK:
        held = _WORKERS.get(name)
        if held is None or held[0] != pid:
            from concurrent.futures import ThreadPoolExecutor

            held = _WORKERS[name] = (
                pid,
                ThreadPoolExecutor(1, thread_name_prefix=f"dpproxy-{name}"),
            )
        return held[1]

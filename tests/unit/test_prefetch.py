"""Noise drawn ahead (``prefetch.py``), with OpenDP's real sampler throughout.

* the exact discrete Laplace draw: with a small threshold, so that the memoryless completion
  runs on a third of the values, the drawn law is the discrete Laplace's (every probability
  of [-12, 12] and the tail beyond, within five standard errors of 60,000 draws);
* the lattice arithmetic: exact units, off-lattice values refused, correct rounding;
* a one-query source serves each drawn value once, falls back to OpenDP when nothing fits, and
  gives exactly x + z;
* the engine draws ahead from the second run of a statement on, never with a test source or
  in a one-shot command, and a forked child draws its own;
* the stock: a run also has its statement's next run drawn, which serves exactly one run (a
  concurrent run of the statement, another demand or a forked child never gets it), bounded
  in values and statements, dropped when the engine closes;
* the answers with values drawn ahead are those of OpenDP's own call: same law (a two-sample
  test in ``tests/audit/test_audit_prefetch.py``) and, with no noise at all, the same values.
"""

from __future__ import annotations

import math
import os
import random
from collections import Counter
from concurrent.futures import Future
from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy import prefetch
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import InternalError
from dpproxy.mechanisms import noise as noise_module
from dpproxy.mechanisms.noise import OpenDPNoise, T, lattice_exponent
from dpproxy.prefetch import (
    MAX_SCALE,
    Prefetched,
    Prefetcher,
    discrete_laplace,
    draw,
    integer_scale,
    lattice_double,
    lattice_units,
    lattice_units_many,
)

SIGMAS = 5


def _pmf(d: int, scale: float) -> float:
    r = math.exp(-1 / scale)
    return (1 - r) / (1 + r) * r ** abs(d)


def test_the_completed_draw_has_the_discrete_laplace_law() -> None:
    scale, threshold, n = 3.0, 4, 60_000
    drawn = discrete_laplace(scale, n, threshold=threshold)
    assert len(drawn) == n and all(isinstance(v, int) for v in drawn)
    seen = Counter(drawn)
    beyond = sum(c for v, c in seen.items() if abs(v) >= threshold)
    assert beyond > n / 4  # the completion ran on many values (P(|D| ≥ 4) ≈ 0.30)
    for d in range(-12, 13):
        p = _pmf(d, scale)
        band = SIGMAS * math.sqrt(p * (1 - p) / n)
        assert abs(seen[d] / n - p) <= band, (d, seen[d] / n, p)
    tail = sum(c for v, c in seen.items() if abs(v) > 12) / n
    p_tail = 1 - sum(_pmf(d, scale) for d in range(-12, 13))
    assert abs(tail - p_tail) <= SIGMAS * math.sqrt(p_tail * (1 - p_tail) / n)
    assert max(drawn) > 12 and min(drawn) < -12  # values past the threshold, both signs


def test_the_default_threshold_leaves_opendp_values_as_they_are() -> None:
    drawn = discrete_laplace(2.0**40, 500)
    assert all(abs(v) < T for v in drawn)
    assert sum(abs(v) for v in drawn) / 500 == pytest.approx(2.0**40, rel=0.3)


def test_a_threshold_beyond_what_opendp_gives_exactly_is_refused() -> None:
    with pytest.raises(ValueError):
        discrete_laplace(1.0, 1, threshold=2**63)
    with pytest.raises(ValueError):
        discrete_laplace(1.0, 1, threshold=0)


def test_which_laws_are_drawn_ahead() -> None:
    assert integer_scale(("int", 4.0)) == 4.0
    assert integer_scale(("lattice", 1000.0, -43)) == math.ldexp(1000.0, 43)
    assert integer_scale(("lattice", 1.0, -57)) is None  # 2^57 > 2^56
    assert integer_scale(("lattice", 1.0, -56)) == MAX_SCALE
    assert integer_scale(("lattice", 1e300, -1074)) is None  # overflows to inf
    assert draw({("int", 2.0): 3, ("lattice", 1.0, -60): 5, ("int", 5.0): 0}).keys() == {
        ("int", 2.0)
    }


def test_lattice_units_and_doubles_are_exact() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        k = rng.randint(-1074, 0) if rng.random() < 0.5 else rng.randint(-80, 10)
        units = rng.randint(-(2**60), 2**60) >> rng.randint(0, 60)
        v = lattice_double(units, k)
        exact = Fraction(units) * Fraction(2) ** k
        if math.isinf(v):
            assert abs(exact) > Fraction(2) ** 1023
            continue
        assert v == float(exact)  # Python's Fraction → float is correctly rounded
        if Fraction(v) == exact:
            assert lattice_units(v, k) == units
    assert lattice_units(-0.0, -3) == 0
    assert lattice_units(1.5, -1) == 3 and lattice_units(8.0, 2) == 2
    assert lattice_double(2**1100, -10) == math.inf
    assert lattice_double(-(2**1100), 0) == -math.inf


def test_many_lattice_units_are_each_ones() -> None:
    """The one-pass form gives every value's units, and refuses a vector with a value off
    the lattice, NaN or ±inf, as the value-by-value form does."""
    rng = random.Random(13)
    for _ in range(500):
        k = rng.choice([-1074, -60, -43, -1, 0])
        vs = [
            lattice_double(rng.randint(-(2**70), 2**70) >> rng.randint(0, 70), k) for _ in range(5)
        ]
        vs = [v for v in vs if math.isfinite(v)]
        assert lattice_units_many(vs, k) == [lattice_units(v, k) for v in vs]
    for bad in (0.1, math.nan, math.inf, -math.inf):
        with pytest.raises(InternalError):
            lattice_units_many([1.0, bad], -1)
    assert lattice_units_many([1e308], -100) == [lattice_units(1e308, -100)]  # past ldexp's range


@pytest.mark.parametrize("value", [0.1, 1.5, math.nan, math.inf, -math.inf])
def test_a_value_off_the_lattice_is_an_internal_error(value: float) -> None:
    with pytest.raises(InternalError):
        lattice_units(value, 0)


def _ready(drawn: dict[prefetch.Law, list[int]]) -> Future[dict[prefetch.Law, list[int]]]:
    f: Future[dict[prefetch.Law, list[int]]] = Future()
    f.set_result(drawn)
    return f


def test_a_value_drawn_ahead_is_served_once_and_exactly() -> None:
    b = Fraction(7, 3)
    law = ("int", noise_module._scale_up(b))
    source = Prefetched(OpenDPNoise(), _ready({law: [5, -2, 9]}))
    assert source.laplace([10.0, 20.0], b, integer=True) == [15.0, 18.0]
    assert source.served == 2
    # one value left: a call for two draws them through OpenDP, and leaves it unused
    out = source.laplace([0.0, 0.0], b, integer=True)
    assert len(out) == 2 and all(v.is_integer() for v in out)
    assert source.served == 2
    assert source.laplace([1.0], b, integer=True) == [10.0]
    assert source.served == 3
    assert source.asked == {law: 5}
    with pytest.raises(InternalError):  # as OpenDP's own call refuses it
        Prefetched(OpenDPNoise(), _ready({law: [0]})).laplace([2.0**63], b, integer=True)


def test_a_lattice_value_drawn_ahead_is_added_exactly() -> None:
    b = Fraction(1000)
    k = lattice_exponent(b, 43)
    law = ("lattice", 1000.0, k)
    z = [3 * 2**40 + 1, -(2**45)]
    source = Prefetched(OpenDPNoise(), _ready({law: list(z)}))
    values = [0.5, 123.25]
    out = source.laplace_lattice(values, b, k)
    assert out == [
        float(Fraction(v) + Fraction(d) * Fraction(2) ** k) for v, d in zip(values, z, strict=True)
    ]
    with pytest.raises(InternalError):
        Prefetched(OpenDPNoise(), _ready({law: [0]})).laplace_lattice([math.nan], b, k)


def test_a_failed_or_unstarted_worker_leaves_the_draw_to_opendp() -> None:
    failed: Future[dict[prefetch.Law, list[int]]] = Future()
    failed.set_exception(RuntimeError("worker failed"))
    pending: Future[dict[prefetch.Law, list[int]]] = Future()
    for future in (failed, pending, None):
        source = Prefetched(OpenDPNoise(), future)
        assert len(source.laplace([1.0] * 3, Fraction(2), integer=True)) == 3
        assert source.served == 0
    assert pending.cancelled()


def test_the_prefetcher_draws_what_the_last_run_asked_for() -> None:
    prefetcher = Prefetcher()
    first = prefetcher.start("q", (), OpenDPNoise())
    first.laplace([1.0] * 16, Fraction(2), integer=True)
    first.laplace_lattice([0.5], Fraction(1), -60)  # 2^60: never drawn ahead
    assert prefetcher._demands["q"] == {("int", 2.0): 16, ("lattice", 1.0, -60): 1}
    second = prefetcher.start("q", (), OpenDPNoise())
    prefetch._worker().submit(int).result()  # one worker, in order: the draw is made
    assert second._future is not None
    assert {law: len(v) for law, v in second._future.result().items()} == {("int", 2.0): 16}
    second.laplace([1.0] * 16, Fraction(2), integer=True)
    assert second.served == 16
    assert prefetcher.served == 16
    assert prefetcher.start("other", (), OpenDPNoise())._future is None


def test_the_prefetcher_forgets_the_oldest_statements() -> None:
    prefetcher = Prefetcher()
    for i in range(prefetch.REMEMBERED + 3):
        run = prefetcher.start(f"q{i}", (), OpenDPNoise())
        run.laplace([1.0] * prefetch.MIN_AHEAD, Fraction(2), integer=True)
    assert prefetcher.start("q0", (), OpenDPNoise())._future is None
    assert prefetcher.start(f"q{prefetch.REMEMBERED + 2}", (), OpenDPNoise())._future is not None


def test_a_few_values_are_never_drawn_ahead() -> None:
    """Below MIN_AHEAD values a run draws through OpenDP as before: handing a draw of one
    value to the worker costs more than it saves."""
    prefetcher = Prefetcher()
    few = prefetch.MIN_AHEAD - 1
    for _ in range(2):
        run = prefetcher.start("q", (), OpenDPNoise())
        assert run._future is None
        assert len(run.laplace([1.0] * few, Fraction(2), integer=True)) == few
    assert prefetcher.served == 0


def _stock_of(prefetcher: Prefetcher, key: str) -> Future[dict[prefetch.Law, list[int]]]:
    """The stocked draw of ``key`` (waited for: the stock's worker draws in order)."""
    future = prefetcher._stock[key][2]
    future.result()
    return future


def test_a_run_stocks_the_next_runs_draw_and_it_serves_that_run_alone() -> None:
    prefetcher = Prefetcher()
    b, law = Fraction(2), ("int", 2.0)
    first = prefetcher.start("q", (), OpenDPNoise())
    first.laplace([1.0] * 16, b, integer=True)
    assert "q" not in prefetcher._stock  # the first run drew at release time: nothing known
    second = prefetcher.start("q", (), OpenDPNoise())
    stocked = _stock_of(prefetcher, "q")
    assert prefetcher._stock["q"][1] == {law: 16}
    assert second._future is not stocked  # the second run's own draw, submitted at its start
    prefetch._worker().submit(int).result()  # one worker, in order: that draw is made
    second.laplace([1.0] * 16, b, integer=True)
    assert second.served == 16
    drawn = list(stocked.result()[law])
    third = prefetcher.start("q", (), OpenDPNoise())
    assert third._future is stocked  # taken out of the stock: this run's alone
    assert prefetcher._stock["q"][2] is not stocked  # and the run after has a new one
    concurrent = prefetcher.start("q", (), OpenDPNoise())  # the same statement meanwhile
    assert concurrent._future is not stocked
    assert third.laplace([0.0] * 16, b, integer=True) == [float(z) for z in drawn]
    assert third.served == 16
    # the values were handed out once: the stocked list is emptied as it is served
    assert stocked.result()[law] == []
    assert concurrent.laplace([0.0] * 16, b, integer=True) != [float(z) for z in drawn]


def test_a_stocked_draw_of_another_demand_is_dropped_unused() -> None:
    prefetcher = Prefetcher()
    b = Fraction(2)
    for _ in range(2):
        prefetcher.start("q", (), OpenDPNoise()).laplace([1.0] * 16, b, integer=True)
    stocked = _stock_of(prefetcher, "q")
    run = prefetcher.start("q", (), OpenDPNoise())  # this run asks for 20 at another scale
    assert run._future is stocked
    run.laplace([1.0] * 20, Fraction(3), integer=True)
    # the next run's demand is the last run's (20 at scale 3): the stock of 16 at scale 2
    # drawn before it was known does not fit it, and is cancelled or left unread
    nxt = prefetcher.start("q", (), OpenDPNoise())
    assert prefetcher._stock["q"][1] == {("int", 3.0): 20}
    assert nxt._future is not prefetcher._stock["q"][2]


def test_the_stock_is_bounded_and_dropped_at_close() -> None:
    prefetcher = Prefetcher()
    b = Fraction(2)
    big = prefetch.STOCK_VALUES + 1
    for _ in range(2):
        prefetcher.start("big", (), OpenDPNoise()).laplace([1.0] * big, b, integer=True)
    assert "big" not in prefetcher._stock  # drawn at each run's start only
    for i in range(prefetch.STOCKED + 5):
        for _ in range(2):
            prefetcher.start(f"q{i}", (), OpenDPNoise()).laplace([1.0] * 4, b, integer=True)
    assert len(prefetcher._stock) == prefetch.STOCKED
    assert "q0" not in prefetcher._stock and f"q{prefetch.STOCKED + 4}" in prefetcher._stock
    stocked = [entry[2] for entry in prefetcher._stock.values()]
    prefetcher.close()
    assert not prefetcher._stock
    prefetch._worker(prefetch.STOCK).submit(int).result()  # in order: one that ran has ended
    assert all(f.cancelled() or f.done() for f in stocked)


def test_the_engine_closes_its_stock(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = _engine(demo_db, demo_catalog)
    sql = "SELECT education, COUNT(*) FROM adult GROUP BY education"
    for i in range(2):
        engine.run(sql, analyst=f"analyst{i}")
    assert engine._ahead is not None and engine._ahead._stock
    engine.close()
    assert not engine._ahead._stock


def _engine(db: Path, catalog: Catalog, noise: object = None) -> Engine:
    return Engine(catalog, DuckDBBackend(db), noise=noise)  # type: ignore[arg-type]


def test_the_engine_draws_ahead_from_the_second_run(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = _engine(demo_db, demo_catalog)
    sql = "SELECT education, COUNT(*), AVG(hours_per_week) FROM adult GROUP BY education"
    prefetcher = engine._ahead
    assert prefetcher is not None
    for i in range(30):  # a loaded machine may not start the worker before the release needs it
        answer = engine.run(sql, analyst=f"analyst{i}")  # a repeat is answered from the cache
        assert len(answer.released.rows) == 16  # the domain's levels
        if prefetcher.served >= 48:
            break
    assert prefetcher.served >= 48  # a run: a count and two parts of the mean per level


def test_the_engine_never_draws_ahead_with_another_source(
    demo_db: Path, demo_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Shifted(OpenDPNoise):  # a source of the tests' own: not OpenDP's, as such
        pass

    engine = _engine(demo_db, demo_catalog, Shifted())
    engine.run("SELECT COUNT(*) FROM adult", analyst="alice")
    assert engine._ahead is None
    monkeypatch.setattr(noise_module, "ONE_SHOT_PROCESS", True)
    engine = _engine(demo_db, demo_catalog)
    engine.run("SELECT COUNT(*) FROM adult", analyst="alice")
    assert engine._ahead is None


def test_a_forked_child_draws_with_a_worker_of_its_own() -> None:
    prefetcher = Prefetcher()
    run = prefetcher.start("q", (), OpenDPNoise())
    run.laplace([1.0] * 16, Fraction(2), integer=True)
    prefetch._worker()  # the parent's worker exists
    second = prefetcher.start("q", (), OpenDPNoise())  # stocks the third run's draw
    second.laplace([1.0] * 16, Fraction(2), integer=True)
    parents = _stock_of(prefetcher, "q")  # the parent may serve it: never the child
    pid = os.fork()
    if pid == 0:  # the child: a new worker, which draws
        try:
            child = prefetcher.start("q", (), OpenDPNoise())
            prefetch._worker().submit(int).result()  # the child's own worker has drawn
            child.laplace([1.0] * 16, Fraction(2), integer=True)
            ok = child.served == 16 and child._future is None  # collected: not the parent's
            ok = ok and prefetcher._stock["q"][0] == os.getpid()
            ok = ok and prefetcher._stock["q"][2] is not parents
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert prefetcher.start("q", (), OpenDPNoise())._future is parents


def test_the_prefetching_source_has_every_draw_of_opendps() -> None:
    """``Prefetched`` stands in for ``OpenDPNoise`` in the engine: a draw it lacked would
    reach a fallback meant for the tests' sources (the staircase's: the Laplace it replaces)."""
    public = {n for n in vars(OpenDPNoise) if not n.startswith("_")}
    assert public <= {n for n in vars(Prefetched) if not n.startswith("_")}


def test_the_engine_draws_an_ungrouped_sum_from_the_staircase_on_every_run(
    demo_db: Path, demo_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run draws from OpenDP's source, later runs through ``Prefetched``: both reach
    the staircase sampler (mechanisms/staircase.py), none the Laplace fallback."""
    calls: list[int] = []
    original = OpenDPNoise.staircase

    def counted(self: OpenDPNoise, values: list[float], law: object) -> list[float]:
        calls.append(len(values))
        return original(self, values, law)  # type: ignore[arg-type]

    monkeypatch.setattr(OpenDPNoise, "staircase", counted)
    engine = _engine(demo_db, demo_catalog)
    try:
        assert engine._ahead is not None
        for i in range(3):
            engine.run("SELECT SUM(capital_gain) FROM adult", analyst=f"analyst{i}")
    finally:
        engine.close()
    assert calls == [1, 1, 1]


def test_a_staircase_value_drawn_ahead_is_added_exactly() -> None:
    """x + 2^k·D in exact integers, rounded once; a demand for the staircase is drawn by its
    own sampler (integers, of the count asked)."""
    from dpproxy.mechanisms.staircase import staircase_for

    b = Fraction(1000)
    k = lattice_exponent(b, 43)
    law = staircase_for(Fraction(1), b, k, b, Fraction(2**60))
    assert law is not None
    z = [3 * 2**40 + 1, -(2**45)]
    source = Prefetched(OpenDPNoise(), _ready({("stair", law): list(z)}))
    values = [0.5, 123.25]
    assert source.staircase(values, law) == [
        float(Fraction(v) + Fraction(d) * Fraction(2) ** k) for v, d in zip(values, z, strict=True)
    ]
    assert source.served == 2 and source.asked == {("stair", law): 2}
    with pytest.raises(InternalError):
        Prefetched(OpenDPNoise(), _ready({("stair", law): [0]})).staircase([math.nan], law)
    drawn = draw({("stair", law): 5})[("stair", law)]
    assert len(drawn) == 5 and all(type(d) is int for d in drawn)


def test_the_engine_draws_a_grouped_sums_staircase_ahead(
    demo_db: Path, demo_catalog: Catalog
) -> None:
    """16 education levels, one group per unit (the unit is the PRIMARY KEY): a staircase per
    level, drawn ahead from the second run on."""
    engine = _engine(demo_db, demo_catalog)
    sql = "SELECT education, SUM(capital_gain) FROM adult GROUP BY education"
    prefetcher = engine._ahead
    assert prefetcher is not None
    try:
        for i in range(30):  # a loaded machine may not start the worker before the release
            answer = engine.run(sql, analyst=f"analyst{i}")
            assert len(answer.released.rows) == 16
            if prefetcher.served >= 16:
                break
    finally:
        engine.close()
    assert prefetcher.served >= 16

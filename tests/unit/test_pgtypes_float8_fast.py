"""The float8 text fast path (``pgfloat._float8_text``, Python's repr when it is PostgreSQL's
digits) prints exactly what the exact route (``_float_text`` with ``_float8_digits``) prints."""

from __future__ import annotations

import math
import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from dpproxy.server import pgtypes
from dpproxy.server.pgfloat import _float8_digits, _float8_text, _float_text
from dpproxy.server.pgtypes import FLOAT8_OID


def _exact(x: float) -> str:
    return _float_text(x, 15, _float8_digits)


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_fast_path_prints_the_exact_digits(x: float) -> None:
    assert _float8_text(x) == _exact(x)


def test_edges_and_noisy_answers() -> None:
    rnd = random.Random(21)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 1e15, 1e16, 123456789012345.6, 1e-4, 1.5e-5]
    values += [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.3, 2 / 3]
    values += [rnd.gauss(36.87, 0.1) for _ in range(2000)]  # AVG(age) with noise
    values += [rnd.uniform(-1e6, 1e6) for _ in range(2000)]
    values += [struct.unpack(">d", rnd.randbytes(8))[0] for _ in range(2000)]  # any bits
    values += [math.ldexp(rnd.randrange(1, 2**20), -rnd.randrange(0, 30)) for _ in range(500)]
    for x in values:
        assert _float8_text(x) == _exact(x), x
    assert pgtypes.encode_text(36.8727, FLOAT8_OID) == b"36.8727"
    assert pgtypes.encode_text(1e15, FLOAT8_OID) == b"1e+15"

"""``mechanisms/opendp_ffi.py``: OpenDP's measurements called through its C interface with the
types known draw from the same law as OpenDP's own Python call, and fail closed.

Statistical checks (OpenDP cannot be seeded): two-sample tests of the direct call against
``Measurement.__call__`` on the same measurement, failing only below p = 1e-7; with three of
them the chance that a correct implementation fails this module is below 10⁻⁶ per run.
"""

from __future__ import annotations

import ctypes
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpproxy.errors import InternalError
from dpproxy.mechanisms import noise as noise_module
from dpproxy.mechanisms import opendp_ffi
from dpproxy.mechanisms.noise import OpenDPNoise

P_FAIL = 1e-7
N = 20_000


def test_the_direct_call_is_used() -> None:
    assert opendp_ffi.AVAILABLE
    assert noise_module._invoker() is opendp_ffi.invoke


def test_integer_laplace_same_law_as_opendp() -> None:
    m = noise_module._measurement("laplace", 3.0, True)
    direct = np.asarray(opendp_ffi.invoke(m, [7] * N, True))
    public = np.asarray(m([7] * N))
    assert direct.dtype.kind == "i"
    support = np.arange(-60, 61)
    a = np.array([(np.clip(direct - 7, -60, 60) == k).sum() for k in support])
    b = np.array([(np.clip(public - 7, -60, 60) == k).sum() for k in support])
    keep = (a + b) >= 20
    table = np.vstack([a[keep], b[keep]])
    assert stats.chi2_contingency(table)[1] > P_FAIL


def test_lattice_laplace_same_law_as_opendp() -> None:
    m = noise_module._lattice_measurement(2.5, -50, N)
    values = [0.25] * N
    direct = opendp_ffi.invoke(m, values, False)
    public = m(values)
    assert all(type(x) is float for x in direct[:10])
    assert stats.ks_2samp(direct, public).pvalue > P_FAIL
    step = 2.0**-50  # every draw stays on the lattice 2^-50·ℤ
    assert all((x / step).is_integer() for x in direct[:1000])


def test_gaussian_same_law_as_opendp() -> None:
    m = noise_module._measurement("gaussian", 4.0, False)
    direct = opendp_ffi.invoke(m, [1.5] * N, False)
    public = m([1.5] * N)
    assert stats.ks_2samp(direct, public).pvalue > P_FAIL


def test_noise_source_returns_floats_of_the_right_length() -> None:
    src = OpenDPNoise()
    for integer in (True, False):
        out = src.laplace([1, 2, 3], Fraction(2), integer=integer)
        assert len(out) == 3 and all(type(x) is float for x in out)
    out = src.laplace_lattice([0.5, 1.0], Fraction(1), -50)
    assert len(out) == 2 and all(type(x) is float for x in out)


def test_an_integer_beyond_64_bits_is_refused_not_wrapped() -> None:
    # ctypes would wrap 2^64 + 5 to 5 silently; OpenDP's own wrapper refuses it, and so do we.
    m = noise_module._measurement("laplace", 1.0, True)
    with pytest.raises(InternalError):
        opendp_ffi.invoke(m, [2**64 + 5], True)
    with pytest.raises(InternalError):
        opendp_ffi.invoke(m, [-(2**63) - 1], True)
    with pytest.raises(InternalError):  # anywhere in the vector
        opendp_ffi.invoke(m, [0, 2**63, 1], True)
    assert len(opendp_ffi.invoke(m, [0, -(2**62), 2**62], True)) == 3  # within: drawn


def test_an_opendp_error_is_raised_not_ignored() -> None:
    # A measurement over Vec<f64> given an i64 vector: OpenDP refuses the input type.
    from opendp.mod import OpenDPException

    m = noise_module._measurement("laplace", 1.0, False)
    with pytest.raises(OpenDPException):
        opendp_ffi.invoke(m, [1, 2], True)


def test_the_input_array_is_copied_by_opendp() -> None:
    # OpenDP's slice_as_object copies the input: drawing twice from one Python list works.
    m = noise_module._measurement("laplace", 1.0, True)
    values = [5, 6]
    first = opendp_ffi.invoke(m, values, True)
    second = opendp_ffi.invoke(m, values, True)
    assert len(first) == len(second) == 2 and values == [5, 6]
    assert ctypes.sizeof(ctypes.c_int64) == 8

"""One call of an OpenDP vector measurement through OpenDP's C interface, without its Python
wrapper's per-call work.

``Measurement.__call__`` (OpenDP's ``core.measurement_invoke``) asks the library for the
measurement's input type, parses it, checks and converts every element in Python, and on the
way back asks for the output's type, parses it and converts again: about 60 µs a call, five
times the sampling of one value (about 14 µs for the whole call here, 7 µs a value beyond).
dpproxy calls only vector measurements it built itself (``mechanisms/noise.py``) over
``Vec<i64>`` or ``Vec<f64>``, so those types are known before the call. :func:`invoke` makes
the same calls into the same library as OpenDP's wrapper — ``opendp_data__slice_as_object``
(the library copies the input), ``opendp_core__measurement_invoke`` (the sampler),
``opendp_data__object_as_slice`` — with the types fixed, checks that the output is of the
expected type and length, and frees what the library allocated. The noise is OpenDP's,
drawn by the same function with the same arguments: only the Python around the call differs.

Integers are checked to fit in 64 bits here (OpenDP's wrapper checks the same; ctypes would
wrap them silently). Where OpenDP's internals this relies on are missing (another OpenDP
version), :data:`AVAILABLE` is False and ``mechanisms/noise.py`` calls the measurement
through OpenDP's public interface, as before.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from dpproxy.errors import InternalError

_I64 = 2**63

try:  # imported by mechanisms/noise.py after OpenDP itself (never at dpproxy's import)
    from opendp._lib import AnyObject, FfiResult, FfiSlice, lib, unwrap
    from opendp.mod import Measurement

    _OBJ = ctypes.POINTER(AnyObject)
    _SLICE = ctypes.POINTER(FfiSlice)
    _ADDRESS = ctypes.c_void_p  # the library's pointers, passed on as plain addresses

    def _fn(name: str, *args: Any) -> Any:
        # A function object of our own (OpenDP's wrappers set argtypes on the library's
        # shared one before each call): the same symbol, the same library. Pointer arguments
        # are declared as addresses (c_void_p: the same machine word the library reads), so
        # the pointers it returns are passed back without a ctypes.cast (about 2 µs each).
        return ctypes.CFUNCTYPE(FfiResult, *args)((name, lib))

    _slice_as_object = _fn("opendp_data__slice_as_object", _SLICE, ctypes.c_char_p)
    _invoke = _fn("opendp_core__measurement_invoke", Measurement, _ADDRESS)
    _object_as_slice = _fn("opendp_data__object_as_slice", _ADDRESS)
    _object_type = _fn("opendp_data__object_type", _ADDRESS)
    _object_free = _fn("opendp_data__object_free", _ADDRESS)
    _slice_free = _fn("opendp_data__slice_free", _ADDRESS)
    _str_free = _fn("opendp_data__str_free", _ADDRESS)
    AVAILABLE = True
except (ImportError, AttributeError):  # pragma: no cover - another OpenDP version
    AVAILABLE = False

_TYPES: dict[bool, tuple[Any, bytes]] = {
    True: (ctypes.c_int64, b"Vec<i64>"),
    False: (ctypes.c_double, b"Vec<f64>"),
}


def _ok(result: Any) -> int:
    """The address an FfiResult holds; an error raises OpenDP's own exception (``unwrap``
    frees the error). A successful call never returns a null pointer; one is refused."""
    if result.tag != 0:
        unwrap(result, _OBJ)
        raise InternalError("OpenDP reported an error")  # pragma: no cover - unwrap raised
    address: int | None = result.payload.Ok
    if not address:
        raise InternalError("OpenDP returned a null pointer")  # pragma: no cover
    return address


def invoke(measurement: Any, values: Sequence[int] | Sequence[float], integer: bool) -> list[Any]:
    """``measurement(values)`` for a measurement over ``Vec<i64>`` (``integer``) or
    ``Vec<f64>``: the released vector, as Python ints or floats."""
    ctype, type_name = _TYPES[integer]
    n = len(values)
    if integer and values and not (-_I64 <= min(values) and max(values) < _I64):
        raise InternalError("a value beyond 64 bits for the integer noise")
    array = (ctype * n)(*values)
    raw = FfiSlice(ctypes.addressof(array), n)
    given = _ok(_slice_as_object(ctypes.byref(raw), type_name))
    try:
        out = _ok(_invoke(measurement, given))
    finally:
        _object_free(given)
    try:
        kind = _ok(_object_type(out))
        try:
            same = ctypes.string_at(kind) == type_name
        finally:
            _str_free(kind)
        if not same:
            raise InternalError("OpenDP released a value of an unexpected type")
        view = _ok(_object_as_slice(out))
        try:
            got = FfiSlice.from_address(view)
            length = got.len
            if length != n:
                raise InternalError("OpenDP released an unexpected number of values")
            drawn: list[Any] = (ctype * length).from_address(got.ptr)[:] if length else []
        finally:
            _slice_free(view)
    finally:
        _object_free(out)
    return drawn

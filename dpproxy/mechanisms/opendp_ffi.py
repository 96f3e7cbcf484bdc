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

    def _fn(name: str, *args: Any) -> Any:
        # A function object of our own (OpenDP's wrappers set argtypes on the library's
        # shared one before each call): the same symbol, the same library.
        return ctypes.CFUNCTYPE(FfiResult, *args)((name, lib))

    _slice_as_object = _fn("opendp_data__slice_as_object", _SLICE, ctypes.c_char_p)
    _invoke = _fn("opendp_core__measurement_invoke", Measurement, _OBJ)
    _object_as_slice = _fn("opendp_data__object_as_slice", _OBJ)
    _object_type = _fn("opendp_data__object_type", _OBJ)
    _object_free = _fn("opendp_data__object_free", _OBJ)
    _slice_free = _fn("opendp_data__slice_free", _SLICE)
    _str_free = _fn("opendp_data__str_free", ctypes.c_char_p)
    AVAILABLE = True
except (ImportError, AttributeError):  # pragma: no cover - another OpenDP version
    AVAILABLE = False

_TYPES: dict[bool, tuple[Any, bytes]] = {
    True: (ctypes.c_int64, b"Vec<i64>"),
    False: (ctypes.c_double, b"Vec<f64>"),
}


def _ok(result: Any, type_: Any) -> Any:
    """The pointer an FfiResult holds; an error raises OpenDP's own exception (``unwrap``
    frees the error)."""
    if result.tag != 0:
        unwrap(result, type_)
        raise InternalError("OpenDP reported an error")  # pragma: no cover - unwrap raised
    return ctypes.cast(result.payload.Ok, type_)


def invoke(measurement: Any, values: Sequence[int] | Sequence[float], integer: bool) -> list[Any]:
    """``measurement(values)`` for a measurement over ``Vec<i64>`` (``integer``) or
    ``Vec<f64>``: the released vector, as Python ints or floats."""
    ctype, type_name = _TYPES[integer]
    n = len(values)
    if integer and values and not (-_I64 <= min(values) and max(values) < _I64):
        raise InternalError("a value beyond 64 bits for the integer noise")
    array = (ctype * n)(*values)
    raw = FfiSlice(ctypes.cast(array, ctypes.c_void_p), n)
    given = _ok(_slice_as_object(ctypes.byref(raw), type_name), _OBJ)
    try:
        out = _ok(_invoke(measurement, given), _OBJ)
    finally:
        _object_free(given)
    try:
        kind = _ok(_object_type(out), ctypes.c_char_p)
        try:
            same = kind.value == type_name
        finally:
            _str_free(kind)
        if not same:
            raise InternalError("OpenDP released a value of an unexpected type")
        view = _ok(_object_as_slice(out), _SLICE)
        try:
            length = view.contents.len
            if length != n:
                raise InternalError("OpenDP released an unexpected number of values")
            drawn: list[Any] = ctypes.cast(view.contents.ptr, ctypes.POINTER(ctype))[0:length]
        finally:
            _slice_free(view)
    finally:
        _object_free(out)
    return drawn

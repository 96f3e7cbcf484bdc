"""``pgtypes.column_encoder``'s shortcuts (a value of exactly int, float, str or bool skips
``_plain``; text columns of str and float8 columns of float in text format use a shorter
encoder) give what ``encode_text`` / ``encode_binary`` give, errors included."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from dpproxy.errors import DPProxyError
from dpproxy.server import pgtypes

OIDS = (
    pgtypes.TEXT_OID, pgtypes.VARCHAR_OID, pgtypes.NAME_OID, pgtypes.FLOAT8_OID,
    pgtypes.FLOAT4_OID, pgtypes.INT2_OID, pgtypes.INT4_OID, pgtypes.INT8_OID,
    pgtypes.NUMERIC_OID, pgtypes.BOOL_OID, pgtypes.DATE_OID,
)  # fmt: skip
VALUES: tuple[object, ...] = (
    None, "", "x", "Grüße", "a\ud800b", "12", "1.5", "nan", True, False, 0, -1, 7,
    2**15, 2**31, 2**63, -(2**63), 0.0, -0.0, 0.1, 36.31296073479744, 1e300, 5e-324,
    float("inf"), float("-inf"), float("nan"), 2.5, Decimal("1.50"), Decimal("NaN"),
    dt.date(2024, 2, 29),
)  # fmt: skip


def _outcome(f: object, *args: object) -> tuple[str, object]:
    try:
        return "ok", f(*args)  # type: ignore[operator]
    except DPProxyError as e:
        return type(e).__name__, (e.sqlstate, e.message)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("oid", OIDS)
def test_the_column_encoder_equals_the_value_encoder(oid: int, binary: bool) -> None:
    encoder = pgtypes.column_encoder(oid, binary=binary)
    slow = pgtypes.encode_binary if binary else pgtypes.encode_text
    for value in VALUES:
        assert _outcome(encoder, value) == _outcome(slow, value, oid), (oid, binary, value)

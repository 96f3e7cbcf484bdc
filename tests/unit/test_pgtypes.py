"""server/pgtypes.py against a real PostgreSQL: the bytes it sends, the parameters it reads.

Every encoder is compared byte for byte with what PostgreSQL itself sends for the same value
(text and binary result formats, read raw through ``psycopg.pq``); every text-format parser
is fuzzed side by side with PostgreSQL's input functions (same value, or same SQLSTATE and
message); binary parameters likewise with its receive functions; and every SQL literal is read
back by PostgreSQL (and through sqlglot, as the server's planner reads it).

The server is ``DPPROXY_TEST_DSN`` if set, else ``host=127.0.0.1 port=5432 dbname=test``; the
tests only run SELECTs. Without a server they skip (fail under CI).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

import psycopg
import pytest
import sqlglot
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import pq

from dpproxy.errors import (
    DPProxyError,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    ProtocolViolation,
)
from dpproxy.server import pgtypes as P
from tests import pg

NO_DEADLINE = settings(deadline=None)
DSN = os.environ.get(pg.ENV_DSN) or "host=127.0.0.1 port=5432 dbname=test"
UTC = dt.UTC


@dataclass(frozen=True)
class PgError:
    sqlstate: str
    message: str


class Raw:
    """Raw libpq round trips: parameters and results as bytes, no adaptation."""

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn

    def run(
        self,
        sql: str,
        params: Sequence[bytes | None] = (),
        oids: Sequence[int] | None = None,
        formats: Sequence[int] | None = None,
        result_format: int = 0,
    ) -> list[bytes | None] | PgError:
        res = self.pgconn.exec_params(
            sql.encode(),
            list(params),
            list(oids) if oids is not None else None,
            list(formats) if formats is not None else None,
            result_format,
        )
        if res.status != pq.ExecStatus.TUPLES_OK:
            code = res.error_field(pq.DiagnosticField.SQLSTATE) or b""
            msg = res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b""
            return PgError(code.decode(), msg.decode())
        return [res.get_value(i, 0) for i in range(res.ntuples)]

    def one(self, sql: str, param: bytes, oid: int, fmt: int, result_format: int) -> bytes | None:
        out = self.run(sql, [param], [oid], [fmt], result_format)
        assert not isinstance(out, PgError), (sql, param, out)
        return out[0]

    def both(self, sql: str, param: bytes, oid: int, fmt: int = 0) -> tuple[bytes, bytes]:
        """PostgreSQL's text and binary output of ``sql`` (one column, one row)."""
        text = self.one(sql, param, oid, fmt, 0)
        binary = self.one(sql, param, oid, fmt, 1)
        assert text is not None and binary is not None
        return text, binary


@pytest.fixture(scope="module")
def raw() -> Iterator[Raw]:
    try:
        conn = psycopg.connect(DSN, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        pg.skip_or_fail(f"no PostgreSQL at {pg.redact(DSN)}: {exc}")
    with conn:
        for setting in ("extra_float_digits = 1", "TimeZone = 'UTC'", "DateStyle = 'ISO, MDY'"):
            conn.execute(f"SET {setting}")
        yield Raw(conn)


def assert_encodes_like_pg(raw: Raw, value: object, oid: int, sql: str, param: bytes,
                           param_oid: int, fmt: int = 0) -> None:  # fmt: skip
    """encode_text / encode_binary of ``value`` as ``oid`` equal PostgreSQL's output of ``sql``
    (which turns ``param`` into the same value of that type)."""
    text, binary = raw.both(sql, param, param_oid, fmt)
    assert P.encode_text(value, oid) == text, (value, text)
    assert P.encode_binary(value, oid) == binary, (value, binary)


def f8(x: float) -> bytes:
    return struct.pack(">d", x)


def f4(x: float) -> bytes:
    return struct.pack(">f", x)


# ------------------------------------------------------------------------ type table


@pytest.mark.postgres
def test_type_table_is_pg_type(raw: Raw) -> None:
    rows = raw.conn.execute(
        "SELECT typname::text, oid::int, typlen, typbyval, typtype::text, typcategory::text,"
        " typelem::int, typarray::int, typalign::text, format_type(oid, NULL)"
        " FROM pg_type WHERE oid = ANY(%s) ORDER BY oid",
        ([t.oid for t in P.TYPES],),
    ).fetchall()
    assert [P.PgType(*r) for r in rows] == sorted(P.TYPES, key=lambda t: t.oid)


def test_type_table_has_what_clients_need() -> None:
    expected = {"bool": 16, "bytea": 17, "char": 18, "name": 19, "int8": 20, "int2": 21,
                "int2vector": 22, "int4": 23, "regproc": 24, "text": 25, "oid": 26, "xid": 28,
                "oidvector": 30, "json": 114, "float4": 700, "float8": 701, "unknown": 705,
                "bpchar": 1042, "varchar": 1043, "date": 1082, "time": 1083, "timestamp": 1114,
                "timestamptz": 1184, "interval": 1186, "numeric": 1700, "regclass": 2205,
                "regtype": 2206, "uuid": 2950, "_text": 1009, "_int2": 1005, "_int4": 1007,
                "_oid": 1028, "_name": 1003, "_char": 1002}  # fmt: skip
    assert {t.name: t.oid for t in P.TYPES if t.name in expected} == expected
    assert len(P.BY_OID) == len(P.TYPES)
    assert P.type_size(P.INT8_OID) == 8 and P.type_size(P.TEXT_OID) == -1
    assert P.type_size(123456) == -1
    assert P.type_name(P.FLOAT8_OID) == "double precision"
    assert P.type_name(0) == P.type_name(P.UNKNOWN_OID) == "text"


def test_output_column_types_map_to_oids() -> None:
    assert [P.oid_of(n) for n in ("integer", "double", "text", "boolean", "date")] == [
        P.INT8_OID, P.FLOAT8_OID, P.TEXT_OID, P.BOOL_OID, P.DATE_OID,
    ]  # fmt: skip
    assert P.oid_of("interval") == P.TEXT_OID


# --------------------------------------------------------------------------- encoders

INT_TYPES = [(P.INT2_OID, "int2", 16), (P.INT4_OID, "int4", 32), (P.INT8_OID, "int8", 64)]


@pytest.mark.postgres
@pytest.mark.parametrize(("oid", "name", "bits"), INT_TYPES)
@NO_DEADLINE
@given(data=st.data())
def test_integers_encode_like_pg(
    raw: Raw, oid: int, name: str, bits: int, data: st.DataObject
) -> None:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    n = data.draw(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1])))
    assert_encodes_like_pg(raw, n, oid, f"SELECT $1::{name}", str(n).encode(), oid)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.integers(0, 2**32 - 1))
@example(0)
@example(2**32 - 1)
def test_oids_encode_like_pg(raw: Raw, n: int) -> None:
    assert_encodes_like_pg(raw, n, P.OID_OID, "SELECT $1::oid", str(n).encode(), P.OID_OID)


SPECIAL_FLOATS = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324,
                  2.2250738585072014e-308, 1.7976931348623157e308, 1e15, 1e14, 999999999999999.9,
                  123456789012345.67, 1e-4, 9.999999999999999e-05, 0.1, 1 / 3, 1e22, 1e23,
                  2.0**53, 2.0**63, 100.0, 1.5]  # fmt: skip


@pytest.mark.postgres
@NO_DEADLINE
@given(st.one_of(st.floats(), st.sampled_from(SPECIAL_FLOATS)))
def test_float8_encodes_like_pg(raw: Raw, x: float) -> None:
    assert_encodes_like_pg(raw, x, P.FLOAT8_OID, "SELECT $1::float8", f8(x), P.FLOAT8_OID, 1)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.floats(width=32))
@example(3.4028234663852886e38)
@example(1.401298464324817e-45)
@example(16777216.0)
@example(100000.0)
@example(1000000.0)
def test_float4_encodes_like_pg(raw: Raw, x: float) -> None:
    assert_encodes_like_pg(raw, x, P.FLOAT4_OID, "SELECT $1::float4", f4(x), P.FLOAT4_OID, 1)


def _float_array(xs: Sequence[float]) -> bytes:
    words = {math.inf: "Infinity", -math.inf: "-Infinity"}
    return ("{" + ",".join("NaN" if x != x else words.get(x, repr(x)) for x in xs) + "}").encode()


@pytest.mark.postgres
@pytest.mark.parametrize(("oid", "name", "width"), [(P.FLOAT8_OID, "float8", 64),
                                                     (P.FLOAT4_OID, "float4", 32)])  # fmt: skip
def test_many_random_floats_encode_like_pg(raw: Raw, oid: int, name: str, width: int) -> None:
    """20,000 uniformly random bit patterns per width (every exponent, subnormals, NaN, inf)."""
    rng = random.Random(20240915 + width)
    fmt = ">d" if width == 64 else ">f"
    xs = [struct.unpack(fmt, rng.getrandbits(width).to_bytes(width // 8, "big"))[0]
          for _ in range(20_000)]  # fmt: skip
    xs = [x if x == x else math.nan for x in xs]  # a NaN reaches PostgreSQL as text: no payload
    sql = f"SELECT v FROM unnest($1::{name}[]) WITH ORDINALITY AS t(v, i) ORDER BY i"
    array_oid = P.BY_OID[oid].typarray
    texts = raw.run(sql, [_float_array(xs)], [array_oid], [0], 0)
    binaries = raw.run(sql, [_float_array(xs)], [array_oid], [0], 1)
    assert not isinstance(texts, PgError) and not isinstance(binaries, PgError)
    mismatches = [(x, t, P.encode_text(x, oid)) for x, t in zip(xs, texts, strict=True)
                  if P.encode_text(x, oid) != t]  # fmt: skip
    assert not mismatches, mismatches[:10]
    assert [P.encode_binary(x, oid) for x in xs] == binaries


def decimals() -> st.SearchStrategy[Decimal]:
    finite = st.builds(
        lambda sign, digits, exp: Decimal((sign, tuple(int(c) for c in str(digits)), exp)),
        st.integers(0, 1),
        st.one_of(st.integers(0, 10**6), st.integers(0, 10**60)),
        st.integers(-40, 40),
    )
    special = st.sampled_from([Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")])
    return st.one_of(finite, special, st.decimals(allow_nan=False, places=3))


@pytest.mark.postgres
@NO_DEADLINE
@given(decimals())
@example(Decimal("-0.00"))
@example(Decimal("1E+5"))
@example(Decimal("0.0001"))
@example(Decimal("1E+131071"))
@example(Decimal("1E-16383"))
def test_numeric_encodes_like_pg(raw: Raw, d: Decimal) -> None:
    assert_encodes_like_pg(raw, d, P.NUMERIC_OID, "SELECT $1::numeric", str(d).encode(),
                           P.NUMERIC_OID)  # fmt: skip


def test_numeric_beyond_pg_limits_is_refused() -> None:
    for d in (Decimal("1E+131072"), Decimal("1E-16384"), Decimal("0E-16384")):
        with pytest.raises(NumericValueOutOfRange, match="value overflows numeric format"):
            P.encode_binary(d, P.NUMERIC_OID)
        with pytest.raises(NumericValueOutOfRange):
            P.encode_text(d, P.NUMERIC_OID)


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("oid", "name"),
    [(P.TEXT_OID, "text"), (P.VARCHAR_OID, "varchar"), (P.BPCHAR_OID, "bpchar"),
     (P.JSON_OID, "json")],
)  # fmt: skip
@NO_DEADLINE
@given(s=TEXT)
@example(s="")
@example(s='it\'s a \\ "quote" é 😀 \n\t')
def test_text_encodes_like_pg(raw: Raw, oid: int, name: str, s: str) -> None:
    if oid == P.JSON_OID:
        s = json.dumps({"k": s}, ensure_ascii=False)
    assert_encodes_like_pg(raw, s, oid, f"SELECT $1::{name}", s.encode(), oid)


@pytest.mark.postgres
def test_booleans_and_chars_encode_like_pg(raw: Raw) -> None:
    for b in (True, False):
        assert_encodes_like_pg(raw, b, P.BOOL_OID, "SELECT $1::bool", str(b).encode(), P.BOOL_OID)
        assert_encodes_like_pg(raw, b, P.TEXT_OID, "SELECT $1::bool::text", str(b).encode(), 16)
    for c in ("a", "Z", "", " "):
        assert_encodes_like_pg(raw, c, P.CHAR_OID, 'SELECT $1::"char"', c.encode(), P.TEXT_OID)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.dates())
@example(dt.date(1, 1, 1))
@example(dt.date(9999, 12, 31))
@example(dt.date(2000, 1, 1))
def test_dates_encode_like_pg(raw: Raw, d: dt.date) -> None:
    assert_encodes_like_pg(raw, d, P.DATE_OID, "SELECT $1::date", d.isoformat().encode(),
                           P.DATE_OID)  # fmt: skip


@pytest.mark.postgres
@NO_DEADLINE
@given(st.datetimes())
@example(dt.datetime(1, 1, 1))
@example(dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
@example(dt.datetime(2020, 1, 1, 0, 0, 0, 500000))
def test_timestamps_encode_like_pg(raw: Raw, t: dt.datetime) -> None:
    param = t.isoformat().encode()
    assert_encodes_like_pg(raw, t, P.TIMESTAMP_OID, "SELECT $1::timestamp", param,
                           P.TIMESTAMP_OID)  # fmt: skip
    aware = t.replace(tzinfo=UTC)
    assert_encodes_like_pg(raw, aware, P.TIMESTAMPTZ_OID, "SELECT $1::timestamptz",
                           aware.isoformat().encode(), P.TIMESTAMPTZ_OID)  # fmt: skip
    # a naive datetime sent as timestamptz counts as UTC
    assert P.encode_binary(t, P.TIMESTAMPTZ_OID) == P.encode_binary(aware, P.TIMESTAMPTZ_OID)


OFFSETS = st.integers(-15 * 3600, 15 * 3600).map(lambda s: dt.timezone(dt.timedelta(seconds=s)))


@pytest.mark.postgres
@NO_DEADLINE
@given(st.datetimes(min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 12, 31)), OFFSETS)
def test_aware_timestamps_encode_like_pg(raw: Raw, t: dt.datetime, tz: dt.timezone) -> None:
    aware = t.replace(tzinfo=tz)
    assert_encodes_like_pg(raw, aware, P.TIMESTAMPTZ_OID, "SELECT $1::timestamptz",
                           aware.isoformat().encode(), P.TIMESTAMPTZ_OID)  # fmt: skip


def assert_same_outcome(raw: Raw, make: object, oid: int, sql: str, param: bytes,
                        param_oid: int, fmt: int = 0) -> None:  # fmt: skip
    """encode_text(make, oid) is PostgreSQL's output of ``sql``, or both fail with one code."""
    out = raw.run(sql, [param], [param_oid], [fmt], 0)
    if isinstance(out, PgError):
        with pytest.raises(DPProxyError) as info:
            P.encode_text(make, oid)
        assert info.value.sqlstate == out.sqlstate, (make, out)
    else:
        assert P.encode_text(make, oid) == out[0], (make, out)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**53 + 1, 2**63 - 1, -(2**63)])))
def test_ints_sent_as_floats_and_numeric_convert_like_pg_casts(raw: Raw, n: int) -> None:
    p = str(n).encode()
    for oid, name in ((P.FLOAT8_OID, "float8"), (P.FLOAT4_OID, "float4"),
                      (P.NUMERIC_OID, "numeric")):  # fmt: skip
        assert_same_outcome(raw, n, oid, f"SELECT $1::numeric::{name}", p, P.NUMERIC_OID)
    assert_same_outcome(raw, n, P.INT2_OID, "SELECT $1::numeric::int2", p, P.NUMERIC_OID)
    assert_same_outcome(raw, n, P.TEXT_OID, "SELECT $1::numeric::text", p, P.NUMERIC_OID)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.one_of(st.floats(), st.sampled_from([2.5, -2.5, 0.5, 1.5, 9.2233720368547758e18, 1e-50])))
def test_floats_sent_as_ints_and_float4_convert_like_pg_casts(raw: Raw, x: float) -> None:
    for oid, name in ((P.INT8_OID, "int8"), (P.INT4_OID, "int4"), (P.FLOAT4_OID, "float4"),
                      (P.TEXT_OID, "text")):  # fmt: skip
        assert_same_outcome(raw, x, oid, f"SELECT $1::{name}", f8(x), P.FLOAT8_OID, 1)


@pytest.mark.postgres
@NO_DEADLINE
@given(decimals())
@example(Decimal("2.5"))
@example(Decimal("-2.5"))
@example(Decimal("1E+400"))
@example(Decimal("1E-400"))
def test_decimals_sent_as_ints_and_floats_convert_like_pg_casts(raw: Raw, d: Decimal) -> None:
    for oid, name in ((P.INT8_OID, "int8"), (P.FLOAT8_OID, "float8"), (P.FLOAT4_OID, "float4")):
        assert_same_outcome(raw, d, oid, f"SELECT $1::numeric::{name}", str(d).encode(),
                            P.NUMERIC_OID)  # fmt: skip


def test_floats_sent_as_numeric_keep_shortest_digits() -> None:
    """Unlike PostgreSQL's float8::numeric (15 digits), no information is lost."""
    assert P.encode_text(0.1 + 0.2, P.NUMERIC_OID) == b"0.30000000000000004"
    assert P.encode_text(1e20, P.NUMERIC_OID) == b"100000000000000000000"
    assert P.encode_text(math.nan, P.NUMERIC_OID) == b"NaN"


def test_numpy_scalars_encode_as_python_numbers() -> None:
    np = pytest.importorskip("numpy")
    assert P.encode_binary(np.int64(-7), P.INT8_OID) == P.encode_binary(-7, P.INT8_OID)
    assert P.encode_text(np.float32(0.5), P.FLOAT8_OID) == b"0.5"
    assert P.sql_literal(np.int32(-3)) == "(-3)"


def test_values_without_a_codec_are_internal_errors() -> None:
    with pytest.raises(DPProxyError, match="cannot send") as info:
        P.encode_text(b"\x00", P.BYTEA_OID)
    assert info.value.sqlstate == "XX000"
    with pytest.raises(DPProxyError, match="cannot send"):
        P.encode_binary(dt.date(2020, 1, 1), P.INT8_OID)
    with pytest.raises(DPProxyError, match="cannot send"):
        P.encode_text(1.5, P.BOOL_OID)
    assert P.encode_text(None, 999999) is None and P.encode_binary(None, P.INT8_OID) is None


# ------------------------------------------------------------- text-format parameters

PARSED_TYPES = {  # oid: (cast name, alphabet for the fuzzer)
    P.INT2_OID: ("int2", "0123456789+- \t\n3x_"),
    P.INT4_OID: ("int4", "0123456789+- \t\n3x_"),
    P.INT8_OID: ("int8", "0123456789+- \t\n3x_"),
    P.OID_OID: ("oid", "0123456789+- \t"),
    P.FLOAT8_OID: ("float8", "0123456789+-.eExXpPinfatyINFATY()_ \t"),
    P.FLOAT4_OID: ("float4", "0123456789+-.eExXpPinfatyINFATY()_ \t"),
    P.NUMERIC_OID: ("numeric", "0123456789+-.eE naifINFty\t"),
    P.BOOL_OID: ("bool", "tTrRuUeEfFaAlLsSyYnNoO01 \t"),
    P.DATE_OID: ("date", "0123456789-  :T"),
    P.TIMESTAMP_OID: ("timestamp", "0123456789-  :.T+Z"),
    P.TIMESTAMPTZ_OID: ("timestamptz", "0123456789-  :.T+Z"),
}
SEEDS = {  # inputs the fuzzer would be slow to find
    P.INT4_OID: ["2147483647", "2147483648", "-2147483648", " +5 ", "٣", "", "1_0", "0x10",
                 "2147483648x", "2147483649x", "-2147483649x", "- 5", "+"],
    P.INT8_OID: ["9223372036854775808", "-9223372036854775808", "1" * 5000],
    P.OID_OID: ["-1", "4294967296", "-2147483649", "-2147483648", "", " ", "18446744073709551616",
                "18446744073709551615", "-4294967295", "12 x", "99999999999999999999x"],
    P.FLOAT8_OID: [" 1E1000", "\t-1e400x ", " 0x1p-2000 ",
                   "1e400", "1e-400", "2e-324", "3e-324", "0x1p3", "0X.8P1", "0x1p", "nan(abc_1)",
                   "-INFINITY", "infinit", "1.", ".", "1e", "1e 5", "1e-" + "9" * 20,
                   "0e999999999999",
                   "1.7976931348623158e308", "1.7976931348623159e308", "0x1p-1075", "0x1p-1074"],
    P.FLOAT4_OID: [" 1E40A ", "1E40A", "1e-50 x", "1e-40x", "nanx", "0x1p200z",
                   "3.4028235e38", "3.4028236e38", "1e-45", "7e-46", "0x1p-150", "0x1.000001p0",
                   "16777217", "1.00000005960464477539062500001", "1e-310"],
    P.NUMERIC_OID: ["1e2147483647x", "1e-20000x", "1ex", "nanx",
                    "1e 5", "1e+ 5", "1e\t-5", "- 1", "-NaN", "nan ", "infin", "1e131071",
                    "1e131072", "9.9e131071", "1e-16383", "1e-16384", "0e-16384", "0e+100000",
                    "1e1073741823", "1e" + "9" * 30, "-0.00", "1.50", ".5", "5.", "1e"],
    P.BOOL_OID: ["o", "on", "of", "off", "ofx", "truex", "", " TRUE ", "ye", "1", "2"],
    P.DATE_OID: ["6000000-1-1", "5874897-12-31", "5874898-1-1", "4714-11-24 BC", "4714-11-23 BC",
                 "2147483648-01-01", "10000-0-0", "10000-02-29", "10400-02-29", "0001-02-29 BC",
                 "0002-02-29 BC",
                 "2020-01-05", " 2020-1-5 ", "0000-01-01", "2020-13-01", "2020-02-30", "2020-02-29",
                 "2019-02-29", "abc", "2020-01-05x", "2020-01-05 12:00", "2020-01-05T00:00"],
    P.TIMESTAMP_OID: ["2020-01-01 24:00:00", "2020-01-01 24:00:01", "2020-01-01 23:59:60",
                      "2020-01-01 23:59:60.5", "2020-01-01 12:00+05", "2020-01-01T12:00:00Z",
                      "2020-01-01 12:00:00.9999995", "2020-01-01 12", "2020-01-01 1:2:3",
                      "2020-01-01 12:00:00.", "9999-12-31 23:59:59.9999999"],
    P.TIMESTAMPTZ_OID: ["294276-12-31", "294278-01-01", "4714-11-23 BC",
                        "2020-01-01 12:00:00+0530", "2020-01-01 12:00:00 +05:30:15",
                        "2020-01-01 12:00 UTC", "2020-01-01 12:00-11", "0001-01-01 00:00:00"],
}  # fmt: skip
DATETIMES = (P.DATE_OID, P.TIMESTAMP_OID, P.TIMESTAMPTZ_OID)


def assert_parses_like_pg(raw: Raw, s: str, oid: int) -> None:
    name = PARSED_TYPES[oid][0]
    out = raw.run(f"SELECT $1::{name}", [s.encode()], [oid], [0], 0)
    try:
        value = P.decode_param(s.encode(), oid, 0)
    except DPProxyError as e:
        if isinstance(out, PgError) and not (e.sqlstate == "22007" and e.hint):
            assert (e.sqlstate, e.message) == (out.sqlstate, out.message), s
        elif isinstance(out, PgError):  # not ISO 8601: PostgreSQL's parser may say 22008
            assert out.sqlstate in ("22007", "22008", "22009", "22023"), (s, out)
        else:  # only dates beyond ISO 8601 or Python's range are refused where PostgreSQL is not
            assert oid in DATETIMES and (e.sqlstate == "0A000" or e.hint), (s, e, out)
        return
    assert not isinstance(out, PgError), (s, value, out)
    assert P.encode_text(value, oid) == out[0], (s, value, out)


@pytest.mark.postgres
@pytest.mark.parametrize("oid", sorted(SEEDS))
def test_known_inputs_parse_like_pg(raw: Raw, oid: int) -> None:
    for s in SEEDS[oid]:
        assert_parses_like_pg(raw, s, oid)


@pytest.mark.postgres
@pytest.mark.parametrize("oid", sorted(PARSED_TYPES))
@NO_DEADLINE
@given(data=st.data())
def test_fuzzed_text_parameters_parse_like_pg(raw: Raw, oid: int, data: st.DataObject) -> None:
    s = data.draw(st.text(PARSED_TYPES[oid][1], max_size=30), label="input")
    assert_parses_like_pg(raw, s, oid)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.floats(allow_nan=False))
def test_float_reprs_parse_like_pg(raw: Raw, x: float) -> None:
    for oid in (P.FLOAT8_OID, P.FLOAT4_OID, P.NUMERIC_OID):
        assert_parses_like_pg(raw, repr(x), oid)
        assert_parses_like_pg(raw, f"{x:.40e}", oid)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.binary(max_size=12))
@example(b"\xff")
@example(b"a\xc3(")
@example(b"\xed\xa0\x80")
@example(b"a\x00b")
@example(b"\xe2\x82")
@example(b"\xf4\x90\x80\x80")
@example(b"\xc0\x80")
def test_invalid_utf8_is_refused_like_pg(raw: Raw, data: bytes) -> None:
    for fmt in (0, 1) if b"\x00" not in data else (1,):  # libpq cuts text parameters at NUL
        out = raw.run("SELECT $1::text", [data], [P.TEXT_OID], [fmt], 0)
        if isinstance(out, PgError):
            with pytest.raises(DPProxyError) as info:
                P.decode_param(data, P.TEXT_OID, fmt)
            assert (info.value.sqlstate, info.value.message) == (out.sqlstate, out.message)
        else:
            assert P.decode_param(data, P.TEXT_OID, fmt) == data.decode()


@pytest.mark.postgres
def test_untyped_and_name_parameters(raw: Raw) -> None:
    assert P.decode_param(b"42", 0, 0) == "42"
    assert P.decode_param(b" x ", P.UNKNOWN_OID, 0) == " x "
    assert P.decode_param(b"abc", P.UNKNOWN_OID, 1) == "abc"
    assert P.decode_param(None, P.INT4_OID, 1) is None
    for s in ("x" * 70, "é" * 40, "short"):
        out = raw.one("SELECT $1::name", s.encode(), P.NAME_OID, 0, 0)
        assert out is not None and P.decode_param(s.encode(), P.NAME_OID, 0) == out.decode()


def test_parse_errors_are_the_documented_classes() -> None:
    with pytest.raises(InvalidTextRepresentation, match='for type integer: "abc"'):
        P.decode_param(b"abc", P.INT4_OID, 0)
    with pytest.raises(InvalidTextRepresentation) as info:  # 22007 is a subclass
        P.decode_param(b"01/02/2020", P.DATE_OID, 0)
    assert info.value.sqlstate == "22007" and info.value.hint
    for fmt in (0, 1):
        with pytest.raises(P.UnsupportedParameterType) as unsupported:
            P.decode_param(b"1", P.UUID_OID, fmt)
        assert unsupported.value.sqlstate == "0A000"
    with pytest.raises(DPProxyError) as value:  # a value, not a type, dpproxy cannot represent
        P.decode_param(b"infinity", P.DATE_OID, 0)
    assert value.value.sqlstate == "0A000"
    assert not isinstance(value.value, P.UnsupportedParameterType)
    with pytest.raises(ProtocolViolation, match="unsupported format code"):
        P.decode_param(b"1", P.INT4_OID, 2)


# ----------------------------------------------------------- binary-format parameters

BINARY_TYPES = {P.BOOL_OID: "bool", P.INT2_OID: "int2", P.INT4_OID: "int4", P.INT8_OID: "int8",
                P.OID_OID: "oid", P.FLOAT4_OID: "float4", P.FLOAT8_OID: "float8",
                P.DATE_OID: "date", P.TIMESTAMP_OID: "timestamp",
                P.TIMESTAMPTZ_OID: "timestamptz", P.NUMERIC_OID: "numeric"}  # fmt: skip


def numeric_blobs() -> st.SearchStrategy[bytes]:
    header = st.tuples(
        st.integers(0, 6),
        st.integers(-(2**15), 2**15 - 1) | st.integers(-4, 4),
        st.sampled_from([0, 0x4000, 0xC000, 0xD000, 0xF000, 0x1200, 0x8000]),
        st.integers(0, 20) | st.sampled_from([0x3FFF, 0x4000, 0xFFFF]),
    )

    def build(h: tuple[int, int, int, int], digits: list[int], cut: int) -> bytes:
        n, weight, sign, dscale = h
        blob = struct.pack(">HhHH", n, weight, sign, dscale)
        blob += b"".join(struct.pack(">H", d) for d in digits[:n])
        return blob[: len(blob) - cut] if cut > 0 else blob + b"\x00" * -cut

    digit = st.integers(0, 9999) | st.sampled_from([10000, 0xFFFF])
    return st.builds(build, header, st.lists(digit, min_size=6, max_size=6),
                     st.integers(-1, 1) | st.just(0))  # fmt: skip


def assert_receives_like_pg(raw: Raw, data: bytes, oid: int) -> None:
    out = raw.run(f"SELECT $1::{BINARY_TYPES[oid]}", [data], [oid], [1], 0)
    try:
        value = P.decode_param(data, oid, 1, param_number=1)
    except DPProxyError as e:
        if isinstance(out, PgError):
            assert (e.sqlstate, e.message) == (out.sqlstate, out.message), data
        else:  # PostgreSQL's ±infinity and far dates have no Python value
            assert oid in DATETIMES and e.sqlstate == "0A000", (data, e, out)
        return
    assert not isinstance(out, PgError), (data, value, out)
    assert P.encode_text(value, oid) == out[0], (data, value, out)


@pytest.mark.postgres
@pytest.mark.parametrize("oid", sorted(BINARY_TYPES))
@NO_DEADLINE
@given(data=st.data())
def test_binary_parameters_are_received_like_pg(raw: Raw, oid: int, data: st.DataObject) -> None:
    size = P.type_size(oid)
    blob = data.draw(
        numeric_blobs()
        if oid == P.NUMERIC_OID
        else st.binary(min_size=size, max_size=size) | st.binary(max_size=size + 2),
        label="data",
    )
    assert_receives_like_pg(raw, blob, oid)


@pytest.mark.postgres
def test_binary_edge_values_are_received_like_pg(raw: Raw) -> None:
    cases = [
        (P.DATE_OID, struct.pack(">i", 2**31 - 1)),  # infinity
        (P.DATE_OID, struct.pack(">i", 2**31 - 2)),  # out of range
        (P.DATE_OID, struct.pack(">i", -2451545)),  # 4714-11-24 BC
        (P.DATE_OID, struct.pack(">i", -2451546)),
        (P.TIMESTAMP_OID, struct.pack(">q", 2**63 - 1)),
        (P.TIMESTAMP_OID, struct.pack(">q", 2**63 - 2)),
        (P.INT4_OID, b"\x00\x00\x00\x01\x00"),  # a byte left over: 22P03
        (P.INT4_OID, b"\x00\x00\x01"),  # too short: 08P01
        (P.BOOL_OID, b"\x05"),
        (P.NUMERIC_OID, bytes.fromhex("0002 0000 0000 0001 0010 0011")),  # 16.0017 → 16.0
        (P.NUMERIC_OID, bytes.fromhex("0001 0000 4000 0000 0000")),  # -0
        (P.NUMERIC_OID, bytes.fromhex("0000 0005 c000 0007")),  # NaN with junk fields
        (P.NUMERIC_OID, bytes.fromhex("0001 7fff 0000 0000 0001")),  # the largest weight
    ]
    for oid, blob in cases:
        assert_receives_like_pg(raw, blob, oid)
    with pytest.raises(ProtocolViolation) as info:
        P.decode_param(b"\x00\x00\x00\x01\x00", P.INT4_OID, 1)
    assert info.value.sqlstate == "22P03"
    with pytest.raises(ProtocolViolation) as short:
        P.decode_param(b"\x00", P.INT8_OID, 1)
    assert short.value.sqlstate == "08P01"


# ------------------------------------------------------------------------ round trips


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or f8(a) == f8(b)
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return str(a) == str(b) if not a.is_finite() else (a == b and
            max(0, -int(a.as_tuple().exponent)) == max(0, -int(b.as_tuple().exponent)))  # fmt: skip
    return type(a) is type(b) and a == b


def _float4(x: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


ROUND_TRIPS = [
    (P.BOOL_OID, st.booleans()),
    (P.INT2_OID, st.integers(-(2**15), 2**15 - 1)),
    (P.INT4_OID, st.integers(-(2**31), 2**31 - 1)),
    (P.INT8_OID, st.integers(-(2**63), 2**63 - 1)),
    (P.OID_OID, st.integers(0, 2**32 - 1)),
    (P.FLOAT8_OID, st.floats()),
    (P.FLOAT4_OID, st.floats(width=32).map(_float4)),
    (P.NUMERIC_OID, decimals().map(lambda d: d.copy_abs() if d.is_zero() else d)),
    (P.TEXT_OID, TEXT),
    (P.VARCHAR_OID, TEXT),
    (P.DATE_OID, st.dates()),
    (P.TIMESTAMP_OID, st.datetimes()),
    (P.TIMESTAMPTZ_OID, st.datetimes(timezones=st.just(UTC))),
]


@pytest.mark.parametrize(("oid", "values"), ROUND_TRIPS, ids=[str(o) for o, _ in ROUND_TRIPS])
@NO_DEADLINE
@given(data=st.data())
def test_encoded_values_decode_to_themselves(
    oid: int, values: st.SearchStrategy[object], data: st.DataObject
) -> None:
    v = data.draw(values, label="value")
    for fmt, enc in ((0, P.encode_text), (1, P.encode_binary)):
        back = P.decode_param(enc(v, oid), oid, fmt)
        assert _same(back, v), (fmt, v, back)


# ---------------------------------------------------------------------- SQL literals

LITERAL_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    decimals(),
    TEXT,
    st.text("'\\-/*;\" \n$e", max_size=12),
    st.dates(),
    st.datetimes(),
)


def _read_back(raw: Raw, sql: str, result_format: int = 0) -> bytes | None:
    out = raw.run(sql, result_format=result_format)
    assert not isinstance(out, PgError), (sql, out)
    return out[0]


@pytest.mark.postgres
@NO_DEADLINE
@given(LITERAL_VALUES)
@example("it's -- not a comment")
@example("a\\'; SELECT 1; --")
@example(-0.0)
@example(-(2**63))
@example(Decimal("-0.00"))
def test_sql_literals_read_back_exactly(raw: Raw, v: object) -> None:
    lit = P.sql_literal(v)
    regenerated = sqlglot.parse_one(f"SELECT {lit}", read="postgres").sql("postgres")
    for sql in (f"SELECT {lit}", regenerated):  # as written, and as dpproxy's planner reads it
        got = _read_back(raw, sql)
        if v is None:
            assert got is None
        elif isinstance(v, float):  # an exact float8 (bit for bit: -0.0, NaN too)
            back = _read_back(raw, f"SELECT ({sql[7:]})::float8", 1)
            assert back is not None and _same(struct.unpack(">d", back)[0], v), (v, lit)
        elif isinstance(v, bool | int | Decimal):
            oid = P.BOOL_OID if isinstance(v, bool) else P.NUMERIC_OID
            assert got == P.encode_text(v, oid), (v, lit, got)
        elif isinstance(v, str):
            assert got == v.encode(), (v, lit)
        else:
            oid = P.TIMESTAMP_OID if isinstance(v, dt.datetime) else P.DATE_OID
            assert got == P.encode_text(v, oid), (v, lit)


@pytest.mark.postgres
@NO_DEADLINE
@given(st.one_of(st.integers(), st.floats(), decimals()))
@example(-5)
@example(-0.0)
@example(-2147483647)
def test_negative_literals_cannot_start_a_comment(raw: Raw, v: object) -> None:
    """``1-$1`` subtracts a negative value; it does not comment out the rest of the line."""
    lit = P.sql_literal(v)
    glued = raw.run(f"SELECT 1-{lit}\n, 2")
    spaced = raw.run(f"SELECT 1 - ({lit}), 2")
    assert glued == spaced, (v, lit, glued)  # the same subtraction: nothing commented out
    # an answer, unless 1 - v leaves PostgreSQL's integer type as written (22003 for both:
    # hypothesis found 1 - (-2147483647), past int4's range)
    assert not isinstance(glued, PgError) or glued.sqlstate == "22003", (v, lit, glued)


def test_nul_in_a_string_literal_is_refused() -> None:
    with pytest.raises(P.CharacterNotInRepertoire) as info:
        P.sql_literal("a\x00b")
    assert info.value.sqlstate == "22021"


def test_literal_spellings() -> None:
    assert P.sql_literal(math.inf) == "'Infinity'::float8"
    assert P.sql_literal(Decimal("NaN")) == "'NaN'::numeric"
    assert P.sql_literal(Decimal("1E+3")) == "1000"
    assert P.sql_literal(dt.datetime(2020, 1, 2, 3, 4, 5, 600000)) == (
        "TIMESTAMP '2020-01-02 03:04:05.6'"
    )
    with pytest.raises(DPProxyError):
        P.sql_literal(object())

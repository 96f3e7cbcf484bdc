"""PostgreSQL types on the wire: OIDs, an emulated ``pg_type``, and value codecs (pure).

* :data:`TYPES` / :data:`BY_OID`: the built-in types clients ask about, as ``pg_type`` rows;
* :func:`oid_of`: dpproxy's output column types → OIDs;
* :func:`encode_text` / :func:`encode_binary`: a Python value → a DataRow field, byte for byte
  what PostgreSQL 15 sends (``extra_float_digits`` ≥ 1, ``DateStyle`` ISO, ``TimeZone`` UTC);
* :func:`decode_param`: a Bind parameter → a Python value, with PostgreSQL's input rules, error
  codes and messages;
* :func:`sql_literal`: a decoded value → a SQL literal to substitute for ``$n``.

A value whose Python type differs from the column type is converted as PostgreSQL's cast would
(an ``int`` sent as ``float8`` is written as a float; a ``float`` sent as ``int8`` is rounded
half to even), except ``float`` → ``numeric``, which keeps the shortest round-trip digits rather
than PostgreSQL's 15. Naive datetimes count as UTC. Types without a codec here (bytea, time,
interval, uuid, arrays, ...) raise :class:`~dpproxy.errors.InternalError` when encoding and
:class:`UnsupportedParameterType` (0A000) when a client binds one.

The code lives in five modules, which this one re-exports (callers import from here; the
private helpers are imported from where they live):

* :mod:`~dpproxy.server.pgoids`: the OIDs, :class:`PgType` with :data:`TYPES` /
  :data:`BY_OID`, :func:`oid_of`, :func:`type_size`, :func:`type_name`;
* :mod:`~dpproxy.server.pgfloat`: float digits and text as PostgreSQL prints them;
* :mod:`~dpproxy.server.pgparse`: the text input functions (and :class:`InvalidDatetimeFormat`);
* :mod:`~dpproxy.server.pgencode`: the coercions, :func:`column_encoder`, :func:`encode_text`,
  :func:`encode_binary` (and :class:`CharacterNotInRepertoire`);
* :mod:`~dpproxy.server.pgparams`: :func:`decode_param`, :func:`decode_array`,
  :func:`array_element`, :func:`sql_literal` (and :class:`UnsupportedParameterType`,
  :class:`InvalidBinaryRepresentation`).

>>> encode_text(1e20, FLOAT8_OID), encode_text(0.1, FLOAT4_OID), encode_binary(2, INT4_OID)
(b'1e+20', b'0.1', b'\\x00\\x00\\x00\\x02')
>>> decode_param(b" 42 ", INT8_OID, 0), sql_literal(-1.5), sql_literal("it's")
(42, '(-1.5)', "'it''s'")
"""

from __future__ import annotations

from dpproxy.server.pgencode import (
    CharacterNotInRepertoire,
    column_encoder,
    encode_binary,
    encode_text,
)
from dpproxy.server.pgoids import (
    BOOL_OID,
    BPCHAR_OID,
    BY_OID,
    BYTEA_OID,
    CHAR_ARRAY_OID,
    CHAR_OID,
    DATE_OID,
    FLOAT4_OID,
    FLOAT8_OID,
    INT2_ARRAY_OID,
    INT2_OID,
    INT2VECTOR_OID,
    INT4_ARRAY_OID,
    INT4_OID,
    INT8_OID,
    INTERVAL_OID,
    JSON_OID,
    NAME_ARRAY_OID,
    NAME_OID,
    NUMERIC_OID,
    OID_ARRAY_OID,
    OID_OID,
    OIDVECTOR_OID,
    REGCLASS_OID,
    REGPROC_OID,
    REGTYPE_OID,
    TEXT_ARRAY_OID,
    TEXT_OID,
    TIME_OID,
    TIMESTAMP_OID,
    TIMESTAMPTZ_OID,
    TYPES,
    UNKNOWN_OID,
    UUID_OID,
    VARCHAR_OID,
    XID_OID,
    PgType,
    oid_of,
    type_name,
    type_size,
)
from dpproxy.server.pgparams import (
    InvalidBinaryRepresentation,
    UnsupportedParameterType,
    array_element,
    decode_array,
    decode_param,
    sql_literal,
)
from dpproxy.server.pgparse import (
    InvalidDatetimeFormat,
)

__all__ = [
    "BOOL_OID",
    "BPCHAR_OID",
    "BYTEA_OID",
    "BY_OID",
    "CHAR_ARRAY_OID",
    "CHAR_OID",
    "DATE_OID",
    "FLOAT4_OID",
    "FLOAT8_OID",
    "INT2VECTOR_OID",
    "INT2_ARRAY_OID",
    "INT2_OID",
    "INT4_ARRAY_OID",
    "INT4_OID",
    "INT8_OID",
    "INTERVAL_OID",
    "JSON_OID",
    "NAME_ARRAY_OID",
    "NAME_OID",
    "NUMERIC_OID",
    "OIDVECTOR_OID",
    "OID_ARRAY_OID",
    "OID_OID",
    "REGCLASS_OID",
    "REGPROC_OID",
    "REGTYPE_OID",
    "TEXT_ARRAY_OID",
    "TEXT_OID",
    "TIMESTAMPTZ_OID",
    "TIMESTAMP_OID",
    "TIME_OID",
    "TYPES",
    "UNKNOWN_OID",
    "UUID_OID",
    "VARCHAR_OID",
    "XID_OID",
    "CharacterNotInRepertoire",
    "InvalidBinaryRepresentation",
    "InvalidDatetimeFormat",
    "PgType",
    "UnsupportedParameterType",
    "array_element",
    "column_encoder",
    "decode_array",
    "decode_param",
    "encode_binary",
    "encode_text",
    "oid_of",
    "sql_literal",
    "type_name",
    "type_size",
]

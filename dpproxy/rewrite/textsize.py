"""Text operations that allocate in proportion to their input, kept far below the limits.

PostgreSQL refuses any single allocation of 1 GB or more (``MaxAllocSize``, "invalid memory
alloc request size") and any text of 1 GB or more, while a ``text`` column may hold up to
1 GB in one row. Several operations allocate a multiple of their input's size, so they raise
on a long enough text, and an error decided by one row's value is an output that no noise
covers (whether that person's text is long). Measured on PostgreSQL 15 (C.UTF-8) with one
text of 600,000,000 bytes: ``UPPER``/``LOWER`` (a wide-character copy, 4 bytes a character,
then up to 4 bytes a character back; with ICU a UTF-16 copy and a case-mapped one, at most
24 bytes a byte), ``TRIM`` (an array per character: 8 to 12 bytes a byte), ``ILIKE`` (it
lowers both sides in a multibyte database), ``a || b`` (the result) and a regular
expression (4 bytes a character: the cast guard of ``rewrite/dialect.py``) all raised;
``LIKE``, ``LENGTH``, ``STRPOS``, ``LEFT``, ``REPLACE`` (never longer), comparisons and
hashing did not.

:func:`bound_text` makes the first four total: a text column read in a value position of
their operands is printed as ``CASE WHEN LENGTH(c) <= 262144 THEN c END`` — NULL for a longer
text, on both engines alike — so it holds at most 2^18 characters, at most 2^20 bytes in
UTF-8. :func:`text_bytes` then bounds the operand's size from the query alone (literals by
their bytes, any value that is not text by 2^18 bytes — a number, date or boolean prints far
shorter —, ``UPPER``/``LOWER`` by 4 times their operand's bound: one character to one
character of at most 4 bytes, everything else by the sum over its operands), and an operand
whose bound exceeds 2^24 bytes is refused (54001) before any data is read. Every allocation
listed above is then at most 32 times 2^24 bytes, 512 MB, half of ``MaxAllocSize``.
The regular expressions of the cast guards run only on texts of at most 100 characters
(``rewrite/dialect.py``, ``MAX_CAST_TEXT``).
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.errors import StatementTooComplex
from dpproxy.rewrite.dialect import guarded_type
from dpproxy.sql.types import SqlType

MAX_CHARS = 2**18  # a text column longer than this is NULL under the operations below
COLUMN_BYTES = 4 * MAX_CHARS  # UTF-8: at most 4 bytes a character
NOT_TEXT_BYTES = 2**18  # a number, date or boolean printed as text: far shorter
MAX_OPERAND_BYTES = 2**24  # 32 times this is half of PostgreSQL's MaxAllocSize

#: The operations that allocate a multiple of their operand's size (measured above).
SIZED = (exp.Upper, exp.Lower, exp.Trim, exp.ILike, exp.DPipe)
_TEXT = (SqlType.TEXT, SqlType.UNKNOWN)


def _length_guard(col: exp.Column) -> exp.Case:
    short = exp.LTE(this=exp.Length(this=col.copy()), expression=exp.Literal.number(MAX_CHARS))
    return exp.Case(ifs=[exp.If(this=short, true=col)])


def _is_length_guard(e: exp.Expression) -> bool:
    if not isinstance(e, exp.Case) or e.args.get("default") or len(e.args["ifs"]) != 1:
        return False
    cond, true = e.args["ifs"][0].this, e.args["ifs"][0].args.get("true")
    return (
        isinstance(true, exp.Column)
        and isinstance(cond, exp.LTE)
        and isinstance(cond.this, exp.Length)
        and cond.this.this == true
        and cond.expression == exp.Literal.number(MAX_CHARS)
    )


def _type(e: exp.Expression, types: dict[str, SqlType]) -> SqlType | None:
    try:
        return guarded_type(e, types)
    except Exception:  # a guarded form the type checker never sees: taken as text
        return None


def _bound_columns(e: exp.Expression, types: dict[str, SqlType]) -> exp.Expression:
    """``e`` with every text column in a text-valued position guarded to MAX_CHARS."""
    if _is_length_guard(e):
        return e
    if isinstance(e, exp.Column):
        return _length_guard(e.copy()) if types.get(e.name) is SqlType.TEXT else e
    for child in list(e.iter_expressions()):
        if _type(child, types) in (*_TEXT, None):
            new = _bound_columns(child, types)
            if new is not child:
                child.replace(new)
    return e


def text_bytes(e: exp.Expression, types: dict[str, SqlType]) -> int:
    """An upper bound on the bytes of the text ``e`` (its columns guarded): see the module."""
    if _is_length_guard(e):
        return COLUMN_BYTES
    if isinstance(e, exp.Literal) and e.is_string:
        return len(e.name.encode())
    if _type(e, types) not in (*_TEXT, None) or isinstance(e, exp.Column):
        return NOT_TEXT_BYTES  # a text column here is not in a value position of the text
    children = list(e.iter_expressions())
    if not children:
        return NOT_TEXT_BYTES
    total = sum(text_bytes(c, types) for c in children)
    return 4 * total if isinstance(e, exp.Upper | exp.Lower) else total


def bound_text(n: exp.Expression, types: dict[str, SqlType]) -> exp.Expression:
    """``n`` (one of :data:`SIZED`) with its operands' text columns guarded, or 54001.

    >>> types = {"note": SqlType.TEXT, "n": SqlType.NUMERIC}
    >>> bound_text(exp.maybe_parse("UPPER(note)"), types).sql()
    'UPPER(CASE WHEN LENGTH(note) <= 262144 THEN note END)'
    >>> bound_text(exp.maybe_parse("note || n"), types).sql()
    'CASE WHEN LENGTH(note) <= 262144 THEN note END || n'
    """
    keys = ("this", "expression") if isinstance(n, exp.DPipe | exp.Trim) else ("this",)
    total = 0
    for key in keys:
        operand = n.args.get(key)
        if operand is None:
            continue
        if _type(operand, types) in (*_TEXT, None):
            operand = _bound_columns(operand, types)
            n.set(key, operand)
        total += text_bytes(operand, types)
    if total > MAX_OPERAND_BYTES:
        name = "||" if isinstance(n, exp.DPipe) else n.key.upper()
        raise StatementTooComplex(
            f"statement too complex: a text operand of {name} could reach "
            f"{total:,} bytes (at most {MAX_OPERAND_BYTES:,})",
            hint="concatenate fewer text columns, or nest fewer UPPER/LOWER",
        )
    return n

"""Small helpers over sqlglot nodes shared by the rewriting and the result typing.

Type names of casts, PostgreSQL array literals, qualified names, literals for bound
parameters. Pure functions of their arguments; :mod:`.rewrite`, :mod:`.columns` and
:mod:`.emulator` use them.
"""

from __future__ import annotations

import re
from typing import TypeGuard

from sqlglot import exp

from dpproxy.server.catalog.pgconst import TEXT_TYPES, TYPE_ALIASES


def pg_type_name(dt: exp.DataType) -> str:
    """The PostgreSQL name of a cast's target type, e.g. ``int4``, ``regclass``, ``_oid``."""
    if dt.this == exp.DataType.Type.ARRAY and dt.expressions:
        inner = dt.expressions[0]
        return "_" + pg_type_name(inner) if isinstance(inner, exp.DataType) else "_text"
    if dt.this == exp.DataType.Type.USERDEFINED:
        kind = dt.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot | exp.Identifier) else str(kind)
        return TYPE_ALIASES.get(name.lower(), name.lower())
    text = dt.sql(dialect="postgres").lower()
    text = re.sub(r"\(.*\)$", "", text).strip()
    return TYPE_ALIASES.get(text, text)


def pg_array(text: str) -> list[str | None] | None:
    """The elements of a one-dimensional PostgreSQL array literal ``{a,"b c",NULL}``."""
    if not (text.startswith("{") and text.endswith("}")) or "{" in text[1:-1]:
        return None
    items: list[str | None] = []
    for m in re.finditer(r'\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|\Z)', text[1:-1]):
        if m.start() == len(text) - 2 and not m.group(1):
            break
        item = m.group(1)
        if item.startswith('"'):
            items.append(re.sub(r"\\(.)", r"\1", item[1:-1]))
        else:
            items.append(None if item.upper() == "NULL" else item)
    return [] if text[1:-1].strip() == "" else items


def split_name(text: str) -> list[str]:
    """``public."My Table"`` → ``['public', 'My Table']`` (unquoted parts lower-cased)."""
    return [
        p[1:-1].replace('""', '"') if p.startswith('"') else p.lower()
        for p in re.findall(r'"(?:[^"]|"")*"|[^.]+', text.strip())
    ]


def call(schema: str, name: str, *args: exp.Expression) -> exp.Dot:
    """``schema.name(args)``: a call of an emulated function (a DuckDB macro)."""
    return exp.Dot(
        this=exp.to_identifier(schema), expression=exp.Anonymous(this=name, expressions=list(args))
    )


def text_literal(node: exp.Expression) -> str | None:
    """The string of a literal, possibly under casts to a text type; else None."""
    while isinstance(node, exp.Cast) and pg_type_name(node.to) in TEXT_TYPES:
        node = node.this
    return node.name if isinstance(node, exp.Literal) and node.is_string else None


def is_function(node: object) -> TypeGuard[exp.Expression]:
    """A function call node (sqlglot 30's Func is not an Expression subclass, its calls are)."""
    return isinstance(node, exp.Func) and isinstance(node, exp.Expression)


def param_literal(v: object) -> exp.Expression:
    """A SQL literal for a bound parameter (text-format values behave as untyped literals)."""
    if v is None:
        return exp.Null()
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, int | float):
        return exp.Literal.number(v)
    if isinstance(v, bytes | bytearray):
        return exp.Literal.string(bytes(v).decode("utf-8", "replace"))
    if isinstance(v, list | tuple):
        return exp.Array(expressions=[param_literal(x) for x in v])
    return exp.Literal.string(str(v))


def name_single_column(node: exp.Expression) -> None:
    """``FROM unnest(x) AS u``: PostgreSQL names the one column after the alias; DuckDB not."""
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.name and not alias.columns:
        alias.set("columns", [exp.to_identifier(alias.name)])

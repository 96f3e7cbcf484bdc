"""SQL text handling for the wire protocol, on sqlglot's PostgreSQL tokenizer (pure).

* :func:`split_statements`: a simple-Query string → its statements (string literals, quoted
  identifiers and comments may contain ``;``);
* :func:`parameters` / :func:`substitute`: the ``$n`` placeholders of an extended-protocol
  statement, replaced by SQL literals of the bound values before planning — the planner only
  ever sees plain SQL;
* :func:`infer_parameter_types`: a type OID per placeholder, from the column it is compared
  with, for a complete ParameterDescription.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.errors import SQLSyntaxError
from dpproxy.explain_command import query_start
from dpproxy.sql.parse import check_length

_TOKENIZER = Postgres().tokenizer


@functools.lru_cache(maxsize=2048)
def _tokens(sql: str) -> tuple[Token, ...]:
    """The tokens of ``sql`` (cached: clients repeat the same statements constantly)."""
    check_length(sql)
    try:
        return tuple(_TOKENIZER().tokenize(sql))
    except SqlglotError as e:
        raise SQLSyntaxError("syntax error: unterminated quoted string or comment") from e
    except Exception as e:  # sqlglot on hostile input: a refusal, never a crash
        raise SQLSyntaxError("syntax error", log_detail=f"{type(e).__name__}: {e}") from None


def split_statements(sql: str) -> list[str]:
    """The statements of ``sql``, without the separating semicolons, blank ones dropped."""
    return list(_split(sql))


@functools.lru_cache(maxsize=2048)
def _split(sql: str) -> tuple[str, ...]:
    out: list[str] = []
    start = 0
    for tok in _tokens(sql):
        if tok.token_type is TokenType.SEMICOLON:
            piece = sql[start : tok.start].strip()
            if piece:
                out.append(piece)
            start = tok.end + 1
    tail = sql[start:].strip()
    if tail and _tokens(tail):
        out.append(tail)
    return tuple(out)


def is_blank(sql: str) -> bool:
    """Only whitespace and comments."""
    return not _tokens(sql)


@dataclass(frozen=True, slots=True)
class Placeholder:
    number: int  # $n, from 1
    start: int
    end: int  # inclusive, like sqlglot's token positions


@functools.lru_cache(maxsize=2048)
def parameters(sql: str) -> tuple[Placeholder, ...]:
    start = query_start(sql)  # EXPLAIN ... is one token to the tokenizer: look inside
    if start:
        return tuple(
            Placeholder(p.number, p.start + start, p.end + start) for p in parameters(sql[start:])
        )
    toks = _tokens(sql)
    out: list[Placeholder] = []
    for i, tok in enumerate(toks):
        if tok.token_type is TokenType.PARAMETER and i + 1 < len(toks):
            nxt = toks[i + 1]
            if nxt.token_type is TokenType.NUMBER and nxt.start == tok.end + 1:
                if nxt.text.isdigit():
                    out.append(Placeholder(int(nxt.text), tok.start, nxt.end))
    return tuple(out)


def parameter_count(sql: str) -> int:
    return max((p.number for p in parameters(sql)), default=0)


def substitute(sql: str, literals: Sequence[str]) -> str:
    """``sql`` with each ``$n`` replaced by ``literals[n - 1]`` (already valid SQL literals)."""
    out = []
    pos = 0
    for p in parameters(sql):
        if p.number > len(literals):
            from dpproxy.errors import ProtocolViolation

            raise ProtocolViolation(
                f"bind message supplies {len(literals)} parameters, "
                f"but the statement uses ${p.number}"
            )
        out.append(sql[pos : p.start])
        out.append(f"({literals[p.number - 1]})")
        pos = p.end + 1
    out.append(sql[pos:])
    return "".join(out)


def infer_parameter_types(
    sql: str, catalog: Catalog, oid_of_column: Callable[[ColumnType], int], default: int
) -> list[int]:
    """A type OID per ``$n``: the type of a column it is compared with (``age > $1``,
    ``$1 = sex``, ``sex IN ($1, $2)``, ``age BETWEEN $1 AND $2``), else ``default``."""
    start = query_start(sql)
    if start:
        return infer_parameter_types(sql[start:], catalog, oid_of_column, default)
    count = parameter_count(sql)
    oids = [default] * count
    if not count:
        return oids
    toks = _tokens(sql)
    columns = {c.name.lower(): c.type for t in catalog.tables for c in t.columns}
    comparison = {
        TokenType.EQ, TokenType.NEQ, TokenType.GT, TokenType.GTE, TokenType.LT, TokenType.LTE,
        TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH,
    }  # fmt: skip

    def column_type(tok: Token) -> ColumnType | None:
        if tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            return columns.get(tok.text.lower())
        return None

    def param_at(i: int) -> int | None:
        if (
            0 <= i < len(toks) - 1
            and toks[i].token_type is TokenType.PARAMETER
            and toks[i + 1].text.isdigit()
        ):
            return int(toks[i + 1].text)
        return None

    for i in range(len(toks)):
        n = param_at(i)
        if n is None or n > count:
            continue
        found: ColumnType | None = None
        # column OP $n
        if i >= 2 and toks[i - 1].token_type in comparison:
            found = column_type(toks[i - 2])
        # $n OP column
        if found is None and i + 3 < len(toks) and toks[i + 2].token_type in comparison:
            found = column_type(toks[i + 3])
        # column IN (..., $n, ...) / column BETWEEN $n AND $m: scan back to the operator
        if found is None:
            j = i - 1
            while j >= 0 and toks[j].token_type in (
                TokenType.COMMA, TokenType.L_PAREN, TokenType.NUMBER, TokenType.PARAMETER,
                TokenType.STRING, TokenType.AND,
            ):  # fmt: skip
                j -= 1
            if j >= 1 and toks[j].token_type in (TokenType.IN, TokenType.BETWEEN):
                found = column_type(toks[j - 1])
        if found is not None:
            oids[n - 1] = oid_of_column(found)
    return oids


# Session statements (``session_commands.py``): classified by their first words, no parser

_TEXT_OID = 25


def words(sql: str) -> list[str]:
    """Upper-cased words of the statement's first tokens (enough to classify it)."""
    out = []
    for raw in sql.replace(";", " ").split():
        out.append(raw.strip().upper())
        if len(out) >= 6:
            break
    return out


def raw_names(sql: str) -> list[str]:
    return sql.strip().rstrip(";").split()


def identifier(word: str) -> str:
    """An SQL identifier as PostgreSQL reads it: ``"Quoted"`` (``""`` a quote) kept as
    written, an unquoted name folded to lower case."""
    if len(word) >= 2 and word[0] == word[-1] == '"':
        return word[1:-1].replace('""', '"')
    return word.lower()


def setting_assignment(sql: str) -> tuple[str, str]:
    """``SET [SESSION|LOCAL] name {=|TO} value`` → (name, value without quotes)."""
    body = sql.strip().rstrip(";")
    parts = body.split(None, 1)
    rest = parts[1] if len(parts) > 1 else ""
    first = rest.split(None, 1)
    if first and first[0].upper() in ("SESSION", "LOCAL"):
        rest = first[1] if len(first) > 1 else ""
    if "=" in rest.split(None, 1)[0] if rest else False:
        name, _, value = rest.partition("=")
    else:
        pieces = rest.split(None, 1)
        if not pieces:
            raise SQLSyntaxError("syntax error at end of input")
        name = pieces[0]
        value = pieces[1] if len(pieces) > 1 else ""
        if "=" in name:
            name, _, more = name.partition("=")
            value = more + " " + value
        elif value.upper().startswith("TO ") or value.upper() == "TO":
            value = value[2:]
        elif value.startswith("="):
            value = value[1:]
    name = name.strip().strip('"')
    value = value.strip()
    if value.upper() == "DEFAULT":
        value = ""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1].replace("''", "'")
    if not name:
        raise SQLSyntaxError("syntax error in SET")
    return name, value


def describe_session_command(sql: str) -> list[tuple[str, int]] | None:
    """The columns of a session statement (SHOW ...: one text column; BEGIN, SET, ...: none),
    or None for any other statement."""
    head = words(sql)
    if not head:
        return None
    if head[0] == "SHOW":
        rest = [w.lower() for w in head[1:]]
        if rest == ["all"]:
            return [("name", _TEXT_OID), ("setting", _TEXT_OID), ("description", _TEXT_OID)]
        if rest[:2] == ["transaction", "isolation"]:
            return [("transaction_isolation", _TEXT_OID)]
        return [("".join(rest), _TEXT_OID)]
    if head[0] in (
        "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "SET",
        "RESET", "DISCARD", "DEALLOCATE",
    ):  # fmt: skip
        return []
    return None

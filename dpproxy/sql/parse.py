"""Text → exactly one sqlglot statement. Input SQL is read in the PostgreSQL dialect.

**Limits.** Every statement a client sends (embedded or on the wire, private or catalog) is
parsed here, within limits that keep the recursive parts of dpproxy (sqlglot's parser and
printer, validation, planning, the rewrite) far from Python's stack limit; past them the
statement is refused with SQLSTATE 54001 (*statement too complex*, as PostgreSQL's "stack
depth limit exceeded") before it is planned, so it costs nothing:

* :data:`MAX_QUERY_LENGTH` characters of SQL text;
* :data:`MAX_NESTING` levels of brackets — parentheses (subqueries and function calls
  included), ``[…]``, ``CASE … END`` — counted on the tokens, before parsing;
* :data:`MAX_DEPTH` levels of the parsed tree: a chain of 20,000 ``OR`` terms or ``+``
  operands has no brackets but is a tree 20,000 levels deep.

Anything sqlglot's parser raises on malformed input (not only its ``ParseError``) is a syntax
error (42601), and a recursion that still runs out of stack is 54001. What sqlglot reads but
PostgreSQL does not is refused here too: malformed numbers (``1e``), calls missing a required
argument (``FLOOR()``) and empty ``IN ()`` lists.
"""

from __future__ import annotations

import datetime
import functools
import re
import typing

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, DialectType
from sqlglot.errors import ParseError, TokenError
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from dpproxy.errors import (
    SQLSyntaxError,
    StatementTooComplex,
    UndefinedFunction,
    UnsupportedQuery,
)

INPUT_DIALECT = "postgres"

MAX_QUERY_LENGTH = 1_000_000  # characters (the wire's default message limit is 1 MiB)
MAX_NESTING = 100  # brackets and CASE … END inside one another
MAX_DEPTH = 200  # levels of the parsed tree

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}
_UNARY = {TokenType.NOT, TokenType.DASH, TokenType.PLUS}
_POSITION_KEYS = frozenset({"line", "col", "start", "end"})  # Expr.update_positions' keys
_NUMBER = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _offset(sql: str, line: int, col: int) -> int:
    """1-based character position (as Postgres reports it) of a line/column pair."""
    lines = sql.split("\n")
    before = sum(len(x) + 1 for x in lines[: max(line - 1, 0)])
    return max(1, before + col)


def too_complex(what: str) -> StatementTooComplex:
    return StatementTooComplex(
        f"statement too complex: {what}",
        hint=f"dpproxy accepts at most {MAX_QUERY_LENGTH:,} characters, {MAX_NESTING} nested "
        f"brackets and expressions {MAX_DEPTH} levels deep; write long OR chains as IN lists",
    )


def check_length(sql: str) -> None:
    if len(sql) > MAX_QUERY_LENGTH:
        raise too_complex(f"{len(sql):,} characters")


def check_tokens(tokens: list[Token]) -> None:
    """Refuse more than :data:`MAX_NESTING` brackets (or unary operators in a row) inside one
    another, then a malformed number (:func:`check_numbers`), in one pass over the tokens
    (iteratively: this runs before anything recursive; one pass since issue 21, its test
    compares it with the two passes it replaced): the nesting's refusal first, a malformed
    number reported only when the nesting is within its limit."""
    depth = run = 0
    bad: Token | None = None
    unary, opening, closing, number = _UNARY, _OPEN, _CLOSE, TokenType.NUMBER
    for tok in tokens:
        kind = tok.token_type
        if kind in unary:
            run += 1
        else:
            run = 0
            if kind in opening:
                depth += 1
            elif kind in closing:
                depth = max(depth - 1, 0)
            elif kind is number and bad is None and not _NUMBER.fullmatch(tok.text):
                bad = tok
        if depth + run > MAX_NESTING:
            raise too_complex(f"more than {MAX_NESTING} levels of nesting")
    if bad is not None:
        check_numbers([bad])


def check_numbers(tokens: list[Token]) -> None:
    """Number literals are PostgreSQL's (``1e`` or ``5e2.5`` is a syntax error there, not a
    number whose reading would fail later)."""
    for tok in tokens:
        if tok.token_type is TokenType.NUMBER and not _NUMBER.fullmatch(tok.text):
            raise SQLSyntaxError(
                f'trailing junk after numeric literal at or near "{tok.text[:40]}"',
                position=tok.start + 1,
            )


def check_tree(tree: exp.Expr) -> None:
    """Refuse a tree deeper than :data:`MAX_DEPTH` levels (iteratively), and what sqlglot
    parses but PostgreSQL does not: a function call without a required argument
    (``FLOOR()``: 42883) and an empty ``IN ()`` list (42601).

    On the way it drops the source positions sqlglot's parser records on most nodes (a
    ``meta`` dict of line, column, start and end that nothing in dpproxy reads, and that the
    printer ignores): every ``copy()`` of a tree would otherwise deep-copy one dict per node
    through :func:`copy.deepcopy`, most of what a copy costs (issue 21). Other ``meta`` keys
    (a ``/* sqlglot.meta … */`` comment's) are kept. An empty ``comments`` list (the parser
    leaves one on a SELECT and on each aggregate call) becomes ``None`` for the same reason:
    a copy deep-copies a list, not ``None``, and nothing reads the two differently (sqlglot's
    printer and ``treekey`` test the list's truth; ``add_comments`` makes a list for ``None``).
    """
    # Depth-first in the order of ``iter_expressions`` (the last child first, as a stack of
    # its children pops them), with the depths on a stack of their own: no tuple and no
    # generator per node.
    nodes: list[exp.Expr] = [tree]
    depths = [1]
    kinds = _KINDS
    expr = exp.Expr
    while nodes:
        node = nodes.pop()
        depth = depths.pop()
        if depth > MAX_DEPTH:
            raise too_complex(f"an expression more than {MAX_DEPTH} levels deep")
        meta = node._meta
        if meta is not None and meta.keys() <= _POSITION_KEYS:
            node._meta = None
        comments = node.comments
        if comments is not None and not comments:
            node.comments = None
        kind = kinds.get(type(node))
        if kind is None:
            kind = kinds[type(node)] = _kind(node)
        if kind:
            keys, is_in = kind
            if any(node.args.get(key) in (None, []) for key in keys):
                assert isinstance(node, exp.Func)  # only a function has required keys here
                raise UndefinedFunction(
                    f"function {node.sql_name().lower()}() does not exist",
                    hint="the function needs arguments",
                )
            if is_in and not any(
                node.args.get(key) for key in ("expressions", "query", "unnest", "field")
            ):
                raise SQLSyntaxError('syntax error at or near ")"', hint="IN needs a value")
        depth += 1
        for value in node.args.values():
            if isinstance(value, list):
                for v in value:
                    if isinstance(v, expr):
                        nodes.append(v)
                        depths.append(depth)
            elif isinstance(value, expr):
                nodes.append(value)
                depths.append(depth)


def _kind(node: exp.Expr) -> tuple[tuple[str, ...], bool] | tuple[()]:
    """What :func:`check_tree` checks of a node of this class: the keys of a function's
    required arguments (``arg_types`` is per class) and whether it is an ``IN``; ``()`` when
    neither applies."""
    keys = tuple(k for k, r in node.arg_types.items() if r) if isinstance(node, exp.Func) else ()
    is_in = isinstance(node, exp.In)
    return (keys, is_in) if keys or is_in else ()


# A node class → what check_tree checks of it (``_kind``), found once per class.
_KINDS: dict[type, tuple[tuple[str, ...], bool] | tuple[()]] = {}


def dialect_of(dialect: DialectType) -> Dialect:
    """sqlglot's dialect object; for a name, looked up once (each lookup parses the name and
    builds a new object; the object only holds settings: every tokenize, parse or print
    makes its own tokenizer, parser or generator). Dialect objects and classes are looked up
    as given (sqlglot compares dialect objects by class only, so they are not cache keys).

    >>> dialect_of("postgres") is dialect_of("postgres")
    True
    """
    if isinstance(dialect, str):
        return _named_dialect(dialect)
    return Dialect.get_or_raise(dialect)


@functools.lru_cache(maxsize=16)
def _named_dialect(name: str) -> Dialect:
    return Dialect.get_or_raise(name)


# Idle tokenizers and parsers per dialect name: each resets its state at the start of every
# ``tokenize``/``parse``, and making them costs about as much as tokenizing a short query. A
# call takes a pair out of the pool (``list.pop`` and ``append`` are atomic, so no two threads
# ever share one) and puts it back when done; an empty pool makes a new pair.
_IDLE: dict[str, list[tuple[Tokenizer, Parser]]] = {}
_MAX_IDLE = 8  # pairs kept per dialect


def _take_reader(dialect: DialectType) -> tuple[Tokenizer, Parser]:
    pool = _IDLE.get(dialect) if isinstance(dialect, str) else None
    if pool:
        try:
            return pool.pop()
        except IndexError:  # another thread took the last one
            pass
    reader = dialect_of(dialect)
    return reader.tokenizer(), reader.parser()


def _give_back(dialect: DialectType, pair: tuple[Tokenizer, Parser]) -> None:
    if isinstance(dialect, str):
        pool = _IDLE.setdefault(dialect, [])
        if len(pool) < _MAX_IDLE:
            pool.append(pair)


def parse_statements(sql: str, dialect: DialectType = INPUT_DIALECT) -> list[exp.Expr]:
    """The statements of ``sql`` within the limits above (none of them ``None``)."""
    check_length(sql)
    pair = _take_reader(dialect)
    try:
        parsed = _parse_with(pair, sql)
    finally:
        _give_back(dialect, pair)
    statements = [s for s in parsed if s is not None]
    for statement in statements:
        check_tree(statement)
    return statements


def _parse_with(pair: tuple[Tokenizer, Parser], sql: str) -> list[exp.Expr | None]:
    tokenizer, parser = pair
    try:
        tokens = tokenizer.tokenize(sql)
    except TokenError as e:
        raise SQLSyntaxError("syntax error: unterminated string or identifier") from e
    except RecursionError:
        raise too_complex("the tokenizer ran out of stack") from None
    except Exception as e:  # sqlglot on hostile input: a refusal
        raise SQLSyntaxError("syntax error", log_detail=f"{type(e).__name__}: {e}") from None
    check_tokens(tokens)
    try:
        return parser.parse(tokens, sql)
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line"), first.get("col")
        pos = _offset(sql, line, col) if isinstance(line, int) and isinstance(col, int) else None
        near = first.get("highlight") or ""
        raise SQLSyntaxError(
            f'syntax error at or near "{near}"' if near else "syntax error",
            position=pos,
            log_detail=str(first.get("description", e)),
        ) from e
    except RecursionError:
        raise too_complex("the parser ran out of stack") from None
    except Exception as e:  # e.g. a TypeError in sqlglot on `SELECT #>>`
        raise SQLSyntaxError("syntax error", log_detail=f"{type(e).__name__}: {e}") from None


def parse(sql: str) -> exp.Expression:
    """Parse one statement; several statements or none are refused.

    The tree of a text parsed lately is kept (:data:`PARSED`): another call with the same text
    gets a copy of it, not a new parse (a copy costs a fraction of tokenizing and parsing).
    One query's first run reads its text up to five times (the public-table, UNION, scalar
    composition and main planners each look at it, and the answer cache's key is its
    canonical text), so a new text used to be tokenized and parsed five times. Every caller
    gets a tree of its own, which it may change; a text that is refused is parsed again each
    time (nothing is kept when parsing raises).

    >>> type(parse("SELECT COUNT(*) FROM adult")).__name__
    'Select'
    >>> parse("SELECT 1") is not parse("SELECT 1")
    True
    """
    return clone(peek(sql))


def peek(sql: str) -> exp.Expression:
    """The tree :func:`parse` copies, itself: for a caller that only reads it, such as the
    engine's first looks at a query (does it read public tables only, is it a UNION, has it
    subqueries?), which a private aggregate answers no to without changing anything. Such a
    caller must not change the tree, nor keep it where another could: it is shared with
    every later caller of the same text. ``tests/unit/test_parse_memo.py`` plans a corpus of
    queries of every kind and checks that each kept tree is still its text's fresh parse.

    >>> peek("SELECT 1") is peek("SELECT 1")
    True
    """
    kept = PARSED.get(sql)
    if kept is not None:
        return kept
    tree = _parse_one(sql)
    PARSED.keep(sql, tree)
    return tree


class ParsedTexts:
    """The trees of the texts parsed last: at most :data:`PARSED_TEXTS` texts of at most
    :data:`PARSED_CHARACTERS` characters each, the oldest dropped first, and beside them the
    one longer text parsed last, up to :data:`PARSED_LARGEST` characters (a tree takes about
    130 bytes per character of its text: a 10,000-item IN list's text of 59 KB was parsed
    four times by one first ``Engine.prepare``, 0.5 s of its 0.6). A longer text is parsed
    each time. A kept tree is handed out only to :func:`peek`'s callers, which only read
    it; :func:`parse` hands out copies, so nobody changes one.

    No lock (this layer is pure): under the server's threads each step is one dict operation
    or one assignment, atomic under the GIL, and what a race can do is harmless: a text kept
    twice, or one more tree dropped or kept for a moment than the limit says."""

    def __init__(self) -> None:
        self._trees: dict[str, exp.Expression] = {}
        self._long: tuple[str, exp.Expression] | None = None

    def get(self, sql: str) -> exp.Expression | None:
        if len(sql) > PARSED_CHARACTERS:
            long = self._long
            return long[1] if long is not None and long[0] == sql else None
        return self._trees.get(sql)

    def keep(self, sql: str, tree: exp.Expression) -> None:
        if len(sql) > PARSED_CHARACTERS:
            if len(sql) <= PARSED_LARGEST:
                self._long = (sql, tree)
            return
        trees = self._trees
        trees[sql] = tree
        while len(trees) > PARSED_TEXTS:
            try:
                trees.pop(next(iter(trees)), None)  # the oldest
            except (StopIteration, RuntimeError):  # another thread changed it meanwhile
                break

    def clear(self) -> None:
        """Forget every tree (the planning benchmark's cold runs: each is a first parse)."""
        self._trees.clear()
        self._long = None


PARSED_TEXTS = 32
PARSED_CHARACTERS = 16 * 1024
PARSED_LARGEST = 256 * 1024  # the one longer text kept: a tree of about 33 MB at most
#: The texts parsed last and their trees (:func:`parse`).
PARSED = ParsedTexts()


def clone(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` through sqlglot's own ``__deepcopy__``: the one-liner of
    ``sql/types.clone``, written here so that parsing does not import the typing modules."""
    return typing.cast(exp.Expression, tree.__deepcopy__({}))


def _parse_one(sql: str) -> exp.Expression:
    if not sql.strip().strip(";").strip():
        raise SQLSyntaxError("empty query", hint="send one SELECT statement")
    statements = parse_statements(sql)
    if not statements:
        raise SQLSyntaxError("empty query", hint="send one SELECT statement")
    if len(statements) != 1:
        raise UnsupportedQuery(
            f"one statement per query, got {len(statements)}",
            hint="send the statements one at a time; each is planned and charged on its own",
        )
    statement = statements[0]
    if not isinstance(statement, exp.Expression):
        raise UnsupportedQuery("this kind of statement is not supported")
    return statement


_CURRENT_DATE = re.compile(r"\bcurrent_date\b", re.IGNORECASE)
_DAY_MARK = re.compile(r"/\* current_date \d{4}-\d{2}-\d{2} \*/ ")


def dated(sql: str) -> str:
    """``sql`` marked with today's date (UTC) when it names ``CURRENT_DATE``, which planning
    folds into a constant (``sql/dates.py``): plans and released answers are cached by their
    text, and the marked text of a query is another text tomorrow. Others come back as they are.

    >>> dated("SELECT COUNT(*) FROM t")
    'SELECT COUNT(*) FROM t'
    >>> dated("SELECT COUNT(*) FROM t WHERE d > CURRENT_DATE - 7").startswith("/* current_date ")
    True
    """
    if _CURRENT_DATE.search(sql) is None or _DAY_MARK.match(sql):
        return sql
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    return f"/* current_date {day} */ {sql}"


@functools.lru_cache(maxsize=1024)
def normalised_text(sql: str) -> str:
    """The query as one canonical PostgreSQL text (a pure function of ``sql``: cached, since
    parsing and printing it again is most of dpproxy's own time on a cheap query); with the
    day a ``CURRENT_DATE`` query was planned on (:func:`dated`), which is part of its answer."""
    mark = _DAY_MARK.match(sql)
    text = parse(sql).sql(dialect="postgres", normalize=True, comments=False)
    return mark.group(0) + text if mark else text

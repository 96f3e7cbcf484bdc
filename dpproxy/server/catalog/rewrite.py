"""One PostgreSQL catalog query → a DuckDB query over the emulation schemas.

:class:`Rewrite` walks a parsed, validated (:mod:`.validate`) statement: relations to the
emulation schemas ``pgc``/``pgis``, ``::regclass``-style casts resolved against the emulated
catalog, ``OPERATOR(pg_catalog.~)``, ``COLLATE``, session constants such as ``version()``
inlined, emulated functions to the macros of :mod:`.functions`, bound parameters to literals.
It sees the session's emulator through the :class:`Emulator` protocol and never imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from sqlglot import exp

from dpproxy.errors import (
    InvalidParameter,
    InvalidTextRepresentation,
    UndefinedFunction,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.server.catalog.functions import (
    INFO_MACROS,
    LITERAL_CLASSES,
    LITERALS,
    MACROS,
    operator_class,
)
from dpproxy.server.catalog.model import NAMESPACES, Model
from dpproxy.server.catalog.nodes import (
    call,
    is_function,
    name_single_column,
    param_literal,
    pg_array,
    pg_type_name,
    split_name,
    text_literal,
)
from dpproxy.server.catalog.pgconst import DUCK_TYPE, REG_TYPES, TEXT_TYPES, duck_type


class Emulator(Protocol):
    """What a :class:`Rewrite` reads and changes of its session's emulator.

    :class:`~.emulator.CatalogEmulator` is the one implementation: the underscored members are
    its private state, which the rewrite (split from it for size) reads and, for
    ``set_config``, changes.
    """

    backend_pid: int
    database: str
    _model: Model
    _settings: dict[str, tuple[str, str]]
    _startup: dict[str, tuple[str, str]]
    _roles: dict[int, str]
    _column_types: dict[str, str]
    _cancel_backend: Callable[[int], bool] | None

    def setting(self, name: str) -> str | None: ...
    def _constant(self, key: str) -> str | None: ...
    def _check_settable(self, key: str) -> None: ...
    def _put(self, name: str, value: str) -> None: ...


class Rewrite:
    """One PostgreSQL catalog query → a DuckDB query over the emulation schemas."""

    def __init__(self, em: Emulator, params: Sequence[object], apply: bool) -> None:
        self.em = em
        self.params = params
        self.apply = apply  # whether set_config changes the session's settings
        self.session_dependent = False  # whether the result used settings or the user
        self.ctes: set[str] = set()

    def tree(self, tree: exp.Expression) -> exp.Expression:
        self.ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        out = self._walk(tree)
        # A reg* value in the final select list prints as a name, as PostgreSQL's output
        # function does; everywhere else it stays an oid (comparisons, joins).
        pending = [out]
        while pending:
            node = pending.pop()
            if isinstance(node, exp.SetOperation):
                pending += [node.this, node.expression]
            elif isinstance(node, exp.Subquery):
                pending.append(node.this)
            elif isinstance(node, exp.Select):
                for item in node.expressions:
                    inner = item.this if isinstance(item, exp.Alias) else item
                    reg = inner.meta.get("reg")
                    if reg in ("regclass", "regtype", "regnamespace", "regrole"):
                        inner.replace(call("pgc", f"{reg}_out", inner.copy()))
        return out

    def _walk(self, node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Dot)
            and isinstance(node.this, exp.Identifier)
            and is_function(node.expression)
            and node.this.name.lower() in ("pg_catalog", "information_schema")
        ):
            node = node.expression  # pg_catalog.f(...) → f(...)
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, self._walk(value))
            elif isinstance(value, list):
                node.set(
                    key, [self._walk(v) if isinstance(v, exp.Expression) else v for v in value]
                )
        return self._node(node)

    def _node(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            return self._param(node)
        if isinstance(node, exp.Collate):
            inner: exp.Expression = node.this
            return inner
        if isinstance(node, exp.Operator):
            return _operator(node)
        if isinstance(node, exp.Table):
            return self._table(node)
        if isinstance(node, exp.Unnest):
            name_single_column(node)
            return node
        if isinstance(node, exp.Column):
            return self._column(node)
        for cls, key in LITERAL_CLASSES.items():
            if isinstance(node, cls):
                return self._literal(key)
        if isinstance(node, exp.Anonymous):
            return self._function(node)
        if isinstance(node, exp.Cast):
            return self._cast(node)
        if isinstance(node, exp.EQ | exp.NEQ):
            return self._array_compare(node)
        if isinstance(node, exp.Any | exp.All):
            return self._untyped_array(node)
        return node

    def _literal(self, key: str) -> exp.Expression:
        self.session_dependent = True
        value = self.em._constant(key)
        return exp.Null() if value is None else exp.Literal.string(value)

    def _param(self, node: exp.Parameter) -> exp.Expression:
        n = int(node.name) if node.name.isdigit() else 0
        if not 1 <= n <= len(self.params):
            raise InvalidParameter(f"there is no parameter ${node.name}")
        return param_literal(self.params[n - 1])

    def _table(self, node: exp.Table) -> exp.Expression:
        if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == (
            "pg_show_all_settings"
        ):  # the function behind the view pg_settings: the session's settings
            self.session_dependent = True
            node.set("this", exp.to_identifier("pg_settings"))
            node.set("db", exp.to_identifier("pgc"))
            node.set("catalog", None)
            return node
        if isinstance(node.this, exp.Func):  # a set-returning function in FROM
            node.set("db", None)
            node.set("catalog", None)
            name_single_column(node)
            return node
        name = node.name.lower()
        if not node.db and name in self.ctes:
            return node
        schema = "pgis" if node.db.lower() == "information_schema" else "pgc"
        node.set("this", exp.to_identifier(name))
        node.set("db", exp.to_identifier(schema))
        node.set("catalog", None)
        return node

    def _column(self, node: exp.Column) -> exp.Expression:
        if node.args.get("db") is not None:
            schema = "pgis" if node.db.lower() == "information_schema" else "pgc"
            node.set("db", exp.to_identifier(schema))
            node.set("catalog", None)
        elif (
            not node.table
            and not node.this.args.get("quoted")
            and node.name.lower()
            in (
                "user",
                "current_user",
                "session_user",
                "current_role",
                "current_catalog",
                "current_schema",
            )
        ):
            return self._literal(LITERALS[node.name.lower()])  # keywords, not columns
        return node

    def _function(self, node: exp.Anonymous) -> exp.Expression:
        name, args = node.name.lower(), node.expressions
        if name in LITERALS:
            return self._literal(LITERALS[name])
        if name == "current_setting" and args and (key := text_literal(args[0])) is not None:
            self.session_dependent = True
            entry = self.em._settings.get(key.lower())
            if entry is not None:
                return exp.Literal.string(entry[1])
            if len(args) > 1 and isinstance(args[1], exp.Boolean) and args[1].this is True:
                return exp.Null()
            raise InvalidParameter(f'unrecognized configuration parameter "{key}"')
        if name == "set_config":
            self.session_dependent = True
            key = text_literal(args[0]) if len(args) == 3 else None
            value = text_literal(args[1]) if key is not None else None
            if not self.apply:  # describe: only the type matters
                return exp.Cast(this=exp.Null(), to=exp.DataType.build("VARCHAR", dialect="duckdb"))
            if key is None or (value is None and not isinstance(args[1], exp.Null)):
                raise UnsupportedQuery("set_config takes constant arguments here")
            self.em._check_settable(key.lower())
            if value is None:  # NULL: back to the session's startup value
                self.em._settings.pop(key.lower(), None)
                if key.lower() in self.em._startup:
                    self.em._settings[key.lower()] = self.em._startup[key.lower()]
                value = self.em.setting(key) or ""
            else:
                self.em._put(key, value)
            return exp.Literal.string(value)
        if name == "pg_backend_pid":
            self.session_dependent = True
            return exp.Cast(
                this=exp.Literal.number(self.em.backend_pid),
                to=exp.DataType.build("INTEGER", dialect="duckdb"),
            )
        if name == "pg_cancel_backend":
            return self._cancel_backend(args)
        if name == "json_build_object":
            return exp.Anonymous(this="json_object", expressions=args)
        if name in MACROS:
            return call("pgc", name, *args)
        if name in INFO_MACROS:
            return call("pgis", name, *args)
        return node

    def _cancel_backend(self, args: list[exp.Expression]) -> exp.Expression:
        """``pg_cancel_backend(pid)``: true when that session's query was signalled (it
        belongs to the same user), false when there is no such session."""
        self.session_dependent = True
        boolean = exp.DataType.build("BOOLEAN", dialect="duckdb")
        if len(args) != 1:
            raise UndefinedFunction("function pg_cancel_backend() takes one pid")
        if not self.apply:  # describe: only the type matters
            return exp.Cast(this=exp.Null(), to=boolean)
        arg = args[0].unnest()
        while isinstance(arg, exp.Cast | exp.Paren):  # pg_backend_pid(), rewritten
            arg = arg.this
        if isinstance(arg, exp.Null):
            return exp.Cast(this=exp.Null(), to=boolean)
        if not (isinstance(arg, exp.Literal) and arg.name.lstrip("-").isdigit()):
            raise UnsupportedQuery("pg_cancel_backend takes a constant pid here")
        hook = self.em._cancel_backend
        done = hook(int(arg.name)) if hook is not None else False
        return exp.Boolean(this=done)

    def _untyped_array(self, node: exp.Expression) -> exp.Expression:
        """``relkind = ANY('{r,p}')``: an untyped array literal, typed as the compared column's
        array (text elements otherwise), as PostgreSQL resolves the unknown literal."""
        inner = node.this.unnest() if isinstance(node.this, exp.Expression) else None
        if not (isinstance(inner, exp.Literal) and inner.is_string):
            return node
        items = pg_array(inner.name)
        if items is None:
            raise InvalidTextRepresentation(f'malformed array literal: "{inner.name}"')
        parent = node.parent
        other = parent.this if isinstance(parent, exp.Binary) else None
        pg = (
            self.em._column_types.get(other.name.lower(), "text")
            if isinstance(other, exp.Column)
            else "text"
        )
        pg = "text" if pg.startswith("_") or pg in ("int2vector", "oidvector") else pg
        array = exp.Array(
            expressions=[exp.Null() if i is None else exp.Literal.string(i) for i in items]
        )
        node.set(
            "this",
            exp.Cast(this=array, to=exp.DataType.build(duck_type("_" + pg), dialect="duckdb")),
        )
        return node

    def _cast(self, node: exp.Cast) -> exp.Expression:
        target, inner = pg_type_name(node.to), node.this
        if target in REG_TYPES:
            return self._reg(inner, target)
        reg = inner.meta.get("reg")
        if reg in ("regclass", "regtype", "regnamespace", "regrole") and target in TEXT_TYPES:
            return call("pgc", f"{reg}_out", inner)
        literal = inner.unnest()  # a bound parameter arrives as ('{23,25}')::oid[]
        if target.startswith("_") and isinstance(literal, exp.Literal) and literal.is_string:
            items = pg_array(literal.name)
            if items is not None:
                node.set(
                    "this",
                    exp.Array(
                        expressions=[
                            exp.Null() if i is None else exp.Literal.string(i) for i in items
                        ]
                    ),
                )
        base = target[1:] if target.startswith("_") else target
        if base in DUCK_TYPE:
            node.set("to", exp.DataType.build(duck_type(target), dialect="duckdb"))
        return node

    def _reg(self, inner: exp.Expression, target: str) -> exp.Expression:
        """``x::regclass`` and friends: an oid (a name for regproc), resolved here if constant."""
        text = text_literal(inner)
        if target in ("regproc", "regprocedure"):
            if text is not None:
                return exp.Literal.string(re.sub(r"\(.*$", "", text).split(".")[-1].strip())
            return exp.Cast(this=inner, to=exp.DataType.build("VARCHAR", dialect="duckdb"))
        value: exp.Expression
        if text is not None:
            value = exp.Literal.number(
                int(text) if text.strip().isdigit() else self._resolve(text, target)
            )
        elif isinstance(inner, exp.Dot | exp.Anonymous | exp.DPipe | exp.Concat):
            value = call("pgc", f"to_{target}", inner)  # a name computed at run time
        else:
            value = inner
        out = exp.Cast(this=value, to=exp.DataType.build("UINTEGER", dialect="duckdb"))
        out.meta["reg"] = target
        return out

    def _regclass(self, text: str) -> int:
        parts = split_name(text)
        if parts and len(parts) == 3 and parts[0] == self.em.database.lower():
            parts = parts[1:]
        candidates: list[tuple[str, str]] = (
            [(parts[0], parts[1])]
            if len(parts) == 2
            else [("pg_catalog", parts[0]), ("public", parts[0])]
            if len(parts) == 1
            else []
        )
        for key in candidates:
            if key in self.em._model.regclass:
                return self.em._model.regclass[key]
        raise UndefinedTable(f'relation "{text}" does not exist')

    def _resolve(self, text: str, target: str) -> int:
        self.session_dependent |= target == "regrole"
        model = self.em._model
        if target == "regclass":
            return self._regclass(text)
        key = " ".join(text.strip().lower().split())
        found = {
            "regtype": model.regtype.get(key.removeprefix("pg_catalog.")),
            "regnamespace": NAMESPACES.get(text.strip()),
            "regrole": {n: o for o, n in self.em._roles.items()}.get(text.strip()),
        }.get(target)
        if found is None:
            what = {"regtype": "type", "regnamespace": "schema", "regrole": "role"}[target]
            raise InvalidParameter(f'{what} "{text}" does not exist')
        return found

    def _array_compare(self, node: exp.Expression) -> exp.Expression:
        """``polroles = '{0}'``: a PostgreSQL array literal compared with an array column."""
        for lit, other in (
            (node.this, node.args.get("expression")),
            (node.args.get("expression"), node.this),
        ):
            if not (
                isinstance(lit, exp.Literal) and lit.is_string and isinstance(other, exp.Column)
            ):
                continue
            pg = self.em._column_types.get(other.name.lower(), "")
            items = pg_array(lit.name)
            if items is not None and (pg.startswith("_") or pg in ("int2vector", "oidvector")):
                lit.replace(
                    exp.Cast(
                        this=exp.Array(
                            expressions=[
                                exp.Null() if i is None else exp.Literal.string(i) for i in items
                            ]
                        ),
                        to=exp.DataType.build(duck_type(pg), dialect="duckdb"),
                    )
                )
        return node


def _operator(node: exp.Operator) -> exp.Expression:
    """``a OPERATOR(pg_catalog.~) b`` → ``a ~ b``."""
    found = operator_class(node)
    if found is None:
        raise UndefinedFunction("operator does not exist in catalog queries")
    cls, negate = found
    out = cls(this=node.this, expression=node.expression)
    return exp.Not(this=out) if negate else out

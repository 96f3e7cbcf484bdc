"""The facade: :class:`CatalogEmulator`, one client session's view of the emulated catalog.

Routes a statement (``SHOW``/``SET``/``RESET`` here, with :mod:`.settings`; catalog queries
through :mod:`.validate`, :mod:`.rewrite` and the DuckDB database of :mod:`.database`), types
its result columns (:mod:`.columns`) and keeps the session's settings, roles and cursors in
step with its TEMP tables (:mod:`.session_tables`). It imports the other modules and none
of them imports it: the rewrite sees it through the :class:`~.rewrite.Emulator` protocol.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpproxy.catalog.model import Catalog
from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    InvalidParameter,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpproxy.server.catalog import validate
from dpproxy.server.catalog.cache import Cache
from dpproxy.server.catalog.columns import (
    WIRE_AS_TEXT,
    first_select,
    output_name,
    parameter_types,
    relations_by_alias,
    result_oid,
    type_hint,
)
from dpproxy.server.catalog.database import duck_error, shared_database
from dpproxy.server.catalog.model import NAMESPACES
from dpproxy.server.catalog.rewrite import Rewrite
from dpproxy.server.catalog.session_tables import (
    create_session_tables,
    session_roles,
    store_cursors,
    store_roles,
    store_settings,
)
from dpproxy.server.catalog.settings import (
    READ_ONLY_SETTINGS,
    REPORTED,
    RESET_RE,
    SET_RE,
    SHOW_ALIASES,
    SHOW_RE,
    default_settings,
    setting_value,
    strip_comments,
)


@dataclass(frozen=True, slots=True)
class Result:
    """An answer: ``columns`` as (name, PostgreSQL type OID), ``rows``, and the command tag.

    Values are Python values: ``str`` for text, name (19), varchar (1043) and ``"char"`` (18,
    a string of at most one character), ``int`` for integers and oid (26), ``float``, ``bool``,
    lists for arrays, None for NULL. ``reg*`` values (``c.oid::regclass``) are their names,
    typed text (25).
    """

    columns: list[tuple[str, int]]
    rows: list[tuple[object, ...]]
    tag: str


@dataclass(frozen=True, slots=True)
class _Translation:
    """A catalog query as DuckDB SQL, with PostgreSQL's output names and type hints."""

    sql: str
    names: tuple[str | None, ...]
    hints: tuple[int | None, ...]
    session_dependent: bool


_TRANSLATIONS: Cache[tuple[object, ...], _Translation] = Cache(512)


class CatalogEmulator:
    """One client session's view of the catalog: tables and columns of the privacy schema.

    Built from the :class:`Catalog` alone (see the package docstring for why nothing about the
    data can leak). Holds a DuckDB cursor on the schema's shared, read-only emulation database
    plus TEMP tables of its own, so one per connection is cheap; use it from one thread at a
    time (:meth:`interrupt` excepted). Session settings (``SET``, ``set_config``) live here:
    ``settings`` are the connection's startup parameters (``application_name``,
    ``client_encoding``, ``DateStyle``, ...), which ``RESET`` returns to.

    Typical use by a session: ``is_catalog_query(sql)`` or ``is_setting_command(sql)`` to
    route, then ``execute(sql, params)``; for the extended protocol ``describe(sql)`` and
    ``parameter_types(sql)`` answer Describe without running anything; ``parameter_status()``
    gives the ParameterStatus values to send after authentication.
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        server_version: str = "15.8",
        database: str = "dpproxy",
        user: str = "analyst",
        settings: Mapping[str, str] | None = None,
        backend_pid: int = 0,
        cancel_backend: Callable[[int], bool] | None = None,
        cursors: Callable[[], Sequence[tuple[object, ...]]] | None = None,
    ) -> None:
        self.catalog = catalog
        self.backend_pid = backend_pid  # the pid of BackendKeyData: pg_backend_pid()
        self._cancel_backend = cancel_backend  # pg_cancel_backend(pid): whether it signalled
        self._cursors = cursors  # the session's open cursors: rows of pg_cursors
        self.server_version = server_version
        self.database = database
        self.user = user
        self._model_key = (catalog, database)
        self._lock = threading.RLock()  # one DuckDB cursor: one statement at a time
        self._model, self._con = shared_database(self._model_key)
        self._roles = session_roles(self._model, user)
        self._settings = default_settings(server_version, user)
        for name, value in (settings or {}).items():
            self._put(name, value)
        self._startup = dict(self._settings)
        create_session_tables(self._con, self._model)
        store_roles(self._con, self._model, self._roles)
        store_settings(self._con, self._model, self._settings)
        specs = self._model.specs.values()
        self._column_types: dict[str, str] = {}
        for rel in specs:
            for c, t in rel.columns:
                self._column_types.setdefault(c, t)
        self._array_of = {t.oid: t.array for t in self._model.types if t.array}

    # ------------------------------------------------------------------------- public API

    def is_catalog_query(self, tree_or_sql: exp.Expression | str) -> bool:
        """Whether the statement only reads emulated catalog relations and allowed functions.

        True for ``SELECT 1``, ``SELECT version()``, psql's ``\\d`` queries and ``SHOW``;
        false for anything that names a schema table, an unknown relation or function, or is
        not a read (``SET`` is a setting command, see :meth:`is_setting_command`).
        """
        if isinstance(tree_or_sql, str):
            text = strip_comments(tree_or_sql)
            if SHOW_RE.match(text):
                return True
            try:
                tree = validate.parse(tree_or_sql)
            except DPProxyError:
                return False
        else:
            tree = tree_or_sql
            if isinstance(tree, exp.Command) and tree.name.upper() == "SHOW":
                return True
        return validate.check(tree, self._model.specs, self.database) is None

    def is_setting_command(self, sql: str) -> bool:
        """Whether ``sql`` is ``SET``/``RESET`` (answered by :meth:`execute`, tag ``SET``)."""
        return re.match(r"(SET|RESET)\b", strip_comments(sql), re.I) is not None

    def execute(self, sql: str, params: Sequence[object] = ()) -> Result:
        """Answer a catalog query, ``SHOW``, ``SET`` or ``RESET``; ``params`` bind ``$1``...

        Parameters are Python values or the text of a text-format Bind value (as for an
        untyped literal). Raises a :class:`DPProxyError` with a PostgreSQL SQLSTATE. Safe to
        call from several threads (calls are serialized), though one emulator per session is
        the intended use: settings changed here are the emulator's.
        """
        with self._lock:
            return self._execute(sql, params)

    def _execute(self, sql: str, params: Sequence[object]) -> Result:
        text = strip_comments(sql)
        if m := SHOW_RE.match(text):
            return self._show(m["name"])
        if self.is_setting_command(text):
            return self._set(text)
        tree = validate.parse(sql)
        problem = validate.check(tree, self._model.specs, self.database)
        if problem is not None:
            raise problem
        if self._cursors is not None and "pg_cursors" in text.lower():
            store_cursors(self._con, self._model, self._cursors())
        before = dict(self._settings)
        try:
            result = self._run(sql, tree, params, apply=True)
        except BaseException:
            self._settings = before
            raise
        if self._settings != before:
            store_settings(self._con, self._model, self._settings)
        return result

    def describe(self, sql: str) -> list[tuple[str, int]]:
        """The result columns of ``sql`` (name, type OID), without side effects.

        The statement is bound (DuckDB ``DESCRIBE``), never evaluated, with NULL for every
        parameter; ``set_config`` is not applied.
        """
        with self._lock:
            return self._describe(sql)

    def _describe(self, sql: str) -> list[tuple[str, int]]:
        text = strip_comments(sql)
        if m := SHOW_RE.match(text):
            return self._show(m["name"], describe=True).columns
        if self.is_setting_command(text):
            return []
        tree = validate.parse(sql)
        problem = validate.check(tree, self._model.specs, self.database)
        if problem is not None:
            raise problem
        count = max(
            (int(p.name) for p in tree.find_all(exp.Parameter) if p.name.isdigit()), default=0
        )
        before = dict(self._settings)
        try:
            return self._run(sql, tree, [None] * count, apply=False).columns
        finally:
            self._settings = before

    def parameter_types(self, sql: str) -> list[int]:
        """Type OIDs for ``$1``... (ParameterDescription): from casts and compared columns."""
        text = strip_comments(sql)
        if SHOW_RE.match(text) or self.is_setting_command(text):
            return []
        tree = validate.parse(sql)
        return parameter_types(tree, self._model.regtype, self._array_of, self._column_types)

    def parameter_status(self) -> dict[str, str]:
        """The settings a server reports in ParameterStatus messages, as now set."""
        with self._lock:
            return {name: self._settings[name.lower()][1] for name in REPORTED}

    def setting(self, name: str) -> str | None:
        """The current value of a setting, or None if it is unknown."""
        with self._lock:
            entry = self._settings.get(name.lower())
            return entry[1] if entry else None

    def interrupt(self) -> None:
        """Cancel the statement running in :meth:`execute` (from another thread), e.g. on a
        CancelRequest or a statement timeout; that call then raises 57014."""
        self._con.interrupt()

    def close(self) -> None:
        """Release this session's cursor (the shared database stays for other sessions)."""
        with self._lock:
            self._con.close()

    # ------------------------------------------------------------------------- SHOW / SET

    def _show(self, raw: str, *, describe: bool = False) -> Result:
        key = " ".join(raw.strip('"').lower().split())
        key = SHOW_ALIASES.get(key, key)
        if key == "all":
            rows = [
                (n, v, None) for n, v in sorted(self._settings.values(), key=lambda e: e[0].lower())
            ]
            cols = [("name", 25), ("setting", 25), ("description", 25)]
            return Result(cols, [] if describe else list(rows), "SHOW")
        entry = self._settings.get(key)
        if entry is None:
            raise InvalidParameter(f'unrecognized configuration parameter "{raw}"')
        return Result([(entry[0], 25)], [] if describe else [(entry[1],)], "SHOW")

    def _set(self, text: str) -> Result:
        if re.match(r"SET\s+(SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b", text, re.I):
            return Result([], [], "SET")  # read committed, read only: nothing to change
        if re.match(r"SET\s+((SESSION|LOCAL)\s+)?(ROLE|SESSION\s+AUTHORIZATION)\b", text, re.I):
            raise Forbidden("dpproxy does not allow changing the role")
        if m := RESET_RE.match(text):
            name = m["name"].lower()
            if name == "all":
                self._settings = dict(self._startup)
            elif name in self._startup:
                self._check_settable(name)
                self._settings[name] = self._startup[name]
            store_settings(self._con, self._model, self._settings)
            return Result([], [], "RESET")
        m = SET_RE.match(text)
        if m is None or not m["value"]:
            raise SQLSyntaxError("syntax error in SET")
        name = " ".join(m["name"].strip('"').split())
        name = "TimeZone" if name.lower() == "time zone" else name
        self._check_settable(name.lower())
        value = setting_value(m["value"])
        if value is None:
            self._settings.pop(name.lower(), None)
            if name.lower() in self._startup:
                self._settings[name.lower()] = self._startup[name.lower()]
        else:
            self._put(name, value)
        store_settings(self._con, self._model, self._settings)
        return Result([], [], "SET")

    @staticmethod
    def _check_settable(key: str) -> None:
        if key in READ_ONLY_SETTINGS:
            raise InvalidParameter(f'parameter "{key}" cannot be changed')

    def _put(self, name: str, value: str) -> None:
        key = name.lower()
        display = self._settings[key][0] if key in self._settings else name
        self._settings[key] = (display, value)

    def _constant(self, key: str) -> str | None:
        if key == "version":
            return f"PostgreSQL {self.server_version} (dpproxy) on x86_64-pc-linux-gnu, 64-bit"
        if key == "database":
            return self.database
        if key == "user":
            return self.user
        path = setting_value(self._settings["search_path"][1]) or ""
        for item in path.split(","):
            schema = item.strip().strip('"')
            if schema in NAMESPACES:
                return schema
        return None

    # --------------------------------------------------------------------- running

    def _translate(
        self, tree: exp.Expression, params: Sequence[object], apply: bool
    ) -> _Translation:
        first = first_select(tree)
        projections = first.expressions if first is not None else []
        sources = relations_by_alias(first, self._model.specs) if first is not None else {}
        rewrite = Rewrite(self, params, apply)
        rewritten = rewrite.tree(tree.copy())
        try:
            sql = rewritten.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
        except SqlglotError as e:
            raise UnsupportedQuery(
                "this catalog query is not supported", log_detail=str(e)
            ) from None
        return _Translation(
            sql,
            tuple(output_name(p) for p in projections),
            tuple(
                type_hint(p.unalias(), sources, self._model.specs, self._column_types)
                for p in projections
            ),
            rewrite.session_dependent,
        )

    def _run(
        self, text: str, tree: exp.Expression, params: Sequence[object], *, apply: bool
    ) -> Result:
        key = (self._model_key, text, repr(list(params)), apply)
        translation = _TRANSLATIONS.get(key)
        if translation is None:
            translation = self._translate(tree, params, apply)
            if not translation.session_dependent:
                _TRANSLATIONS.put(key, translation)
        sql, names, hints = translation.sql, translation.names, translation.hints
        try:
            if apply:
                cursor = self._con.execute(sql)
                rows = cursor.fetchall()
                description = [(d[0], d[1]) for d in cursor.description or []]
            else:  # describe: bind only, evaluate nothing
                rows = []
                bound = self._con.execute("DESCRIBE " + sql).fetchall()
                description = [(r[0], r[1]) for r in bound]
        except duckdb.Error as e:
            raise duck_error(e) from None
        stars = None in names or len(names) != len(description)
        columns: list[tuple[str, int]] = []
        for i, d in enumerate(description):
            oid = result_oid(str(d[1]), self._array_of)
            name = str(d[0]) if stars else names[i] or str(d[0])
            # through * only the hints that travel as text either way (name, varchar)
            hint = WIRE_AS_TEXT.get(self._column_types.get(name, "")) if stars else hints[i]
            if hint and (oid == 25 or (oid == 1009 and hint in (1002, 1003))):
                oid = hint
            columns.append((name, oid))
        return Result(columns, [tuple(r) for r in rows], f"SELECT {len(rows)}")

"""Session statements: transactions, SET/RESET/SHOW, DISCARD, DEALLOCATE, dpproxy's settings.

:class:`SessionCommands` is the part of :class:`~dpproxy.server.session.Session` that answers
them without any database (``Session.execute`` asks :meth:`SessionCommands.session_command`
first): BEGIN/COMMIT/ROLLBACK and the end of a transaction's cursors, SET/RESET/SHOW of
PostgreSQL's settings and of dpproxy's own (``dpproxy.epsilon``, ``dpproxy.delta``,
``dpproxy.mechanism``, ``dpproxy.budget``), the ParameterStatus of a reported setting that
changed, DISCARD and DEALLOCATE.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from fractions import Fraction

from dpproxy.catalog.model import MechanismKind
from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    PrivacyParameterError,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpproxy.planning.plan import Method
from dpproxy.server import protocol, spending
from dpproxy.server.catalog import CatalogEmulator
from dpproxy.server.session_types import (
    ISOLATION,
    STATUS_PARAMETERS,
    TEXT_OID,
    Cursor,
    InFailedTransaction,
    Portal,
    Prepared,
    SessionHost,
    SessionState,
    UndefinedObject,
    UndefinedPreparedStatement,
    default_settings,
)
from dpproxy.server.sqltext import identifier as _identifier
from dpproxy.server.sqltext import raw_names as _raw_names
from dpproxy.server.sqltext import setting_assignment as _setting_assignment
from dpproxy.server.sqltext import words as _words
from dpproxy.server.worker import Result
from dpproxy.values import check_privacy_parameters, parse_privacy_number

_UTF8 = frozenset(("utf8", "unicode"))  # client_encoding spellings of UTF8


class SessionCommands:
    """Session statements, answered from the session's own state (a part of ``Session``)."""

    # What this part reads of the session (set by Session.__init__, or defined by Session).
    server: SessionHost
    user: str
    database: str
    status: str
    state: SessionState
    prepared: dict[str, Prepared]
    portals: dict[str, Portal]
    cursors: dict[str, Cursor]
    emulator: CatalogEmulator | None
    _catalog_answers: dict[str, Result]
    send: Callable[[bytes], None]

    # ------------------------------------------------------------- session statements

    def session_command(self, sql: str) -> Result | None:
        words = _words(sql)
        if not words:
            return None
        head = words[0]
        if head in ("BEGIN", "START"):
            if self.status == "I":
                self.status = "T"
            return Result([], [], "BEGIN")
        if head in ("COMMIT", "END"):
            failed = self.status == "E"  # PostgreSQL rolls a failed block back, and says so
            self._end_transaction(committed=self.status == "T")
            return Result([], [], "ROLLBACK" if failed else "COMMIT")
        if head == "ABORT":
            self._end_transaction(committed=False)
            return Result([], [], "ROLLBACK")
        if head == "ROLLBACK":
            if "TO" in words[1:3] or (len(words) > 2 and words[1] == "TO"):
                if self.status == "E":
                    self.status = "T"
                return Result([], [], "ROLLBACK")
            self._end_transaction(committed=False)
            return Result([], [], "ROLLBACK")
        if self.status == "E" and head not in ("SHOW",):
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if head == "SAVEPOINT":
            return Result([], [], "SAVEPOINT")
        if head == "RELEASE":
            return Result([], [], "RELEASE")
        if head == "SET":
            self._catalog_answers.clear()
            return self._set(sql, words)
        if head == "RESET":
            self._catalog_answers.clear()
            return self._reset(words)
        if head == "SHOW":
            return self._show(words)
        if head == "DISCARD":
            self._catalog_answers.clear()
            if words[1:2] == ["ALL"]:
                self.prepared.clear()
                self.portals.clear()
                self.cursors.clear()
                self.state = SessionState()
            return Result([], [], "DISCARD " + " ".join(words[1:2]))
        if head == "DEALLOCATE":
            rest = [w for w in words[1:] if w != "PREPARE"]
            if rest == ["ALL"]:
                self.prepared = {k: v for k, v in self.prepared.items() if not k}
                return Result([], [], "DEALLOCATE ALL")
            name = _identifier(_raw_names(sql)[-1]) if rest else ""
            if name not in self.prepared:
                raise UndefinedPreparedStatement(f'prepared statement "{name}" does not exist')
            del self.prepared[name]
            return Result([], [], "DEALLOCATE")
        if head == "COPY":
            raise UnsupportedQuery(
                "COPY is not supported by dpproxy",
                hint="every answer is an aggregate: use SELECT with COUNT, SUM, AVG, ...",
            )
        if head in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
            return None  # handled by the cursor functions below, via execute_cursor
        if head in ("LISTEN", "UNLISTEN", "NOTIFY", "LOCK", "VACUUM", "ANALYZE", "CHECKPOINT"):
            raise UnsupportedQuery(f"{head} is not supported by dpproxy")
        return None

    def _end_transaction(self, *, committed: bool) -> None:
        """COMMIT closes the cursors without HOLD; ROLLBACK every cursor the transaction
        declared (PostgreSQL's portal cleanup at transaction end)."""
        if self.status != "I":
            for name, cursor in list(self.cursors.items()):
                if not cursor.holdable or (cursor.in_transaction and not committed):
                    del self.cursors[name]
                    self.portals.pop(name, None)
                else:
                    cursor.in_transaction = False
        self.status = "I"

    def _set(self, sql: str, words: list[str]) -> Result:
        rest = words[1:]
        if rest[:1] in (["SESSION"], ["LOCAL"]):
            if rest[1:3] == ["CHARACTERISTICS", "AS"]:
                return Result([], [], "SET")
            rest = rest[1:]
        if rest[:1] == ["TRANSACTION"]:
            return Result([], [], "SET")
        names = _raw_names(sql)
        # names: the tokens after SET [SESSION|LOCAL]: name, [=|TO], value...
        if not rest:
            raise SQLSyntaxError("syntax error at end of input")
        if rest[0] == "TIME" and rest[1:2] == ["ZONE"]:
            value = " ".join(names[3 if words[1] not in ("SESSION", "LOCAL") else 4 :])
            self.state.settings["timezone"] = value.strip("'") or "UTC"
            return Result([], [], "SET", reported=self._reported(["timezone"]))
        name, value = _setting_assignment(sql)
        key = name.lower()
        if key.startswith("dpproxy."):
            self._set_dpproxy(key, value)
        else:
            if key == "client_encoding" and re.sub(r"[-_]", "", value).lower() in _UTF8:
                value, sql = "UTF8", "SET client_encoding = 'UTF8'"  # PostgreSQL's name
            self.state.settings[key] = value
            if self.emulator is not None:  # keep current_setting() in catalog queries in step
                with contextlib.suppress(DPProxyError):
                    self.emulator.execute(sql)
            return Result([], [], "SET", reported=self._reported([key]))
        return Result([], [], "SET")

    def _set_dpproxy(self, key: str, value: str) -> None:
        policy = self.server.engine.catalog.policy
        if key == "dpproxy.epsilon":
            eps = parse_privacy_number(value, "epsilon")
            check_privacy_parameters(eps, Fraction(0))  # refused now, not at the next query
            if eps > policy.epsilon:
                raise Forbidden(
                    "dpproxy.epsilon cannot exceed the schema's limit of "
                    f"{float(policy.epsilon):g}",
                    hint="a session may only lower ε; the data steward sets the limit",
                )
            self.state.epsilon = eps
        elif key == "dpproxy.delta":
            dlt = parse_privacy_number(value, "delta", allow_zero=True)
            check_privacy_parameters(Fraction(1), dlt)
            if dlt > policy.delta:
                raise Forbidden(
                    f"dpproxy.delta cannot exceed the schema's limit of {float(policy.delta):g}",
                    hint="a session may only lower δ; the data steward sets the limit",
                )
            self.state.delta = dlt
        elif key == "dpproxy.mechanism":
            word = value.strip().strip("'\"").lower()
            if word in ("auto", "default"):
                self.state.method = None
            elif word in {m.value for m in MechanismKind}:
                self.state.mechanism = MechanismKind(word)
            elif word in {m.value for m in Method}:
                self.state.method = Method(word)
            else:
                raise PrivacyParameterError(
                    f"unknown mechanism {value!r}",
                    hint="laplace or gaussian (the noise of sums and counts), a plan ("
                    + ", ".join(m.value for m in Method)
                    + "), or auto",
                )
        elif key == "dpproxy.budget":
            raise Forbidden("dpproxy.budget cannot be set by a session")
        else:
            raise UndefinedObject(f'unrecognized configuration parameter "{key}"')

    def _report(self, result: Result) -> None:
        """ParameterStatus for each reported setting the statement changed, as PostgreSQL
        sends it (drivers and BI tools track DateStyle, TimeZone, application_name …)."""
        for name, value in result.reported:
            self.send(protocol.parameter_status(name, value))

    def _reported(self, keys: list[str]) -> list[tuple[str, str]]:
        """(PostgreSQL's name, current value) of each of ``keys`` that is reported."""
        now = self.settings()
        return [(STATUS_PARAMETERS[k], now.get(k, "")) for k in keys if k in STATUS_PARAMETERS]

    def _reset(self, words: list[str]) -> Result:
        if words[1:2] == ["ALL"]:
            changed = [k for k in self.state.settings if k in STATUS_PARAMETERS]
            self.state = SessionState()
            return Result([], [], "RESET", reported=self._reported(changed))
        key = words[1].lower() if len(words) > 1 else ""
        if key == "dpproxy.epsilon":
            self.state.epsilon = None
        elif key == "dpproxy.delta":
            self.state.delta = None
        elif key == "dpproxy.mechanism":
            self.state.mechanism = None
            self.state.method = None
        else:
            if self.state.settings.pop(key, None) is not None:
                return Result([], [], "RESET", reported=self._reported([key]))
        return Result([], [], "RESET")

    def settings(self) -> dict[str, str]:
        base = default_settings(self.server.startup_params(self), self.user, self.database)
        base.update(self.state.settings)
        return base

    def _show(self, words: list[str]) -> Result:
        rest = [w.lower() for w in words[1:]]
        if rest == ["all"]:
            rows = [(k, v, "") for k, v in sorted(self.settings().items())]
            return Result(
                [("name", TEXT_OID), ("setting", TEXT_OID), ("description", TEXT_OID)], rows, "SHOW"
            )
        if rest[:2] == ["transaction", "isolation"]:
            return Result([("transaction_isolation", TEXT_OID)], [(ISOLATION,)], "SHOW")
        name = "".join(rest)
        if name == "timezone" or rest[:2] == ["time", "zone"]:
            name = "timezone"
        if name.startswith("dpproxy."):
            return Result([(name, TEXT_OID)], [(self._dpproxy_setting(name),)], "SHOW")
        value = self.settings().get(name)
        if value is None:
            raise UndefinedObject(f'unrecognized configuration parameter "{name}"')
        shown = STATUS_PARAMETERS.get(name, name)
        return Result([(shown if shown != name else name, TEXT_OID)], [(value,)], "SHOW")

    def _dpproxy_setting(self, name: str) -> str:
        engine = self.server.engine
        policy = engine.catalog.policy
        if name == "dpproxy.budget":
            return spending.describe_budget(engine.accountant.status(self.user))
        if name == "dpproxy.epsilon":
            eps = self.state.epsilon if self.state.epsilon is not None else policy.epsilon
            return f"{float(eps):g}"
        if name == "dpproxy.delta":
            return f"{float(self.state.delta if self.state.delta is not None else policy.delta):g}"
        if name == "dpproxy.mechanism":
            noise = (self.state.mechanism or policy.mechanism).value
            plan = self.state.method.value if self.state.method else "auto"
            return f"{noise}, plan {plan}"
        raise UndefinedObject(f'unrecognized configuration parameter "{name}"')

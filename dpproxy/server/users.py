"""The users file of ``dpproxy serve``: who may log in, as salted SCRAM verifiers.

The file is JSON, never holds a password, and is written only whole::

    {"version": 1,
     "users": {"ana": {"verifier": "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>",
                       "created": "2024-06-01T12:00:00+00:00"},
               "sam": {"verifier": "...", "created": "...", "role": "steward"}}}

A user's ``role`` is ``analyst`` when absent; a ``steward`` may also log in to the steward
console (``dpproxy console``), which analysts cannot.

Its default place is ``$DPPROXY_USERS``, else ``$XDG_CONFIG_HOME/dpproxy/users.json``, else
``~/.config/dpproxy/users.json`` (:func:`default_users_path`).

Security argument: a verifier is not a password, but it is what an attacker needs for an
offline dictionary attack, so :meth:`UserStore.save` writes the file with mode 0600 (created
that way, never widened afterwards) in a directory made with mode 0700, and replaces it
atomically: a temporary file in the same directory is written, flushed to disk and
``os.replace``-d over the old one, so a reader (a running server) sees the old file or the new
one, never half of one, and a crash leaves the old file intact. Salts come from
:mod:`secrets` (see :func:`dpproxy.server.scram.make_verifier`).

Two administrators changing the same file at the same moment are not serialised: the last
``save`` wins.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from dpproxy.errors import DPProxyError, InvalidParameter
from dpproxy.server.scram import Verifier, make_verifier, parse_verifier

ENV_USERS: Final = "DPPROXY_USERS"
FORMAT_VERSION: Final = 1
MAX_NAME_LENGTH: Final = 63  # PostgreSQL's NAMEDATALEN - 1
FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700
ANALYST: Final = "analyst"
STEWARD: Final = "steward"
ROLES: Final = (ANALYST, STEWARD)  # a steward may also log in to the console


class UsersFileError(DPProxyError):
    """The users file cannot be read, parsed or written (config_file_error)."""

    sqlstate = "F0000"


def default_users_path() -> Path:
    """``$DPPROXY_USERS``, else ``$XDG_CONFIG_HOME/dpproxy/users.json`` (an absolute
    XDG_CONFIG_HOME only, as the XDG spec says), else ``~/.config/dpproxy/users.json``."""
    explicit = os.environ.get(ENV_USERS, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "dpproxy" / "users.json"


def check_user_name(name: str) -> str:
    """``name`` if it can be a user name (1-63 characters, no NUL, not blank), else
    InvalidParameter (22023)."""
    if not name or not name.strip():
        raise InvalidParameter("a user name cannot be empty")
    if "\0" in name:
        raise InvalidParameter("a user name cannot contain a NUL character")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidParameter(
            f"user name too long ({len(name)} characters; at most {MAX_NAME_LENGTH})"
        )
    return name


class UserStore:
    """The users of one users file, in memory; nothing touches the disk but load and save.

    ``UserStore(path).load()`` reads it (a missing file is an empty store);
    :meth:`add` and :meth:`remove` change the memory copy and :meth:`save` writes it back.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._users: dict[str, dict[str, str]] = {}

    # ------------------------------------------------------------------------------- read

    def load(self) -> UserStore:
        """Read the file (replacing what is in memory); returns self.

        A missing file is an empty store. Anything else that is wrong (unreadable, not JSON,
        wrong version, a malformed verifier or user name) is a UsersFileError naming the path.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self._users = {}
            return self
        except (OSError, UnicodeDecodeError) as exc:
            raise self._error(f"cannot read it ({exc})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self._error(f"not valid JSON (line {exc.lineno}, column {exc.colno})") from None
        self._users = self._parse(data)
        return self

    def _parse(self, data: Any) -> dict[str, dict[str, str]]:
        if not isinstance(data, dict):
            raise self._error("expected a JSON object")
        if data.get("version") != FORMAT_VERSION:
            raise self._error(f"unsupported version {data.get('version')!r} (expected 1)")
        users = data.get("users")
        if not isinstance(users, dict):
            raise self._error('"users" must be an object')
        out: dict[str, dict[str, str]] = {}
        for name, entry in users.items():
            try:
                check_user_name(name)
            except InvalidParameter as exc:
                raise self._error(f"users.{name!r}: {exc.message}") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("verifier"), str):
                raise self._error(f'users.{name!r}: expected {{"verifier": "SCRAM-SHA-256$..."}}')
            try:
                parse_verifier(entry["verifier"])
            except ValueError as exc:
                raise self._error(f"users.{name!r}.verifier: {exc}") from None
            created = entry.get("created")
            out[name] = {"verifier": entry["verifier"]}
            if isinstance(created, str):
                out[name]["created"] = created
            role = entry.get("role", ANALYST)
            if role not in ROLES:
                raise self._error(f"users.{name!r}.role: {role!r} (expected one of {ROLES})")
            if role != ANALYST:
                out[name]["role"] = role
        return out

    def _error(self, problem: str) -> UsersFileError:
        return UsersFileError(
            f"users file {self.path}: {problem}",
            hint="fix or remove the file; `dpproxy user add` writes a new one",
        )

    def names(self) -> list[str]:
        """The user names, sorted."""
        return sorted(self._users)

    def __contains__(self, name: object) -> bool:
        return name in self._users

    def role(self, name: str) -> str | None:
        """``"analyst"`` (the default: queries through ``serve``) or ``"steward"`` (also the
        console, ``dpproxy console``); None if there is no such user."""
        entry = self._users.get(name)
        return None if entry is None else entry.get("role", ANALYST)

    def set_role(self, name: str, role: str) -> None:
        """Give user ``name`` a role of :data:`ROLES`; InvalidParameter (22023) otherwise."""
        if name not in self._users:
            raise InvalidParameter(f'user "{name}" does not exist')
        if role not in ROLES:
            raise InvalidParameter(f"unknown role {role!r}", hint=f"one of {', '.join(ROLES)}")
        if role == ANALYST:
            self._users[name].pop("role", None)
        else:
            self._users[name]["role"] = role

    def verifier(self, name: str) -> Verifier | None:
        """The verifier of user ``name``, or None if there is no such user."""
        entry = self._users.get(name)
        return None if entry is None else parse_verifier(entry["verifier"])

    # ----------------------------------------------------------------------------- change

    def add(self, name: str, password: str, *, replace: bool = False) -> None:
        """Add user ``name`` with a new verifier of ``password`` (or change it: ``replace``).

        InvalidParameter (22023) for a bad name, an empty or impossible password, or a user
        that already exists without ``replace``. A replaced user keeps its ``created`` time.
        """
        check_user_name(name)
        if name in self._users and not replace:
            raise InvalidParameter(
                f'user "{name}" already exists', hint="use --replace to change its password"
            )
        if not password:
            raise InvalidParameter("the password cannot be empty")
        try:
            verifier = make_verifier(password)
        except ValueError as exc:
            raise InvalidParameter(f"unusable password: {exc}") from None
        old = self._users.get(name, {})
        created = old.get("created") or datetime.now(UTC).isoformat(timespec="seconds")
        self._users[name] = {"verifier": verifier, "created": created}
        if "role" in old:  # a new password keeps the role
            self._users[name]["role"] = old["role"]

    def remove(self, name: str) -> None:
        """Remove user ``name``; InvalidParameter (22023) if there is none."""
        if name not in self._users:
            raise InvalidParameter(f'user "{name}" does not exist')
        del self._users[name]

    # ------------------------------------------------------------------------------ write

    def save(self) -> None:
        """Write the file atomically with mode 0600 (see the module docstring)."""
        text = json.dumps(
            {"version": FORMAT_VERSION, "users": {n: self._users[n] for n in self.names()}},
            indent=2,
            ensure_ascii=False,
        )
        directory = self.path.parent
        tmp: str | None = None
        try:
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            # mkstemp creates the file with mode 0600 and O_EXCL: never readable by others.
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), FILE_MODE)
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            tmp = None
            _fsync_directory(directory)
        except OSError as exc:
            raise UsersFileError(f"users file {self.path}: cannot write it ({exc})") from None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

"""Storage faults of the budget ledger: a clean SQLSTATE, never a dropped session or a raw
``sqlite3`` exception, and nothing released when its charge cannot be recorded (fail closed).

The faults are real, and work when the tests run as root (where ``chmod`` stops nothing):

* a full disk is a real 1 MiB tmpfs mounted for the test (``mount -t tmpfs``; skipped where
  mounting is not allowed) filled to the last block: SQLite gets ENOSPC (SQLITE_FULL) → 53100;
* a read-only ledger is a file made immutable with ``chattr +i`` (root) — opening it falls back
  to read-only (SQLITE_READONLY → 25006), and writes through a file already open fail with
  EPERM (SQLITE_IOERR → 58030) — or, when not root, ``chmod 0444``/``0555``.

``dpproxy serve`` refuses to start on a ledger it cannot write: one line, exit 1, at once (it
used to retry for the busy timeout, 60 s). A new ledger, its -wal and -shm are mode 0600.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dpproxy.accounting.ledger import Ledger
from dpproxy.engine import Engine
from dpproxy.errors import LedgerFull
from dpproxy.values import Cost
from tests.commands import dpproxy_command
from tests.integration.test_ledger_concurrency import launch, ready, stop
from tests.integration.test_single_flight import SLOW, GatedDuckDB, slow_database

DEFAULT = Cost(F(10), F(1, 10**5))
ROOT = os.geteuid() == 0


# ------------------------------------------------------------------ real faults


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB file system (tmpfs), unmounted afterwards."""
    where = tmp_path / "fs"
    where.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs CAP_SYS_ADMIN): {made.stderr}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> Path:
    """Write a file until the file system is full (ENOSPC); the file."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == 28, e  # ENOSPC
    finally:
        os.close(fd)
    return filler


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Files or directories no one (root included) can write: ``chattr +i`` as root, else
    ``chmod a-w``."""
    done: list[Path] = []
    try:
        for p in paths:
            if ROOT:
                made = subprocess.run(["chattr", "+i", str(p)], capture_output=True, text=True)
                if made.returncode != 0:
                    pytest.skip(f"chattr +i is not supported here: {made.stderr}")
            else:
                p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)
            done.append(p)
        yield
    finally:
        for p in done:
            if ROOT:
                subprocess.run(["chattr", "-i", str(p)], check=True)
            else:
                p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o200)


def _entries(ledger: Path) -> list[tuple[str, str]]:
    led = Ledger(ledger, "adult", DEFAULT)
    try:
        assert led.verify().ok
        return [(e.kind, str(e.body.get("query", ""))) for e in led.entries("ana")]
    finally:
        led.close()


# ------------------------------------------------------------------ file modes


def test_a_new_ledger_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "ledger.sqlite"
        led = Ledger(path, "adult", DEFAULT)
        led.grant("ana", DEFAULT)
        try:
            for suffix in ("", "-wal", "-shm"):
                mode = stat.S_IMODE(Path(f"{path}{suffix}").stat().st_mode)
                assert mode == 0o600, (suffix, oct(mode))
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        finally:
            led.close()
    finally:
        os.umask(old)


# ------------------------------------------------------------------ serving


def test_a_full_ledger_gives_53100_and_releases_nothing(
    tiny_fs: Path, tmp_path: Path, demo_db: Path
) -> None:
    ledger = tiny_fs / "ledger.sqlite"
    server = ready(launch(ledger, tmp_path / "serve.log"), tmp_path / "serve.log")
    try:
        with psycopg.connect(server.dsn("ana"), autocommit=True) as c:
            c.execute("SELECT COUNT(*) FROM adult WHERE age > 1").fetchall()
            filler = fill(tiny_fs)
            with pytest.raises(psycopg.errors.DiskFull) as err:
                c.execute("SELECT COUNT(*) FROM adult WHERE age > 2").fetchall()
            assert "the budget ledger is full" in str(err.value)
            assert c.execute("SELECT 1").fetchone() == (1,)  # the session goes on
            assert c.execute("SHOW dpproxy.budget").fetchone() is not None
            filler.unlink()
            c.execute("SELECT COUNT(*) FROM adult WHERE age > 3").fetchall()
    finally:
        stop(server)
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    released = [q for kind, q in _entries(ledger) if kind in ("reserve", "release")]
    assert not any("age > 2" in q for q in released)  # never reserved, never run
    assert sum("age > 1" in q for q in released) == sum("age > 3" in q for q in released) == 2


@pytest.mark.skipif(not ROOT, reason="needs chattr +i on a file the server holds open (root)")
def test_a_ledger_made_read_only_while_serving_gives_58030(tmp_path: Path, demo_db: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    server = ready(launch(ledger, tmp_path / "serve.log"), tmp_path / "serve.log")
    try:
        with psycopg.connect(server.dsn("ana"), autocommit=True) as c:
            c.execute("SELECT COUNT(*) FROM adult WHERE age > 1").fetchall()
            with read_only(ledger, Path(f"{ledger}-wal")):
                with pytest.raises(psycopg.Error) as err:
                    c.execute("SELECT COUNT(*) FROM adult WHERE age > 2").fetchall()
                assert err.value.sqlstate == "58030", err.value
                assert "the budget ledger cannot be read or written" in str(err.value)
                assert c.execute("SELECT 1").fetchone() == (1,)
            c.execute("SELECT COUNT(*) FROM adult WHERE age > 3").fetchall()
    finally:
        stop(server)
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    released = [q for kind, q in _entries(ledger) if kind == "release"]
    assert not any("age > 2" in q for q in released)


def _serve(ledger: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    out = subprocess.run(
        [
            *dpproxy_command(),
            "serve",
            "--trust",
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            str(ledger),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out, time.monotonic() - started


def _refused(out: subprocess.CompletedProcess[str], elapsed: float, sqlstate: str) -> str:
    assert out.returncode == 1, out
    assert elapsed < 30, f"took {elapsed:.0f} s to refuse"
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out.stderr
    assert f"(SQLSTATE {sqlstate})" in errors[0], errors[0]
    assert "dpproxy serving on" not in out.stderr
    return errors[0]


def test_serve_refuses_to_start_on_a_read_only_ledger(tmp_path: Path, demo_db: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger, "adult", DEFAULT).close()
    with read_only(ledger):
        line = _refused(*_serve(ledger), "25006")
    assert f"the budget ledger {ledger} is read-only" in line


def test_serve_refuses_to_start_when_the_ledger_cannot_be_created(
    tmp_path: Path, demo_db: Path
) -> None:
    where = tmp_path / "locked"
    where.mkdir()
    with read_only(where):
        line = _refused(*_serve(where / "ledger.sqlite"), "25006")
    assert "is read-only" in line
    line = _refused(*_serve(tmp_path), "58030")  # a directory, not a file
    assert "cannot be read or written" in line


def test_serve_refuses_to_start_on_a_full_ledger_disk(tiny_fs: Path, demo_db: Path) -> None:
    fill(tiny_fs)
    line = _refused(*_serve(tiny_fs / "ledger.sqlite"), "53100")
    assert "is full" in line


# ------------------------------------------------------------------ a charge that cannot be kept


def test_a_charge_that_cannot_be_recorded_releases_nothing(tiny_fs: Path, tmp_path: Path) -> None:
    """The disk fills while the query runs: its release cannot be logged, so its answer is
    withheld (53100); the reservation stays held, then counts as spent (never refunded) when
    the same query runs again and takes over its flight."""
    db, catalog = slow_database(tmp_path)
    ledger = Ledger(tiny_fs / "ledger.sqlite", "big", Cost(F(100), F(1, 1000)))
    backend = GatedDuckDB(db)  # the query waits until the disk is full
    engine = Engine(catalog, backend, accountant=ledger)
    cost = engine.plan(SLOW).cost
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(engine.run(SLOW, analyst="ana"))
        except BaseException as e:
            result.append(e)

    try:
        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 60
        while ledger.status("ana").reserved != cost and time.monotonic() < deadline:
            time.sleep(0.005)
        filler = fill(tiny_fs)
        backend.gate.set()
        t.join(timeout=120)
        assert len(result) == 1 and isinstance(result[0], LedgerFull), result
        assert ledger.status("ana").reserved == cost  # held: it may have read the data
        assert ledger.spent("ana") == Cost.zero()
        filler.unlink()
        again = engine.run(SLOW, analyst="ana")
        assert again.cost == cost
        assert ledger.spent("ana") == cost + cost
        assert ledger.status("ana").reserved == Cost.zero()
        kinds = [e.kind for e in ledger.entries("ana")]
        assert kinds == ["open", "reserve", "expire", "reserve", "release"], kinds
        assert ledger.verify().ok
    finally:
        backend.gate.set()
        engine.close()
        ledger.close()

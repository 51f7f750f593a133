"""How a connection is opened on the store file, migrated to :data:`SCHEMA_VERSION` by the steps of
:mod:`memkit.adapters._sqlite._migrations`."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from memkit._core._errors import ConfigError
from memkit.adapters._sqlite._foreign import not_a_database
from memkit.adapters._sqlite._migrations import MIGRATIONS, statements

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "connect", "migrate", "statements", "write_transaction", "write_unless_busy"]

SCHEMA_VERSION = 14


@contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any error roll back if SQLite has not already.

    SQLite ends the transaction itself on some errors (a full disk while writing the
    WAL, for one); rolling back again would raise "no transaction is active" and hide
    the error that says what happened.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with suppress(sqlite3.Error):  # the error being raised is the one worth reporting
                db.execute("ROLLBACK")
        raise


def write_unless_busy(db: sqlite3.Connection, sql: str, params: Sequence[object]) -> bool:
    """Run one write in its own transaction, or skip it if another writer holds the lock, the
    file is read-only or the row is too big (False). For caches a search saves: a search never
    waits for a writer, and a cache not saved is only built again by the next process."""
    timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 0")
    try:
        with write_transaction(db):
            db.execute(sql, params)
        return True
    except (sqlite3.OperationalError, sqlite3.DataError):
        return False
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def connect(
    path: str, busy_timeout_ms: int, prepare: Callable[[sqlite3.Connection], None] = lambda conn: None
) -> sqlite3.Connection:
    """Open ``path`` (creating its folder), set it up for several processes, migrate it, then
    ``prepare`` it; a file that is not a memkit database is a ConfigError."""
    if path != ":memory:":
        parent = Path(path).expanduser().resolve().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the folder for {path!r}: {exc}") from exc
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open SQLite database {path!r}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # A new file only (a file's page size is fixed when made): a vector row (1.5 KB at 384
        # dimensions) fills 4 KiB pages two to a page, a quarter left empty; 8 KiB pages take five.
        conn.execute("PRAGMA page_size = 8192")
        if path != ":memory:":
            _use_wal(conn, busy_timeout_ms)
        # NORMAL is durable across application crashes in WAL mode; only a power
        # cut can lose the last commits, and it makes small writes ~10x faster.
        conn.execute("PRAGMA synchronous = NORMAL")
        # A checkpointed WAL holds nothing a reader needs: cut it back to 4 MiB then (SQLite otherwise
        # keeps it at the largest size any write grew it to; a bulk load left as much again as the data).
        conn.execute("PRAGMA journal_size_limit = 4194304")
        migrate(conn)
        prepare(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise not_a_database(path, exc) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers
    # "locked" at once instead of calling the busy handler when several processes
    # open the same new file together; wait for it as the busy timeout would.
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"this database has schema version {version}; this memkit knows up to"
            f" {SCHEMA_VERSION}: upgrade memkit"
        )
    if version == SCHEMA_VERSION:
        return
    with write_transaction(conn):
        # Another process may have migrated while we waited for the lock.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, SCHEMA_VERSION + 1):
            step = MIGRATIONS[target]
            if callable(step):
                step(conn)
            else:
                for statement in statements(step):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
        conn.execute(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )

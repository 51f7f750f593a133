"""Reads that need neither memkit's event loop nor the store's worker thread: each calling thread
reads the file through a connection of its own (WAL lets readers run beside the writer and see
what it committed). For a caller that wants one memory now, as LangGraph's ``store.get`` does:
handing the read to two other threads and back costs far more than the read."""

from __future__ import annotations

import sqlite3
import threading

from memkit._core._errors import StorageError
from memkit._core._records import Record
from memkit.adapters._sqlite._sql import COLUMNS, row_record

__all__ = ["ThreadReads", "row_by_id"]


def row_by_id(conn: sqlite3.Connection, memory_id: str) -> Record | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchone()  # noqa: S608
    return None if row is None else row_record(row)


class ThreadReads:
    """Per-thread read-only connections on one store file, all closed by :meth:`close`."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self._path, self._timeout = path, busy_timeout_ms / 1000
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = path == ":memory:"  # a RAM database is the worker's connection alone

    def get(self, memory_id: str) -> Record | None:
        conn = self._connection()
        try:
            return row_by_id(conn, memory_id)
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite failed on {self._path!r}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._lock:
                if self._closed:
                    raise NotImplementedError("no reads outside the store's worker: closed, or a RAM database")
                # Not this thread's only user of the file: the store's own connection wrote and migrated it.
                conn = sqlite3.connect(
                    f"file:{self._path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False,
                    timeout=self._timeout,
                )
                self._opened.append(conn)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._opened:
                conn.close()
            self._opened.clear()

"""The key-value scratchpad the key-value tools run on: :class:`memkit.tools.MemoryTools`.

The seed's persistent memory for one experiment run (``write``, ``read``, ``list``, ``delete``,
``pattern_search``), in a ``kv_memory`` table of a SQLite file, each ``run_id`` apart. The
messages are part of the contract (users' tests match them word for word). ``write`` stores
strings only, as the tool's schema says: any other JSON value is refused and nothing is written,
so that what ``read`` returns is always exactly what was written. As in the seed, the tools never
raise for what they are given: a refused argument is answered with the seed's
``Error: Invalid arguments for tool '<name>': <why>``.
"""

from __future__ import annotations

import builtins
import functools
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from memkit._core._errors import InvalidInputError
from memkit._core._port import MemoryProvider
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_text, checked_as, checked_methods
from memkit.adapters._sqlite._foreign import not_a_database, tinydb_records
from memkit.adapters._sqlite._schema import write_transaction

__all__ = ["MemoryTools", "import_tinydb", "kv_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv_memory (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    UNIQUE (run_id, key)
)
"""


def _need_str(name: str, value: object, most: int, knob: str) -> str:
    """``value`` if it is text of at most ``most`` characters (``knob`` is the Limits field that sets it)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > most:
        raise InvalidInputError(
            f"{name} is {len(value)} characters; the limit is {most} (Limits.{knob})"
        )
    return check_text(value, name)


T = TypeVar("T")


def _open(path: Path) -> sqlite3.Connection:
    """A connection to the key-value table in ``path``; a file SQLite cannot read is a ConfigError
    saying what it is (the seed's TinyDB JSON file, say)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(_SCHEMA)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, ...: not about what the file is
            raise
        raise not_a_database(str(path), exc) from exc
    return conn


#: The key-value tools: the methods that answer a refusal in words.
_TOOL_METHODS = ("write", "read", "list", "delete", "pattern_search")


def _answering(name: str, method: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(method)
    def answered(self: MemoryTools, *args: Any, **kwargs: Any) -> str:
        try:
            return method(self, *args, **kwargs)
        except InvalidInputError as exc:
            if not self._refusals_as_text:
                raise
            return f"Error: Invalid arguments for tool '{name}': {exc}"

    return answered


def _answers_refusals(cls: type[T]) -> type[T]:
    """Make each tool method of ``cls`` answer an argument it refuses with the seed's error string
    instead of raising; outside the argument check, so a missing or mistyped argument is answered too."""
    for name in _TOOL_METHODS:
        setattr(cls, name, _answering(name, getattr(cls, name)))
    return cls


@_answers_refusals
@checked_methods
class MemoryTools:
    """A persistent key-value memory for one experiment run.

    Entries live in a ``kv_memory`` table of the SQLite file at ``db_path`` (the same
    file as a memkit store is fine); each ``run_id`` sees only its own keys. Several
    processes may share the file: every write is one transaction (WAL, busy timeout).

    Parameters
    ----------
    db_path
        SQLite file; it and its folders are created on first use.
    run_id
        Identifier of the run whose keys this instance reads and writes.
    limits
        Bounds on what one call may carry (see :class:`memkit.Limits`): a key or run id is at
        most ``max_id_chars``, a value ``max_content_chars``, a pattern ``max_query_chars``.

    Examples
    --------
    >>> tools = MemoryTools(db_path="data/memory.db", run_id="exp-001")  # doctest: +SKIP
    >>> tools.write("task_status", "in_progress")                         # doctest: +SKIP
    "Wrote value to key 'task_status'"
    """

    # The seed's tools answer every refusal in words; the MCP server, whose clients tell a tool
    # error from an answer, turns this off to have the refusal raised as InvalidInputError.
    _refusals_as_text = True

    def __init__(
        self, db_path: str | os.PathLike[str] = "data/memory.db", run_id: str = "default",
        *, limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.limits = limits
        self.db_path = Path(db_path)
        self.run_id = _need_str("run_id", run_id, limits.max_id_chars, "max_id_chars")
        self._lock = threading.Lock()
        self._conn = _open(self.db_path)

    def __repr__(self) -> str:
        return f"MemoryTools({str(self.db_path)!r}, run_id={self.run_id!r})"

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> MemoryTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key(self, key: object) -> str:
        return _need_str("key", key, self.limits.max_id_chars, "max_id_chars")

    def _keys(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key FROM kv_memory WHERE run_id = ? ORDER BY rowid", (self.run_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def write(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` (overwriting); returns a confirmation message."""
        self._key(key)
        _need_str("value", value, self.limits.max_content_chars, "max_content_chars")
        with self._lock:
            db = self._conn
            db.execute("BEGIN IMMEDIATE")  # check-then-write must not race another process
            try:
                updated = db.execute(
                    "UPDATE kv_memory SET value = ? WHERE run_id = ? AND key = ?", (value, self.run_id, key)
                ).rowcount
                if not updated:
                    db.execute(
                        "INSERT INTO kv_memory (run_id, key, value) VALUES (?, ?, ?)",
                        (self.run_id, key, value),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return f"Updated key '{key}' with new value" if updated else f"Wrote value to key '{key}'"

    def read(self, key: str) -> str:
        """The value stored under ``key``, or an error message."""
        self._key(key)
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM kv_memory WHERE run_id = ? AND key = ?", (self.run_id, key)
            ).fetchone()
        return row[0] if row is not None else f"Error: Key '{key}' not found"

    def list(self) -> str:
        """Every key of this run, comma-separated, in the order they were first written."""
        keys = self._keys()
        return ", ".join(keys) if keys else "No keys stored"

    def delete(self, key: str) -> str:
        """Remove ``key``; returns a confirmation or an error message."""
        self._key(key)
        with self._lock:
            removed = self._conn.execute(
                "DELETE FROM kv_memory WHERE run_id = ? AND key = ?", (self.run_id, key)
            ).rowcount
        return f"Deleted key '{key}'" if removed else f"Error: Key '{key}' not found"

    def pattern_search(self, pattern: str) -> str:
        """Keys containing ``pattern`` (case-sensitive substring), comma-separated."""
        _need_str("pattern", pattern, self.limits.max_query_chars, "max_query_chars")
        matching = [k for k in self._keys() if pattern in k]
        return ", ".join(matching) if matching else f"No keys found matching pattern '{pattern}'"


def kv_path(provider: MemoryProvider) -> str | None:
    """The SQLite file the key-value tools share with the store, if the store is one."""
    from memkit.adapters import SQLiteAdapter

    return provider.path if isinstance(provider, SQLiteAdapter) and provider.path != ":memory:" else None


@checked_as("import_tinydb")
def import_tinydb(
    source: str | os.PathLike[str], db_path: str | os.PathLike[str] = "data/memory.db",
    *, limits: Limits = DEFAULT_LIMITS,
) -> int:
    """Copy the key-value records of a TinyDB JSON file (the seed's first ``MemoryTools`` kept its
    scratchpad in one) into the ``kv_memory`` table of the SQLite file ``db_path``, where
    :class:`MemoryTools` reads them, each under its own ``run_id``. All or nothing: every record
    must be ``{"run_id": str, "key": str, "value": str}``, and a key its run already holds with
    another value is refused (one with the same value is skipped, so importing again changes
    nothing). Returns how many records were new.
    """
    records = tinydb_records(source)
    if records is None:
        raise InvalidInputError(f"{str(source)!r} is not a TinyDB JSON file")
    rows: dict[tuple[str, str], str] = {}
    for table, doc_id, record in records:
        where = f"record {doc_id} of table {table!r} in {str(source)!r}"
        try:
            run_id = _need_str("run_id", record.get("run_id"), limits.max_id_chars, "max_id_chars")
            key = _need_str("key", record.get("key"), limits.max_id_chars, "max_id_chars")
            value = _need_str("value", record.get("value"), limits.max_content_chars, "max_content_chars")
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None
        if rows.setdefault((run_id, key), value) != value:
            raise InvalidInputError(f"{where}: run {run_id!r} holds key {key!r} twice, with different values")
    conn = _open(Path(db_path))
    try:
        with write_transaction(conn):
            new = 0
            for (run_id, key), value in rows.items():
                held = conn.execute(
                    "SELECT value FROM kv_memory WHERE run_id = ? AND key = ?", (run_id, key)
                ).fetchone()
                if held is None:
                    conn.execute("INSERT INTO kv_memory (run_id, key, value) VALUES (?, ?, ?)", (run_id, key, value))
                    new += 1
                elif held[0] != value:
                    raise InvalidInputError(
                        f"run {run_id!r} already holds key {key!r} in {str(db_path)!r} with another value;"
                        " nothing was imported"
                    )
    finally:
        conn.close()
    return new

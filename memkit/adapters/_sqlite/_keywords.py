"""The keyword indexes of recently searched namespaces, kept in step with the store file.

The indexes consume the store's change feed and nothing else: memories are appended
with a ``seq`` that is never handed out twice (AUTOINCREMENT), and every deletion is
logged in ``memory_deletions`` by a trigger. An index that has applied every row up to
``seq`` and every deletion up to ``change`` is exactly the namespace at that point,
whichever process or connection wrote, so there is nothing to guess or re-count.
Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memkit._retrieval._cache import IndexCache
from memkit.adapters._sqlite._schema import write_unless_busy
from memkit.adapters._sqlite._traces import gc_paused

if TYPE_CHECKING:
    from memkit._retrieval._keyword import KeywordIndex

__all__ = ["KeywordCache", "feed_head", "lag", "snapshot"]


def feed_head(db: sqlite3.Connection) -> tuple[int, int]:
    """The feed's current position: the last seq handed out and the last deletion logged."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
    change = db.execute("SELECT coalesce(max(change), 0) FROM memory_deletions").fetchone()[0]
    return (row[0] if row else 0), change


@contextmanager
def snapshot(db: sqlite3.Connection) -> Iterator[None]:
    """Read everything inside from one snapshot (or the caller's transaction)."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


class KeywordCache:
    """In-memory BM25 indexes of the namespaces, kept current from the feed, in one :class:`IndexCache`."""

    def __init__(self, max_indexed: int, resave_min: int = 1_000) -> None:
        # An index is saved when building or loading it took this many changes (or a quarter
        # of its size): a new process then loads it instead of analysing every text again.
        self.resave_min = resave_min
        self._indexes: IndexCache[tuple[str, str], KeywordIndex] = IndexCache(max_indexed)
        self._seq = 0  # every cached index holds the store as of this seq ...
        self._change = 0  # ... and this deletion

    def __len__(self) -> int:
        return len(self._indexes)

    def _catch_up(self, db: sqlite3.Connection) -> None:
        """Apply what the feed holds past our position to every cached index."""
        seq, change = feed_head(db)
        if self._indexes and seq > self._seq:
            rows = db.execute(
                "SELECT seq, user_id, agent_id, content, created_us FROM memories WHERE seq > ? AND seq <= ?",
                (self._seq, seq),
            ).fetchall()
            added: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
            for key, user, agent, content, created in rows:
                if self._indexes.peek((user, agent)) is not None:
                    added.setdefault((user, agent), []).append((key, content, created))
            for (user, agent), texts in added.items():  # one batch a namespace: thousands after a bulk write
                index = self._indexes.peek((user, agent))
                assert index is not None
                with gc_paused():
                    index.add_many(texts)
        if self._indexes and change > self._change:
            for key, user, agent in db.execute(
                "SELECT seq, user_id, agent_id FROM memory_deletions WHERE change > ? AND change <= ?",
                (self._change, change),
            ):
                index = self._indexes.peek((user, agent))
                if index is not None:
                    index.remove(key)
        self._seq, self._change = seq, change

    def index(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> KeywordIndex:
        """The namespace's index as of now: cached, else loaded as saved and brought up to
        date from the feed, else built from the namespace's texts (and saved for next time)."""
        key = (user_id, agent_id)
        with snapshot(db):
            self._catch_up(db)
            index = self._indexes.get(key)
            if index is not None:
                return index
            with gc_paused():  # analysing a namespace makes millions of objects, none in a cycle
                index, replayed = self._load(db, user_id, agent_id)
            position = (self._seq, self._change)
        if replayed and replayed >= max(self.resave_min, len(index) // 4):
            with gc_paused():
                _save(db, user_id, agent_id, position, index)
        self._indexes.put(key, index)
        return index

    def _load(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> tuple[KeywordIndex, int]:
        """The namespace's index at our feed position, and how many changes that took past the saved one."""
        from memkit._retrieval._keyword import KeywordIndex, StaleIndexError  # numpy: loaded by the first search

        saved = db.execute(
            "SELECT seq, change, data FROM keyword_snapshots WHERE user_id = ? AND agent_id = ?", (user_id, agent_id)
        ).fetchone()
        index = KeywordIndex()
        if saved:
            try:
                index = KeywordIndex.from_bytes(saved[2])
            except StaleIndexError:  # analysed by another memkit version: rebuild (and resave) from the texts
                saved = None
        seq, change = (saved[0], saved[1]) if saved else (0, self._change)
        # From nothing, the namespace's index finds its rows; after a snapshot, the rows past it
        # (unary + keeps the planner off the namespace index, which would walk the whole namespace).
        namespace = "+user_id = ? AND +agent_id = ?" if seq else "user_id = ? AND agent_id = ?"
        rows = db.execute(
            f"SELECT seq, content, created_us FROM memories WHERE {namespace} AND seq > ? AND seq <= ?",  # noqa: S608
            (user_id, agent_id, seq, self._seq),
        ).fetchall()
        if rows:  # a loaded index turns its arrays into appendable lists on its first change
            index.add_many(rows)
        gone = db.execute(
            "SELECT seq FROM memory_deletions WHERE change > ? AND change <= ? AND user_id = ? AND agent_id = ?",
            (change, self._change, user_id, agent_id),
        ).fetchall()
        for (key,) in gone:
            index.remove(key)
        return index, len(rows) + len(gone)

    def save_current(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> None:
        """Save the namespace's index as of now (built, loaded or cached), unless already saved there."""
        index = self.index(db, user_id, agent_id)
        position = (self._seq, self._change)
        saved = db.execute(
            "SELECT seq, change FROM keyword_snapshots WHERE user_id = ? AND agent_id = ?", (user_id, agent_id)
        ).fetchone()
        if saved is None or tuple(saved) != position:
            _save(db, user_id, agent_id, position, index)

    def clear(self) -> None:
        self._indexes.clear()


def lag(db: sqlite3.Connection, table: str, user_id: str, agent_id: str) -> int:
    """How many changes to the namespace its snapshot in ``table`` (``keyword_snapshots`` or
    ``vector_snapshots``) lacks: rows added and rows deleted since it was saved (all, if none was)."""
    saved = db.execute(
        f"SELECT seq, change FROM {table} WHERE user_id = ? AND agent_id = ?",  # noqa: S608 - fixed names
        (user_id, agent_id),
    ).fetchone()
    seq, change = saved if saved else (0, 0)
    added = db.execute(
        "SELECT count(*) FROM memories WHERE user_id = ? AND agent_id = ? AND seq > ?", (user_id, agent_id, seq)
    ).fetchone()[0]
    removed = db.execute(
        "SELECT count(*) FROM memory_deletions WHERE change > ? AND user_id = ? AND agent_id = ?",
        (change, user_id, agent_id),
    ).fetchone()[0] if saved else 0
    return int(added) + int(removed)


def _save(db: sqlite3.Connection, user_id: str, agent_id: str, position: tuple[int, int], index: KeywordIndex) -> None:
    """Save ``index`` at feed ``position``; skipped when another writer holds the lock (a search never waits)."""
    data = index.to_bytes()
    # Never over a newer snapshot: a process that caught up less far (a closer, or a search behind
    # another) would only make every later process replay more.
    write_unless_busy(
        db,
        "INSERT INTO keyword_snapshots (user_id, agent_id, seq, change, data) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (user_id, agent_id) DO UPDATE SET seq = excluded.seq, change = excluded.change,"
        " data = excluded.data WHERE excluded.seq >= keyword_snapshots.seq"
        " AND excluded.change >= keyword_snapshots.change",
        (user_id, agent_id, *position, data),
    )

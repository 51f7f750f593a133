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
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from memkit._keyword import KeywordIndex

__all__ = ["KeywordCache", "feed_head", "snapshot"]


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
    """In-memory BM25 indexes, least recently searched dropped first past ``max_indexed`` memories."""

    def __init__(self, max_indexed: int) -> None:
        self.max_indexed = max_indexed
        self._indexes: OrderedDict[tuple[str, str], KeywordIndex] = OrderedDict()
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
            for key, user, agent, content, created in rows:
                index = self._indexes.get((user, agent))
                if index is not None:
                    index.add(key, content, created)
        if self._indexes and change > self._change:
            for key, user, agent in db.execute(
                "SELECT seq, user_id, agent_id FROM memory_deletions WHERE change > ? AND change <= ?",
                (self._change, change),
            ):
                index = self._indexes.get((user, agent))
                if index is not None:
                    index.remove(key)
        self._seq, self._change = seq, change

    def index(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> KeywordIndex:
        """The namespace's index as of now (built on first use, then kept by the feed)."""
        key = (user_id, agent_id)
        with snapshot(db):
            self._catch_up(db)
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return index
            index = KeywordIndex()
            index.add_many(db.execute(
                "SELECT seq, content, created_us FROM memories WHERE user_id = ? AND agent_id = ? AND seq <= ?",
                (user_id, agent_id, self._seq),
            ))
        self._indexes[key] = index
        while len(self._indexes) > 1 and sum(len(i) for i in self._indexes.values()) > self.max_indexed:
            self._indexes.popitem(last=False)
        return index

    def clear(self) -> None:
        self._indexes.clear()

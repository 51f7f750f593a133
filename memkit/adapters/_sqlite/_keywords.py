"""The keyword indexes of recently searched namespaces, kept in step with the store file.

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Sequence

from memkit._keyword import KeywordIndex
from memkit._records import Record

__all__ = ["KeywordCache"]


class KeywordCache:
    """In-memory BM25 indexes, least recently searched dropped first past ``max_indexed`` memories."""

    def __init__(self, max_indexed: int) -> None:
        self.max_indexed = max_indexed
        self._indexes: OrderedDict[tuple[str, str], KeywordIndex] = OrderedDict()
        self._seen_seq = 0
        self._data_version: int | None = None

    def __len__(self) -> int:
        return len(self._indexes)

    def start(self, db: sqlite3.Connection) -> None:
        self._seen_seq = db.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
        self._data_version = db.execute("PRAGMA data_version").fetchone()[0]

    def refresh(self, db: sqlite3.Connection) -> None:
        """Bring cached indexes up to date with rows other connections committed."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        self._data_version = version
        if not self._indexes:
            self._seen_seq = db.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
            return
        rows = db.execute(
            "SELECT seq, user_id, agent_id, content, created_us FROM memories WHERE seq > ? ORDER BY seq",
            (self._seen_seq,),
        ).fetchall()
        for seq, user, agent, content, created in rows:
            index = self._indexes.get((user, agent))
            if index is not None:
                index.add(seq, content, created)
        if rows:
            self._seen_seq = rows[-1][0]
        # another connection may also have deleted rows: drop any index whose size disagrees
        for key, index in list(self._indexes.items()):
            count = db.execute("SELECT count(*) FROM memories WHERE user_id = ? AND agent_id = ?", key).fetchone()[0]
            if count != len(index):
                del self._indexes[key]

    def index(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> KeywordIndex:
        self.refresh(db)
        key = (user_id, agent_id)
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
            return index
        index = KeywordIndex()
        index.add_many(db.execute(
            "SELECT seq, content, created_us FROM memories WHERE user_id = ? AND agent_id = ?", key
        ))
        self._indexes[key] = index
        while len(self._indexes) > 1 and sum(len(i) for i in self._indexes.values()) > self.max_indexed:
            self._indexes.popitem(last=False)
        return index

    def added(self, seqs: Sequence[int], records: Sequence[Record]) -> None:
        """Our own write committed with these seqs."""
        for seq, record in zip(seqs, records, strict=True):
            index = self._indexes.get((record.user_id, record.agent_id))
            if index is not None:
                index.add(seq, record.content, record.created_us)
        if seqs:
            self._seen_seq = seqs[-1]

    def removed(self, seq: int, user_id: str, agent_id: str) -> None:
        index = self._indexes.get((user_id, agent_id))
        if index is not None:
            index.remove(seq)

    def clear(self) -> None:
        self._indexes.clear()

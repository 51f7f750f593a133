"""Which embedder a store file is bound to, and its vectors cached per namespace.

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from memkit._errors import ConfigError
from memkit._records import Record
from memkit._retrieval import VectorIndex
from memkit.adapters._sqlite._keywords import feed_head, snapshot
from memkit.adapters._sqlite._schema import write_transaction

__all__ = ["EMBED_BATCH", "Vectors", "blob"]

EMBED_BATCH = 1_024
_ALL_ROWS = "SELECT seq, content FROM memories WHERE seq > ? ORDER BY seq LIMIT ?"


def blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def recorded(conn: sqlite3.Connection) -> tuple[str | None, int | None]:
    """The embedder name and dimension the file records (``None`` for a keyword-only store)."""
    rows = dict(
        conn.execute("SELECT key, value FROM store_meta WHERE key IN ('embedder_name', 'embedder_dim')").fetchall()
    )
    dim = rows.get("embedder_dim")
    return rows.get("embedder_name"), (int(dim) if dim is not None else None)


def _is_new(conn: sqlite3.Connection) -> bool:
    """No memories and no recorded choice of embedder (or of none) yet."""
    marked = conn.execute("SELECT 1 FROM store_meta WHERE key = 'keyword_only'").fetchone()
    return marked is None and conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is None


class Vectors:
    """The store's embedder (or none) and each searched namespace's vectors as one matrix."""

    def __init__(self, path: str, embedder: Any, unset: bool) -> None:
        self.path = path
        # Unset: the store decides (new stores get the default model); None: keyword-only if new.
        self.unset = unset
        self.embedder = embedder
        # The embedder this file's vectors came from when we could not load it: writes are refused.
        self.foreign: str | None = None
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._version = -1
        self._seq = 0  # cached matrices hold the store as of this seq and deletion (the change feed)
        self._change = 0

    def mismatch(self, name: str, dim: int | None, wanted: str, wanted_dim: int) -> ConfigError:
        return ConfigError(
            f"{self.path!r} holds vectors made by embedder {name!r} (dim {dim}), not {wanted!r}"
            f" (dim {wanted_dim}); memkit never mixes two embedders in one store. Open it with"
            f" embedder={name!r}, or re-embed every memory with the new one:"
            f" SQLiteAdapter({self.path!r}).reembed(<embedder>)"
            f" (from the shell: memkit.open({('sqlite:///' + self.path)!r}).reembed(<embedder>))"
        )

    def bind(self, conn: sqlite3.Connection) -> None:
        """Settle which embedder this handle uses, recording it in a store that has none yet."""
        from memkit.embeddings import DEFAULT_EMBEDDER, get_embedder

        name, dim = recorded(conn)
        if self.embedder is None:
            if name == DEFAULT_EMBEDDER:
                self.embedder = get_embedder("default")
            elif name is not None:
                self.foreign = name
                return
            elif self.unset and _is_new(conn):
                # A new store gets the shipped static model: hybrid search by default.
                self.embedder = get_embedder("default")
            else:
                if not self.unset and _is_new(conn):
                    # embedder=None on a new store: remember it, so reopening without
                    # embedder= keeps it keyword-only even while it is empty.
                    conn.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES ('keyword_only', '1')")
                return
        emb = self.embedder
        if name is not None:
            if name != emb.name or dim != emb.dim:
                raise self.mismatch(name, dim, emb.name, emb.dim)
            return
        with write_transaction(conn):
            name, dim = recorded(conn)  # another process may have bound one meanwhile
            if name is not None and (name != emb.name or dim != emb.dim):
                raise self.mismatch(name, dim, emb.name, emb.dim)
            if name is None:
                # A keyword-only store gains vectors for what it already holds.
                self.embed_all(conn)
                conn.execute("DELETE FROM store_meta WHERE key = 'keyword_only'")

    def embed_all(self, conn: sqlite3.Connection, bar: Any = None) -> int:
        """Embed and store every memory, then record the embedder (inside the caller's transaction)."""
        assert self.embedder is not None
        after, done = -1, 0
        while True:
            rows = conn.execute(_ALL_ROWS, (after, EMBED_BATCH)).fetchall()
            if not rows:
                break
            vectors = self.embed([r[1] for r in rows])
            conn.executemany(
                "INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                [(r[0], blob(v)) for r, v in zip(rows, vectors, strict=True)],
            )
            after, done = rows[-1][0], done + len(rows)
            if bar is not None:
                bar.update(len(rows))
        conn.executemany(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
            [("embedder_name", self.embedder.name), ("embedder_dim", str(self.embedder.dim))],
        )
        return done

    def embed(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise ConfigError(
                f"embedder {self.embedder.name!r} returned shape {vectors.shape},"
                f" expected {(len(texts), self.embedder.dim)}"
            )
        return vectors

    def embed_records(self, records: Sequence[Record]) -> np.ndarray | None:
        """The records' vectors (``None`` for a keyword-only store)."""
        if self.embedder is None:
            return None
        return np.concatenate(
            [self.embed([r.content for r in records[i : i + EMBED_BATCH]])
             for i in range(0, len(records), EMBED_BATCH)]
        )

    def check_writable(self) -> None:
        from memkit.embeddings import RETIRED_DEFAULTS

        if self.foreign in RETIRED_DEFAULTS:
            raise ConfigError(
                f"{self.path!r} holds vectors made by {self.foreign!r}, the default model of an"
                " earlier memkit; re-embed it with this one (a few seconds per 100k memories):"
                f" SQLiteAdapter({self.path!r}).reembed('default')"
            )
        if self.foreign is not None:
            raise ConfigError(
                f"{self.path!r} holds vectors made by embedder {self.foreign!r}; open it with"
                f" embedder=<that embedder> to write, or re-embed with SQLiteAdapter({self.path!r})"
                ".reembed(<embedder>)"
            )

    def sync(self, db: sqlite3.Connection) -> None:
        """Re-check the embedder when another connection committed (it may have re-embedded)."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return
        if self.embedder is not None:
            name, dim = recorded(db)
            if name is not None and (name != self.embedder.name or dim != self.embedder.dim):
                # Someone re-embedded the store with another model while we had it open; keep
                # failing (the version stays unseen) until this adapter is reopened or re-embeds.
                raise self.mismatch(name, dim, self.embedder.name, self.embedder.dim)
        self._version = version

    def index(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> VectorIndex:
        """The namespace's vectors as one matrix, loaded once and kept in step with our writes."""
        assert self.embedder is not None
        self.sync(db)
        with snapshot(db):
            self._catch_up(db)
            index = self._indexes.get((user_id, agent_id))
            if index is None:
                index = VectorIndex(self.embedder.dim)
                self._load(index, db.execute(
                    "SELECT v.seq, v.vector FROM memory_vectors v JOIN memories m ON m.seq = v.seq"
                    " WHERE m.user_id = ? AND m.agent_id = ? AND v.seq <= ? ORDER BY v.seq",
                    (user_id, agent_id, self._seq),
                ).fetchall())
                self._indexes[(user_id, agent_id)] = index
        return index

    @staticmethod
    def _load(index: VectorIndex, rows: Sequence[tuple[int, bytes]]) -> None:
        if rows:
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
            index.add([r[0] for r in rows], matrix.astype(np.float32))

    def _catch_up(self, db: sqlite3.Connection) -> None:
        """Apply the change feed past our position to every cached namespace (see _keywords)."""
        seq, change = feed_head(db)
        if self._indexes and seq > self._seq:
            groups: dict[tuple[str, str], list[tuple[int, bytes]]] = {}
            for key, vector, user, agent in db.execute(
                "SELECT v.seq, v.vector, m.user_id, m.agent_id FROM memory_vectors v JOIN memories m"
                " ON m.seq = v.seq WHERE v.seq > ? AND v.seq <= ? ORDER BY v.seq",
                (self._seq, seq),
            ):
                if (user, agent) in self._indexes:
                    groups.setdefault((user, agent), []).append((key, vector))
            for namespace, rows in groups.items():
                self._load(self._indexes[namespace], rows)
        if self._indexes and change > self._change:
            gone: dict[tuple[str, str], list[int]] = {}
            for key, user, agent in db.execute(
                "SELECT seq, user_id, agent_id FROM memory_deletions WHERE change > ? AND change <= ?",
                (self._change, change),
            ):
                gone.setdefault((user, agent), []).append(key)
            for namespace, keys in gone.items():
                if namespace in self._indexes:
                    self._indexes[namespace].remove(keys)
        self._seq, self._change = seq, change

    def clear(self) -> None:
        self._indexes.clear()

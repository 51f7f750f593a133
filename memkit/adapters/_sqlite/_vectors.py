"""Which embedder a store file is bound to, and its vectors cached per namespace.

A namespace's :class:`VectorIndex` follows the store's change feed exactly like a keyword
index (see :mod:`memkit.adapters._sqlite._keywords`), and is saved in the store file at a
feed position (``vector_snapshots``) so that a new process need not recompute what the
dense leg derives from the vectors: the namespace's moments (the z-score in fusion needs
them), its principal axes and every vector's projection on them (for the shortlist).
A process restores those and catches up from the feed. For a namespace with a shortlist
its first search reads only the few thousand vectors the shortlist rescores, by key; the
rest are read behind that search (:meth:`Vectors.settle`), or before it when it needs
them all (a filter, a deep query, a removal).

Why in the store file and not a side file mapped with numpy: one file is the whole store
(copy it, and the copy is fast on first search too), and a snapshot is written in one
SQLite transaction, so a crash mid-write leaves the previous snapshot (or none), never a
torn one, and no file can be paired with the wrong store. A side file would map lazily
and skip the read, but would need its own atomic replace, its own check that it belongs
to this file at this position, and its own clean-up.

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memkit._core._errors import ConfigError
from memkit._retrieval._fusion import _COARSE_DIMS, SHORTLIST_MIN, VectorIndex
from memkit.adapters._sqlbase import embedded
from memkit.adapters._sqlite._keywords import feed_head, snapshot
from memkit.adapters._sqlite._schema import write_transaction, write_unless_busy
from memkit.adapters._sqlite._vector_rows import SUPPLY, _arrays, _namespace_rows, _Replaced, _rows, _stored

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    import numpy as np

    from memkit.embeddings import Embedder

__all__ = ["EMBED_BATCH", "Vectors", "blob", "fits"]

EMBED_BATCH = 1_024
# SQLite's default limit on one value is 1e9 bytes. A namespace whose vectors are larger (about
# 585k at 384 dimensions) is saved without them (see _save), its vectors read from memory_vectors.
_MAX_BLOB = 900_000_000
# Marks, in the embedder column, a snapshot saved without its matrix. An older memkit looks its
# snapshot up by the embedder's exact name, so it never finds one of these (it builds from the rows,
# as it did for a namespace this large) and never reads an empty matrix as vectors.
_NO_MATRIX = " +rows"
_ALL_ROWS = "SELECT seq, content FROM memories WHERE seq > ? ORDER BY seq LIMIT ?"


def blob(vector: np.ndarray) -> bytes:
    import numpy as np

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

    def __init__(self, path: str, embedder: Embedder | None, unset: bool) -> None:
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
        # Like KeywordCache.resave_min: save a namespace whose loading took this many changes
        # (or a quarter of its size). Saving is left to settle(), after the search returns.
        self.resave_min = 1_000
        self._unsaved: set[tuple[str, str]] = set()
        self._partial = False  # some cached index was restored without its vectors

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
        from memkit.embeddings import DEFAULT_EMBEDDER, fingerprint, get_embedder, same_model

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
            if not same_model(name, emb) or dim != emb.dim:
                raise self.mismatch(name, dim, fingerprint(emb), emb.dim)
            return
        with write_transaction(conn):
            name, dim = recorded(conn)  # another process may have bound one meanwhile
            if name is not None and (not same_model(name, emb) or dim != emb.dim):
                raise self.mismatch(name, dim, fingerprint(emb), emb.dim)
            if name is None:
                # A keyword-only store gains vectors for what it already holds.
                self.embed_all(conn)
                conn.execute("DELETE FROM store_meta WHERE key = 'keyword_only'")

    def embed_all(self, conn: sqlite3.Connection, bar: Any = None) -> int:
        """Embed and store every memory, then record the embedder (inside the caller's transaction)."""
        from memkit.embeddings import fingerprint

        assert self.embedder is not None
        conn.execute("DELETE FROM vector_snapshots")  # saved from the vectors being replaced
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
            [("embedder_name", fingerprint(self.embedder)), ("embedder_dim", str(self.embedder.dim))],
        )
        return done

    def embed(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None
        return embedded(self.embedder, texts)

    def embed_contents(self, contents: Sequence[str]) -> np.ndarray | None:
        """The vectors of memories' contents (``None`` for a keyword-only store)."""
        if self.embedder is None:
            return None  # before numpy: a keyword-only write never needs it
        import numpy as np

        return np.concatenate(
            [self.embed(list(contents[i : i + EMBED_BATCH])) for i in range(0, len(contents), EMBED_BATCH)]
        )

    def check_writable(self) -> None:
        from memkit.embeddings import RETIRED_DEFAULTS

        # the model's name, without what a fingerprint adds to it (#digest, @version)
        if self.foreign is not None and self.foreign.split("#", 1)[0].split("@", 1)[0] in RETIRED_DEFAULTS:
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
            from memkit.embeddings import fingerprint, same_model

            name, dim = recorded(db)
            if name is not None and (not same_model(name, self.embedder) or dim != self.embedder.dim):
                # Someone re-embedded the store with another model while we had it open; keep
                # failing (the version stays unseen) until this adapter is reopened or re-embeds.
                raise self.mismatch(name, dim, fingerprint(self.embedder), self.embedder.dim)
        self._version = version

    def index(
        self, db: sqlite3.Connection, user_id: str, agent_id: str, depth: int = 0, filtered: bool = False
    ) -> VectorIndex:
        """The namespace's vectors as of now (call inside :func:`snapshot`, which the dense leg's
        reads of single vectors must share): cached, else restored as saved and brought up to
        date from the feed, else loaded from every vector. A query that will score every vector
        (``filtered``, or ``depth`` past the shortlist) gets them all in memory."""
        assert self.embedder is not None
        self.sync(db)
        with snapshot(db):
            self._catch_up(db)
            key = (user_id, agent_id)
            index = self._indexes.get(key)
            if index is None:
                index, replayed = self._load(db, user_id, agent_id)
                self._indexes[key] = index
                if replayed and replayed >= max(self.resave_min, len(index) // 4):
                    self._unsaved.add(key)
            if index.partial and (filtered or index.needs_all(depth)):
                index = self._whole(db, key)
            self._partial = self._partial or index.partial
        return index

    @property
    def unsettled(self) -> bool:
        """There are indexes to save or to read whole (see :meth:`settle`)."""
        return self._partial or bool(self._unsaved)

    def settle(self, db: sqlite3.Connection) -> bool:
        """Run after the search that loaded an index: save the indexes whose loading took many
        changes, and read :data:`SUPPLY` more of a restored index's vectors (its later searches
        then read none). Returns whether vectors are still lacking: the caller runs it again,
        queued behind whatever came meanwhile, so no call waits for more than one step."""
        if not self.unsettled:
            return False
        self.sync(db)  # re-embedded by another process since: the search after this one says so
        with snapshot(db):
            self._catch_up(db)
            for key in [k for k, index in self._indexes.items() if index.partial][:1]:
                self._supply(db, key)
            self._partial = any(index.partial for index in self._indexes.values())
            indexes = {k: self._to_save(db, k) for k in self._unsaved if k in self._indexes}
            position = (self._seq, self._change)
        self._unsaved.clear()
        assert self.embedder is not None
        for (user_id, agent_id), index in indexes.items():
            _save(db, user_id, agent_id, position, self.embedder.name, index)
        return self._partial

    def save_current(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> None:
        """Save the namespace's index as of now (built, restored or cached) with every vector in it."""
        assert self.embedder is not None
        key = (user_id, agent_id)
        self.sync(db)
        with snapshot(db):
            self.index(db, user_id, agent_id)
            index = self._to_save(db, key)
            position = (self._seq, self._change)
            saved = db.execute(
                "SELECT seq, change FROM vector_snapshots WHERE user_id = ? AND agent_id = ? AND embedder IN (?, ?)",
                (user_id, agent_id, self.embedder.name, self.embedder.name + _NO_MATRIX),
            ).fetchone()
        self._partial = any(i.partial for i in self._indexes.values())
        self._unsaved.discard(key)
        if not len(index):  # every memory deleted: a stale snapshot would only be replayed away
            write_unless_busy(db, "DELETE FROM vector_snapshots WHERE user_id = ? AND agent_id = ?", key)
        elif saved is None or tuple(saved) != position:
            _save(db, user_id, agent_id, position, self.embedder.name, index)

    def save_unsaved(self, db: sqlite3.Connection) -> None:
        """Save the namespaces whose loading took many changes (what :meth:`settle` saves behind
        the searches), without reading any more of a restored index's vectors than saving needs:
        for a process that searches once and exits (the command line's one-shot search)."""
        if not self._unsaved or self.embedder is None:
            return
        self.sync(db)
        with snapshot(db):
            self._catch_up(db)
            indexes = {k: self._to_save(db, k) for k in self._unsaved if k in self._indexes}
            position = (self._seq, self._change)
        self._unsaved.clear()
        for (user_id, agent_id), index in indexes.items():
            _save(db, user_id, agent_id, position, self.embedder.name, index)

    def _supply(self, db: sqlite3.Connection, key: tuple[str, str]) -> None:
        """Read the next :data:`SUPPLY` vectors a restored index lacks, from the vectors table.

        A restored index lacks only vectors of its snapshot's keys, none deleted since (a
        deletion reads them all first), so the namespace's rows between the first and the last
        of the keys asked for are exactly those keys; anything else reads them all from the
        snapshot instead."""
        import numpy as np

        index = self._indexes[key]
        keys = index.lacking(SUPPLY)
        rows = db.execute(
            "SELECT v.seq, v.vector FROM memory_vectors v JOIN memories m ON m.seq = v.seq"
            " WHERE v.seq >= ? AND v.seq <= ? AND +m.user_id = ? AND +m.agent_id = ? ORDER BY v.seq",
            (int(keys[0]), int(keys[-1]), *key),
        ).fetchall()
        found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if not np.array_equal(found, keys):
            self._whole(db, key)
            return
        index.supply(keys, np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1))

    def _to_save(self, db: sqlite3.Connection, key: tuple[str, str]) -> VectorIndex:
        """The cached index as :func:`_save` needs it: whole, unless it is saved without its vectors
        (then a partial one is saved as it is, none of its vectors read)."""
        index = self._indexes[key]
        return index if _without_matrix(index) else self._whole(db, key)

    def _whole(self, db: sqlite3.Connection, key: tuple[str, str]) -> VectorIndex:
        """The cached index with every vector in memory (reloaded if its snapshot was replaced)."""
        index = self._indexes[key]
        try:
            index.materialize()
        except _Replaced:
            del self._indexes[key]
            index, _ = self._load(db, *key)
            index.materialize()  # read in this transaction: the snapshot it names is there
            self._indexes[key] = index
        return index

    def _load(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> tuple[VectorIndex, int]:
        """The namespace's index at our feed position, and how many changes that took past the saved one."""
        assert self.embedder is not None
        index, seq, change = self._restore(db, user_id, agent_id)
        if seq:
            # After a snapshot, the rows past it (unary + keeps the planner off the namespace
            # index, which would walk the whole namespace).
            rows = db.execute(
                "SELECT v.seq, v.vector FROM memory_vectors v JOIN memories m ON m.seq = v.seq"
                " WHERE +m.user_id = ? AND +m.agent_id = ? AND v.seq > ? AND v.seq <= ? ORDER BY v.seq",
                (user_id, agent_id, seq, self._seq),
            ).fetchall()
        else:
            rows = _namespace_rows(db, user_id, agent_id, self._seq)
        self._add(index, rows)
        gone = [
            key for (key,) in db.execute(
                "SELECT seq FROM memory_deletions WHERE change > ? AND change <= ? AND user_id = ? AND agent_id = ?",
                (change, self._change, user_id, agent_id),
            )
            if index.position(key) is not None
        ]
        if gone:
            index.materialize()
            index.remove(gone)
        return index, len(rows) + len(gone)

    def _restore(self, db: sqlite3.Connection, user_id: str, agent_id: str) -> tuple[VectorIndex, int, int]:
        """The namespace's saved index and its feed position (an empty index at ours if none fits)."""
        import numpy as np

        assert self.embedder is not None
        dim, name = self.embedder.dim, self.embedder.name
        saved = db.execute(
            "SELECT seq, change, size, coarse_dim, head, coarse, embedder FROM vector_snapshots"
            " WHERE user_id = ? AND agent_id = ? AND embedder IN (?, ?) AND dim = ? AND seq <= ? AND change <= ?",
            (user_id, agent_id, name, name + _NO_MATRIX, dim, self._seq, self._change),
        ).fetchone()
        if saved is None:
            return VectorIndex(dim), 0, self._change
        seq, change, size, coarse_dim, head, coarse, embedder = saved
        if embedder != name and (not coarse_dim or db.execute(
            "SELECT 1 FROM memory_deletions WHERE change > ? AND change <= ? AND user_id = ? AND agent_id = ? LIMIT 1",
            (change, self._change, user_id, agent_id),
        ).fetchone()):
            # Saved without its vectors, and some of its memories deleted since: removing one from the
            # moments needs its vector, which went with the row. Built from the rows instead.
            return VectorIndex(dim), 0, self._change
        arrays = _arrays(head, coarse, size, dim, coarse_dim)
        where = (user_id, agent_id, seq, change, self.embedder.name)

        def whole() -> np.ndarray:
            row = db.execute(
                "SELECT matrix FROM vector_snapshots"
                " WHERE user_id = ? AND agent_id = ? AND seq = ? AND change = ? AND embedder = ?",
                where,
            ).fetchone()
            if row is None:
                raise _Replaced  # another process saved a newer one since we read this
            return np.frombuffer(row[0], dtype="<f4").reshape(size, dim)

        def stored() -> np.ndarray:
            return _stored(db, arrays["keys"], dim)

        if embedder == name and not coarse_dim:  # no shortlist: every query scores every vector
            arrays["matrix"] = whole()
        return VectorIndex.restore(
            dim, arrays, rows=lambda keys: _rows(db, keys, dim), whole=whole if embedder == name else stored
        ), seq, change

    @staticmethod
    def _add(index: VectorIndex, rows: Sequence[tuple[int, bytes]]) -> None:
        import numpy as np

        if rows:
            # One copy of the stored bytes, writable, which an empty index keeps as its matrix.
            joined = bytearray().join([r[1] for r in rows])
            matrix = np.frombuffer(joined, dtype="<f4").reshape(len(rows), -1)
            keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            index.add(keys, matrix.astype(np.float32, copy=False), adopt=True)

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
                self._add(self._indexes[namespace], rows)
        if self._indexes and change > self._change:
            gone: dict[tuple[str, str], list[int]] = {}
            for key, user, agent in db.execute(
                "SELECT seq, user_id, agent_id FROM memory_deletions WHERE change > ? AND change <= ?",
                (self._change, change),
            ):
                gone.setdefault((user, agent), []).append(key)
            for namespace, keys in gone.items():
                index = self._indexes.get(namespace)
                if index is None or all(index.position(k) is None for k in keys):
                    continue
                try:
                    index.materialize()  # removing a vector needs it (and its snapshot still holds it)
                except _Replaced:
                    del self._indexes[namespace]  # loaded afresh when next searched
                    continue
                index.remove(keys)
        self._seq, self._change = seq, change

    def clear(self) -> None:
        self._indexes.clear()
        self._unsaved.clear()
        self._partial = False


def _save(
    db: sqlite3.Connection, user_id: str, agent_id: str, position: tuple[int, int], embedder: str,
    index: VectorIndex,
) -> None:
    """Save ``index`` at feed ``position``; skipped when another writer holds the lock (nobody waits)."""
    import numpy as np

    base = embedder
    if len(index) * index.dim * 4 > _MAX_BLOB and not _without_matrix(index):
        return  # no shortlist to restore partially, or the projections too are over the limit
    if _without_matrix(index):
        embedder = embedder + _NO_MATRIX
    arrays = {name: np.ascontiguousarray(a) for name, a in index.state(not _without_matrix(index)).items()}
    matrix = arrays["matrix"].astype("<f4", copy=False) if "matrix" in arrays else np.zeros((0,), "<f4")
    coarse = arrays["coarse"].astype("<f4", copy=False) if "coarse" in arrays else None
    coarse_dim = arrays["basis"].shape[1] if "basis" in arrays else 0
    head = b"".join(
        arrays[name].astype(dtype, copy=False).tobytes()
        for name, dtype in (("keys", "<i8"), ("sum", "<f8"), ("moment", "<f8"), ("basis", "<f4"))
        if name in arrays
    )
    # The matrix and the projections go in as zero-filled blobs, then are copied into place in
    # slices: bound as parameters, SQLite would copy each whole (and again into the row it builds),
    # three times the matrix in memory at once for a closing writer.
    timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 0")  # nobody waits for a writer to save a cache
    try:
        with write_transaction(db):
            # Never over a newer snapshot of the same embedder: a process that caught up less far (a
            # closer or a search behind another) would only make every later process replay more.
            row = db.execute(
                "INSERT INTO vector_snapshots (user_id, agent_id, seq, change, embedder, size, dim,"
                " coarse_dim, head, coarse, matrix) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, zeroblob(?), zeroblob(?))"
                " ON CONFLICT (user_id, agent_id) DO UPDATE SET seq = excluded.seq, change = excluded.change,"
                " embedder = excluded.embedder, size = excluded.size, dim = excluded.dim,"
                " coarse_dim = excluded.coarse_dim, head = excluded.head, coarse = excluded.coarse,"
                " matrix = excluded.matrix WHERE vector_snapshots.embedder NOT IN (?, ?)"
                " OR (excluded.seq >= vector_snapshots.seq AND excluded.change >= vector_snapshots.change)"
                " RETURNING rowid",
                (user_id, agent_id, *position, embedder, len(arrays["keys"]), index.dim, coarse_dim, head,
                 0 if coarse is None else coarse.nbytes, matrix.nbytes, base, base + _NO_MATRIX),
            ).fetchone()
            if row is not None:
                for column, array in (("coarse", coarse), ("matrix", matrix)):
                    if array is not None and array.nbytes:
                        _fill(db, column, row[0], array.data.cast("B"))
    except (sqlite3.OperationalError, sqlite3.DataError):
        return  # another writer holds the lock, or the file is read-only: the next process saves
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _without_matrix(index: VectorIndex) -> bool:
    """Whether ``index`` is saved without its vectors: too large for one value (they stay in
    memory_vectors, which a restored index reads anyway, by key and then behind its searches), and
    with a shortlist whose projections fit. Cutting the matrix into several rows would need a new
    table (a schema migration) and a second copy of every vector; what the snapshot spares a new
    process is computing the moments, axes and projections."""
    n = len(index)
    return n * index.dim * 4 > _MAX_BLOB and not index.needs_all(0) and n * _COARSE_DIMS * 4 <= _MAX_BLOB


_SLICE = 1 << 24


def _fill(db: sqlite3.Connection, column: str, rowid: int, data: memoryview) -> None:
    """Copy ``data`` into the zero-filled blob ``column`` of the snapshot row, a slice at a time."""
    with db.blobopen("vector_snapshots", column, rowid) as target:
        for start in range(0, len(data), _SLICE):
            target.write(data[start : start + _SLICE])


def fits(db: sqlite3.Connection, vectors: Vectors, user_id: str, agent_id: str) -> bool:
    """Whether :func:`_save` can save the namespace's index (with its vectors, or else its shortlist
    projections without them): asked before building one, which would hold every vector in memory
    only for :func:`_save` to drop it."""
    assert vectors.embedder is not None
    count = int(db.execute(
        "SELECT count(*) FROM memories WHERE user_id = ? AND agent_id = ?", (user_id, agent_id)
    ).fetchone()[0])
    dim = vectors.embedder.dim
    return count * dim * 4 <= _MAX_BLOB or (
        count >= SHORTLIST_MIN and dim > _COARSE_DIMS and count * _COARSE_DIMS * 4 <= _MAX_BLOB
    )

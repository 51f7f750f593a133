"""A namespace's memories indexed in this process for search: the store keeps it current.

For stores whose database cannot rank one namespace's memories by memkit's BM25 or score
only that namespace's vectors (graph databases: their vector index ranks the whole graph).
Scoring the namespace's own vectors here gives every backend the same dense leg, at the
memory SQLite spends on it (4 bytes a dimension a memory).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from memkit._retrieval._fusion import DenseScores, VectorIndex, dense_leg
from memkit._retrieval._keyword import KeywordIndex

__all__ = ["NamespaceCache"]

F = TypeVar("F", bound=Hashable)


class NamespaceCache(Generic[F]):
    """What this process keeps of one namespace for searching: memkit's BM25 index of its
    memories (the keyword leg, scored as SQLite and in-memory score it) and its vectors in a
    :class:`~memkit._retrieval._fusion.VectorIndex` (the semantic leg, scored exactly as SQLite scores it).

    Memories are known by their string id; index keys follow the order they were added, which
    is write order when rows are added oldest first (fusion's ``context`` relies on it).
    ``fingerprint`` is the store's own summary of the namespace when the cache was read (for
    example a count and a checksum); the store compares it with the database's before each
    search and reads the namespace anew, or only what was added, when they differ.
    """

    def __init__(self, fingerprint: F) -> None:
        self.fingerprint = fingerprint
        self.vectors: VectorIndex | None = None
        self.index = KeywordIndex()
        self.key_of: dict[str, int] = {}  # memory id -> index key
        self.ids: list[str] = []  # index key -> memory id
        self.ages: list[tuple[int, int]] = []  # index key -> (created_us, seq): larger is newer
        # The adapter may be driven from several threads (sync facade, notebooks); the index is not
        # safe to search while it grows.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many memories are indexed."""
        return len(self.ids)

    def add(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Index rows with ``id``, ``content``, ``created_us``, ``seq`` (and ``embedding`` once the
        moments exist); how many were new."""
        with self._lock:
            fresh = [row for row in rows if row["id"] not in self.key_of]
            batch: list[tuple[int, str, int]] = []
            for row in fresh:
                key = len(self.ids)
                self.key_of[row["id"]] = key
                self.ids.append(row["id"])
                self.ages.append((int(row["created_us"]), int(row["seq"])))
                batch.append((key, row["content"], int(row["created_us"])))
            self.index.add_many(batch)
            if self.vectors is not None:
                self._fold(self.vectors, fresh)
            return len(fresh)

    def add_vectors(self, vectors: VectorIndex, rows: Sequence[Mapping[str, Any]]) -> None:
        """Fold rows' ``embedding`` into ``vectors`` (only of memories indexed here, so a memory
        written meanwhile is added once, when it is indexed)."""
        with self._lock:
            self._fold(vectors, rows)

    def _fold(self, vectors: VectorIndex, rows: Sequence[Mapping[str, Any]]) -> None:
        # A memory written by a process without an embedder has no vector: the dense leg skips it.
        present = [(self.key_of[row["id"]], row["embedding"]) for row in rows
                   if row["id"] in self.key_of and row.get("embedding") is not None]
        if present:
            vectors.add([k for k, _ in present], np.asarray([v for _, v in present], dtype=np.float32))

    def dense(self, query: np.ndarray, depth: int, until_us: int | None, extra: Iterable[str],
              exact: bool = False) -> DenseScores:
        """The ``depth`` memories (ids) nearest ``query`` created at or before ``until_us`` if
        given, with the cosine of ``extra`` ids too (the keyword hits); ``exact``: every vector
        scored, never the shortlist."""
        with self._lock:
            assert self.vectors is not None
            allowed = None if until_us is None else (
                lambda keys: {k for k in keys if self.ages[k][0] <= until_us})
            scores = dense_leg(self.vectors, query, depth, allowed,
                               [self.key_of[i] for i in extra if i in self.key_of], exact=exact)
            return DenseScores({self.ids[k]: c for k, c in scores.cosine.items()},
                               [self.ids[k] for k in scores.ranked], scores.mean, scores.std, scores.path)

    def neighbours(self, ids: Iterable[str], reach: int) -> dict[str, list[tuple[int, str]]]:
        """For fusion's ``context``: the memories written up to ``reach`` places around each of
        ``ids`` in this namespace, as ``(distance, id)`` (index keys follow write order)."""
        with self._lock:
            around = self.index.neighbours((self.key_of[i] for i in ids if i in self.key_of), reach)
            return {self.ids[key]: [(d, self.ids[other]) for d, other in near] for key, near in around.items()}

    def spoken_by(self, ids: list[str], query: str) -> set[str]:
        """For fusion's ``speaker``: the ``ids`` that are chat lines by someone ``query`` names."""
        with self._lock:
            keys = self.index.spoken_by((self.key_of[i] for i in ids if i in self.key_of), query)
            return {self.ids[key] for key in keys}

    def top(self, terms: list[str], k: int | None, until_us: int | None) -> list[tuple[str, float]]:
        """The best ``k`` (``None``: every) matching memories by BM25 as ``(id, score)``, ties
        newest first, created at or before ``until_us`` if given."""
        with self._lock:
            keys, scores = self.index.top(terms, len(self.index) if k is None else k)
            return [(self.ids[key], score) for key, score in zip(keys.tolist(), scores.tolist(), strict=True)
                    if until_us is None or self.ages[key][0] <= until_us]

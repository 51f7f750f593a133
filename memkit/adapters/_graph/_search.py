"""Search on a graph database: the keyword and semantic legs of one namespace, scored in this process.

The database narrows to one namespace and hands back rows; memkit's BM25 and the namespace's
own vectors (a :class:`~memkit.adapters._namespace_cache.NamespaceCache` per namespace) rank
them, and :func:`memkit.store._search.rank` fuses the legs as on every other backend.

A cache is valid while the database's :data:`~memkit.adapters._graph._cypher.NS_FINGERPRINT` of the
namespace (count, newest ``seq``, checksum of every ``seq``) equals the cache's, checked before
every search: another process's writes are read in, anything else (a delete, a reset) rebuilds
the cache. This process's writes fold in; its deletes and resets drop the cache.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from memkit._core._filters import matches
from memkit._core._graph_schema import memory_key, node_key
from memkit._core._models import MemoryItem
from memkit._core._records import Record
from memkit._retrieval._cache import IndexCache
from memkit._retrieval._fusion import DenseScores, VectorIndex
from memkit._retrieval._keyword import analyze_query
from memkit.adapters._graph._cypher import CHECKSUM, NS_FINGERPRINT, NS_PAGE, PAGE, Statement
from memkit.adapters._namespace_cache import NamespaceCache
from memkit.store import _ops as ops
from memkit.store import _search as _pipeline

__all__ = ["Fingerprint", "GraphSearch", "record_of"]

Fingerprint = tuple[int, int | None, int]  # (memories, newest seq, checksum of seqs): see NS_FINGERPRINT
Read = Callable[[str, dict[str, Any]], Awaitable[list[dict[str, Any]]]]
Embed = Callable[[list[str]], list[list[float]]]


def record_of(row: Mapping[str, Any]) -> Record:
    """A memory row as the Cypher statements return it (``_MEMORY_FIELDS``) -> a record."""
    return Record(
        id=row["id"], user_id=row["user_id"], agent_id=row["agent_id"], content=row["content"],
        metadata=json.loads(row["metadata"]), created_us=int(row["created_us"]),
    )


class GraphSearch:
    """The ranked search of a graph store: its namespace caches and the legs that read them.

    ``read`` runs one read statement (the store's, so schema set-up and error translation
    apply); ``hits`` is the dialect's statement for the rows of hits; ``embed``/``dim`` are the
    store's embedder (``None``: keyword only); ``max_indexed``: how many memories the namespace
    caches may hold together (the least recently searched namespaces are dropped first).
    """

    def __init__(self, read: Read, hits: str, embed: Embed | None, dim: int | None, max_indexed: int) -> None:
        self._read = read
        self._hits = hits
        self._embed = embed
        self._dim = dim
        # Per namespace key: its keyword index and vectors, while its fingerprint holds (a namespace
        # dropped for the budget is read again when next searched).
        self._caches: IndexCache[str, NamespaceCache[Fingerprint]] = IndexCache(max_indexed)
        self._lock = threading.Lock()  # the store may be driven from several threads

    # -- keeping the caches current with this process's own writes ------------------------------

    def written(self, statements: Sequence[Statement]) -> None:
        """Fold this process's new memories into the cached namespaces (another process's writes
        are caught by the fingerprint check before each search)."""
        for _, params in statements:
            for memory in params["memories"]:
                with self._lock:
                    cache = self._caches.peek(memory["ns_key"])
                if cache is not None and cache.add([memory]):
                    count, last, checksum = cache.fingerprint
                    seq = int(memory["seq"])
                    cache.fingerprint = (count + 1, max(last or 0, seq), checksum + seq % CHECKSUM)

    def forget(self, ns: str | None = None) -> None:
        """Drop namespace key ``ns``'s cache (``None``: every cache)."""
        with self._lock:
            if ns is None:
                self._caches.clear()
            else:
                self._caches.pop(ns)

    # -- the legs ------------------------------------------------------------------------------

    async def ranked(self, op: ops.SearchOp) -> list[MemoryItem]:
        """Rank the search's namespace against its (non-empty) query."""
        found: dict[str, Record] = {}
        ages: dict[str, tuple[int, int]] = {}
        keyword: list[tuple[str, float]] = []
        cache = await self._namespace_cache(op, vectors=op.mode != "keyword")
        if op.mode != "semantic":
            for record, seq, score in await self._keyword(op, cache):
                found[record.id], ages[record.id] = record, (record.created_us, seq)
                keyword.append((record.id, score))
        dense = None
        if op.mode != "keyword":
            dense = await self._dense(op, found, ages, cache)
        ranked = _pipeline.rank(op, keyword, dense, lambda keys: ages, cache.neighbours, cache.spoken_by)
        return [found[k].to_item(score, details) for k, score, details in ranked]

    @staticmethod
    def _in(record: Record, op: ops.SearchOp) -> bool:
        # Re-checked in Python: the namespace (FalkorDB's range index trims whitespace) and the filters.
        return (record.user_id, record.agent_id) == (op.user_id, op.agent_id) and matches(
            op.conditions, record.metadata)

    async def _keyword(
        self, op: ops.SearchOp, cache: NamespaceCache[Fingerprint]
    ) -> list[tuple[Record, int, float]]:
        """The keyword leg: the namespace's best ``depth`` memories by memkit's BM25, ties newest
        first, as ``(record, seq, score)``. ``as_of`` is applied from the cache; filters on the
        rows read back."""
        terms = analyze_query(op.query)
        if not terms:
            return []
        depth = op.depth
        exact = not op.conditions and op.until_us is None
        ranked = cache.top(terms, depth if exact else None, op.until_us)
        ns = node_key("Namespace", op.user_id, op.agent_id)
        page = depth if not op.conditions else max(depth, PAGE)
        hits: list[tuple[Record, int, float]] = []
        for start in range(0, len(ranked), page):
            chunk = ranked[start : start + page]
            rows = await self._rows(ns, [i for i, _ in chunk])
            for memory_id, score in chunk:
                row = rows.get(memory_id)  # gone if another process deleted it since the fingerprint
                if row is not None and self._in(record := record_of(row), op):
                    hits.append((record, int(row["seq"]), score))
                    if len(hits) == depth:
                        return hits
        return hits

    async def _rows(self, ns: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rows of memories ``ids`` of namespace key ``ns`` that still exist, by id."""
        if not ids:
            return {}
        rows = await self._read(self._hits, {"keys": [memory_key(i) for i in ids], "ns": ns})
        return {row["id"]: row for row in rows}

    async def _dense(
        self, op: ops.SearchOp, found: dict[str, Record], ages: dict[str, tuple[int, int]],
        cache: NamespaceCache[Fingerprint],
    ) -> DenseScores:
        """The semantic leg, scored in this process over the namespace's own vectors: the best
        ``depth`` memories that pass the filters, the cosine of every keyword hit in ``found``,
        and the namespace's mean and spread of cosine."""
        assert self._embed is not None
        ns = node_key("Namespace", op.user_id, op.agent_id)
        depth = op.depth
        query = np.asarray(self._embed([op.query])[0], dtype=np.float32)
        keyword_ids = list(found)
        total = len(cache.vectors) if cache.vectors is not None else 0
        want = depth
        # The filters are checked on the rows read back, best first: under a filter the namespace's
        # vectors are all scored exactly (its rows that pass are not known here), so no true
        # neighbour of a selective filter is lost to the shortlist.
        filtered = bool(op.conditions)
        rejected: set[str] = set()
        while True:
            scores = cache.dense(query, want, op.until_us, keyword_ids, exact=filtered)
            missing = [i for i in scores.ranked if i not in found and i not in rejected]
            rows = await self._rows(ns, missing)
            rejected.update(missing)
            for memory_id, row in rows.items():
                # a filter's misses are read once per search: the next, wider pass skips them
                record = record_of(row)
                if self._in(record, op):
                    found[memory_id], ages[memory_id] = record, (record.created_us, int(row["seq"]))
            passing = [i for i in scores.ranked if i in found][:depth]
            if len(passing) >= depth or want >= total:
                break
            want = min(want * 4, total)  # a selective filter: look deeper
        cosine = {i: scores.cosine[i] for i in (*keyword_ids, *passing) if i in scores.cosine}
        return DenseScores(cosine, passing, scores.mean, scores.std, scores.path)

    # -- reading a namespace into its cache ------------------------------------------------------

    async def _namespace_cache(
        self, op: ops.SearchOp, *, vectors: bool
    ) -> NamespaceCache[Fingerprint]:
        """The namespace's search cache (with its vectors if ``vectors``), current with the
        database: one aggregate query when nothing changed, new memories read in when only memories
        were added, else read anew."""
        ns = node_key("Namespace", op.user_id, op.agent_id)
        row = (await self._read(NS_FINGERPRINT, {"ns": ns}))[0]
        fingerprint = (int(row["n"]), None if row["last"] is None else int(row["last"]), int(row["checksum"] or 0))
        with self._lock:
            cache = self._caches.get(ns)
        if cache is not None and cache.fingerprint != fingerprint and not await self._catch_up(
                cache, ns, fingerprint, op):
            cache = None
        vectors = vectors and self._dim is not None
        fresh = cache is None
        if cache is None:
            cache = NamespaceCache(fingerprint)
        if fresh or (vectors and cache.vectors is None):
            # Built aside and set at the end: this process's writes meanwhile do not fold into half an index.
            built = VectorIndex(int(self._dim)) if vectors and self._dim is not None else None
            async for rows in self._namespace_pages(ns, op, text=fresh, vectors=vectors):
                if fresh:
                    cache.add(rows)
                if built is not None:
                    cache.add_vectors(built, rows)
            if built is not None:
                cache.vectors = built
            with self._lock:
                self._caches.put(ns, cache)
        return cache

    async def _catch_up(
        self, cache: NamespaceCache[Fingerprint], ns: str, fingerprint: Fingerprint,
        op: ops.SearchOp,
    ) -> bool:
        """Read the memories written since the cache's newest one; True if that explains the
        database's ``fingerprint`` (only additions), False if the cache must be read anew."""
        count, last, checksum = cache.fingerprint
        rows = [row async for page in self._namespace_pages(
            ns, op, text=True, vectors=cache.vectors is not None,
            after=-(2**62) if last is None else last, exact=False) for row in page]
        new = [row for row in rows if row["id"] not in cache.key_of]
        seqs = [int(row["seq"]) for row in new]
        projected = (count + len(new), max([last or 0, *seqs]) if count + len(new) else None,
                     checksum + sum(seq % CHECKSUM for seq in seqs))
        if projected != fingerprint:
            return False
        cache.add([row for row in new if (row["user_id"], row["agent_id"]) == (op.user_id, op.agent_id)])
        cache.fingerprint = fingerprint
        return True

    async def _namespace_pages(
        self, ns: str, op: ops.SearchOp, *, text: bool, vectors: bool,
        after: int = -(2**62), exact: bool = True,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The namespace's memories written at or after seq ``after``, in write order, a page at a
        time; ``exact``: only rows of exactly the search's namespace."""
        after_id = ""
        while True:
            rows = await self._read(NS_PAGE[(text, vectors)],
                                    {"ns": ns, "after": after, "after_id": after_id, "limit": PAGE})
            yield [row for row in rows if not exact
                   or (row["user_id"], row["agent_id"]) == (op.user_id, op.agent_id)]
            if len(rows) < PAGE:
                return
            after, after_id = rows[-1]["seq"], rows[-1]["id"]

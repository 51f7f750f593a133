"""A process-local adapter for tests and throwaway runs; nothing survives the process."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np

from memkit import _marks, _pipeline, _recall
from memkit._errors import ConfigError, InvalidInputError
from memkit._filters import matches, parse_filters
from memkit._keyword import KeywordIndex, analyze_query
from memkit._marks import Mark
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._recall import Recall, checked_recalls
from memkit._records import Record, records_from_items
from memkit._retrieval import HybridConfig, Neighbours, VectorIndex, dense_leg, modes_for
from memkit._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_id,
    check_limit,
    check_namespace,
    check_read,
    check_scope,
)
from memkit.adapters._plumbing import RecordWriter, namespace_infos, timed_health, trace_count

__all__ = ["InMemoryAdapter", "MockMemoryAdapter"]


class InMemoryAdapter(RecordWriter):
    """Keep memories in a dict; same rules and errors as every other adapter.

    Keyword search is the same per-namespace BM25 index as the SQLite adapter's;
    with ``embedder=`` semantic and hybrid search use the same fusion code too.

    Examples
    --------
    >>> mem = InMemoryAdapter()
    >>> memory_id = await mem.add("TP53 is mutated in sample 7", "u1", "bio")  # doctest: +SKIP
    """

    provider_name = "memory"
    searches_as_of = True

    def __init__(
        self,
        *,
        limits: Limits = DEFAULT_LIMITS,
        embedder: object = None,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
    ) -> None:
        from memkit.embeddings import Embedder, get_embedder

        if not isinstance(record_recalls, bool):
            raise ConfigError(f"record_recalls must be True or False, got {record_recalls!r}")
        self.record_recalls = record_recalls
        self._recalls: dict[str, dict[str, Any]] = {}  # recall bodies, recording order
        self._marks: dict[str, str] = {}  # mark id -> its JSON
        self.limits = limits
        if hybrid is not None and not isinstance(hybrid, HybridConfig):
            raise ConfigError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
        self.hybrid = hybrid or HybridConfig()
        self.embedder: Embedder | None = None if embedder is None else get_embedder(embedder)
        self._vectors: dict[str, np.ndarray] = {}
        self._records: dict[str, Record] = {}
        self._seq: dict[str, int] = {}
        self._by_seq: dict[int, Record] = {}
        self._indexes: dict[tuple[str, str], KeywordIndex] = {}
        self._next_seq = 0
        # A thread lock, not an asyncio one: the adapter may be driven from
        # several event loops (sync facade, notebooks, worker threads).
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> InMemoryAdapter:
        """``memory://`` or ``memory://?embedder=default&record_recalls=true`` (the factory calls this)."""
        from memkit._url import bool_option, embedder_option, query_options

        query = query_options(url)
        if "embedder" in query:
            options.setdefault("embedder", embedder_option(query.pop("embedder")))
        if "record_recalls" in query:
            options.setdefault("record_recalls", bool_option("record_recalls", query.pop("record_recalls")))
        if query:
            raise ConfigError(f"unknown memory:// URL options: {', '.join(sorted(query))}")
        return cls(**options)

    def __repr__(self) -> str:
        return f"InMemoryAdapter({len(self._records)} memories)"

    # -- writes ---------------------------------------------------------------

    def _insert(self, records: list[Record]) -> list[str]:
        vectors = None
        if self.embedder is not None and records:
            vectors = np.concatenate(
                [self.embedder.embed([r.content for r in records[i : i + 1024]]) for i in range(0, len(records), 1024)]
            ).astype(np.float32)
        with self._lock:
            clash = next((r.id for r in records if r.id in self._records), None)
            if clash is not None:
                raise InvalidInputError(f"a memory with id {clash!r} already exists")
            for record in records:
                self._records[record.id] = record
                self._seq[record.id] = self._next_seq
                self._by_seq[self._next_seq] = record
                index = self._indexes.setdefault((record.user_id, record.agent_id), KeywordIndex())
                index.add(self._next_seq, record.content, record.created_us)
                self._next_seq += 1
            if vectors is not None:
                self._vectors.update((r.id, v) for r, v in zip(records, vectors, strict=True))
        return [r.id for r in records]

    async def _store(self, records: list[Record]) -> list[str]:
        return self._insert(records)

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False
    ) -> list[str]:
        return self._insert(records_from_items(items, self.limits))

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete one memory; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        memory_id, user_id, agent_id = check_scope(memory_id, user_id, agent_id, self.limits)
        with self._lock:
            record = self._records.get(memory_id)
            if record is None:
                return False
            if user_id is not None and record.user_id != user_id:
                return False
            if agent_id is not None and record.agent_id != agent_id:
                return False
            del self._records[memory_id]
            seq = self._seq.pop(memory_id)
            del self._by_seq[seq]
            self._indexes[(record.user_id, record.agent_id)].remove(seq)
            self._vectors.pop(memory_id, None)
            return True

    async def reset(self) -> bool:
        with self._lock:
            self._records.clear()
            self._seq.clear()
            self._by_seq.clear()
            self._indexes.clear()
            self._vectors.clear()
            self._recalls.clear()
            self._marks.clear()
        return True

    # -- reads ----------------------------------------------------------------

    def _newest_first(self, user_id: str, agent_id: str, filters: object, until_us: int | None = None) -> list[Record]:
        user, agent = check_namespace(user_id, agent_id, self.limits)
        conditions = parse_filters(filters)
        with self._lock:
            rows = [
                r
                for r in self._records.values()
                if r.user_id == user and r.agent_id == agent and matches(conditions, r.metadata)
                and (until_us is None or r.created_us <= until_us)
            ]
            seq = dict(self._seq)
        rows.sort(key=lambda r: (r.created_us, seq[r.id]), reverse=True)
        return rows

    @property
    def search_modes(self) -> tuple[str, ...]:
        """The ``mode=`` values :meth:`search` answers (all three with an embedder, else keyword)."""
        return modes_for(self.embedder is not None)

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        hybrid: HybridConfig | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryItem]:
        """Search one namespace (keyword BM25; with an embedder also semantic and hybrid, fused
        exactly as the SQLite adapter does); an empty query lists it newest first.

        ``as_of``: only memories that existed then (see :class:`memkit.SupportsAsOf`).
        """
        request = _pipeline.prepare(self, query, user_id, agent_id, limit, filters, mode, hybrid, as_of)
        return await _pipeline.search(self, request, self._search)

    async def _search(self, request: _pipeline.SearchRequest) -> list[MemoryItem]:
        user, agent, conditions, until_us = request.user_id, request.agent_id, request.conditions, request.until_us
        if not request.query:
            return [r.to_item() for r in self._newest_first(user, agent, request.filters, until_us)[: request.limit]]
        depth = request.depth
        terms = analyze_query(request.query)
        hits: list[tuple[Record, float]] = []
        if request.mode != "semantic":
            with self._lock:
                index = self._indexes.get((user, agent))
                if index is not None and terms:
                    seqs, scores = index.top(terms, len(index))
                    for seq, score in zip(seqs.tolist(), scores.tolist(), strict=True):
                        found = self._by_seq[seq]
                        if matches(conditions, found.metadata) and (until_us is None or found.created_us <= until_us):
                            hits.append((found, score))
                            if len(hits) == depth:
                                break
        if request.mode == "keyword":
            found_records = {found.id: found for found, _ in hits}
            keyed = [(found.id, score) for found, score in hits]
            return [found_records[rid].to_item(score, details) for rid, score, details in
                    _pipeline.rank(request, keyed, None, _no_ages)]
        assert self.embedder is not None
        rows = self._newest_first(user, agent, request.filters, until_us)  # position = recency rank, breaks ties
        position = {r.id: i for i, r in enumerate(rows)}
        keyword = [(position[r.id], score) for r, score in hits if r.id in position]
        vectors = VectorIndex(self.embedder.dim)
        with self._lock:
            present = [(i, self._vectors[r.id]) for i, r in enumerate(rows) if r.id in self._vectors]
        if present:
            vectors.add([i for i, _ in present], np.stack([v for _, v in present]))
        query_vector = self.embedder.embed([request.query])[0].astype(np.float32)
        dense = dense_leg(vectors, query_vector, depth, None, [i for i, _ in keyword])
        ranked = _pipeline.rank(request, keyword, dense, lambda keys: {i: (-i, 0) for i in keys},
                                self._neighbours(user, agent, rows))
        return [rows[i].to_item(score, details) for i, score, details in ranked]

    def _neighbours(self, user: str, agent: str, rows: list[Record]) -> Neighbours:
        """Neighbours in writing order, for fusion's ``context``, keyed by position in ``rows``."""
        index = self._indexes.get((user, agent))
        seq_of = {i: self._seq[r.id] for i, r in enumerate(rows)}
        position = {seq: i for i, seq in seq_of.items()}

        def neighbours(keys: Iterable[Any], reach: int) -> dict[Any, list[tuple[int, Any]]]:
            if index is None:
                return {}
            with self._lock:
                around = index.neighbours((seq_of[k] for k in keys), reach)
            return {position[s]: [(d, position[o]) for d, o in near if o in position]
                    for s, near in around.items() if s in position}

        return neighbours

    async def get_all(
        self, user_id: str, agent_id: str, limit: int = 10, filters: dict[str, Any] | None = None
    ) -> list[MemoryItem]:
        limit = check_limit(limit, self.limits)
        return [r.to_item() for r in self._newest_first(user_id, agent_id, filters)[:limit]]

    async def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        read = check_read(user_id, agent_id, limit, filters, self.limits, offset)
        rows = self._newest_first(read.user, read.agent, filters)
        return [r.to_item() for r in rows[read.offset : read.offset + read.limit]]

    async def get(self, memory_id: str) -> MemoryItem | None:
        check_id(memory_id, "memory_id", self.limits)
        record = self._records.get(memory_id)
        return None if record is None else record.to_item()

    async def namespaces(self) -> list[NamespaceInfo]:
        with self._lock:
            records = list(self._records.values())
        return namespace_infos(records)

    async def stats(self) -> Stats:
        with self._lock:
            records = list(self._records.values())
        return Stats(
            provider=self.provider_name,
            memories=len(records),
            traces=trace_count(records),
            namespaces=len({(r.user_id, r.agent_id) for r in records}),
        )

    async def health(self) -> Health:
        async def ping() -> str:
            with self._lock:  # answers once no writer holds the store
                return f"{len(self._records)} memories in this process"

        return await timed_health(self.provider_name, ping)

    async def export(self, user_id: str | None = None, agent_id: str | None = None) -> AsyncIterator[MemoryItem]:
        with self._lock:
            rows = [
                r
                for r in self._records.values()
                if (user_id is None or r.user_id == user_id) and (agent_id is None or r.agent_id == agent_id)
            ]
            seq = dict(self._seq)
        rows.sort(key=lambda r: (r.created_us, seq[r.id]))
        for r in rows:
            yield r.to_item()

    async def aclose(self) -> None:
        return None

    # -- recalls ------------------------------------------------------------------

    def _keep_recall(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._recalls[body["id"]] = body

    async def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]:
        """Recorded recalls, oldest first (see :class:`memkit.SupportsRecalls`)."""
        with self._lock:
            kept = list(self._recalls.values())
        # Through JSON, as SQLite does: a caller editing a returned recall cannot edit the stored one.
        return [
            _recall.loads(_recall.encode(b)) for b in kept
            if (user_id is None or b["user_id"] == user_id) and (agent_id is None or b["agent_id"] == agent_id)
            and (workflow_id is None or b["workflow_id"] == workflow_id) and (run_id is None or b["run_id"] == run_id)
        ]

    async def get_recall(
        self, recall_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> Recall | None:
        """One recall; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        check_id(recall_id, "recall_id", self.limits)
        with self._lock:
            body = self._recalls.get(recall_id)
        if body is None or user_id not in (None, body["user_id"]) or agent_id not in (None, body["agent_id"]):
            return None
        return _recall.loads(_recall.encode(body))

    async def add_recalls(self, recalls: Iterable[Recall]) -> int:
        """Store recalls as given (an import); a recall id the store holds already refuses them all."""
        batch = checked_recalls(recalls, self.limits)
        with self._lock:
            clash = next((r.id for r in batch if r.id in self._recalls), None)
            if clash is not None:
                raise InvalidInputError(f"a recall with id {clash!r} already exists")
            self._recalls.update((r.id, _recall.body_of(r)) for r in batch)
        return len(batch)

    # -- marks ----------------------------------------------------------------------

    async def marks(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Mark]:
        """A researcher's marks, oldest first (see :class:`memkit.SupportsMarks`)."""
        _marks.check_reads(self.limits, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)
        with self._lock:
            kept = list(self._marks.values())
        return _marks.matching(map(_marks.loads, kept), user_id, agent_id, workflow_id, run_id)

    async def put_marks(self, marks: Iterable[Mark]) -> int:
        """Store marks, each replacing the mark on the same target; all or none."""
        batch = _marks.checked_marks(marks, self.limits)
        with self._lock:
            self._marks.update((m.id, _marks.dumps(m)) for m in batch)
        return len(batch)

    async def remove_marks(self, mark_ids: Iterable[str], *, user_id: str, agent_id: str) -> int:
        """Delete these marks, those of them that live in ``user_id``/``agent_id`` only."""
        ids = _marks.checked_ids(mark_ids, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        with self._lock:
            kept = {i: _marks.loads(self._marks[i]) for i in ids if i in self._marks}
            gone = [i for i, m in kept.items() if (m.user_id, m.agent_id) == (user, agent)]
            for i in gone:
                del self._marks[i]
        return len(gone)


def _no_ages(keys: list[str]) -> dict[str, tuple[int, int]]:
    return {}  # keyword mode keeps the leg's own order (ties already newest first)


# The seed's name for the same adapter.
MockMemoryAdapter = InMemoryAdapter

"""A process-local adapter for tests and throwaway runs; nothing survives the process."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._filters import Condition, matches
from memkit._core._models import MemoryItem, NamespaceInfo, Stats
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record, namespace_infos
from memkit._core._validate import DEFAULT_LIMITS, Limits
from memkit._recall import _marks
from memkit._recall import _recording as _recall
from memkit._retrieval._config import dense_path
from memkit._retrieval._fusion import HybridConfig, Neighbours, VectorIndex, dense_leg
from memkit._retrieval._keyword import KeywordIndex, analyze_query
from memkit.adapters._sqlbase import LISTED, listed_bounds
from memkit.store import _ops as ops
from memkit.store import _search as _pipeline
from memkit.store._base import Store

if TYPE_CHECKING:
    from memkit.embeddings import Embedder

__all__ = ["InMemoryAdapter", "MockMemoryAdapter"]


class InMemoryOptions(TypedDict, total=False):
    """The keywords :class:`InMemoryAdapter` takes (what ``from_url`` passes on)."""

    limits: Limits
    embedder: object  # a name, an Embedder, or None (see memkit.embeddings.get_embedder)
    hybrid: HybridConfig | None
    record_recalls: bool


def _same_namespace(a: Record, b: Record) -> bool:
    return (a.user_id, a.agent_id) == (b.user_id, b.agent_id)


class InMemoryAdapter(Store):
    """Keep memories in a dict; same rules and errors as every other adapter.

    Keyword search is the same per-namespace BM25 index as the SQLite adapter's;
    with ``embedder=`` semantic and hybrid search use the same fusion code too.

    Examples
    --------
    >>> mem = InMemoryAdapter()
    >>> memory_id = await mem.add("TP53 is mutated in sample 7", "u1", "bio")  # doctest: +SKIP
    """

    provider_name = "memory"
    supports_as_of = True

    def __init__(
        self,
        *,
        limits: Limits = DEFAULT_LIMITS,
        embedder: object = None,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
    ) -> None:
        from memkit.embeddings import get_embedder

        super().__init__(limits=limits, hybrid=hybrid, record_recalls=record_recalls)
        self._embedder: Embedder | None = None if embedder is None else get_embedder(embedder)
        self._recall_bodies: dict[str, dict[str, Any]] = {}  # recording order
        self._mark_bodies: dict[str, str] = {}  # mark id -> its JSON
        self._vectors: dict[str, np.ndarray] = {}
        self._records: dict[str, Record] = {}
        self._seq: dict[str, int] = {}
        self._by_seq: dict[int, Record] = {}
        self._indexes: dict[tuple[str, str], KeywordIndex] = {}
        # Per namespace: its memory ids in writing order, the newest created_us written, whether one
        # was written older than that (then writing order is not newest-first order), and each LISTED
        # value's ids (what the SQL stores' index of it holds).
        self._order: dict[tuple[str, str], dict[str, None]] = {}
        self._latest: dict[tuple[str, str], int] = {}
        self._disordered: set[tuple[str, str]] = set()
        self._listed: dict[tuple[str, str], dict[str, dict[str, None]]] = {}
        self._next_seq = 0
        # A thread lock, not an asyncio one: the adapter may be driven from
        # several event loops (sync facade, notebooks, worker threads).
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    @classmethod
    def from_url(cls, url: str, **options: Unpack[InMemoryOptions]) -> InMemoryAdapter:
        """``memory://`` or ``memory://?embedder=default&record_recalls=true`` (the factory calls this)."""
        from memkit._core._url import bool_option, embedder_option, query_options

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

    async def _write(self, op: ops.WriteOp) -> list[str]:
        records = op.records
        vectors = None
        if self._embedder is not None and records:
            vectors = np.concatenate([
                self._embedder.embed([r.content for r in records[i : i + 1024]]) for i in range(0, len(records), 1024)
            ]).astype(np.float32)
        with self._lock:
            held = [r for r in records if r.id in self._records]
            clash = next((r.id for r in held if not op.replace or not _same_namespace(self._records[r.id], r)), None)
            if clash is not None:
                raise InvalidInputError(f"a memory with id {clash!r} already exists")
            for record in held:  # replaced: under the same lock as the write, so no reader sees neither
                self._drop(record.id)
            for record in records:
                self._records[record.id] = record
                self._seq[record.id] = self._next_seq
                self._by_seq[self._next_seq] = record
                index = self._indexes.get((record.user_id, record.agent_id))
                if index is None:  # not setdefault: building an index to throw away costs more than the add
                    index = self._indexes[(record.user_id, record.agent_id)] = KeywordIndex()
                index.add(self._next_seq, record.content, record.created_us)
                key = (record.user_id, record.agent_id)
                self._order.setdefault(key, {})[record.id] = None
                if record.created_us < self._latest.setdefault(key, record.created_us):
                    self._disordered.add(key)
                self._latest[key] = max(self._latest[key], record.created_us)
                listed = record.metadata.get(LISTED)
                if isinstance(listed, str):
                    self._listed.setdefault(key, {}).setdefault(listed, {})[record.id] = None
                self._next_seq += 1
            if vectors is not None:
                self._vectors.update((r.id, v) for r, v in zip(records, vectors, strict=True))
        return [r.id for r in records]

    async def _delete(self, op: ops.DeleteOp) -> bool:
        with self._lock:
            record = self._records.get(op.memory_id)
            if record is None or op.user_id not in (None, record.user_id) or op.agent_id not in (None, record.agent_id):
                return False
            self._drop(op.memory_id)
            return True

    def _drop(self, memory_id: str) -> None:
        """Forget one memory (the caller holds the lock)."""
        record = self._records.pop(memory_id)
        seq = self._seq.pop(memory_id)
        del self._by_seq[seq]
        self._indexes[(record.user_id, record.agent_id)].remove(seq)
        self._vectors.pop(memory_id, None)
        del self._order[(record.user_id, record.agent_id)][memory_id]
        listed = record.metadata.get(LISTED)
        if isinstance(listed, str):
            ids = self._listed[(record.user_id, record.agent_id)][listed]
            del ids[memory_id]
            if not ids:
                del self._listed[(record.user_id, record.agent_id)][listed]

    async def _reset(self, op: ops.ResetOp) -> None:
        with self._lock:
            for kept in (self._records, self._seq, self._by_seq, self._indexes, self._vectors, self._listed,
                         self._order, self._latest, self._disordered, self._recall_bodies, self._mark_bodies):
                kept.clear()

    # -- reads ----------------------------------------------------------------

    def _newest_first(
        self, user: str, agent: str, conditions: tuple[Condition, ...], until_us: int | None = None
    ) -> list[Record]:
        with self._lock:
            rows = [
                r
                for r in self._candidates(user, agent, conditions)
                if r.user_id == user and r.agent_id == agent and matches(conditions, r.metadata)
                and (until_us is None or r.created_us <= until_us)
            ]
            seq = self._seq
            rows.sort(key=lambda r: (r.created_us, seq[r.id]), reverse=True)
        return rows

    def _candidates(self, user: str, agent: str, conditions: tuple[Condition, ...]) -> Iterable[Record]:
        """Every memory that may pass: those of the LISTED values the conditions bound, else all
        (the caller holds the lock)."""
        bounds = listed_bounds(conditions)
        if bounds is None:
            return self._records.values()
        lo, hi = bounds
        listed = self._listed.get((user, agent), {})
        return [self._records[i] for value, ids in listed.items() if lo <= value < hi for i in ids]

    async def _values(self, op: ops.ValuesOp) -> list[object]:
        if op.path != (LISTED,):
            return await super()._values(op)
        lo, hi = listed_bounds(op.conditions) or ("", None)
        with self._lock:
            listed = self._listed.get((op.user_id, op.agent_id), {})
            return [
                value for value, ids in listed.items()
                if lo <= value and (hi is None or value < hi)
                and any(matches(op.conditions, self._records[i].metadata) for i in ids)
            ]

    async def _list(self, op: ops.ListOp) -> list[Record]:
        key, want = (op.user_id, op.agent_id), op.offset + op.limit
        with self._lock:
            if key not in self._disordered:
                # Writing order is newest-first order read backwards: stop at the page's end.
                bounds = listed_bounds(op.conditions)
                listed = self._listed.get(key, {})
                values = [v for v in listed if bounds[0] <= v < bounds[1]] if bounds else None
                ids = self._order.get(key, {}) if values is None or len(values) > 1 else (
                    listed[values[0]] if values else {})
                out: list[Record] = []
                for memory_id in reversed(ids):
                    if len(out) == want:
                        break
                    record = self._records[memory_id]
                    early = op.until_us is None or record.created_us <= op.until_us
                    if early and matches(op.conditions, record.metadata):
                        out.append(record)
                return out[op.offset :]
        return self._newest_first(op.user_id, op.agent_id, op.conditions, op.until_us)[op.offset : want]

    async def _rank(self, op: ops.SearchOp) -> list[MemoryItem]:
        user, agent, conditions, until_us = op.user_id, op.agent_id, op.conditions, op.until_us
        depth = op.depth
        terms = analyze_query(op.query)
        hits: list[tuple[Record, float]] = []
        if op.mode != "semantic":
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
        if op.mode == "keyword":
            found_records = {found.id: found for found, _ in hits}
            keyed = [(found.id, score) for found, score in hits]
            return [found_records[rid].to_item(score, details) for rid, score, details in
                    _pipeline.rank(op, keyed, None, _no_ages)]
        assert self._embedder is not None
        rows = self._newest_first(user, agent, conditions, until_us)  # position = recency rank, breaks ties
        position = {r.id: i for i, r in enumerate(rows)}
        keyword = [(position[r.id], score) for r, score in hits if r.id in position]
        vectors = VectorIndex(self._embedder.dim)
        with self._lock:
            present = [(i, self._vectors[r.id]) for i, r in enumerate(rows) if r.id in self._vectors]
        if present:
            vectors.add([i for i, _ in present], np.stack([v for _, v in present]))
        query_vector = self._embedder.embed([op.query])[0].astype(np.float32)
        # The index holds only the rows that pass: scored exactly while there are few enough.
        dense = dense_leg(vectors, query_vector, depth, None, [i for i, _ in keyword],
                          exact=dense_path(len(vectors)) == "exact")
        neighbours, speakers = self._neighbours(user, agent, rows)
        ranked = _pipeline.rank(op, keyword, dense, lambda keys: {i: (-i, 0) for i in keys}, neighbours, speakers)
        return [rows[i].to_item(score, details) for i, score, details in ranked]

    def _neighbours(
        self, user: str, agent: str, rows: list[Record]
    ) -> tuple[Neighbours, Callable[[list[int], str], set[int]]]:
        """Neighbours in writing order, for fusion's ``context``, and the candidates spoken by someone the
        query names, for its ``speaker`` weight; both keyed by position in ``rows``."""
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

        def speakers(keys: list[int], query: str) -> set[int]:
            if index is None:
                return set()
            with self._lock:
                spoken = index.spoken_by((seq_of[k] for k in keys), query)
            return {position[s] for s in spoken}

        return neighbours, speakers

    async def _get(self, op: ops.GetOp) -> Record | None:
        return self._records.get(op.memory_id)

    def get_now(self, memory_id: str) -> Record | None:
        """One memory by id, read in the calling thread: no event loop needed."""
        return self._records.get(memory_id)

    async def _namespaces(self, op: ops.NamespacesOp) -> list[NamespaceInfo]:
        with self._lock:
            records = list(self._records.values())
        return namespace_infos(records)

    async def _stats(self, op: ops.StatsOp) -> Stats:
        with self._lock:
            records = list(self._records.values())
        return Stats(
            provider=self.provider_name,
            memories=len(records),
            traces=sum(1 for r in records if r.metadata.get("type") == "trace"),
            namespaces=len({(r.user_id, r.agent_id) for r in records}),
        )

    async def _ping(self, op: ops.PingOp) -> str:
        with self._lock:  # answers once no writer holds the store
            return f"{len(self._records)} memories in this process"

    async def _export(self, op: ops.ExportOp) -> AsyncIterator[Record]:
        with self._lock:
            rows = [
                r
                for r in self._records.values()
                if op.user_id in (None, r.user_id) and op.agent_id in (None, r.agent_id)
            ]
            seq = dict(self._seq)
        rows.sort(key=lambda r: (r.created_us, seq[r.id]))
        for r in rows:
            yield r

    async def _close(self, op: ops.CloseOp) -> None:
        return None  # nothing to release: the store keeps answering

    # -- recalls ------------------------------------------------------------------

    def _keep_recall(self, body: dict[str, Any]) -> None:
        with self._lock:
            self._recall_bodies[body["id"]] = body

    async def _recalls(self, op: ops.RecallsOp) -> list[Recall]:
        with self._lock:
            kept = [self._recall_bodies[op.recall_id]] if op.recall_id in self._recall_bodies else (
                [] if op.recall_id is not None else list(self._recall_bodies.values()))
        # Through JSON, as SQLite does: a caller editing a returned recall cannot edit the stored one.
        return [
            _recall.loads(_recall.encode(b)) for b in kept
            if op.user_id in (None, b["user_id"]) and op.agent_id in (None, b["agent_id"])
            and op.workflow_id in (None, b["workflow_id"]) and op.run_id in (None, b["run_id"])
        ]

    async def _add_recalls(self, op: ops.AddRecallsOp) -> int:
        with self._lock:
            clash = next((r.id for r in op.recalls if r.id in self._recall_bodies), None)
            if clash is not None:
                raise InvalidInputError(f"a recall with id {clash!r} already exists")
            self._recall_bodies.update((r.id, _recall.body_of(r)) for r in op.recalls)
        return len(op.recalls)

    # -- marks ----------------------------------------------------------------------

    async def _marks(self, op: ops.MarksOp) -> list[Mark]:
        with self._lock:
            kept = list(self._mark_bodies.values())
        return list(map(_marks.loads, kept))

    async def _put_marks(self, op: ops.PutMarksOp) -> int:
        with self._lock:
            self._mark_bodies.update((m.id, _marks.dumps(m)) for m in op.marks)
        return len(op.marks)

    async def _remove_marks(self, op: ops.RemoveMarksOp) -> int:
        with self._lock:
            kept = {i: _marks.loads(self._mark_bodies[i]) for i in op.mark_ids if i in self._mark_bodies}
            gone = [i for i, m in kept.items() if (m.user_id, m.agent_id) == (op.user_id, op.agent_id)]
            for i in gone:
                del self._mark_bodies[i]
        return len(gone)


def _no_ages(keys: list[str]) -> dict[str, tuple[int, int]]:
    return {}  # keyword mode keeps the leg's own order (ties already newest first)


# The seed's name for the same adapter.
MockMemoryAdapter = InMemoryAdapter

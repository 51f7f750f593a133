"""The memkit port over a graph database: what FalkorDB and Neo4j share.

The Cypher text and the :class:`~memkit.adapters._cypher.Dialect` seam live in
:mod:`memkit.adapters._cypher`; ranked search and its per-namespace caches in
:mod:`memkit.adapters._graph_search`; reading the graph back for the views in
:mod:`memkit.adapters._graph_views`. Metadata is stored as one JSON string and filtered in
Python with :func:`memkit._filters.matches`, the reference semantics, after Cypher has
narrowed the candidates to one namespace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any

from memkit import _marks, _pipeline, _recall
from memkit._errors import ConfigError, InvalidInputError
from memkit._filters import Condition, matches
from memkit._graphschema import DEFAULT_ENTITY_FIELDS, RecordParts, edge_id, memory_key, node_key, record_parts
from memkit._marks import Mark
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._recall import Recall
from memkit._records import Record, from_us, now_us, records_from_items, to_us
from memkit._retrieval import HybridConfig, modes_for
from memkit._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_id,
    check_limit,
    check_namespace,
    check_read,
    check_scope,
)
from memkit.adapters._cypher import (
    DELETE,
    EXISTING_IDS,
    EXPORT,
    GET,
    MARK_REMOVE,
    MARK_WRITE,
    MARKS,
    NAMESPACES,
    NEIGHBOURS,
    PAGE,
    PING,
    RECALL,
    RECALL_IDS,
    RECALL_WRITE,
    RECALLS,
    RELINK,
    RESET,
    SELECT,
    STATS,
    TIDY,
    Dialect,
)
from memkit.adapters._graph_search import GraphSearch, record_of
from memkit.adapters._graph_views import read_graph, read_neighbourhood
from memkit.adapters._plumbing import RecordWriter, timed_health
from memkit.graph import MemoryGraph

__all__ = ["GraphAdapter"]

_EXPORT_CHUNK = 2_000
_WRITE_CHUNK = 2_000


def _write_params(parts: list[RecordParts]) -> dict[str, Any]:
    steps = [{**p.step, "ns_key": p.memory["ns_key"]} for p in parts if p.step is not None]
    # One row per trace: FalkorDB 4.16 drops the later rows of an UNWIND whose MERGE of a
    # relationship with ON CREATE SET matches the edge an earlier row created.
    trace_rows = list({s["trace_key"]: s for s in steps}.values())
    return {
        "memories": [p.memory for p in parts],
        "mentions": [x for p in parts for x in p.mentions],
        "trace_rows": trace_rows,
        "steps": steps,
        "tools": [p.tool for p in parts if p.tool is not None],
        "traces": sorted({s["trace_key"] for s in steps}),
    }


class GraphAdapter(RecordWriter):
    """The memkit port over a graph database; subclasses pick a :class:`Dialect`.

    Parameters
    ----------
    dialect
        The database seam.
    limits
        Input bounds (see :class:`memkit.Limits`).
    entity_fields
        Metadata fields whose values become ``Entity`` nodes.
    embedder
        Optional: an object with ``dim`` and ``embed(texts) -> (n, dim) array`` (L2-normalised).
        With it every memory stores a vector, and ``search`` offers ``mode="semantic"`` and
        ``"hybrid"`` (the default: the score fusion of :class:`memkit.HybridConfig`, as on
        every adapter).
    hybrid
        The default :class:`memkit.HybridConfig` of hybrid searches.
    record_recalls
        Record searches made outside any step scope as recalls too (inside a step they
        always are); see :class:`memkit.SupportsRecalls`.
    """

    provider_name = "graph"
    searches_as_of = True
    record_recalls = False  # set per store (see __init__)

    def __init__(
        self,
        dialect: Dialect,
        *,
        limits: Limits = DEFAULT_LIMITS,
        entity_fields: Iterable[str] = DEFAULT_ENTITY_FIELDS,
        embedder: Any = None,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
    ) -> None:
        if not isinstance(record_recalls, bool):
            raise ConfigError(f"record_recalls must be True or False, got {record_recalls!r}")
        self.record_recalls = record_recalls
        if hybrid is not None and not isinstance(hybrid, HybridConfig):
            raise ConfigError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
        self.hybrid = hybrid or HybridConfig()
        if isinstance(embedder, str):  # a name, as sqlite:// and falkordb:// URLs give it
            from memkit.embeddings import get_embedder

            embedder = get_embedder(embedder)
        if embedder is not None and not (
            isinstance(getattr(embedder, "dim", None), int) and callable(getattr(embedder, "embed", None))
        ):
            raise ConfigError("embedder must have an integer `dim` and an `embed(texts)` method")
        self.embedder = embedder
        if isinstance(entity_fields, str):
            raise ConfigError("entity_fields must be a list of metadata field names, not one string")
        self.dialect = dialect
        self.limits = limits
        self.entity_fields = tuple(entity_fields)
        self._schema_ready = False
        self._search = GraphSearch(self._read, dialect.hits_statement(), self._embed if embedder is not None else None,
                                   int(embedder.dim) if embedder is not None else None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dialect.describe()})"

    async def _ready(self) -> None:
        if not self._schema_ready:
            await self.dialect.ensure_schema()
            if self.embedder is not None:
                await self.dialect.ensure_vector_schema(int(self.embedder.dim))
            self._schema_ready = True

    async def _read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        await self._ready()
        return await self.dialect.read(query, params)

    # -- writes ------------------------------------------------------------------

    async def _insert(self, records: list[Record]) -> list[str]:
        if not records:
            return []
        await self._ready()
        ids = [r.id for r in records]
        clash = await self.dialect.read(EXISTING_IDS, {"keys": [memory_key(i) for i in ids]})
        if clash:
            raise InvalidInputError(f"a memory with id {clash[0]['id']!r} already exists")
        parts = [record_parts(r, self.entity_fields, seq=now_us()) for r in records]
        # Neo4j: UNWIND chunks inside one transaction. FalkorDB has no multi-statement
        # transactions but runs each statement atomically, so the whole batch is one statement.
        size = _WRITE_CHUNK if self.dialect.transactional else len(parts)
        chunks = [parts[i : i + size] for i in range(0, len(parts), size)]
        statements = []
        for chunk in chunks:
            params = _write_params(chunk)
            if self.embedder is not None:
                for memory, vector in zip(params["memories"], self._embed([p.memory["content"] for p in chunk]),
                                          strict=True):
                    memory["embedding"] = vector
            query = self.dialect.write_statement(bool(params["traces"]), self.embedder is not None)
            statements.append((query, params))
        await self.dialect.write(statements)
        self._search.written(statements)
        return ids

    async def _store(self, records: list[Record]) -> list[str]:
        return await self._insert(records)

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False
    ) -> list[str]:
        """Validate every item, then write all of them or none (UNWIND batches, one transaction)."""
        return await self._insert(records_from_items(items, self.limits))

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete one memory; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        memory_id, user_id, agent_id = check_scope(memory_id, user_id, agent_id, self.limits)
        await self._ready()
        [deleted] = await self.dialect.write([(DELETE, {
            "key": memory_key(memory_id), "id": memory_id, "user_id": user_id, "agent_id": agent_id,
        })])
        if not deleted:
            return False
        row = deleted[0]
        self._search.forget(node_key("Namespace", row["user_id"], row["agent_id"]))
        traces = sorted({r["tk"] for r in deleted if r.get("tk") is not None})
        await self.dialect.write([(
            TIDY.replace("{relink}", RELINK),
            {"traces": traces, "user_id": row["user_id"], "agent_id": row["agent_id"]},
        )])
        return True

    async def reset(self) -> bool:
        await self._ready()
        await self.dialect.write([(RESET, {})])
        self._search.forget()
        return True

    # -- reads -----------------------------------------------------------------------

    async def _select(
        self, user: str, agent: str, conditions: tuple[Condition, ...], offset: int, limit: int,
        until_us: int | None = None,
    ) -> list[Record]:
        ns = node_key("Namespace", user, agent)
        if not conditions:
            rows = await self._read(SELECT, {"ns": ns, "skip": offset, "limit": limit, "until_us": until_us})
            return [r for r in map(record_of, rows) if (r.user_id, r.agent_id) == (user, agent)]
        # Filters are applied in Python with the reference semantics, a page at a time.
        kept: list[Record] = []
        skip = 0
        while len(kept) < offset + limit:
            rows = await self._read(SELECT, {"ns": ns, "skip": skip, "limit": PAGE, "until_us": until_us})
            kept.extend(r for r in map(record_of, rows)
                        if (r.user_id, r.agent_id) == (user, agent) and matches(conditions, r.metadata))
            if len(rows) < PAGE:
                break
            skip += PAGE
        return kept[offset : offset + limit]

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
        """Rank one namespace against ``query`` (see :func:`memkit._pipeline.rank`); an empty query
        lists it newest first.

        ``mode``: ``"hybrid"`` (the default with an embedder), ``"keyword"`` (memkit's BM25, kept
        per namespace in this process) or ``"semantic"`` (its vector index). ``hybrid`` overrides the store's
        :class:`memkit.HybridConfig`. ``as_of``: only memories that existed then.
        """
        request = _pipeline.prepare(self, query, user_id, agent_id, limit, filters, mode, hybrid, as_of)
        return await _pipeline.search(self, request, self._ranked)

    async def _ranked(self, request: _pipeline.SearchRequest) -> list[MemoryItem]:
        if not request.query:
            records = await self._select(request.user_id, request.agent_id, request.conditions, 0, request.limit,
                                         request.until_us)
            return [r.to_item() for r in records]
        return await self._search.ranked(request)

    @property
    def search_modes(self) -> tuple[str, ...]:
        """The ``mode=`` values :meth:`search` answers (all three with an embedder, else keyword)."""
        return modes_for(self.embedder is not None)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embedder is not None
        matrix = self.embedder.embed(texts)
        return [[float(x) for x in row] for row in matrix]

    async def get_all(
        self, user_id: str, agent_id: str, limit: int = 10, filters: dict[str, Any] | None = None
    ) -> list[MemoryItem]:
        return await self.get_page(user_id, agent_id, limit=limit, filters=filters)

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
        records = await self._select(read.user, read.agent, read.conditions, read.offset, read.limit)
        return [r.to_item() for r in records]

    async def get(self, memory_id: str) -> MemoryItem | None:
        check_id(memory_id, "memory_id", self.limits)
        rows = [r for r in await self._read(GET, {"key": memory_key(memory_id)}) if r["id"] == memory_id]
        return record_of(rows[0]).to_item() if rows else None

    async def namespaces(self) -> list[NamespaceInfo]:
        rows = await self._read(NAMESPACES, {})
        return [
            NamespaceInfo(
                user_id=r["user_id"], agent_id=r["agent_id"], count=r["n"],
                first_at=from_us(r["first_us"]), last_at=from_us(r["last_us"]),
            )
            for r in rows
        ]

    async def stats(self) -> Stats:
        rows = await self._read(STATS, {})
        row = rows[0] if rows else {"memories": 0, "traces": 0, "namespaces": 0}
        return Stats(
            provider=self.provider_name, memories=row["memories"], traces=row["traces"] or 0,
            namespaces=row["namespaces"], location=self.dialect.describe(),
        )

    async def health(self) -> Health:
        async def ping() -> str:
            await self.dialect.read(PING, {})
            return self.dialect.describe()

        return await timed_health(self.provider_name, ping)

    async def export(self, user_id: str | None = None, agent_id: str | None = None) -> AsyncIterator[MemoryItem]:
        """Every record, oldest first, read in chunks (keyset paging on time and insertion order)."""
        after_us, after_seq = -(2**62), -1
        while True:
            rows = await self._read(EXPORT, {
                "user_id": user_id, "agent_id": agent_id, "after_us": after_us, "after_seq": after_seq,
                "limit": _EXPORT_CHUNK,
            })
            for row in rows:
                yield record_of(row).to_item()
            if len(rows) < _EXPORT_CHUNK:
                return
            after_us, after_seq = rows[-1]["created_us"], rows[-1]["seq"]

    async def neighbours(self, memory_id: str, limit: int = 25) -> list[dict[str, Any]]:
        """Memories two hops away (sharing an entity), most shared entities first."""
        check_id(memory_id, "memory_id", self.limits)
        limit = check_limit(limit, self.limits)
        return await self._read(NEIGHBOURS, {"key": memory_key(memory_id), "limit": limit})

    async def graph(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        limit: int = 1_000,
    ) -> MemoryGraph:
        """Read the stored graph around the newest ``limit`` memories of a scope."""
        return await read_graph(self._read, user_id, agent_id, workflow_id, limit)

    async def neighbourhood(
        self, node_id: str, *, label: str | None = None, depth: int = 1, limit: int = 50,
    ) -> MemoryGraph:
        """A node and its neighbours up to ``depth`` hops (at most ``limit`` per node walked)."""
        check_id(node_id, "node id", self.limits)
        return await read_neighbourhood(self._read, node_id, label, depth, limit)

    async def aclose(self) -> None:
        """Close the database connections; again is a no-op, any other call then fails."""
        await self.dialect.aclose()

    # -- recalls --------------------------------------------------------------------

    async def _keep_recall(self, body: dict[str, Any]) -> None:
        # Awaited by the search that made it (memkit._recall.settle): a failure warns, never fails the search.
        await self._write_recalls([body])

    async def _write_recalls(self, bodies: list[dict[str, Any]]) -> int:
        await self._ready()
        recalls: list[dict[str, Any]] = []
        hits: list[dict[str, Any]] = []
        for body in bodies:
            key = node_key("Recall", body["id"])
            step_user = body.get("trace_user_id") or body["user_id"]
            step_agent = body.get("trace_agent_id") or body["agent_id"]
            recalls.append({
                "id": body["id"], "key": key, "ns": node_key("Namespace", body["user_id"], body["agent_id"]),
                "step_ns": node_key("Namespace", step_user, step_agent),
                "user_id": body["user_id"], "agent_id": body["agent_id"], "created_us": _recall.created_us(body),
                "kind": body["kind"], "query": body["query"], "mode": body["mode"],
                "workflow_id": body["workflow_id"], "run_id": body["run_id"], "step_index": body["step_index"],
                "step_name": body["step_name"], "body": _recall.encode(body),
            })
            hits.extend({
                "recall_key": key, "memory_key": memory_key(hit[0]), "memory_id": hit[0],
                "user_id": body["user_id"], "agent_id": body["agent_id"], "rank": hit[1], "score": hit[2],
                "id": edge_id("RECALLED", body["id"], hit[0]),
            } for hit in body["hits"])
        await self.dialect.write([(RECALL_WRITE, {"recalls": recalls, "hits": hits})])
        return len(recalls)

    async def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]:
        """Recorded recalls, oldest first (see :class:`memkit.SupportsRecalls`)."""
        wanted = {"user_id": user_id, "agent_id": agent_id, "workflow_id": workflow_id, "run_id": run_id}
        rows = await self._read(RECALLS, wanted)
        # Exact comparison in Python too (FalkorDB's range index trims whitespace from strings).
        return [_recall.loads(row["body"]) for row in rows
                if all(value is None or row[name] == value for name, value in wanted.items())]

    async def get_recall(
        self, recall_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> Recall | None:
        """One recall; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        check_id(recall_id, "recall_id", self.limits)
        rows = await self._read(RECALL, {"key": node_key("Recall", recall_id), "id": recall_id})
        if not rows or user_id not in (None, rows[0]["user_id"]) or agent_id not in (None, rows[0]["agent_id"]):
            return None
        return _recall.loads(rows[0]["body"])

    async def add_recalls(self, recalls: Iterable[Recall]) -> int:
        """Store recalls as given (an import), linked to the memories and steps present; all or none."""
        batch = [_recall.body_of(r) for r in _recall.checked_recalls(recalls, self.limits)]
        if not batch:
            return 0
        await self._ready()
        clash = await self.dialect.read(RECALL_IDS, {"keys": [node_key("Recall", b["id"]) for b in batch]})
        if clash:
            raise InvalidInputError(f"a recall with id {clash[0]['id']!r} already exists")
        return await self._write_recalls(batch)

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
        rows = await self._read(MARKS, {"user_id": user_id, "agent_id": agent_id, "workflow_id": workflow_id,
                                        "run_id": run_id})
        return _marks.matching((_marks.loads(row["body"]) for row in rows), user_id, agent_id, workflow_id, run_id)

    async def put_marks(self, marks: Iterable[Mark]) -> int:
        """Store marks in one statement, each replacing the mark on the same target; all or none."""
        batch = _marks.checked_marks(marks, self.limits)
        if not batch:
            return 0
        await self._ready()
        rows = [{
            "key": node_key("Mark", m.id), "id": m.id, "ns": node_key("Namespace", m.user_id, m.agent_id),
            "user_id": m.user_id, "agent_id": m.agent_id, "created_us": to_us(m.created_at),
            "workflow_id": m.workflow_id, "run_id": m.run_id, "body": _marks.dumps(m),
        } for m in batch]
        await self.dialect.write([(MARK_WRITE, {"marks": rows})])
        return len(rows)

    async def remove_marks(self, mark_ids: Iterable[str], *, user_id: str, agent_id: str) -> int:
        """Delete these marks, those of them that live in ``user_id``/``agent_id`` only."""
        ids = _marks.checked_ids(mark_ids, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        if not ids:
            return 0
        await self._ready()
        [rows] = await self.dialect.write([(MARK_REMOVE, {
            "keys": [node_key("Mark", i) for i in ids], "user_id": user, "agent_id": agent})])
        return int(rows[0]["removed"]) if rows else 0

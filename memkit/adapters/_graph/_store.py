"""The memkit port over a graph database: what FalkorDB and Neo4j share.

The Cypher text and the :class:`~memkit.adapters._graph._cypher.Dialect` seam live in
:mod:`memkit.adapters._graph._cypher`; ranked search and its per-namespace caches in
:mod:`memkit.adapters._graph._search`; reading the graph back for the views in
:mod:`memkit.adapters._graph._views`. Metadata is stored as one JSON string and filtered in
Python with :func:`memkit._core._filters.matches`, the reference semantics, after Cypher has
narrowed the candidates to one namespace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, TypedDict

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._filters import matches
from memkit._core._graph_model import MemoryGraph
from memkit._core._graph_schema import DEFAULT_ENTITY_FIELDS, RecordParts, edge_id, memory_key, node_key, record_parts
from memkit._core._models import MemoryItem, NamespaceInfo, Stats
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record, from_us, now_us, to_us
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id, check_limit
from memkit._recall import _marks
from memkit._recall import _recording as _recall
from memkit._retrieval._fusion import HybridConfig
from memkit.adapters._graph._cypher import (
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
    Statement,
)
from memkit.adapters._graph._search import GraphSearch, record_of
from memkit.adapters._graph._views import read_graph, read_neighbourhood
from memkit.embeddings import Embedder
from memkit.store import _ops as ops
from memkit.store._base import Store

__all__ = ["GraphAdapter", "GraphOptions"]


class GraphOptions(TypedDict, total=False):
    """The keywords every graph store takes besides where its server is (see :class:`GraphAdapter`)."""

    limits: Limits
    entity_fields: Iterable[str]
    embedder: Embedder | None
    hybrid: HybridConfig | None
    record_recalls: bool
    max_indexed: int

_EXPORT_CHUNK = 2_000
_WRITE_CHUNK = 2_000
# How often a replacing write reads again after another writer stored one of its ids first.
_REPLACE_TRIES = 50


class _Raced(Exception):
    """A write met an id another writer stored after this one looked."""


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


class GraphAdapter(Store):
    """The memkit port over a graph database; subclasses pick a :class:`~memkit.adapters._graph._cypher.Dialect`.

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
    max_indexed
        Most memories this process keeps indexed for search, over all namespaces (least recently
        searched namespaces are dropped first and read again when searched), as on SQLite.
    """

    provider_name = "graph"
    supports_as_of = True

    def __init__(
        self,
        dialect: Dialect,
        *,
        limits: Limits = DEFAULT_LIMITS,
        entity_fields: Iterable[str] = DEFAULT_ENTITY_FIELDS,
        embedder: Embedder | None = None,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
        max_indexed: int = 2_000_000,
    ) -> None:
        super().__init__(limits=limits, hybrid=hybrid, record_recalls=record_recalls)
        if isinstance(max_indexed, bool) or not isinstance(max_indexed, int) or max_indexed < 1:
            raise ConfigError(f"max_indexed must be a positive integer, got {max_indexed!r}")
        if isinstance(embedder, str):  # a name, as sqlite:// and falkordb:// URLs give it
            from memkit.embeddings import get_embedder

            embedder = get_embedder(embedder)
        if embedder is not None and not (
            isinstance(getattr(embedder, "dim", None), int) and callable(getattr(embedder, "embed", None))
        ):
            raise ConfigError("embedder must have an integer `dim` and an `embed(texts)` method")
        self._embedder: Any = embedder
        if isinstance(entity_fields, str):
            raise ConfigError("entity_fields must be a list of metadata field names, not one string")
        self.dialect = dialect
        self.entity_fields = tuple(entity_fields)
        self._schema_ready = False
        self._search = GraphSearch(self._read, dialect.hits_statement(), None if embedder is None else self._embed,
                                   None if embedder is None else int(embedder.dim), max_indexed)

    @property
    def embedder(self) -> Any:
        """The embedder given (anything with ``dim`` and ``embed(texts)``), or ``None``: keyword only."""
        return self._embedder

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dialect.describe()})"

    async def _ready(self) -> None:
        if not self._schema_ready:
            await self.dialect.ensure_schema()
            if self._embedder is not None:
                await self.dialect.ensure_vector_schema(int(self._embedder.dim))
            self._schema_ready = True

    async def _read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        await self._ready()
        return await self.dialect.read(query, params)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self._embedder is not None
        return [[float(x) for x in row] for row in self._embedder.embed(texts)]

    # -- writes ------------------------------------------------------------------

    async def _write(self, op: ops.WriteOp) -> list[str]:
        await self._ready()
        for attempt in range(_REPLACE_TRIES):
            try:
                return await self._write_once(op)
            except _Raced:
                # Another writer stored one of these ids between our read and our write: a replacing
                # write reads again and replaces that one (last writer wins); a plain one is refused.
                if not op.replace or attempt == _REPLACE_TRIES - 1:
                    raise InvalidInputError("a memory with one of these ids already exists") from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _write_once(self, op: ops.WriteOp) -> list[str]:
        ids = [r.id for r in op.records]
        # Neo4j reads committed data: a node another transaction is deleting can show with no id.
        held = [h for h in await self.dialect.read(EXISTING_IDS, {"keys": [memory_key(i) for i in ids]})
                if h["id"] is not None]
        wanted = {r.id: (r.user_id, r.agent_id) for r in op.records}
        if op.replace and any(h["user_id"] is None or h["agent_id"] is None for h in held):
            raise _Raced  # a node another transaction is replacing, read half gone: read again
        clash = [h["id"] for h in held if not op.replace or wanted.get(h["id"]) != (h["user_id"], h["agent_id"])]
        if clash:
            raise InvalidInputError(f"a memory with id {clash[0]!r} already exists")
        # Replaced memories go in the same call as the write: one transaction on Neo4j; on FalkorDB
        # (no multi-statement transactions) consecutive statements of this adapter's one worker.
        replaced: list[Statement] = [
            (DELETE, {"key": memory_key(h["id"]), "id": h["id"], "user_id": h["user_id"], "agent_id": h["agent_id"]})
            for h in held
        ]
        parts = [record_parts(r, self.entity_fields, seq=now_us()) for r in op.records]
        # Neo4j: UNWIND chunks inside one transaction. FalkorDB has no multi-statement
        # transactions but runs each statement atomically, so the whole batch is one statement.
        size = _WRITE_CHUNK if self.dialect.transactional else len(parts)
        statements = []
        for chunk in (parts[i : i + size] for i in range(0, len(parts), size)):
            params = _write_params(chunk)
            if self._embedder is not None:
                vectors = self._embed([p.memory["content"] for p in chunk])
                for memory, vector in zip(params["memories"], vectors, strict=True):
                    memory["embedding"] = vector
            query = self.dialect.write_statement(bool(params["traces"]), self._embedder is not None)
            statements.append((query, params))
        tidy: list[Statement] = [
            (TIDY.replace("{relink}", RELINK), {"traces": [], "user_id": user, "agent_id": agent})
            for user, agent in sorted({(h["user_id"], h["agent_id"]) for h in held})
        ]
        try:
            await self.dialect.write([*replaced, *statements, *tidy])
        except InvalidInputError:
            raise _Raced from None
        for user, agent in {(h["user_id"], h["agent_id"]) for h in held}:
            self._search.forget(node_key("Namespace", user, agent))
        self._search.written(statements)
        return ids

    async def _delete(self, op: ops.DeleteOp) -> bool:
        await self._ready()
        [deleted] = await self.dialect.write([(DELETE, {
            "key": memory_key(op.memory_id), "id": op.memory_id, "user_id": op.user_id, "agent_id": op.agent_id,
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

    async def _reset(self, op: ops.ResetOp) -> None:
        await self._ready()
        await self.dialect.write([(RESET, {})])
        self._search.forget()

    # -- reads -----------------------------------------------------------------------

    async def _list(self, op: ops.ListOp) -> list[Record]:
        ns = node_key("Namespace", op.user_id, op.agent_id)
        user, agent = op.user_id, op.agent_id
        if op.offset > self.dialect.max_skip:
            return []  # no namespace holds that many memories; the server would count the skip wrong
        if not op.conditions:
            rows = await self._read(SELECT, {"ns": ns, "skip": op.offset, "limit": op.limit, "until_us": op.until_us})
            return [r for r in map(record_of, rows) if (r.user_id, r.agent_id) == (user, agent)]
        # Filters are applied in Python with the reference semantics, a page at a time.
        kept: list[Record] = []
        skip = 0
        while len(kept) < op.offset + op.limit:
            rows = await self._read(SELECT, {"ns": ns, "skip": skip, "limit": PAGE, "until_us": op.until_us})
            kept.extend(r for r in map(record_of, rows)
                        if (r.user_id, r.agent_id) == (user, agent) and matches(op.conditions, r.metadata))
            if len(rows) < PAGE:
                break
            skip += PAGE
        return kept[op.offset : op.offset + op.limit]

    async def _rank(self, op: ops.SearchOp) -> list[MemoryItem]:
        return await self._search.ranked(op)

    async def _get(self, op: ops.GetOp) -> Record | None:
        rows = [r for r in await self._read(GET, {"key": memory_key(op.memory_id)}) if r["id"] == op.memory_id]
        return record_of(rows[0]) if rows else None

    async def _namespaces(self, op: ops.NamespacesOp) -> list[NamespaceInfo]:
        return [
            NamespaceInfo(user_id=r["user_id"], agent_id=r["agent_id"], count=r["n"],
                          first_at=from_us(r["first_us"]), last_at=from_us(r["last_us"]))
            for r in await self._read(NAMESPACES, {})
        ]

    async def _stats(self, op: ops.StatsOp) -> Stats:
        rows = await self._read(STATS, {})
        row = rows[0] if rows else {"memories": 0, "traces": 0, "namespaces": 0}
        return Stats(
            provider=self.provider_name, memories=row["memories"], traces=row["traces"] or 0,
            namespaces=row["namespaces"], location=self.dialect.describe(),
        )

    async def _ping(self, op: ops.PingOp) -> str:
        await self.dialect.read(PING, {})
        return self.dialect.describe()

    async def _export(self, op: ops.ExportOp) -> AsyncIterator[Record]:
        """Every record, oldest first, read in chunks (keyset paging on time and insertion order)."""
        after_us, after_seq = -(2**62), -1
        while True:
            rows = await self._read(EXPORT, {
                "user_id": op.user_id, "agent_id": op.agent_id, "after_us": after_us, "after_seq": after_seq,
                "limit": _EXPORT_CHUNK,
            })
            for row in rows:
                yield record_of(row)
            if len(rows) < _EXPORT_CHUNK:
                return
            after_us, after_seq = rows[-1]["created_us"], rows[-1]["seq"]

    async def _close(self, op: ops.CloseOp) -> None:
        await self.dialect.aclose()

    # -- the stored graph -------------------------------------------------------------

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

    # -- recalls --------------------------------------------------------------------

    def _keep_recall(self, body: dict[str, Any]) -> Awaitable[None]:
        # Awaited by the search that made it (memkit._recall._recording.settle): a failure warns,
        # never fails the search.
        return self._write_recalls([body])

    async def _write_recalls(self, bodies: list[dict[str, Any]]) -> None:
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

    async def _recalls(self, op: ops.RecallsOp) -> list[Recall]:
        if op.recall_id is not None:
            rows = await self._read(RECALL, {"key": node_key("Recall", op.recall_id), "id": op.recall_id})
            wanted = {"user_id": op.user_id, "agent_id": op.agent_id}
        else:
            wanted = {"user_id": op.user_id, "agent_id": op.agent_id, "workflow_id": op.workflow_id,
                      "run_id": op.run_id}
            rows = await self._read(RECALLS, wanted)
        # Exact comparison in Python too (FalkorDB's range index trims whitespace from strings).
        return [_recall.loads(row["body"]) for row in rows
                if all(value is None or row[name] == value for name, value in wanted.items())]

    async def _add_recalls(self, op: ops.AddRecallsOp) -> int:
        """Store recalls as given (an import), linked to the memories and steps present; all or none."""
        batch = [_recall.body_of(r) for r in op.recalls]
        await self._ready()
        clash = await self.dialect.read(RECALL_IDS, {"keys": [node_key("Recall", b["id"]) for b in batch]})
        if clash:
            raise InvalidInputError(f"a recall with id {clash[0]['id']!r} already exists")
        await self._write_recalls(batch)
        return len(batch)

    # -- marks ----------------------------------------------------------------------

    async def _marks(self, op: ops.MarksOp) -> list[Mark]:
        rows = await self._read(MARKS, {"user_id": op.user_id, "agent_id": op.agent_id,
                                        "workflow_id": op.workflow_id, "run_id": op.run_id})
        return [_marks.loads(row["body"]) for row in rows]

    async def _put_marks(self, op: ops.PutMarksOp) -> int:
        """Store marks in one statement, each replacing the mark on the same target; all or none."""
        await self._ready()
        rows = [{
            "key": node_key("Mark", m.id), "id": m.id, "ns": node_key("Namespace", m.user_id, m.agent_id),
            "user_id": m.user_id, "agent_id": m.agent_id, "created_us": to_us(m.created_at),
            "workflow_id": m.workflow_id, "run_id": m.run_id, "body": _marks.dumps(m),
        } for m in op.marks]
        await self.dialect.write([(MARK_WRITE, {"marks": rows})])
        return len(rows)

    async def _remove_marks(self, op: ops.RemoveMarksOp) -> int:
        await self._ready()
        [rows] = await self.dialect.write([(MARK_REMOVE, {
            "keys": [node_key("Mark", i) for i in op.mark_ids], "user_id": op.user_id, "agent_id": op.agent_id})])
        return int(rows[0]["removed"]) if rows else 0

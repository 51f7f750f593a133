"""One Cypher query layer for graph databases, with a small :class:`Dialect` per database.

The statements below are the portable Cypher subset that runs on FalkorDB 4.x
and Neo4j 5 (no EXISTS{}, COUNT{}, ``=~``, temporal types or map properties).
A dialect supplies only what truly differs: index DDL, the vector index
procedure and its score scale, and how statements are executed (Neo4j runs a
batch in one transaction; FalkorDB runs each statement atomically, so every
logical write is a single statement).

Every value is a parameter. Metadata is stored as one JSON string and filtered
in Python with :func:`memkit._filters.matches`, the reference semantics, after
Cypher has narrowed the candidates to one namespace.
"""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import numpy as np

from memkit import _marks, _pipeline, _recall
from memkit._errors import ConfigError, InvalidInputError
from memkit._filters import Condition, matches
from memkit._keyword import KeywordIndex, analyze_query
from memkit._marks import Mark
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._recall import Recall
from memkit._records import Record, from_us, now_us, records_from_items, to_us
from memkit._retrieval import DenseScores, HybridConfig, VectorIndex, dense_leg, modes_for
from memkit._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_id,
    check_limit,
    check_namespace,
    check_read,
    check_scope,
)
from memkit.adapters._plumbing import RecordWriter, timed_health
from memkit.graph._model import GraphBuilder, MemoryGraph
from memkit.graph._schema import (
    DEFAULT_ENTITY_FIELDS,
    NODE_LABELS,
    RecordParts,
    edge_id,
    memory_key,
    node_key,
    record_parts,
)

__all__ = ["Dialect", "GraphAdapter", "Statement"]

Statement = tuple[str, dict[str, Any]]

_MEMORY_FIELDS = (
    "m.id AS id, m.user_id AS user_id, m.agent_id AS agent_id, m.content AS content,"
    " m.metadata AS metadata, m.created_us AS created_us"
)

# One write = one statement: the memories, their entities, their trace steps and
# tools, and the NEXT chains of the traces it touched. ``WITH count(*)`` closes
# each part so an empty UNWIND does not end the statement early (an aggregate with no
# grouping key yields one row even from no rows; never carry a grouping key across).
WRITE = """
UNWIND $memories AS r
MERGE (ns:Namespace {key: r.ns_key})
  ON CREATE SET ns.id = r.ns_id, ns.user_id = r.user_id, ns.agent_id = r.agent_id
CREATE (m:Memory {id: r.id, key: r.key, ns: r.ns_key, user_id: r.user_id, agent_id: r.agent_id,
                  content: r.content, metadata: r.metadata, type: r.type, workflow_id: r.workflow_id,
                  created_us: r.created_us, seq: r.seq{embedding}})
CREATE (ns)-[:HAS_MEMORY {id: r.rel_id}]->(m)
WITH count(*) AS written
UNWIND $mentions AS x
MATCH (m:Memory {key: x.memory_key})
MERGE (e:Entity {key: x.key})
  ON CREATE SET e.id = x.id, e.user_id = x.user_id, e.agent_id = x.agent_id, e.kind = x.kind, e.name = x.name
CREATE (m)-[:MENTIONS {id: x.rel_id, field: x.kind}]->(e)
WITH count(*) AS mentioned
UNWIND $trace_rows AS s
MERGE (w:Workflow {key: s.workflow_key})
  ON CREATE SET w.id = s.workflow_node, w.user_id = s.user_id, w.agent_id = s.agent_id,
                w.workflow_id = s.workflow_id
MERGE (t:Trace {key: s.trace_key})
  ON CREATE SET t.id = s.trace_node, t.user_id = s.user_id, t.agent_id = s.agent_id,
                t.workflow_id = s.workflow_id, t.run_id = s.run_id
MERGE (w)-[ht:HAS_TRACE]->(t)
  ON CREATE SET ht.id = s.has_trace_id
WITH count(*) AS traced
UNWIND $steps AS s
MATCH (m:Memory {key: s.memory_key})
MATCH (t:Trace {key: s.trace_key})
CREATE (st:Step {id: s.id, user_id: s.user_id, agent_id: s.agent_id, workflow_id: s.workflow_id,
                 run_id: s.run_id, order: s.order, sort: s.sort, name: s.name, status: s.status,
                 tool: s.tool, created_us: s.created_us})
CREATE (t)-[:HAS_STEP {id: s.has_step_id, order: s.order}]->(st)
CREATE (st)-[:RECORDED_AS {id: s.recorded_id}]->(m)
WITH count(*) AS stepped
UNWIND $tools AS u
MATCH (st:Step {id: u.step_id})
MERGE (tool:Tool {key: u.key})
  ON CREATE SET tool.id = u.id, tool.user_id = u.user_id, tool.agent_id = u.agent_id, tool.name = u.name
CREATE (st)-[:USES_TOOL {id: u.rel_id}]->(tool)
WITH count(*) AS used
{link_recalls}
{relink}
RETURN size($memories) AS written
"""

# Rebuild the NEXT chain of each trace in $traces from its steps' order.
RELINK = """
UNWIND $traces AS tk
MATCH (t:Trace {key: tk})-[:HAS_STEP]->(s:Step)
OPTIONAL MATCH (s)-[old:NEXT]->(:Step)
DELETE old
WITH tk, s
ORDER BY s.sort, s.created_us, s.id
WITH tk, collect(s) AS chain
UNWIND range(0, size(chain) - 2) AS i
WITH chain[i] AS a, chain[i + 1] AS b
CREATE (a)-[:NEXT {id: randomUUID()}]->(b)
WITH count(*) AS linked
"""

# Delete one memory (and its step), scoped when asked; report the traces it was part of.
DELETE = """
MATCH (m:Memory {key: $key})
WHERE m.id = $id AND ($user_id IS NULL OR m.user_id = $user_id) AND ($agent_id IS NULL OR m.agent_id = $agent_id)
OPTIONAL MATCH (st:Step)-[:RECORDED_AS]->(m)
OPTIONAL MATCH (t:Trace)-[:HAS_STEP]->(st)
WITH m, st, t.key AS tk, m.user_id AS user_id, m.agent_id AS agent_id
DETACH DELETE m, st
RETURN user_id, agent_id, tk
"""

# After a delete: relink the traces and drop nodes nothing points to any more.
TIDY = """
WITH 0 AS start
{relink}
OPTIONAL MATCH (t:Trace {user_id: $user_id, agent_id: $agent_id})
OPTIONAL MATCH (t)-[r:HAS_STEP]->(:Step)
WITH t, count(r) AS n WHERE t IS NOT NULL AND n = 0
DETACH DELETE t
WITH count(*) AS done
OPTIONAL MATCH (w:Workflow {user_id: $user_id, agent_id: $agent_id})
OPTIONAL MATCH (w)-[r:HAS_TRACE]->(:Trace)
WITH w, count(r) AS n WHERE w IS NOT NULL AND n = 0
DETACH DELETE w
WITH count(*) AS done
OPTIONAL MATCH (e:Entity {user_id: $user_id, agent_id: $agent_id})
OPTIONAL MATCH (e)<-[r:MENTIONS]-(:Memory)
WITH e, count(r) AS n WHERE e IS NOT NULL AND n = 0
DETACH DELETE e
WITH count(*) AS done
OPTIONAL MATCH (u:Tool {user_id: $user_id, agent_id: $agent_id})
OPTIONAL MATCH (u)<-[r:USES_TOOL]-(:Step)
WITH u, count(r) AS n WHERE u IS NOT NULL AND n = 0
DETACH DELETE u
WITH count(*) AS done
OPTIONAL MATCH (ns:Namespace {user_id: $user_id, agent_id: $agent_id})
OPTIONAL MATCH (ns)-[r:HAS_MEMORY]->(:Memory)
WITH ns, count(r) AS n WHERE ns IS NOT NULL AND n = 0
DETACH DELETE ns
RETURN count(*) AS removed
"""

RESET = "MATCH (n) DETACH DELETE n"

SELECT = (
    "MATCH (m:Memory {ns: $ns})"
    " WHERE $until_us IS NULL OR m.created_us <= $until_us"
    f" RETURN {_MEMORY_FIELDS}"
    " ORDER BY m.created_us DESC, m.seq DESC SKIP $skip LIMIT $limit"
)

GET = f"MATCH (m:Memory {{key: $key}}) RETURN {_MEMORY_FIELDS}"

EXISTING_IDS = "UNWIND $keys AS k MATCH (m:Memory {key: k}) RETURN m.id AS id"

EXPORT = (
    "MATCH (m:Memory)"
    " WHERE ($user_id IS NULL OR m.user_id = $user_id) AND ($agent_id IS NULL OR m.agent_id = $agent_id)"
    " AND (m.created_us > $after_us OR (m.created_us = $after_us AND m.seq > $after_seq))"
    f" RETURN {_MEMORY_FIELDS}, m.seq AS seq"
    " ORDER BY m.created_us, m.seq LIMIT $limit"
)

# A namespace's state for the search cache (:class:`_NamespaceCache`): how many memories, the
# newest write, and a checksum of every write (so another process deleting one memory and adding
# one, which leaves the count alone, still changes it). One small aggregate per search.
_CHECKSUM = 1_000_000_007
NS_FINGERPRINT = (
    "MATCH (m:Memory {ns: $ns})"
    f" RETURN count(m) AS n, max(m.seq) AS last, sum(m.seq % {_CHECKSUM}) AS checksum"
)
# A page of a namespace's memories in write order, for the cache: their text for the keyword index,
# their vectors for the semantic leg, or both (vectors cost the most to read: only when needed).
_NS_PAGE = (
    "MATCH (m:Memory {{ns: $ns}})"
    " WHERE m.seq > $after OR (m.seq = $after AND m.id > $after_id)"
    " RETURN m.id AS id, m.seq AS seq, m.user_id AS user_id, m.agent_id AS agent_id,"
    " m.created_us AS created_us{fields}"
    " ORDER BY m.seq, m.id LIMIT $limit"
)
NS_PAGE = {
    (text, vectors): _NS_PAGE.format(fields=(", m.content AS content" if text else "")
                                     + (", m.embedding AS embedding" if vectors else ""))
    for text in (True, False) for vectors in (True, False) if text or vectors
}
# Recalls: a Recall node per recorded search, RECALLED edges to the memories it returned that
# still exist (same namespace only), and HAS_RECALL from the step that made it (same
# namespace, workflow, run and step index) if that step is stored; a step stored later links
# itself (see LINK_RECALLS). ``step_ns`` is the namespace of the step's trace (memkit._recall.
# step_namespace): a step whose trace lives in another namespace than the one it searched is
# not linked, so a namespace's graph never holds another namespace's memories.
RECALL_WRITE = """
UNWIND $recalls AS c
CREATE (r:Recall {id: c.id, key: c.key, ns: c.ns, step_ns: c.step_ns, user_id: c.user_id,
                  agent_id: c.agent_id, created_us: c.created_us, kind: c.kind, query: c.query, mode: c.mode,
                  workflow_id: c.workflow_id, run_id: c.run_id, step_index: c.step_index,
                  step_name: c.step_name, body: c.body})
WITH count(*) AS written
UNWIND $hits AS h
MATCH (r:Recall {key: h.recall_key})
MATCH (m:Memory {key: h.memory_key})
WHERE m.id = h.memory_id AND m.user_id = h.user_id AND m.agent_id = h.agent_id
CREATE (r)-[:RECALLED {id: h.id, rank: h.rank, score: h.score}]->(m)
WITH count(*) AS linked
UNWIND $recalls AS c
MATCH (r:Recall {key: c.key})
MATCH (st:Step {workflow_id: c.workflow_id})
WHERE c.step_index IS NOT NULL AND c.step_ns = c.ns AND st.order = c.step_index AND st.user_id = c.user_id
  AND st.agent_id = c.agent_id AND coalesce(st.run_id, '') = coalesce(c.run_id, '')
CREATE (st)-[:HAS_RECALL {id: c.id + ':' + st.id}]->(r)
RETURN size($recalls) AS written
"""
# A step written after the recalls it made (the usual order: a step is stored when it ends).
LINK_RECALLS = """
UNWIND $steps AS s
MATCH (st:Step {id: s.id})
MATCH (r:Recall {ns: s.ns_key})
WHERE s.order IS NOT NULL AND coalesce(r.step_ns, r.ns) = r.ns AND r.workflow_id = s.workflow_id
  AND r.step_index = s.order AND coalesce(r.run_id, '') = coalesce(s.run_id, '')
CREATE (st)-[:HAS_RECALL {id: r.id + ':' + st.id}]->(r)
WITH count(*) AS recalled
"""
RECALL_IDS = "UNWIND $keys AS k MATCH (r:Recall {key: k}) RETURN r.id AS id"
RECALLS = (
    "MATCH (r:Recall)"
    " WHERE ($user_id IS NULL OR r.user_id = $user_id) AND ($agent_id IS NULL OR r.agent_id = $agent_id)"
    " AND ($workflow_id IS NULL OR r.workflow_id = $workflow_id) AND ($run_id IS NULL OR r.run_id = $run_id)"
    " RETURN r.id AS id, r.user_id AS user_id, r.agent_id AS agent_id, r.workflow_id AS workflow_id,"
    " r.run_id AS run_id, r.body AS body ORDER BY r.created_us, r.id"
)
RECALL = (
    "MATCH (r:Recall {key: $key}) WHERE r.id = $id"
    " RETURN r.id AS id, r.user_id AS user_id, r.agent_id AS agent_id, r.body AS body"
)

# Marks: a node per mark, keyed by its id (derived from namespace and target, see memkit._marks),
# so marking a target again replaces the node's properties. Not linked to the recall or step it
# judges: like a recall, a mark outlives them, and the graph views stay those of the memories.
MARK_WRITE = """
UNWIND $marks AS k
MERGE (n:Mark {key: k.key})
SET n.id = k.id, n.ns = k.ns, n.user_id = k.user_id, n.agent_id = k.agent_id, n.created_us = k.created_us,
    n.workflow_id = k.workflow_id, n.run_id = k.run_id, n.body = k.body
RETURN count(n) AS written
"""
MARK_REMOVE = (
    "UNWIND $keys AS k MATCH (n:Mark {key: k}) WHERE n.user_id = $user_id AND n.agent_id = $agent_id"
    " DELETE n RETURN count(*) AS removed"
)
MARKS = (
    "MATCH (n:Mark)"
    " WHERE ($user_id IS NULL OR n.user_id = $user_id) AND ($agent_id IS NULL OR n.agent_id = $agent_id)"
    " AND ($workflow_id IS NULL OR n.workflow_id = $workflow_id) AND ($run_id IS NULL OR n.run_id = $run_id)"
    " RETURN n.body AS body ORDER BY n.created_us, n.id"
)

NAMESPACES = (
    "MATCH (m:Memory)"
    " RETURN m.user_id AS user_id, m.agent_id AS agent_id, count(m) AS n,"
    " min(m.created_us) AS first_us, max(m.created_us) AS last_us"
    " ORDER BY user_id, agent_id"
)

STATS = (
    "MATCH (m:Memory)"
    " WITH count(m) AS memories, sum(CASE WHEN m.type = 'trace' THEN 1 ELSE 0 END) AS traces,"
    " collect(DISTINCT [m.user_id, m.agent_id]) AS spaces"
    " RETURN memories, traces, size(spaces) AS namespaces"
)

PING = "RETURN 1 AS ok"

# The newest memories of a scope: the seeds of a graph export.
GRAPH_SEEDS = (
    "MATCH (m:Memory)"
    " WHERE ($user_id IS NULL OR m.user_id = $user_id) AND ($agent_id IS NULL OR m.agent_id = $agent_id)"
    " AND ($workflow_id IS NULL OR m.workflow_id = $workflow_id)"
    " WITH m ORDER BY m.created_us DESC, m.seq DESC LIMIT $limit"
    " RETURN properties(m) AS props"
)

# One hop out of a set of nodes of one label (labels come from the schema, never from input).
# Edges come back as scalars; properties are fetched once per new node with NODES.
_EXPAND = (
    "UNWIND $ids AS nid"
    " MATCH (a:{label} {{{prop}: nid}})-[r]-(b)"
    " RETURN type(r) AS type, r.id AS id, r.order AS order, r.field AS field, r.rank AS rank, r.score AS score,"
    " startNode(r).id AS source, endNode(r).id AS target, labels(b) AS labels, b.id AS bid, b.key AS bkey"
)
_LOOKUP = {"Memory": "key", "Namespace": "key", "Entity": "key", "Workflow": "key", "Trace": "key",
           "Tool": "key", "Step": "id", "Recall": "key"}
EXPAND = {label: _EXPAND.format(label=label, prop=prop) for label, prop in (("Memory", "key"), ("Step", "id"),
                                                                         ("Trace", "id"), ("Recall", "id"))}
NODES = {
    label: f"UNWIND $ids AS nid MATCH (n:{label} {{{prop}: nid}}) RETURN properties(n) AS props"
    for label, prop in _LOOKUP.items()
}

# One node and its relationships, newest neighbours first (labels come from the schema, never from input).
# Memories are found through their indexed key, steps and traces through their indexed id.
_BY = {"Memory": "key", "Step": "id", "Trace": "id", "Recall": "id"}
AROUND = {
    label: (
        f"MATCH (a:{label} {{{_BY.get(label, 'id')}: $nid}})-[r]-(b) WHERE a.id = $id"
        " RETURN type(r) AS type, r.id AS id, r.order AS order, r.field AS field, r.rank AS rank, r.score AS score,"
        " startNode(r).id AS source, endNode(r).id AS target, labels(b) AS labels, properties(b) AS props"
        " ORDER BY coalesce(b.created_us, 0) DESC LIMIT $limit"
    )
    for label in NODE_LABELS
}
NODE_AT = {
    label: f"MATCH (n:{label} {{{_BY.get(label, 'id')}: $nid}}) WHERE n.id = $id RETURN properties(n) AS props"
    for label in NODE_LABELS
}

# Two hops from one memory through what it shares (entities, steps, tools): the
# memories related to it. Used by the graph bench and by neighbourhood views.
NEIGHBOURS = (
    "MATCH (m:Memory {key: $key})-[:MENTIONS]->(e:Entity)<-[:MENTIONS]-(other:Memory)"
    " WHERE other.id <> m.id"
    " RETURN other.id AS id, collect(DISTINCT e.name) AS via, count(DISTINCT e) AS shared"
    " ORDER BY shared DESC, id LIMIT $limit"
)

_PAGE = 1_000
_EXPORT_CHUNK = 2_000
_WRITE_CHUNK = 2_000


class Dialect(abc.ABC):
    """What differs between graph databases; everything else is shared Cypher.

    Subclasses give the index DDL, the vector procedure and its score scale,
    and execution (:meth:`read`, :meth:`write`).
    """

    name: ClassVar[str] = "graph"
    # True when :meth:`write` runs all its statements in one transaction.
    transactional: ClassVar[bool] = False

    @abc.abstractmethod
    def schema_statements(self) -> list[str]:
        """Index and constraint DDL, each safe to run again."""

    @abc.abstractmethod
    def vector_schema_statements(self, dim: int) -> list[str]:
        """Vector index DDL for ``Memory.embedding`` with cosine similarity."""

    @abc.abstractmethod
    def vector_value(self, expr: str) -> str:
        """How a list of floats is stored as a vector property."""

    def write_statement(self, relink: bool, embedding: bool) -> str:
        return WRITE.replace("{relink}", RELINK if relink else "").replace(
            "{link_recalls}", LINK_RECALLS if relink else "").replace(
            "{embedding}", f", embedding: {self.vector_value('r.embedding')}" if embedding else "")

    def hits_statement(self) -> str:
        """The rows of search hits (``$keys``, one namespace)."""
        return (
            "UNWIND $keys AS k MATCH (m:Memory {key: k}) WHERE m.ns = $ns"
            f" RETURN {_MEMORY_FIELDS}, m.seq AS seq"
        )

    def statements(self) -> list[str]:
        """Every Cypher statement this dialect can send (checked by the Cypher linter in tests)."""
        return [
            *self.schema_statements(),
            *self.vector_schema_statements(384),
            *(self.write_statement(relink, vec) for relink in (True, False) for vec in (True, False)),
            DELETE, TIDY.replace("{relink}", RELINK),
            RESET, SELECT, GET, EXISTING_IDS, EXPORT, NAMESPACES, STATS, PING, GRAPH_SEEDS,
            NS_FINGERPRINT, *NS_PAGE.values(), RECALL_WRITE, RECALL_IDS, RECALLS, RECALL,
            MARK_WRITE, MARK_REMOVE, MARKS,
            *EXPAND.values(), *NODES.values(), NEIGHBOURS,
            *AROUND.values(), *NODE_AT.values(), self.hits_statement(),
        ]

    @abc.abstractmethod
    async def read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Run one read-only statement; rows as dicts keyed by the RETURN aliases."""

    @abc.abstractmethod
    async def write(self, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
        """Run write statements in order (in one transaction where the database has them)."""

    async def ensure_schema(self) -> None:
        await self.write([(s, {}) for s in self.schema_statements()])

    async def ensure_vector_schema(self, dim: int) -> None:
        await self.write([(s, {}) for s in self.vector_schema_statements(dim)])

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections; again is a no-op; a call after it raises a :class:`~memkit.StorageError`."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the database is, without credentials."""



Fingerprint = tuple[int, int | None, int]  # (memories, newest seq, checksum of seqs): see NS_FINGERPRINT


class _NamespaceCache:
    """What this process keeps of one namespace for searching: memkit's BM25 index of its
    memories (the keyword leg, scored as SQLite and in-memory score it) and its vectors in a
    :class:`~memkit._retrieval.VectorIndex` (the semantic leg, scored exactly as SQLite scores it).

    The database's vector index ranks the whole graph, so a namespace that holds a small share of
    it got fewer and approximate hits; scoring the namespace's own vectors gives every backend the
    same dense leg (at the memory SQLite spends on it: 4 bytes a dimension a memory).

    Read once by paging the namespace (the vectors only when a semantic or hybrid search first
    needs them); valid while the database's :data:`NS_FINGERPRINT` equals ``fingerprint`` (checked
    before every search, so another process's writes and deletes are seen: new memories are read
    in, anything else rebuilds the cache). This process's writes fold in; its deletes and resets
    drop the cache.
    """

    def __init__(self, fingerprint: Fingerprint) -> None:
        self.fingerprint = fingerprint
        self.vectors: VectorIndex | None = None
        self.index = KeywordIndex()
        self.key_of: dict[str, int] = {}  # memory id -> index key
        self.ids: list[str] = []  # index key -> memory id
        self.ages: list[tuple[int, int]] = []  # index key -> (created_us, seq): larger is newer
        # The adapter may be driven from several threads (sync facade, notebooks); the index is not
        # safe to search while it grows.
        self._lock = threading.Lock()

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

    def dense(self, query: np.ndarray, depth: int, until_us: int | None, extra: Iterable[str]) -> DenseScores:
        """The ``depth`` memories (ids) nearest ``query`` created at or before ``until_us`` if
        given, with the cosine of ``extra`` ids too (the keyword hits)."""
        with self._lock:
            assert self.vectors is not None
            allowed = None if until_us is None else (
                lambda keys: {k for k in keys if self.ages[k][0] <= until_us})
            scores = dense_leg(self.vectors, query, depth, allowed,
                               [self.key_of[i] for i in extra if i in self.key_of])
            return DenseScores({self.ids[k]: c for k, c in scores.cosine.items()},
                               [self.ids[k] for k in scores.ranked], scores.mean, scores.std)

    def neighbours(self, ids: Iterable[str], reach: int) -> dict[str, list[tuple[int, str]]]:
        """For fusion's ``context``: the memories written up to ``reach`` places around each of
        ``ids`` in this namespace, as ``(distance, id)`` (index keys follow write order)."""
        with self._lock:
            around = self.index.neighbours((self.key_of[i] for i in ids if i in self.key_of), reach)
            return {self.ids[key]: [(d, self.ids[other]) for d, other in near] for key, near in around.items()}

    def top(self, terms: list[str], k: int | None, until_us: int | None) -> list[tuple[str, float]]:
        """The best ``k`` (``None``: every) matching memories by BM25 as ``(id, score)``, ties
        newest first, created at or before ``until_us`` if given."""
        with self._lock:
            keys, scores = self.index.top(terms, len(self.index) if k is None else k)
            return [(self.ids[key], score) for key, score in zip(keys.tolist(), scores.tolist(), strict=True)
                    if until_us is None or self.ages[key][0] <= until_us]


def _record(row: Mapping[str, Any]) -> Record:
    return Record(
        id=row["id"], user_id=row["user_id"], agent_id=row["agent_id"], content=row["content"],
        metadata=json.loads(row["metadata"]), created_us=int(row["created_us"]),
    )


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
        # Per namespace key: its keyword index and cosine moments, while its fingerprint holds.
        self._caches: dict[str, _NamespaceCache] = {}
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
        self._cache_after_write(statements)
        return ids

    def _cache_after_write(self, statements: list[Statement]) -> None:
        """Fold this process's new memories into the cached namespaces (another process's writes
        are caught by the fingerprint check before each search)."""
        for _, params in statements:
            for memory in params["memories"]:
                cache = self._caches.get(memory["ns_key"])
                if cache is not None and cache.add([memory]):
                    count, last, checksum = cache.fingerprint
                    seq = int(memory["seq"])
                    cache.fingerprint = (count + 1, max(last or 0, seq), checksum + seq % _CHECKSUM)

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
        self._caches.pop(node_key("Namespace", row["user_id"], row["agent_id"]), None)
        traces = sorted({r["tk"] for r in deleted if r.get("tk") is not None})
        await self.dialect.write([(
            TIDY.replace("{relink}", RELINK),
            {"traces": traces, "user_id": row["user_id"], "agent_id": row["agent_id"]},
        )])
        return True

    async def reset(self) -> bool:
        await self._ready()
        await self.dialect.write([(RESET, {})])
        self._caches.clear()
        return True

    # -- reads -----------------------------------------------------------------------

    async def _select(
        self, user: str, agent: str, conditions: tuple[Condition, ...], offset: int, limit: int,
        until_us: int | None = None,
    ) -> list[Record]:
        ns = node_key("Namespace", user, agent)
        if not conditions:
            rows = await self._read(SELECT, {"ns": ns, "skip": offset, "limit": limit, "until_us": until_us})
            return [r for r in map(_record, rows) if (r.user_id, r.agent_id) == (user, agent)]
        # Filters are applied in Python with the reference semantics, a page at a time.
        kept: list[Record] = []
        skip = 0
        while len(kept) < offset + limit:
            rows = await self._read(SELECT, {"ns": ns, "skip": skip, "limit": _PAGE, "until_us": until_us})
            kept.extend(r for r in map(_record, rows)
                        if (r.user_id, r.agent_id) == (user, agent) and matches(conditions, r.metadata))
            if len(rows) < _PAGE:
                break
            skip += _PAGE
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
        user, agent = request.user_id, request.agent_id
        if not request.query:
            records = await self._select(user, agent, request.conditions, 0, request.limit, request.until_us)
            return [r.to_item() for r in records]
        found: dict[str, Record] = {}
        ages: dict[str, tuple[int, int]] = {}
        keyword: list[tuple[str, float]] = []
        cache = await self._namespace_cache(request, vectors=request.mode != "keyword")
        if request.mode != "semantic":
            for record, seq, score in await self._keyword(request, cache):
                found[record.id], ages[record.id] = record, (record.created_us, seq)
                keyword.append((record.id, score))
        dense = None
        if request.mode != "keyword":
            dense = await self._dense(request, found, ages, cache)
        ranked = _pipeline.rank(request, keyword, dense, lambda keys: ages, cache.neighbours)
        return [found[k].to_item(score, details) for k, score, details in ranked]

    @property
    def search_modes(self) -> tuple[str, ...]:
        """The ``mode=`` values :meth:`search` answers (all three with an embedder, else keyword)."""
        return modes_for(self.embedder is not None)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embedder is not None
        matrix = self.embedder.embed(texts)
        return [[float(x) for x in row] for row in matrix]

    def _in(self, record: Record, request: _pipeline.SearchRequest) -> bool:
        # Re-checked in Python: the namespace (FalkorDB's range index trims whitespace) and the filters.
        return (record.user_id, record.agent_id) == (request.user_id, request.agent_id) and matches(
            request.conditions, record.metadata)

    async def _keyword(
        self, request: _pipeline.SearchRequest, cache: _NamespaceCache
    ) -> list[tuple[Record, int, float]]:
        """The keyword leg: the namespace's best ``depth`` memories by memkit's BM25, ties newest
        first, as ``(record, seq, score)``. ``as_of`` is applied from the cache; filters on the
        rows read back."""
        terms = analyze_query(request.query)
        if not terms:
            return []
        depth = request.depth
        exact = not request.conditions and request.until_us is None
        ranked = cache.top(terms, depth if exact else None, request.until_us)
        ns = node_key("Namespace", request.user_id, request.agent_id)
        page = depth if not request.conditions else max(depth, _PAGE)
        hits: list[tuple[Record, int, float]] = []
        for start in range(0, len(ranked), page):
            chunk = ranked[start : start + page]
            rows = await self._rows(ns, [i for i, _ in chunk])
            for memory_id, score in chunk:
                row = rows.get(memory_id)  # gone if another process deleted it since the fingerprint
                if row is not None and self._in(record := _record(row), request):
                    hits.append((record, int(row["seq"]), score))
                    if len(hits) == depth:
                        return hits
        return hits

    async def _rows(self, ns: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rows of memories ``ids`` of namespace key ``ns`` that still exist, by id."""
        if not ids:
            return {}
        rows = await self._read(self.dialect.hits_statement(), {"keys": [memory_key(i) for i in ids], "ns": ns})
        return {row["id"]: row for row in rows}

    async def _dense(
        self, request: _pipeline.SearchRequest, found: dict[str, Record], ages: dict[str, tuple[int, int]],
        cache: _NamespaceCache,
    ) -> DenseScores:
        """The semantic leg, scored in this process over the namespace's own vectors (see
        :class:`_NamespaceCache`): the best ``depth`` memories that pass the filters, the cosine
        of every keyword hit in ``found``, and the namespace's mean and spread of cosine."""
        ns = node_key("Namespace", request.user_id, request.agent_id)
        depth = request.depth
        query = np.asarray(self._embed([request.query])[0], dtype=np.float32)
        keyword_ids = list(found)
        total = len(cache.vectors) if cache.vectors is not None else 0
        want = depth
        while True:
            scores = cache.dense(query, want, request.until_us, keyword_ids)
            missing = [i for i in scores.ranked if i not in found]
            for memory_id, row in (await self._rows(ns, missing)).items():
                # a filter's misses are read once per search: the next, wider pass skips them
                record = _record(row)
                if self._in(record, request):
                    found[memory_id], ages[memory_id] = record, (record.created_us, int(row["seq"]))
            passing = [i for i in scores.ranked if i in found][:depth]
            if len(passing) >= depth or want >= total:
                break
            want = min(want * 4, total)  # a selective filter: look deeper
        cosine = {i: scores.cosine[i] for i in (*keyword_ids, *passing) if i in scores.cosine}
        return DenseScores(cosine, passing, scores.mean, scores.std)

    async def _namespace_cache(self, request: _pipeline.SearchRequest, *, vectors: bool) -> _NamespaceCache:
        """The namespace's search cache (with its vectors if ``vectors``), current with the
        database: one aggregate query when nothing changed, new memories read in when only memories
        were added, else read anew."""
        ns = node_key("Namespace", request.user_id, request.agent_id)
        row = (await self._read(NS_FINGERPRINT, {"ns": ns}))[0]
        fingerprint = (int(row["n"]), None if row["last"] is None else int(row["last"]), int(row["checksum"] or 0))
        cache = self._caches.get(ns)
        if cache is not None and cache.fingerprint != fingerprint and not await self._catch_up(
                cache, ns, fingerprint, request):
            cache = None
        vectors = vectors and self.embedder is not None
        fresh = cache is None
        if cache is None:
            cache = _NamespaceCache(fingerprint)
        if fresh or (vectors and cache.vectors is None):
            # Built aside and set at the end: this process's writes meanwhile do not fold into half an index.
            built = VectorIndex(int(self.embedder.dim)) if vectors else None
            async for rows in self._namespace_pages(ns, request, text=fresh, vectors=vectors):
                if fresh:
                    cache.add(rows)
                if built is not None:
                    cache.add_vectors(built, rows)
            if built is not None:
                cache.vectors = built
            self._caches[ns] = cache
        return cache

    async def _catch_up(
        self, cache: _NamespaceCache, ns: str, fingerprint: Fingerprint, request: _pipeline.SearchRequest
    ) -> bool:
        """Read the memories written since the cache's newest one; True if that explains the
        database's ``fingerprint`` (only additions), False if the cache must be read anew."""
        count, last, checksum = cache.fingerprint
        rows = [row async for page in self._namespace_pages(
            ns, request, text=True, vectors=cache.vectors is not None,
            after=-(2**62) if last is None else last, exact=False) for row in page]
        new = [row for row in rows if row["id"] not in cache.key_of]
        seqs = [int(row["seq"]) for row in new]
        projected = (count + len(new), max([last or 0, *seqs]) if count + len(new) else None,
                     checksum + sum(seq % _CHECKSUM for seq in seqs))
        if projected != fingerprint:
            return False
        cache.add([row for row in new if (row["user_id"], row["agent_id"]) == (request.user_id, request.agent_id)])
        cache.fingerprint = fingerprint
        return True

    async def _namespace_pages(
        self, ns: str, request: _pipeline.SearchRequest, *, text: bool, vectors: bool,
        after: int = -(2**62), exact: bool = True,
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The namespace's memories written at or after seq ``after``, in write order, a page at a
        time; ``exact``: only rows of exactly the request's namespace."""
        after_id = ""
        while True:
            rows = await self._read(NS_PAGE[(text, vectors)],
                                    {"ns": ns, "after": after, "after_id": after_id, "limit": _PAGE})
            yield [row for row in rows if not exact
                   or (row["user_id"], row["agent_id"]) == (request.user_id, request.agent_id)]
            if len(rows) < _PAGE:
                return
            after, after_id = rows[-1]["seq"], rows[-1]["id"]

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
        return _record(rows[0]).to_item() if rows else None

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
                yield _record(row).to_item()
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
        seeds = await self._read(GRAPH_SEEDS, {
            "user_id": user_id, "agent_id": agent_id, "workflow_id": workflow_id, "limit": limit,
        })
        out = GraphBuilder()
        lookups: dict[str, list[str]] = {"Memory": [], "Step": [], "Trace": [], "Recall": []}
        for row in seeds:
            out.node("Memory", row["props"])
            lookups["Memory"].append(row["props"]["key"])
        wanted: dict[str, str] = {}  # node id -> label, for nodes whose properties are still to fetch
        edges: list[dict[str, Any]] = []
        for label in ("Memory", "Step", "Trace", "Recall"):
            ids = lookups[label]
            for start in range(0, len(ids), _PAGE):
                rows = await self._read(EXPAND[label], {"ids": ids[start : start + _PAGE]})
                new: dict[str, list[str]] = {}
                for row in rows:
                    other = _label(row["labels"])
                    if other is None:
                        continue
                    known = row["bid"] in out.nodes or row["bid"] in wanted
                    # Steps and memories enter only through their own memory, recalls only through
                    # the step that made them (a workflow's recalls, not every search), and the
                    # memories a step recalled through its recall.
                    if not known and (
                        (other == "Recall" and label != "Step")
                        or (other in ("Step", "Memory") and label not in ("Memory", "Recall"))
                        or (other == "Step" and label == "Recall")
                    ):
                        continue
                    if not known:
                        wanted[row["bid"]] = other
                        new.setdefault(other, []).append(row["bkey"] if _LOOKUP[other] == "key" else row["bid"])
                        if other in lookups:
                            lookups[other].append(row["bid"])
                    edges.append(row)
                await self._fetch_nodes(out, new)
        for row in edges:
            if row["source"] in out.nodes and row["target"] in out.nodes:
                out.edge(row["type"], row["id"], row["source"], row["target"], row)
        return out.build()

    async def neighbourhood(
        self, node_id: str, *, label: str | None = None, depth: int = 1, limit: int = 50,
    ) -> MemoryGraph:
        """A node and its neighbours up to ``depth`` hops (at most ``limit`` per node walked)."""
        check_id(node_id, "node id", self.limits)
        out = GraphBuilder()
        labels = [label] if label in NODE_LABELS else list(NODE_LABELS)
        start: str | None = None
        for candidate in labels:
            nid = memory_key(node_id) if candidate == "Memory" else node_id
            rows = await self._read(NODE_AT[candidate], {"nid": nid, "id": node_id})
            if rows:
                out.node(candidate, rows[0]["props"])
                start = candidate
                break
        if start is None:
            return out.build()
        frontier = [(node_id, start)]
        edges: list[dict[str, Any]] = []
        for _ in range(depth):
            reached: list[tuple[str, str]] = []
            for current, kind in frontier:
                nid = memory_key(current) if kind == "Memory" else current
                for row in await self._read(AROUND[kind], {"nid": nid, "id": current, "limit": limit}):
                    other = _label(row["labels"])
                    if other is None:
                        continue
                    if row["props"]["id"] not in out.nodes:
                        out.node(other, row["props"])
                        reached.append((row["props"]["id"], other))
                    edges.append(row)
            frontier = reached
        for row in edges:
            out.edge(row["type"], row["id"], row["source"], row["target"], row)
        return out.build()

    async def _fetch_nodes(self, out: GraphBuilder, new: dict[str, list[str]]) -> None:
        for label, keys in new.items():
            for start in range(0, len(keys), _PAGE):
                for row in await self._read(NODES[label], {"ids": keys[start : start + _PAGE]}):
                    out.node(label, row["props"])

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


def _label(labels: Sequence[str]) -> str | None:
    for label in labels:
        if label in NODE_LABELS:
            return label
    return None


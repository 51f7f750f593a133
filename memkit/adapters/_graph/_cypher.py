"""The Cypher every graph database runs, and the :class:`Dialect` seam for what differs.

The statements below are the portable Cypher subset that runs on FalkorDB 4.x
and Neo4j 5 (no EXISTS{}, COUNT{}, ``=~``, temporal types or map properties).
A dialect supplies only what truly differs: index DDL, the vector index
procedure and its score scale, and how statements are executed (Neo4j runs a
batch in one transaction; FalkorDB runs each statement atomically, so every
logical write is a single statement). Each database's dialect, with its own
DDL text, lives beside its adapter (:mod:`memkit.adapters._falkordb._adapter`,
:mod:`memkit.adapters._neo4j._adapter`).

Every value is a parameter; labels and property names come from the schema
(:mod:`memkit._core._graph_schema`), never from input.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from memkit._core._graph_schema import NODE_LABELS

__all__ = ["PAGE", "Dialect", "Statement"]


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

EXISTING_IDS = (
    "UNWIND $keys AS k MATCH (m:Memory {key: k}) RETURN m.id AS id, m.user_id AS user_id, m.agent_id AS agent_id"
)

EXPORT = (
    "MATCH (m:Memory)"
    " WHERE ($user_id IS NULL OR m.user_id = $user_id) AND ($agent_id IS NULL OR m.agent_id = $agent_id)"
    " AND (m.created_us > $after_us OR (m.created_us = $after_us AND m.seq > $after_seq))"
    f" RETURN {_MEMORY_FIELDS}, m.seq AS seq"
    " ORDER BY m.created_us, m.seq LIMIT $limit"
)

# A namespace's state for the search cache (:mod:`memkit.adapters._graph._search`): how many memories, the
# newest write, and a checksum of every write (so another process deleting one memory and adding
# one, which leaves the count alone, still changes it). One small aggregate per search.
CHECKSUM = 1_000_000_007
NS_FINGERPRINT = (
    "MATCH (m:Memory {ns: $ns})"
    f" RETURN count(m) AS n, max(m.seq) AS last, sum(m.seq % {CHECKSUM}) AS checksum"
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
# itself (see LINK_RECALLS). ``step_ns`` is the namespace of the step's trace (memkit._recall._recording.
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

# Marks: a node per mark, keyed by its id (derived from namespace and target, see memkit._recall._marks),
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
LOOKUP = {"Memory": "key", "Namespace": "key", "Entity": "key", "Workflow": "key", "Trace": "key",
           "Tool": "key", "Step": "id", "Recall": "key"}
EXPAND = {label: _EXPAND.format(label=label, prop=prop) for label, prop in (("Memory", "key"), ("Step", "id"),
                                                                         ("Trace", "id"), ("Recall", "id"))}
NODES = {
    label: f"UNWIND $ids AS nid MATCH (n:{label} {{{prop}: nid}}) RETURN properties(n) AS props"
    for label, prop in LOOKUP.items()
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

#: Rows per page when a read is paged (filters, the search cache, graph exports).
PAGE = 1_000


class Dialect(abc.ABC):
    """What differs between graph databases; everything else is shared Cypher.

    Subclasses give the index DDL, the vector procedure and its score scale,
    and execution (:meth:`read`, :meth:`write`).
    """

    name: ClassVar[str] = "graph"
    # True when :meth:`write` runs all its statements in one transaction.
    transactional: ClassVar[bool] = False
    #: The largest SKIP the server counts right: Neo4j adds SKIP and LIMIT in 64 bits ("long
    #: overflow" past that), FalkorDB keeps 32 bits of it (2**32 skips nothing).
    max_skip: ClassVar[int] = 2**62

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

"""The memory graph of any store, as typed nodes and edges (networkx and pandas views).

Graph databases return the graph they store; the SQLite and in-memory adapters
build the same graph from their rows (same node ids and properties), so graph
views work without a graph server. See ``docs/graph.md`` for the schema.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memkit._errors import InvalidInputError
from memkit._graphschema import (
    DEFAULT_ENTITY_FIELDS,
    EDGE_PROPERTIES,
    NODE_PROPERTIES,
    RecordParts,
    edge_id,
    record_parts,
)
from memkit._models import MemoryItem
from memkit._protocols import SupportsExport
from memkit._records import Record, to_us
from memkit._validate import check_id

if TYPE_CHECKING:
    import networkx
    import pandas

__all__ = ["GraphEdge", "GraphNode", "MemoryGraph", "amemory_graph", "memory_graph"]

DEFAULT_GRAPH_LIMIT = 1_000


@dataclass(frozen=True)
class GraphNode:
    """One node: its id, its type (a schema label) and its properties."""

    id: str
    type: str
    properties: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class GraphEdge:
    """One directed relationship between two node ids."""

    id: str
    type: str
    source: str
    target: str
    properties: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass
class MemoryGraph:
    """Typed nodes and edges of a memory store.

    Examples
    --------
    >>> g = memory_graph(memkit.open("memory://"))            # doctest: +SKIP
    >>> g.nodes_frame().groupby("type").size()                 # doctest: +SKIP
    """

    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)

    def node_types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.type] = counts.get(node.type, 0) + 1
        return counts

    def edge_types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for edge in self.edges:
            counts[edge.type] = counts.get(edge.type, 0) + 1
        return counts

    def to_networkx(self) -> networkx.MultiDiGraph:
        """A ``networkx.MultiDiGraph``; node and edge attributes are ``type`` plus the properties."""
        try:
            import networkx as nx
        except ImportError:  # pragma: no cover - depends on the environment
            from memkit._errors import missing_extra

            raise missing_extra("networkx", "graph") from None
        graph = nx.MultiDiGraph()
        for node in self.nodes:
            graph.add_node(node.id, **{**node.properties, "type": node.type})
        for edge in self.edges:
            graph.add_edge(edge.source, edge.target, key=edge.id, **{**edge.properties, "type": edge.type})
        return graph

    def nodes_frame(self) -> pandas.DataFrame:
        """One row per node: ``id``, ``type`` and one column per property."""
        import pandas as pd

        rows = [{**n.properties, "id": n.id, "type": n.type} for n in self.nodes]
        frame = pd.DataFrame(rows, columns=_columns(["id", "type"], rows))
        return frame

    def edges_frame(self) -> pandas.DataFrame:
        """One row per edge: ``id``, ``type``, ``source``, ``target`` and its properties."""
        import pandas as pd

        rows = [{**e.properties, "id": e.id, "type": e.type, "source": e.source, "target": e.target}
                for e in self.edges]
        return pd.DataFrame(rows, columns=_columns(["id", "type", "source", "target"], rows))


def _columns(first: list[str], rows: list[dict[str, Any]]) -> list[str]:
    rest = sorted({k for r in rows for k in r} - set(first))
    return [*first, *rest]


def node_properties(label: str, props: dict[str, Any]) -> dict[str, Any]:
    """The public properties of a node (missing ones as ``None``)."""
    return {k: props.get(k) for k in NODE_PROPERTIES[label]}


def edge_properties(kind: str, props: dict[str, Any]) -> dict[str, Any]:
    return {k: props.get(k) for k in EDGE_PROPERTIES.get(kind, ())}


class GraphBuilder:
    """Accumulate nodes and edges without duplicates."""

    def __init__(self) -> None:
        self.nodes: dict[str, GraphNode] = {}
        self.edges: dict[str, GraphEdge] = {}

    def node(self, label: str, props: dict[str, Any]) -> None:
        node_id = str(props["id"])
        if node_id not in self.nodes:
            self.nodes[node_id] = GraphNode(node_id, label, node_properties(label, props))

    def edge(self, kind: str, edge_id_: str, source: str, target: str, props: dict[str, Any] | None = None) -> None:
        if edge_id_ not in self.edges:
            self.edges[edge_id_] = GraphEdge(edge_id_, kind, source, target, edge_properties(kind, props or {}))

    def build(self) -> MemoryGraph:
        return MemoryGraph(list(self.nodes.values()), list(self.edges.values()))


def graph_from_parts(parts: Iterable[RecordParts]) -> MemoryGraph:
    """Build the graph of some records the way the graph adapters store it."""
    out = GraphBuilder()
    steps: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        m = part.memory
        out.node("Namespace", {"id": m["ns_id"], "user_id": m["user_id"], "agent_id": m["agent_id"]})
        out.node("Memory", m)
        out.edge("HAS_MEMORY", m["rel_id"], m["ns_id"], m["id"])
        for x in part.mentions:
            out.node("Entity", x)
            out.edge("MENTIONS", x["rel_id"], x["memory_id"], x["id"], {"field": x["kind"]})
        s = part.step
        if s is None:
            continue
        common = {"user_id": s["user_id"], "agent_id": s["agent_id"], "workflow_id": s["workflow_id"]}
        out.node("Workflow", {"id": s["workflow_node"], **common})
        out.node("Trace", {"id": s["trace_node"], "run_id": s["run_id"], **common})
        out.node("Step", s)
        out.edge("HAS_TRACE", s["has_trace_id"], s["workflow_node"], s["trace_node"])
        out.edge("HAS_STEP", s["has_step_id"], s["trace_node"], s["id"], {"order": s["order"]})
        out.edge("RECORDED_AS", s["recorded_id"], s["id"], s["memory_id"])
        steps.setdefault(s["trace_node"], []).append(s)
        if part.tool is not None:
            t = part.tool
            out.node("Tool", t)
            out.edge("USES_TOOL", t["rel_id"], t["step_id"], t["id"])
    for chain in steps.values():
        chain.sort(key=lambda s: (s["sort"], s["created_us"], s["id"]))
        for a, b in itertools.pairwise(chain):
            out.edge("NEXT", edge_id("NEXT", a["id"], b["id"]), a["id"], b["id"])
    return out.build()


def _record(item: MemoryItem) -> Record:
    return Record(
        id=item.id, user_id=item.user_id or "", agent_id=item.agent_id or "", content=item.content,
        metadata=dict(item.metadata), created_us=to_us(item.created_at) if item.created_at else 0,
    )


async def _from_export(
    provider: Any, user_id: str | None, agent_id: str | None, workflow_id: str | None, limit: int,
    entity_fields: tuple[str, ...],
) -> MemoryGraph:
    if not isinstance(provider, SupportsExport):
        raise InvalidInputError(f"{type(provider).__name__} can neither export its records nor return a graph")
    records: list[Record] = []
    async for item in provider.export(user_id=user_id, agent_id=agent_id):
        if workflow_id is not None and not (
            item.metadata.get("type") == "trace" and item.metadata.get("workflow_id") == workflow_id
        ):
            continue
        records.append(_record(item))
    newest = records[::-1][:limit]  # export is oldest first; keep the newest `limit`
    return graph_from_parts(record_parts(r, entity_fields) for r in newest)


async def amemory_graph(
    mem: Any,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
    limit: int = DEFAULT_GRAPH_LIMIT,
) -> MemoryGraph:
    """Async form of :func:`memory_graph` (``mem`` must be a provider, not the sync facade)."""
    from memkit._sync import Memory

    provider = mem.provider if isinstance(mem, Memory) else mem
    for name, value in (("user_id", user_id), ("agent_id", agent_id), ("workflow_id", workflow_id)):
        if value is not None:
            check_id(value, name)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    graph_method = getattr(provider, "graph", None)
    if callable(graph_method):
        result = await graph_method(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, limit=limit)
        assert isinstance(result, MemoryGraph)
        return result
    fields = getattr(provider, "entity_fields", DEFAULT_ENTITY_FIELDS)
    return await _from_export(provider, user_id, agent_id, workflow_id, limit, tuple(fields))


def memory_graph(
    mem: Any,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
    limit: int = DEFAULT_GRAPH_LIMIT,
) -> MemoryGraph:
    """The memory graph of ``mem`` (a provider or a :class:`memkit.Memory`), for any adapter.

    Parameters
    ----------
    mem
        A provider or the sync facade returned by :func:`memkit.open`.
    user_id, agent_id
        Restrict to one user and/or agent (``None``: all).
    workflow_id
        Only the traces of this workflow, with their steps, tools and entities.
    limit
        At most this many memories (the newest), plus the nodes they connect to.

    Examples
    --------
    >>> mem = memkit.open("memory://")
    >>> _ = mem.add("TP53 knockdown", "u1", "bio", {"gene": "TP53"})
    >>> sorted(memory_graph(mem).node_types().items())
    [('Entity', 1), ('Memory', 1), ('Namespace', 1)]
    """
    from memkit._sync import Memory, run_sync

    if isinstance(mem, Memory):
        return run_sync(amemory_graph(mem.provider, user_id, agent_id, workflow_id, limit))
    return run_sync(amemory_graph(mem, user_id, agent_id, workflow_id, limit))

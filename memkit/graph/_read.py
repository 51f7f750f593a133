"""Reading the memory graph of any store: the whole (or a scope of) it, or one node's neighbourhood.

Graph databases return the graph they store; the SQLite and in-memory adapters build the same
graph from their rows (same node ids and properties), so graph views work without a graph server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memkit._core._errors import InvalidInputError
from memkit._core._graph_model import MemoryGraph, graph_from_parts
from memkit._core._graph_parts import GraphEdge, GraphNode, _record
from memkit._core._graph_schema import (
    DEFAULT_ENTITY_FIELDS,
    NODE_LABELS,
    RecordParts,
    key_id,
    node_key,
    record_parts,
)
from memkit._core._port import SupportsExport, SupportsGet, SupportsGraph, SupportsNamespaces, SupportsPaging
from memkit._core._records import Record
from memkit._core._validate import check_id

if TYPE_CHECKING:
    from memkit._core._port import MemoryProvider
    from memkit._sync import Memory

DEFAULT_GRAPH_LIMIT = 1_000
DEFAULT_NEIGHBOURS = 50
_PAGE = 500


async def _newest(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, filters: dict[str, Any] | None, limit: int,
) -> list[Record] | None:
    """The newest ``limit`` records of a scope through paging (``None``: the provider cannot page)."""
    if not isinstance(provider, SupportsPaging):
        return None
    if user_id is not None and agent_id is not None:
        spaces = [(user_id, agent_id)]
    elif isinstance(provider, SupportsNamespaces):
        spaces = [(ns.user_id, ns.agent_id) for ns in await provider.namespaces()
                  if user_id in (None, ns.user_id) and agent_id in (None, ns.agent_id)]
    else:
        return None
    records: list[Record] = []
    for user, agent in spaces:
        offset = 0
        while True:
            page = await provider.get_page(user, agent, offset=offset, limit=min(_PAGE, limit - offset),
                                           filters=filters)
            records.extend(_record(item) for item in page)
            offset += len(page)
            if len(page) < min(_PAGE, limit - offset + len(page)) or offset >= limit:
                break
    records.sort(key=lambda r: r.created_us, reverse=True)
    return records[:limit]


async def _from_export(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, workflow_id: str | None, limit: int,
    entity_fields: tuple[str, ...],
) -> MemoryGraph:
    filters = {"type": "trace", "workflow_id": workflow_id} if workflow_id is not None else None
    newest = await _newest(provider, user_id, agent_id, filters, limit)
    if newest is None:
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
    mem: Memory | MemoryProvider,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
    limit: int = DEFAULT_GRAPH_LIMIT,
) -> MemoryGraph:
    """Async form of :func:`memory_graph` (``mem`` must be a provider, not the sync facade)."""
    from memkit._sync import provider_of

    provider = provider_of(mem)
    for name, value in (("user_id", user_id), ("agent_id", agent_id), ("workflow_id", workflow_id)):
        if value is not None:
            check_id(value, name)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    if isinstance(provider, SupportsGraph):
        return await provider.graph(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, limit=limit)
    return await _from_export(provider, user_id, agent_id, workflow_id, limit, DEFAULT_ENTITY_FIELDS)


def memory_graph(
    mem: Memory | MemoryProvider,
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
    from memkit._sync import call

    return call(mem, amemory_graph, user_id, agent_id, workflow_id, limit)


def _check_node(node: str | GraphNode) -> None:
    if isinstance(node, GraphNode):
        if node.type not in NODE_LABELS:
            raise InvalidInputError(f"unknown node type {node.type!r}; expected one of {', '.join(NODE_LABELS)}")
        check_id(node.id, "node id")
    elif isinstance(node, str):
        check_id(node, "node id")
    else:
        raise InvalidInputError(f"node must be a node id or a GraphNode, got {type(node).__name__}")


def _trace_node(p: dict[str, Any]) -> str:
    return key_id(node_key("Trace", p.get("user_id") or "", p.get("agent_id") or "", p.get("workflow_id") or "",
                           p.get("run_id") or ""))


def _touches(part: RecordParts, node: GraphNode) -> bool:
    """Whether one record's graph fragment contains ``node`` (or, for a step, its trace)."""
    if node.type == "Memory":
        return bool(part.memory["id"] == node.id)
    if node.type == "Namespace":
        return bool(part.memory["ns_id"] == node.id)
    if node.type == "Entity":
        return any(x["id"] == node.id for x in part.mentions)
    s = part.step
    if s is None:
        return False
    if node.type == "Workflow":
        return bool(s["workflow_node"] == node.id)
    if node.type == "Trace":
        return bool(s["trace_node"] == node.id)
    if node.type == "Step":  # the whole trace: a step's neighbours include the steps before and after it
        return bool(s["trace_node"] == _trace_node(node.properties))
    return part.tool is not None and part.tool["id"] == node.id


def _filters_for(node: GraphNode) -> dict[str, Any] | None:
    """A metadata filter that narrows a scan to the records around ``node`` (exact match done after)."""
    p = node.properties
    if node.type in ("Workflow", "Trace", "Step") and isinstance(p.get("workflow_id"), str):
        return {"type": "trace", "workflow_id": p["workflow_id"]}
    if node.type == "Tool" and isinstance(p.get("name"), str):
        return {"type": "trace", "tool": p["name"]}
    # Entities are not narrowed: a value may sit in a list, which an equality filter never matches.
    return None


async def _row_records(
    provider: MemoryProvider, node: GraphNode, limit: int, fields: tuple[str, ...]
) -> list[RecordParts]:
    """The records of a row store whose graph fragment holds ``node``, newest first, at most ``limit``."""
    if node.type == "Memory":
        item = await provider.get(node.id) if isinstance(provider, SupportsGet) else None
        return [record_parts(_record(item), fields)] if item is not None else []
    user, agent = node.properties.get("user_id"), node.properties.get("agent_id")
    if not isinstance(user, str) or not isinstance(agent, str):
        return []
    # A step needs its whole trace; anything else needs `limit` records that touch it.
    want = None if node.type in ("Step", "Trace") else limit
    if not isinstance(provider, SupportsPaging):
        raise NotImplementedError(f"{provider!r} does not support get_page(), which a neighbourhood reads")
    found: list[RecordParts] = []
    for filters in (_filters_for(node), None):
        offset = 0
        while want is None or len(found) < want:
            page = await provider.get_page(user, agent, offset=offset, limit=_PAGE, filters=filters)
            for item in page:
                part = record_parts(_record(item), fields)
                if _touches(part, node):
                    found.append(part)
            offset += len(page)
            if len(page) < _PAGE:
                break
        # A numeric tool name does not match the string filter: scan once unfiltered.
        if found or filters is None:
            break
    return found if want is None else found[:want]


async def _resolve(provider: MemoryProvider, node_id: str, fields: tuple[str, ...]) -> GraphNode | None:
    """Find a node by id in a row store: a memory directly, anything else by rebuilding the graph."""
    if isinstance(provider, SupportsGet):
        item = await provider.get(node_id)
        if item is not None:
            return graph_from_parts([record_parts(_record(item), fields)]).node(node_id)
    if not isinstance(provider, SupportsExport):
        return None
    batch: list[RecordParts] = []
    async for item in provider.export():
        batch.append(record_parts(_record(item), fields))
        if len(batch) == _PAGE:
            found = graph_from_parts(batch).node(node_id)
            if found is not None:
                return found
            batch = []
    return graph_from_parts(batch).node(node_id) if batch else None


def _within(graph: MemoryGraph, start: str, limit: int) -> MemoryGraph:
    """``start`` and its direct neighbours in ``graph`` (at most ``limit`` of them, newest memories first)."""
    adjacent: dict[str, GraphEdge] = {}
    for e in graph.edges:
        if e.source == start and e.target not in adjacent:
            adjacent[e.target] = e
        elif e.target == start and e.source not in adjacent:
            adjacent[e.source] = e
    by_id = {n.id: n for n in graph.nodes}
    near = sorted(adjacent, key=lambda i: -(by_id[i].properties.get("created_us") or 0))[:limit]
    keep = {start, *near}
    return MemoryGraph([by_id[i] for i in keep if i in by_id],
                       [e for e in graph.edges if e.source in keep and e.target in keep])


async def _row_neighbourhood(provider: MemoryProvider, node: GraphNode, limit: int) -> MemoryGraph:
    fields = tuple(provider.entity_fields) if isinstance(provider, SupportsGraph) else DEFAULT_ENTITY_FIELDS
    parts = await _row_records(provider, node, limit, fields)
    return _within(graph_from_parts(parts), node.id, limit)


async def aneighbourhood(
    mem: Memory | MemoryProvider, node: str | GraphNode, depth: int = 1, limit: int = DEFAULT_NEIGHBOURS,
) -> MemoryGraph:
    """Async form of :func:`neighbourhood` (``mem`` may be a provider or the sync facade)."""
    from memkit._sync import provider_of

    provider = provider_of(mem)
    _check_node(node)
    for name, value, top in (("depth", depth, 3), ("limit", limit, 1_000)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise InvalidInputError(f"{name} must be an integer from 1 to {top}, got {value!r}")
    if isinstance(provider, SupportsGraph):  # graph databases walk their own edges
        start = node.id if isinstance(node, GraphNode) else node
        return await provider.neighbourhood(start, label=node.type if isinstance(node, GraphNode) else None,
                                            depth=depth, limit=limit)
    found = node if isinstance(node, GraphNode) else await _resolve(provider, node, DEFAULT_ENTITY_FIELDS)
    if found is None:
        return MemoryGraph()
    out = MemoryGraph([found], [])
    frontier = [found]
    for _ in range(depth):
        reached: list[GraphNode] = []
        for current in frontier:
            ring = await _row_neighbourhood(provider, current, limit)
            known = {n.id for n in out.nodes}
            reached.extend(n for n in ring.nodes if n.id not in known)
            out = out.merge(ring)
            if len(out.nodes) > limit * depth:
                break
        frontier = reached
    return out


def neighbourhood(
    mem: Memory | MemoryProvider, node: str | GraphNode, depth: int = 1, limit: int = DEFAULT_NEIGHBOURS,
) -> MemoryGraph:
    """A node and what it connects to, read from the store: the way to walk out from one gene.

    Parameters
    ----------
    mem
        A provider or the sync facade returned by :func:`memkit.open`.
    node
        A node id from a :class:`MemoryGraph` (a memory id works as is), or the :class:`GraphNode`
        itself, which row stores (SQLite, in-memory) find faster.
    depth
        Hops to walk (1 to 3).
    limit
        At most this many neighbours per node walked (newest memories first).

    Examples
    --------
    >>> mem = memkit.open("memory://")
    >>> first = mem.add("TP53 knockdown", "u1", "bio", {"gene": "TP53"})
    >>> second = mem.add("TP53 ChIP-seq peaks", "u1", "bio", {"gene": "TP53"})
    >>> tp53 = next(n for n in memory_graph(mem).nodes if n.type == "Entity")
    >>> sorted(n.type for n in neighbourhood(mem, tp53).nodes)
    ['Entity', 'Memory', 'Memory']
    """
    from memkit._sync import call

    return call(mem, aneighbourhood, node, depth, limit)

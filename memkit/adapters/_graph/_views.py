"""Reading the stored graph back for the graph views: a scope's graph, a node's neighbourhood.

Both walk the graph a hop at a time with the statements of :mod:`memkit.adapters._graph._cypher`
(labels come from the schema, never from input) and assemble a :class:`memkit.graph.MemoryGraph`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memkit._core._graph_model import GraphBuilder, MemoryGraph
from memkit._core._graph_schema import NODE_LABELS, memory_key
from memkit.adapters._graph._cypher import AROUND, EXPAND, GRAPH_SEEDS, LOOKUP, NODE_AT, NODES, PAGE

__all__ = ["read_graph", "read_neighbourhood"]

Read = Callable[[str, dict[str, Any]], Awaitable[list[dict[str, Any]]]]


async def read_graph(
    read: Read, user_id: str | None, agent_id: str | None, workflow_id: str | None, limit: int
) -> MemoryGraph:
    """The stored graph around the newest ``limit`` memories of a scope."""
    seeds = await read(GRAPH_SEEDS, {
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
        for start in range(0, len(ids), PAGE):
            rows = await read(EXPAND[label], {"ids": ids[start : start + PAGE]})
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
                    new.setdefault(other, []).append(row["bkey"] if LOOKUP[other] == "key" else row["bid"])
                    if other in lookups:
                        lookups[other].append(row["bid"])
                edges.append(row)
            await _fetch_nodes(read, out, new)
    for row in edges:
        if row["source"] in out.nodes and row["target"] in out.nodes:
            out.edge(row["type"], row["id"], row["source"], row["target"], row)
    return out.build()


async def read_neighbourhood(read: Read, node_id: str, label: str | None, depth: int, limit: int) -> MemoryGraph:
    """A node and its neighbours up to ``depth`` hops (at most ``limit`` per node walked)."""
    out = GraphBuilder()
    labels = [label] if label in NODE_LABELS else list(NODE_LABELS)
    start: str | None = None
    for candidate in labels:
        nid = memory_key(node_id) if candidate == "Memory" else node_id
        rows = await read(NODE_AT[candidate], {"nid": nid, "id": node_id})
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
            for row in await read(AROUND[kind], {"nid": nid, "id": current, "limit": limit}):
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


async def _fetch_nodes(read: Read, out: GraphBuilder, new: dict[str, list[str]]) -> None:
    for label, keys in new.items():
        for start in range(0, len(keys), PAGE):
            for row in await read(NODES[label], {"ids": keys[start : start + PAGE]}):
                out.node(label, row["props"])


def _label(labels: Sequence[str]) -> str | None:
    for label in labels:
        if label in NODE_LABELS:
            return label
    return None

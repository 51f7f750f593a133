"""A small graph of one namespace or one workflow, built through the port only.

Stand-in for ``memkit.graph.memory_graph`` until that lands: :func:`load_graph`
uses the real one when it is importable and this builder otherwise, and both
feed the same generic view (:mod:`memkit._graphview`).
"""

from __future__ import annotations

from typing import Any

from memkit._graphview import GraphEdge, GraphNode
from memkit._models import MemoryItem
from memkit._sync import Memory

__all__ = ["ENTITY_KEYS", "SimpleGraph", "load_graph", "namespace_graph", "workflow_graph", "workflows"]

ENTITY_KEYS = ("gene", "tool", "topic", "pathway")
_PAGE = 500


class SimpleGraph:
    """Nodes and edges, the shape :func:`memkit._graphview.coerce_graph` reads."""

    def __init__(self) -> None:
        self.nodes: list[GraphNode] = []
        self.edges: list[GraphEdge] = []
        self._ids: set[str] = set()
        self._edges: set[tuple[str, str, str]] = set()

    def node(self, node_id: str, kind: str, label: str, title: str = "") -> str:
        if node_id not in self._ids:
            self._ids.add(node_id)
            self.nodes.append(GraphNode(node_id, kind, label, title))
        return node_id

    def edge(self, source: str, target: str, kind: str) -> None:
        if (source, target, kind) not in self._edges:
            self._edges.add((source, target, kind))
            self.edges.append(GraphEdge(source, target, kind))


def _pages(mem: Memory, user: str, agent: str, limit: int, filters: dict[str, Any] | None = None) -> list[MemoryItem]:
    items: list[MemoryItem] = []
    while len(items) < limit:
        page = mem.get_page(user, agent, offset=len(items), limit=min(_PAGE, limit - len(items)), filters=filters)
        items.extend(page)
        if len(page) < min(_PAGE, limit - len(items) + len(page)):
            break
    return items


def namespace_graph(mem: Memory, user_id: str, agent_id: str, max_memories: int = 300) -> SimpleGraph:
    """namespace -> its newest memories -> the gene/tool/topic/pathway values in their metadata."""
    g = SimpleGraph()
    root = g.node(f"ns:{user_id}/{agent_id}", "namespace", f"{user_id}/{agent_id}")
    for item in _pages(mem, user_id, agent_id, max_memories):
        meta = item.metadata
        if meta.get("type") == "trace":
            wf = str(meta.get("workflow_id", "?"))
            g.edge(root, g.node(f"wf:{wf}", "workflow", wf), "ran")
            continue
        m = g.node(f"mem:{item.id}", "memory", item.content, item.content)
        g.edge(root, m, "has_memory")
        for key in ENTITY_KEYS:
            value = meta.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                g.edge(m, g.node(f"{key}:{value}", key, str(value)), f"mentions_{key}")
    return g


def workflow_graph(mem: Memory, user_id: str, agent_id: str, workflow_id: str, max_steps: int = 500) -> SimpleGraph:
    """workflow -> its steps in order (next_step edges) -> the tool each step used."""
    g = SimpleGraph()
    root = g.node(f"wf:{workflow_id}", "workflow", workflow_id)
    steps = _pages(mem, user_id, agent_id, max_steps, {"type": "trace", "workflow_id": workflow_id})
    steps.reverse()  # oldest first
    previous = None
    for item in steps:
        trace = item.metadata.get("trace") or {}
        name = str(trace.get("step_name", "step"))
        status = str(trace.get("status", ""))
        label = f"{trace.get('step_index', '')} {name}" + (f" ({status})" if status and status != "success" else "")
        title = f"{name}\nstatus: {status}\nduration: {trace.get('duration')}\nerror: {trace.get('error')}"
        s = g.node(f"step:{item.id}", "step", label.strip(), title)
        g.edge(root, s, "has_step")
        if previous is not None:
            g.edge(previous, s, "next_step")
        previous = s
        tool = trace.get("tool")
        if tool:
            g.edge(s, g.node(f"tool:{tool}", "tool", str(tool)), "used_tool")
    return g


def workflows(mem: Memory, max_traces: int = 5000) -> list[tuple[str, str, str]]:
    """(user_id, agent_id, workflow_id) of the traces in the store, scanning at most ``max_traces`` per namespace."""
    found: dict[tuple[str, str, str], None] = {}
    for ns in mem.namespaces():
        for item in _pages(mem, ns.user_id, ns.agent_id, max_traces, {"type": "trace"}):
            wf = item.metadata.get("workflow_id")
            if wf is not None:
                found[(ns.user_id, ns.agent_id, str(wf))] = None
    return sorted(found)


def load_graph(mem: Memory, user_id: str, agent_id: str, workflow_id: str | None = None) -> Any:
    """``memkit.graph.memory_graph`` when it exists, else the builder above."""
    try:
        from memkit.graph import memory_graph  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        if workflow_id:
            return workflow_graph(mem, user_id, agent_id, workflow_id)
        return namespace_graph(mem, user_id, agent_id)
    return memory_graph(mem, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)

"""``MemoryGraph``: typed nodes and edges of a store, and how to build one from records.

The drawn forms (``to_html``, ``to_pyvis``, a grouped ``to_networkx``) are made by the view
of this package, which registers itself here (``register_drawing``) when ``memkit.graph`` loads:
the view reads graphs, never the other way round.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memkit._core._graph_schema import (
    RecordParts,
    edge_id,
)

if TYPE_CHECKING:
    import networkx
    import pandas
from memkit._core._graph_parts import GraphEdge, GraphNode, edge_properties, node_properties

# Nodes the drawn views keep unless told otherwise (see MemoryGraph.to_html).
DEFAULT_VIEW_NODES = 300


class Drawing(Protocol):
    """How a graph is drawn (implemented by the view, ``memkit.graph._draw``)."""

    def pyvis(self, graph: MemoryGraph, max_nodes: int, group: str | None) -> Any: ...

    def html(self, graph: MemoryGraph, max_nodes: int, title: str, group: str | None) -> str: ...

    def grouped(self, graph: MemoryGraph, out: networkx.MultiDiGraph, group: str, max_nodes: int) -> None: ...


_drawing: list[Drawing] = []


def register_drawing(drawing: Drawing) -> None:
    """Called once by the view when ``memkit.graph`` loads."""
    _drawing[:] = [drawing]


def _draw() -> Drawing:
    if not _drawing:  # pragma: no cover - memkit.graph's __init__ registers it before any graph exists
        raise RuntimeError("memkit.graph's view is not loaded: import memkit.graph")
    return _drawing[0]


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

    def node(self, node_id: str) -> GraphNode | None:
        """The node with this id, or ``None``."""
        return next((n for n in self.nodes if n.id == node_id), None)

    def merge(self, other: MemoryGraph) -> MemoryGraph:
        """A new graph with the nodes and edges of both (ids decide what is the same)."""
        nodes = {n.id: n for n in self.nodes}
        edges = {e.id: e for e in self.edges}
        for n in other.nodes:
            nodes.setdefault(n.id, n)
        for e in other.edges:
            edges.setdefault(e.id, e)
        return MemoryGraph(list(nodes.values()), list(edges.values()))

    def to_pyvis(self, max_nodes: int = DEFAULT_VIEW_NODES, group: str | None = None) -> Any:
        """A ``pyvis.network.Network`` with memkit's captions, colours, sizes, tooltips and layout.

        Customise it as any pyvis network; its ``generate_html()`` page carries vis-network inline,
        fetches nothing and shows tooltips as text (even one holding "href", which pyvis renders as HTML).
        ``group="entity"`` draws the grouped overview GraphExplorer shows on a large store.
        """
        return _draw().pyvis(self, max_nodes, group)

    def to_html(self, path: str | None = None, *, max_nodes: int = DEFAULT_VIEW_NODES,
                title: str = "memkit graph", group: str | None = None) -> str:
        """The standalone, offline page ``memkit graph --html`` writes; also written to ``path`` if given.

        Search, legend toggles, fit/reset and the properties panel work in the file; expanding a
        node needs the live widget (:class:`memkit.widgets.GraphExplorer`). ``group="entity"`` (or
        ``"auto"``: over ``max_nodes``) writes the grouped overview, each group's first page opening
        on a click in the file.
        """
        page = _draw().html(self, max_nodes, title, group)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(page)
        return page

    def to_networkx(self, group: str | None = None, max_nodes: int = DEFAULT_VIEW_NODES) -> networkx.MultiDiGraph:
        """A ``networkx.MultiDiGraph``; node and edge attributes are ``type`` plus the properties.

        ``group="entity"``: the grouped overview instead (GraphExplorer's first view of a large store):
        entities, tools, workflows and runs with ``memories`` (what each group holds), edges with ``count``.
        """
        try:
            import networkx as nx
        except ImportError:  # pragma: no cover - depends on the environment
            from memkit._core._errors import missing_extra

            raise missing_extra("networkx", "graph") from None
        graph = nx.MultiDiGraph()
        if group is not None:
            _draw().grouped(self, graph, group, max_nodes)
            return graph
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

"""The drawn forms of a ``MemoryGraph``: a pyvis network, the standalone page, the grouped networkx graph.

``MemoryGraph`` (domain: the graph adapters store it) cannot import the view above it, so the
view hands it these when the package loads (``memkit.graph`` imports this module, and importing
``memkit._core._graph_model`` always runs the package first). The view modules themselves load on the
first call, so opening a store that never draws pays nothing for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memkit._core._graph_model import register_drawing

if TYPE_CHECKING:
    import networkx

    from memkit._core._graph_model import MemoryGraph


class _Drawing:
    """What ``MemoryGraph.to_pyvis``, ``to_html`` and ``to_networkx(group=...)`` delegate to."""

    def pyvis(self, graph: MemoryGraph, max_nodes: int, group: str | None) -> Any:
        from memkit.graph._page import to_pyvis
        from memkit.graph._view import select

        return to_pyvis(select(graph, max_nodes, group))

    def html(self, graph: MemoryGraph, max_nodes: int, title: str, group: str | None) -> str:
        from memkit.graph._page import page_html
        from memkit.graph._view import select

        return page_html(select(graph, max_nodes, group), title)

    def grouped(self, graph: MemoryGraph, out: networkx.MultiDiGraph, group: str, max_nodes: int) -> None:
        from memkit.graph._groups import _check_group
        from memkit.graph._view import select

        _check_group(group)
        view = select(graph, max_nodes, "entity" if group == "auto" else group)
        for node in view.nodes:
            out.add_node(node.id, **{**node.properties, "type": node.type, "memories": view.counts.get(node.id, 0)})
        for edge in view.edges:
            out.add_edge(edge.source, edge.target, key=edge.id, **{**edge.properties, "type": edge.type})


register_drawing(_Drawing())

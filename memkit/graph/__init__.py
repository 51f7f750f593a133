"""The memory graph of any store, as typed nodes and edges (networkx and pandas views).

Graph databases return the graph they store; the SQLite and in-memory adapters
build the same graph from their rows (same node ids and properties), so graph
views work without a graph server. See ``docs/graph.md`` for the schema.

The package: ``_schema`` (node and edge ids and properties, shared with the graph adapters),
``_parts`` and ``_model`` (the graph), ``_read`` (reading it from a store), and the view
(``_layout``, ``_groups``, ``_style``, ``_view``, ``_page``, the ``_graph*.js`` scripts and ``_graph.css``),
which only the widgets and ``_draw`` import; ``_draw`` hands ``MemoryGraph`` its drawing methods.
"""

from __future__ import annotations

from memkit._core._graph_model import MemoryGraph
from memkit._core._graph_parts import GraphEdge, GraphNode
from memkit.graph import _draw  # noqa: F401  (registers the drawn forms with MemoryGraph)
from memkit.graph._read import amemory_graph, aneighbourhood, memory_graph, neighbourhood

__all__ = [
    "GraphEdge", "GraphNode", "MemoryGraph", "amemory_graph", "aneighbourhood", "memory_graph", "neighbourhood",
]

"""The safe, offline graph view: any nodes/edges structure drawn with vis-network.

pyvis 0.3.2 draws the graph, but with memkit's own page template (a trimmed copy
of pyvis's, see ``_graph_template.html``): vis-network's JS and CSS are embedded
from the pyvis package (``cdn_resources="in_line"``), nothing is fetched, and
pyvis's ``href`` popup, which assigns node titles with ``innerHTML``, is gone.
The page is shown in an ``<iframe srcdoc=...>`` (escaped, sandboxed) inside a
``<div>``, which renders in JupyterLab, VS Code and Colab and in a saved file.

The input is generic so that ``memkit.graph.MemoryGraph`` and the private
fallback builder both plug in: an object with ``nodes`` and ``edges`` (mappings
or objects with ``id``/``label``/``type`` and ``source``/``target``/``type``),
or a networkx graph.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memkit._errors import missing_extra

__all__ = [
    "PHYSICS", "GraphEdge", "GraphNode", "GraphView", "coerce_graph", "graph_html", "graph_view", "page_html",
    "standalone_html",
]

# Measured in issue 7 with pyvis 0.3.2: this stabilises ~8x faster than vis-network's defaults.
PHYSICS: dict[str, Any] = {
    "layout": {"improvedLayout": False},
    "physics": {
        "solver": "forceAtlas2Based",
        "forceAtlas2Based": {"gravitationalConstant": -60, "springLength": 90, "avoidOverlap": 0.2},
        "stabilization": {"enabled": True, "iterations": 200, "fit": True},
    },
    "interaction": {"hover": True, "tooltipDelay": 120},
    "edges": {"smooth": False, "color": {"color": "#b0b7c3"}},
    "nodes": {"font": {"size": 12}},
}

# Colour-blind-safe palette (Okabe-Ito) per node type; unknown types share the last colour.
TYPE_COLOURS: dict[str, str] = {
    "namespace": "#000000",
    "memory": "#56B4E9",
    "gene": "#D55E00",
    "tool": "#009E73",
    "topic": "#E69F00",
    "workflow": "#CC79A7",
    "step": "#0072B2",
    "trace": "#0072B2",
    "pathway": "#882255",
    "agent": "#F0E442",
    "user": "#999999",
}
_OTHER = "#7f7f7f"


@dataclass(frozen=True)
class GraphNode:
    """One node: ``title`` is the hover text (shown as plain text, never as HTML)."""

    id: str
    type: str
    label: str
    title: str = ""


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    type: str = ""


@dataclass
class GraphView:
    """What was drawn: the kept nodes and edges, and how many there were."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    total_nodes: int
    total_edges: int
    degree: dict[str, int] = field(default_factory=dict)

    @property
    def message(self) -> str:
        if len(self.nodes) < self.total_nodes:
            return f"showing {len(self.nodes)} of {self.total_nodes} nodes (the most connected ones)"
        return f"showing all {self.total_nodes} nodes"


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj and obj[name] is not None:
                return obj[name]
        elif getattr(obj, name, None) is not None:
            return getattr(obj, name)
    return default


def _title(obj: Any) -> str:
    title = _field(obj, "title", "content")
    if title is None:
        props = _field(obj, "properties", "attrs", default=None)
        if isinstance(props, Mapping) and props:
            title = json.dumps(dict(props), ensure_ascii=False, default=str, indent=1)
    return str(title or "")


def coerce_graph(graph: Any) -> tuple[list[GraphNode], list[GraphEdge]]:
    """Nodes and edges of a MemoryGraph-like object, a networkx graph, or a ``(nodes, edges)`` pair."""
    if isinstance(graph, tuple) and len(graph) == 2:
        raw_nodes, raw_edges = graph
    elif hasattr(graph, "nodes") and hasattr(graph, "edges") and hasattr(graph, "adj"):  # networkx
        raw_nodes = [{"id": n, **attrs} for n, attrs in graph.nodes(data=True)]
        raw_edges = [{"source": u, "target": v, **attrs} for u, v, attrs in graph.edges(data=True)]
    else:
        raw_nodes, raw_edges = graph.nodes, graph.edges
    nodes: list[GraphNode] = []
    for raw in raw_nodes:
        node_id = str(_field(raw, "id", "key"))
        kind = str(_field(raw, "type", "kind", "label_type", default="node"))
        label = str(_field(raw, "label", "name", default=node_id))
        nodes.append(GraphNode(node_id, kind, label, _title(raw)))
    edges = [
        GraphEdge(str(_field(e, "source", "src", "u")), str(_field(e, "target", "dst", "v")),
                  str(_field(e, "type", "kind", "relation", default="")))
        for e in raw_edges
    ]
    return nodes, edges


def graph_view(graph: Any, max_nodes: int = 150) -> GraphView:
    """Keep at most ``max_nodes`` nodes, most connected first (ties keep input order)."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be at least 1, got {max_nodes}")
    nodes, edges = coerce_graph(graph)
    known = {n.id for n in nodes}
    edges = [e for e in edges if e.source in known and e.target in known]
    degree = dict.fromkeys(known, 0)
    for e in edges:
        degree[e.source] += 1
        degree[e.target] += 1
    if len(nodes) > max_nodes:
        order = sorted(range(len(nodes)), key=lambda i: (-degree[nodes[i].id], i))
        keep = sorted(order[:max_nodes])
        kept = [nodes[i] for i in keep]
    else:
        kept = list(nodes)
    ids = {n.id for n in kept}
    kept_edges = [e for e in edges if e.source in ids and e.target in ids]
    return GraphView(kept, kept_edges, len(nodes), len(edges), degree)


def _template_dirs() -> list[str]:
    try:
        import pyvis
    except ImportError:
        raise missing_extra("pyvis", "notebook") from None
    return [os.path.dirname(__file__), os.path.join(os.path.dirname(pyvis.__file__), "templates")]


def page_html(view: GraphView, height: str = "560px") -> str:
    """The self-contained vis-network page (no external resources) for ``view``."""
    _template_dirs()
    from jinja2 import Environment, FileSystemLoader
    from pyvis.network import Network

    net = Network(height=height, width="100%", directed=True, cdn_resources="in_line")
    net.path = "_graph_template.html"
    net.templateEnv = Environment(loader=FileSystemLoader(_template_dirs()))
    top = max(view.degree.values(), default=1) or 1
    for node in view.nodes:
        size = 8 + 22 * (view.degree.get(node.id, 0) / top) ** 0.5
        # Plain-string titles: vis-network sets them with innerText.
        net.add_node(node.id, label=_short(node.label, 40), title=node.title or node.label, shape="dot",
                     color=TYPE_COLOURS.get(node.type, _OTHER), size=round(size, 1))
    for edge in view.edges:
        net.add_edge(edge.source, edge.target, title=edge.type or None)
    net.set_options(json.dumps(PHYSICS))
    page: str = net.generate_html()
    return page


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _legend(view: GraphView) -> str:
    present = sorted({n.type for n in view.nodes})
    chips = "".join(
        f'<span style="margin-right:12px;white-space:nowrap"><span style="display:inline-block;width:11px;'
        f'height:11px;border-radius:50%;background:{TYPE_COLOURS.get(t, _OTHER)};margin-right:4px;'
        f'vertical-align:middle"></span>{html.escape(t)}</span>'
        for t in present
    )
    return f'<div class="memkit-graph-legend" style="font:13px sans-serif;margin:4px 0">{chips}</div>'


def graph_html(graph: Any, max_nodes: int = 150, height: str = "560px", caption: str = "") -> str:
    """A ``<div>`` with the caption, the "showing N of M" line, a legend and the graph in an iframe.

    Every piece of text from the store is escaped; the page goes into ``srcdoc``
    escaped as an attribute, and the iframe may run scripts but has no origin.
    """
    view = graph if isinstance(graph, GraphView) else graph_view(graph, max_nodes)
    page = page_html(view, height)
    head = f"<b>{html.escape(caption)}</b> · " if caption else ""
    return (
        '<div class="memkit-graph" style="width:100%">'
        f'<div class="memkit-graph-message" style="font:13px sans-serif">{head}{html.escape(view.message)}</div>'
        f"{_legend(view)}"
        f'<iframe class="memkit-graph-frame" sandbox="allow-scripts" srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{int(height.removesuffix("px")) + 12}px;border:1px solid #ddd"></iframe>'
        "</div>"
    )


def standalone_html(graph: Any, max_nodes: int = 150, title: str = "memkit graph") -> str:
    """A whole HTML document around :func:`graph_html`, for ``memkit graph --html``."""
    body = graph_html(graph, max_nodes=max_nodes, height="720px", caption=title)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head>"
        f'<body style="margin:12px">{body}</body></html>\n'
    )

"""What the browser gets: the JSON payload the graph scripts draw, the widget's ES module and css, the
standalone offline page (``MemoryGraph.to_html``, ``memkit graph --html``) and the pyvis export.

The graph scripts (``SCRIPTS``, one script for the widget and the page) run on vis-network 9.1.2, the
engine pyvis embeds, read from the pyvis package: nothing is fetched.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
from typing import TYPE_CHECKING, Any

from memkit._core._errors import missing_extra
from memkit._core._graph_parts import GraphEdge, GraphNode
from memkit.graph._groups import MEMBERS_SHOWN
from memkit.graph._style import edge_legend, legend, style_edges, style_nodes
from memkit.graph._view import GraphView, expansion

if TYPE_CHECKING:
    pass


# Up to this many nodes the browser lets physics settle the precomputed start (capped iterations);
# above it the precomputed layout is drawn as is: see the numbers in docs/graph.md.
PHYSICS_LIMIT = 150


# A grouped view has few, well-separated hubs: physics settles it quickly up to this many.
GROUPED_PHYSICS_LIMIT = 400


SETTLE_MS = 1500


ITERATIONS = 100


# The view's JavaScript, joined in this order into one script (the last defines ``memkitGraph``).
SCRIPTS = ("_graph_layout.js", "_graph_panel.js", "_graph.js")


def payload(view: GraphView, title: str = "") -> dict[str, Any]:
    """Everything the graph scripts draw, as JSON-ready data."""
    return {
        "title": title,
        "message": view.message,
        "layout": view.layout,
        "physics": (view.layout == "force" and len(view.nodes) <= PHYSICS_LIMIT)
        or (view.layout == "grouped" and len(view.nodes) <= GROUPED_PHYSICS_LIMIT),
        "iterations": ITERATIONS,
        # the grouped overview is drawn at once and settles on screen (interactive before it is still)
        "animate": view.layout == "grouped",
        "settle_ms": SETTLE_MS,
        "nodes": style_nodes(view.nodes, view.graph, view.positions, view.layout, view.groups),
        "edges": style_edges(view.edges),
        "legend": legend(view.nodes),
        "edge_legend": edge_legend(view.edges),
    }


def _pyvis_dir() -> str:
    try:
        import pyvis
    except ImportError:
        raise missing_extra("pyvis", "notebook") from None
    return os.path.join(os.path.dirname(pyvis.__file__), "templates", "lib", "vis-9.1.2")


def _asset(name: str) -> str:
    folder = _pyvis_dir() if name.startswith("vis-network") else os.path.dirname(__file__)
    with open(os.path.join(folder, name), encoding="utf-8") as fh:
        return fh.read()


def _scripts() -> str:
    return "\n".join(_asset(name) for name in SCRIPTS)


def widget_esm() -> str:
    """vis-network (its UMD build, given a private ``module`` to fill) and the graph scripts as one ES module."""
    return (
        "const module = { exports: {} };\nconst exports = module.exports;\n"
        + _asset("vis-network.min.js")
        + "\nconst vis = module.exports;\n"
        + _scripts()
        + "\nexport default { render({ model, el }) { return memkitGraph(vis, el, model); } };\n"
    )


def widget_css() -> str:
    return _asset("vis-network.css") + "\n" + _asset("_graph.css")


def script_json(data: object) -> str:
    """JSON that cannot close the ``<script>`` element it sits in."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, safe in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                      ("\u2029", "\\u2029")):
        text = text.replace(raw, safe)
    return text


def page_html(view: GraphView, title: str = "memkit graph") -> str:
    """A whole offline HTML document: vis-network, the graph scripts and the data, nothing fetched.

    A grouped view carries the first page of every drawn group, so a click opens it without a kernel.
    """
    data = payload(view, title)
    if view.groups is not None:
        data["reserve"] = reserve(view)
    return page_from_payload(data, title)


def reserve(view: GraphView) -> dict[str, Any]:
    """What opening each drawn group adds (its first page), each node and edge written once."""
    top = {n.id for n in view.nodes}
    nodes: dict[str, GraphNode] = {}
    edges: dict[str, GraphEdge] = {}
    groups: dict[str, Any] = {}
    for n in view.nodes:
        if not view.counts.get(n.id):
            continue
        fresh, found, where, _ = expansion(view, n.id, top)
        nodes.update((x.id, x) for x in fresh)
        edges.update((e.id, e) for e in found)
        groups[n.id] = {"ids": [x.id for x in fresh], "edges": [e.id for e in found],
                        "offsets": {k: list(v) for k, v in where.items()},
                        "shown": min(view.counts[n.id], MEMBERS_SHOWN)}
    return {"nodes": {x["id"]: x for x in style_nodes(nodes.values(), view.graph, layout="grouped",
                                                      groups=view.groups)},
            "edges": {e["id"]: e for e in style_edges(edges.values())}, "groups": groups}


def page_from_payload(data: dict[str, Any], title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{widget_css()}\nbody{{margin:12px}}</style></head>"
        '<body><div id="memkit-graph-root"></div>'
        f'<script type="application/json" id="memkit-graph-data">{script_json(data)}</script>'
        f"<script>{_asset('vis-network.min.js')}</script>"
        f"<script>{_scripts()}\nmemkitGraph(vis, document.getElementById('memkit-graph-root'),"
        " memkitStaticModel(JSON.parse(document.getElementById('memkit-graph-data').textContent)));</script>"
        "</body></html>\n"
    )


def to_pyvis(view: GraphView) -> Any:
    """A ``pyvis.network.Network`` of ``view`` with the same captions, colours, tooltips and layout."""
    _pyvis_dir()
    net = _inert_network()(height="720px", width="100%", directed=True, cdn_resources="in_line")
    data = payload(view)
    for node in data["nodes"]:
        extra = {"x": node["x"], "y": node["y"]} if "x" in node else {}
        net.add_node(node["id"], label=node["label"], title=node["title"], shape=node["shape"], size=node["size"],
                     color=node["color"], borderWidth=node["borderWidth"], **extra)
    for edge in data["edges"]:
        net.add_edge(edge["from"], edge["to"], title=edge["title"], **{
            k: edge[k] for k in ("width", "color") if k in edge})
    net.set_options(json.dumps(_options(data)))
    return net


# The stylesheets and scripts pyvis's template links from a CDN whatever ``cdn_resources`` says
# (bootstrap; tom-select with a select or filter menu): the page draws without them.
_REMOTE = re.compile(
    r'<link\b[^>]*\bhref="https?://[^"]*"[^>]*>|<script\b[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>', re.I)


@functools.cache
def _inert_network() -> Any:
    """pyvis's ``Network`` writing a page that runs no tooltip as HTML and fetches nothing.

    pyvis shows every tooltip through ``innerHTML`` as soon as one title holds the word ``href``
    (a memory saying "href <img onerror=...>" ran its script on hover); vis-network's own tooltip,
    used otherwise, shows a title as text. So the page is rendered with the titles out of that
    check's sight, and without the CDN links.
    """
    from pyvis.network import Network

    class InertNetwork(Network):  # type: ignore[misc]
        nodes: list[dict[str, Any]]

        def generate_html(self, name: str = "index.html", local: bool = True, notebook: bool = False) -> str:
            shown = self.nodes
            self.nodes = [{k: v for k, v in node.items() if k != "title"} for node in shown]
            self._titled = shown
            try:
                page: str = super().generate_html(name, local, notebook)
            finally:
                self.nodes = shown
                del self._titled
            self.html = _REMOTE.sub("", page)
            return self.html

        def get_network_data(self) -> Any:
            # generate_html's data: the nodes with their titles
            _, *rest = super().get_network_data()
            return (getattr(self, "_titled", self.nodes), *rest)

    return InertNetwork


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """vis-network options; the same object ``memkitOptions`` in ``_graph_layout.js`` builds."""
    return {
        "layout": {"improvedLayout": False},
        "physics": {
            "enabled": bool(data["physics"]), "solver": "barnesHut",
            "barnesHut": {"gravitationalConstant": -6000, "springLength": 130, "springConstant": 0.04,
                          "damping": 0.5, "avoidOverlap": 0.3},
            "stabilization": {"enabled": True, "iterations": data["iterations"], "updateInterval": 25, "fit": True},
        },
        "interaction": {"hover": True, "tooltipDelay": 150, "hideEdgesOnDrag": True},
        "edges": {"smooth": False, "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}},
                  "color": {"color": "#b0b7c3"}},
        "nodes": {"font": {"size": 12, "face": "sans-serif"}},
    }

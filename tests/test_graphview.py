"""The offline graph view: nothing fetched, hostile memory text stays inert."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import networkx as nx
import pytest

import memkit
from memkit._graphview import (
    PHYSICS,
    TYPE_COLOURS,
    GraphEdge,
    GraphNode,
    coerce_graph,
    graph_html,
    graph_view,
    standalone_html,
)
from memkit.graph import memory_graph

HOSTILE = '<img src=x onerror="window.__pwned=1">'

# A resource URL is one the browser would fetch: src/href attributes, CSS url(), @import.
RESOURCE = re.compile(r"""(?:\bsrc\s*=|\bhref\s*=|url\(|@import)\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def _hostile_graph() -> tuple[list[GraphNode], list[GraphEdge]]:
    nodes = [
        GraphNode("ns", "namespace", "u1/bio"),
        GraphNode("m1", "memory", HOSTILE, HOSTILE),
        GraphNode("m2", "memory", "see <a href='https://example.org'>the paper</a>",
                  "see <a href='https://example.org'>the paper</a>"),
        GraphNode("g", "gene", "TP53"),
    ]
    edges = [GraphEdge("ns", "m1", "has_memory"), GraphEdge("ns", "m2", "has_memory"), GraphEdge("m1", "g", "mentions")]
    return nodes, edges


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


def test_page_fetches_nothing() -> None:
    out = graph_html(_hostile_graph())
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', out).group(1))  # type: ignore[union-attr]
    for document in (out, page, standalone_html(_hostile_graph())):
        assert not RESOURCE.search(document), RESOURCE.search(document)
    tags = _tags(page)
    assert [a.get("src") for t, a in tags if t == "script"] == [None, None]  # both inline: vis-network, drawGraph
    assert not [t for t, _ in tags if t == "link"]
    assert "vis.Network" in page and "cdnjs" not in page and "jsdelivr" not in page


def test_hostile_title_with_href_elsewhere_stays_data() -> None:
    out = graph_html(_hostile_graph())
    # Outside the iframe only our own tags exist: the page is one escaped attribute.
    assert {t for t, _ in _tags(out)} <= {"div", "b", "span", "iframe"}
    frame = next(a for t, a in _tags(out) if t == "iframe")
    assert frame["sandbox"] == "allow-scripts"
    page = frame["srcdoc"] or ""
    assert "<img" not in page  # the JSON is \\u003c-escaped inside the script
    assert "\\u003cimg src=x onerror=" in page
    # pyvis's href popup (innerHTML) is not in memkit's template even though a title contains href.
    assert "popup.innerHTML" not in page and "showPopup(params)" not in page


def test_physics_is_the_tuned_one() -> None:
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', graph_html(_hostile_graph())).group(1))  # type: ignore[union-attr]
    assert '"solver": "forceAtlas2Based"' in page and '"improvedLayout": false' in page
    assert PHYSICS["physics"]["stabilization"]["iterations"] == 200


def test_cap_keeps_the_most_connected_nodes_and_says_so() -> None:
    nodes = [GraphNode("hub", "namespace", "hub")] + [GraphNode(f"n{i}", "memory", f"n{i}") for i in range(20)]
    edges = [GraphEdge("hub", f"n{i}") for i in range(20)] + [GraphEdge("n3", "n4")]
    view = graph_view((nodes, edges), max_nodes=3)
    assert [n.id for n in view.nodes] == ["hub", "n3", "n4"]
    assert view.message == "showing 3 of 21 nodes (the most connected ones)"
    assert len(view.edges) == 3
    assert "showing 3 of 21 nodes" in graph_html(view)
    with pytest.raises(ValueError, match="max_nodes"):
        graph_view((nodes, edges), max_nodes=0)


def test_colour_by_type_size_by_degree_and_legend() -> None:
    out = graph_html(_hostile_graph())
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', out).group(1))  # type: ignore[union-attr]
    nodes = {n["id"]: n for n in json.loads(re.search(r"nodes = new vis.DataSet\((.*?)\);", page).group(1))}  # type: ignore[union-attr]
    assert nodes["ns"]["size"] == nodes["m1"]["size"] > nodes["m2"]["size"] == nodes["g"]["size"]  # degree 2, 2, 1, 1
    assert nodes["m1"]["color"] == nodes["m2"]["color"] == TYPE_COLOURS["memory"]
    assert nodes["g"]["color"] == TYPE_COLOURS["gene"] != TYPE_COLOURS["memory"]
    legend = re.search(r'memkit-graph-legend.*?</div>', out).group(0)  # type: ignore[union-attr]
    for kind in ("gene", "memory", "namespace"):
        assert f"</span>{kind}</span>" in legend


def test_networkx_and_memory_graph_shapes_are_accepted() -> None:
    g = nx.DiGraph()
    g.add_node("a", type="memory", label="A", content="alpha")
    g.add_node("b", type="gene", label="TP53")
    g.add_edge("a", "b", type="mentions")
    nodes, edges = coerce_graph(g)
    assert nodes == [GraphNode("a", "memory", "A", "alpha"), GraphNode("b", "gene", "TP53", "")]
    assert edges == [GraphEdge("a", "b", "mentions")]

    class Node:
        def __init__(self, id: str, type: str, properties: dict[str, object]) -> None:
            self.id, self.type, self.properties = id, type, properties

    class Graph:
        def __init__(self) -> None:
            self.nodes = [Node("x", "tool", {"name": "blast"})]
            self.edges: list[dict[str, str]] = []

    assert coerce_graph(Graph()) == ([GraphNode("x", "tool", "x", '{\n "name": "blast"\n}')], [])


def test_namespace_graph_from_the_port() -> None:
    with memkit.open("memory://") as mem:
        mem.add("BLAST of TP53", "u1", "bio", {"gene": "TP53", "tool": "blast"})
        mem.add("KRAS variant", "u1", "bio", {"gene": "KRAS"})
        mem.add("other namespace", "u2", "bio", {"gene": "MYC"})
        graph = graph_view(memory_graph(mem, user_id="u1", agent_id="bio"), 100)
    kinds = sorted(n.type for n in graph.nodes)
    assert kinds == ["Entity", "Entity", "Entity", "Memory", "Memory", "Namespace"]
    assert "MYC" not in str([n.label for n in graph.nodes])  # the other namespace stays out
    assert len(graph.edges) == 5

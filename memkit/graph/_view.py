"""How a :class:`~memkit.graph.MemoryGraph` is drawn: style by label, a representative cut, a layout.

Everything a view of the graph shows is decided here, once, for the live widget
(:class:`memkit.widgets.GraphExplorer`), the standalone page (``MemoryGraph.to_html``,
``memkit graph --html``) and the pyvis export (``MemoryGraph.to_pyvis``):

- style keyed by the schema's labels: colour (Okabe-Ito, colour-blind safe; vermillion only
  for failed steps), shape, size, a caption chosen per label (``TP53``, ``3 · bwa``, a memory's
  first words; never a UUID), a plain-text tooltip (memories and steps read through
  :mod:`memkit._display`) and the properties shown on click;
- a cut over the node cap that keeps memories sampled evenly over time (every kind of memory
  kept) and the entities they mention most, and says what it left out;
- a layout computed here: a workflow reads left to right along ``NEXT`` with each step's tool
  below it and its memory above; a namespace starts from positions near the entities each memory
  mentions, so the browser's physics only has to settle, not to untangle.

The browser side is ``_graph.js`` (one file for the widget and the page) on vis-network 9.1.2,
the engine pyvis embeds, read from the pyvis package: nothing is fetched.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import textwrap
import zlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memkit._display import format_time, printable, shorten, status_of, summary
from memkit._errors import InvalidInputError, missing_extra
from memkit._graphschema import edge_id, record_parts
from memkit._models import MemoryItem
from memkit._recall import Recall, step_namespace
from memkit._records import from_us
from memkit.graph import GraphEdge, GraphNode, MemoryGraph, _record, node_properties

__all__ = [
    "DELETED_COLOUR", "EDGE_STYLE", "FAILED_COLOUR", "LABEL_STYLE", "GraphView", "collapse_recall_nodes", "page_html",
    "payload", "select", "style_nodes", "to_pyvis", "with_recalls",
]

# Okabe & Ito's palette: distinguishable with every common colour-vision deficiency. Shapes differ too.
LABEL_STYLE: dict[str, dict[str, Any]] = {
    "Namespace": {"color": "#000000", "shape": "hexagon", "size": 20},
    "Memory": {"color": "#56B4E9", "shape": "dot", "size": 9},
    "Entity": {"color": "#E69F00", "shape": "diamond", "size": 12},
    "Workflow": {"color": "#CC79A7", "shape": "square", "size": 18},
    "Trace": {"color": "#F0E442", "shape": "triangle", "size": 14},
    "Step": {"color": "#0072B2", "shape": "dot", "size": 13},
    "Tool": {"color": "#009E73", "shape": "triangleDown", "size": 14},
    "Group": {"color": "#56B4E9", "shape": "star", "size": 16},  # a namespace's memories that mention nothing
}
FAILED_COLOUR = "#D55E00"
DELETED_COLOUR = "#D9D9D9"
# Edges from a step: the memory it was recorded as (solid), the memories it recalled (dashed, purple).
EDGE_STYLE: dict[str, dict[str, Any]] = {
    "RECORDED_AS": {"label": "recorded as", "color": "#5F6B7A", "dashes": False, "width": 1.5},
    "RECALLED": {"label": "recalled", "color": "#8E24AA", "dashes": [7, 5], "width": 2},
}
_ORDER = ("Namespace", "Workflow", "Trace", "Step", "Tool", "Memory", "Entity", "Group")
# Edges that stand for many memories or steps in a grouped view (their ``count``).
GROUP_EDGE_STYLE: dict[str, dict[str, Any]] = {
    "CO_MENTIONED": {"label": "mentioned together", "color": "#E6B35C"},
    "HAS_WORKFLOW": {"label": "workflow of", "color": "#CC79A7"},
    "IN_GROUP": {"label": "in group", "color": "#dde1e7"},
}
LEGEND_LABELS = {"Group": "other memories"}
_CAPTION = 28
# Up to this many nodes the browser lets physics settle the precomputed start (capped iterations);
# above it the precomputed layout is drawn as is: see the numbers in docs/graph.md.
PHYSICS_LIMIT = 150
# A grouped view has few, well-separated hubs: physics settles it quickly up to this many.
GROUPED_PHYSICS_LIMIT = 400
SETTLE_MS = 1500
ITERATIONS = 100


@dataclass
class GraphView:
    """What a view shows: the kept part of a graph, its layout and what was left out."""

    graph: MemoryGraph
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    total: dict[str, int]
    shown: dict[str, int]
    layout: str
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    note: str = ""
    # A grouped view: how its groups fold the graph (None: every node is drawn as itself).
    groups: Grouping | None = None
    counts: dict[str, int] = field(default_factory=dict)
    summary: str = ""

    @property
    def total_nodes(self) -> int:
        return sum(self.total.values())

    @property
    def message(self) -> str:
        """One line: what is shown, what was left out and how to see it."""
        if self.summary:
            return f"{self.note}{self.summary}"
        if len(self.nodes) >= self.total_nodes:
            text = f"showing all {self.total_nodes} nodes"
        else:
            parts = [f"{self.total[k] - self.shown.get(k, 0):,} of {self.total[k]:,} {_plural(k)}" for k in _ORDER
                     if self.total.get(k, 0) > self.shown.get(k, 0)]
            text = (f"showing {len(self.nodes):,} of {self.total_nodes:,} nodes; left out: {', '.join(parts)}"
                    " (memories sampled evenly over time, every kind kept; entities most mentioned by them)."
                    " To see more: draw one workflow, double-click a node to expand it, or raise max nodes")
        return f"{self.note}{text}"


def _plural(label: str) -> str:
    return {"Entity": "entities", "Memory": "memories", "Group": "memory groups"}.get(label, label.lower() + "s")


# -- captions, tooltips, properties -------------------------------------------------------


def _item(props: dict[str, Any]) -> MemoryItem:
    raw = props.get("metadata")
    try:
        meta = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        meta = {}
    created = props.get("created_us")
    return MemoryItem(
        id=str(props.get("id")), content=str(props.get("content") or ""),
        metadata=meta if isinstance(meta, dict) else {},
        created_at=from_us(created) if isinstance(created, int) and not isinstance(created, bool) else None,
        user_id=props.get("user_id"), agent_id=props.get("agent_id"),
    )


def _text(value: object, width: int = _CAPTION) -> str:
    return printable(shorten("" if value is None else value, width))


def caption(node: GraphNode) -> str:
    """The label drawn under a node: a name, ``3 · bwa``, a memory's first words; never its UUID."""
    p = node.properties
    if node.type == "Memory":
        return _text(("(deleted) " if p.get("deleted") else "") + summary(_item(p), 80))
    if node.type in ("Entity", "Tool"):
        return _text(p.get("name"))
    if node.type == "Step":
        name = p.get("tool") or p.get("name") or "step"
        return _text(f"{p['order']} · {name}" if p.get("order") is not None else name)
    if node.type == "Workflow":
        return _text(p.get("workflow_id"), 40)
    if node.type == "Trace":
        run = str(p.get("run_id") or "")
        return _text(run if run.lower().startswith("run") else f"run {run}".strip())
    if node.type == "Namespace":
        return _text(f"{p.get('user_id')} / {p.get('agent_id')}", 40)
    if node.type == "Group":
        return "other memories"
    return node.type


def _wrap(text: str, width: int = 64, lines: int = 8) -> str:
    out = textwrap.wrap(text, width) or [""]
    return "\n".join(out[:lines] + (["…"] if len(out) > lines else []))


def tooltip(node: GraphNode, recorded: GraphNode | None = None) -> str:
    """Hover text, plain (vis-network shows string titles as text): what a person needs at a glance."""
    p = node.properties
    where = f"{p.get('user_id')} / {p.get('agent_id')}"
    if node.type == "Memory" or (node.type == "Step" and recorded is not None):
        item = _item((recorded or node).properties)
        head = "Step" if node.type == "Step" else "Memory (deleted since; the text as recalled)" if p.get(
            "deleted") else "Memory"
        body = summary(item, 400) if item.metadata.get("type") == "trace" else printable(item.content)
        when = format_time(item.created_at)
        return "\n".join(x for x in (f"{head} · {where}", _wrap(body), when) if x)
    if node.type == "Step":
        return printable(f"Step {p.get('order')} · {p.get('name') or p.get('tool')} · {status_of(p.get('status'))}"
                         f"\nworkflow {p.get('workflow_id')} · run {p.get('run_id')}")
    if node.type == "Entity":
        return printable(f"{p.get('kind')}: {p.get('name')}\n{where}")
    if node.type == "Tool":
        return printable(f"Tool: {p.get('name')}\n{where}")
    if node.type == "Workflow":
        return printable(f"Workflow {p.get('workflow_id')}\n{where}")
    if node.type == "Trace":
        return printable(f"Run {p.get('run_id')} of workflow {p.get('workflow_id')}\n{where}")
    if node.type == "Group":
        return printable(f"Memories that mention no entity\n{where}")
    return printable(f"Namespace {where}")


def properties(node: GraphNode) -> list[list[str]]:
    """The properties panel: every property as text, the id first, metadata pretty-printed."""
    rows = [["label", node.type], ["id", node.id]]
    for key, value in node.properties.items():
        if key == "id" or value is None:
            continue
        if key == "metadata" and isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = json.dumps(json.loads(value), indent=1, ensure_ascii=False)
        if key == "created_us" and isinstance(value, int):
            value = format_time(from_us(value)) or value
        rows.append([key, printable(str(value))[:4000]])
    return rows


def _failed(node: GraphNode) -> bool:
    return node.type == "Step" and status_of(node.properties.get("status")) == "failed"


def _deleted(node: GraphNode) -> bool:
    return node.type == "Memory" and node.properties.get("deleted") is True


# -- recalls ------------------------------------------------------------------------------


def _recalled_edge(step: str, memory: str, hits: list[dict[str, Any]]) -> GraphEdge:
    best = min(hits, key=lambda h: h["rank"] if isinstance(h.get("rank"), int) else 2**31)
    return GraphEdge(edge_id("RECALLED", step, memory), "RECALLED", step, memory, {
        "rank": best.get("rank"), "score": best.get("score"), "searches": hits,
    })


def collapse_recall_nodes(graph: MemoryGraph) -> MemoryGraph:
    """A graph whose ``Recall`` nodes (as a graph database stores a recall: linked to its step,
    ``RECALLED`` edges to the memories with rank and score) are drawn as the picture
    :func:`with_recalls` draws: one ``RECALLED`` edge from the step to each memory."""
    recalls = {n.id: n for n in graph.nodes if n.type == "Recall"}
    if not recalls:
        return graph
    by_id = {n.id: n for n in graph.nodes}
    step_of: dict[str, str] = {}
    for e in graph.edges:
        for near, far in ((e.source, e.target), (e.target, e.source)):
            if near in recalls and getattr(by_id.get(far), "type", None) == "Step":
                step_of[near] = far
    found: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in graph.edges:
        if e.type == "RECALLED" and e.source in step_of and e.target in by_id:
            recall = recalls[e.source].properties
            found[(step_of[e.source], e.target)].append({
                "rank": e.properties.get("rank"), "score": e.properties.get("score"),
                "query": recall.get("query"), "mode": recall.get("mode"), "recall_id": e.source,
            })
    edges = [e for e in graph.edges if e.source not in recalls and e.target not in recalls]
    edges += [_recalled_edge(step, memory, hits) for (step, memory), hits in found.items()]
    return MemoryGraph([n for n in graph.nodes if n.id not in recalls], edges)


def with_recalls(graph: MemoryGraph, recalls: Iterable[Recall],
                 current: dict[str, MemoryItem | None]) -> MemoryGraph:
    """``graph`` (a workflow's) with a ``RECALLED`` edge from each step to each memory it recalled.

    A step is matched by its namespace, workflow, run and step index (two users' runs of one
    workflow share the rest); a recall of a step not in the graph is left out. ``current`` maps
    memory ids to the memory as stored now (``None``: deleted since, drawn from the recall's
    snapshot, greyed and marked ``deleted``).
    """
    graph = collapse_recall_nodes(graph)
    steps = {(n.properties.get("user_id"), n.properties.get("agent_id"), n.properties.get("workflow_id"),
              n.properties.get("run_id"), n.properties.get("order")): n.id
             for n in graph.nodes if n.type == "Step"}
    have = {n.id for n in graph.nodes}
    nodes = list(graph.nodes)
    found: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for recall in recalls:
        step = steps.get((*step_namespace(recall), recall.workflow_id, recall.run_id, recall.step_index))
        if step is None:
            continue
        for hit in recall.hits:
            if hit.id not in have:
                item = current.get(hit.id)
                if item is not None:
                    props = node_properties("Memory", record_parts(_record(item), ()).memory)
                else:
                    props = {"id": hit.id, "user_id": recall.user_id, "agent_id": recall.agent_id,
                             "content": hit.content, "metadata": "{}", "deleted": True}
                nodes.append(GraphNode(hit.id, "Memory", props))
                have.add(hit.id)
            found[(step, hit.id)].append({"rank": hit.rank, "score": hit.score, "query": recall.query,
                                          "mode": recall.mode, "recall_id": recall.id})
    edges = [e for e in graph.edges if not (e.type == "RECALLED" and (e.source, e.target) in found)]
    edges += [_recalled_edge(step, memory, hits) for (step, memory), hits in found.items()]
    return MemoryGraph(nodes, edges)


def _edge_title(e: GraphEdge) -> str:
    if e.type == "RECALLED":
        lines = []
        for hit in e.properties.get("searches") or [e.properties]:
            score = hit.get("score")
            score_text = f" · score {score:.3f}" if isinstance(score, (int, float)) and math.isfinite(score) else ""
            lines.append(f"rank {hit.get('rank')}{score_text} · {hit.get('mode') or 'search'} "
                         f"“{shorten(printable(hit.get('query') or ''), 80)}”")
        return "recalled\n" + "\n".join(lines[:8]) + ("\n…" if len(lines) > 8 else "")
    return str({**EDGE_STYLE, **GROUP_EDGE_STYLE}.get(e.type, {}).get("label", e.type))


def style_nodes(nodes: Iterable[GraphNode], graph: MemoryGraph,
                positions: dict[str, tuple[float, float]] | None = None, layout: str = "force",
                groups: Grouping | None = None) -> list[dict[str, Any]]:
    """The JSON-ready nodes for the browser (vis-network fields plus ``type``, ``props`` and the numbers
    the styling rules use: ``degree``, ``count`` (a group's memories, runs or steps), ``recalls``)."""
    index = groups.index if groups is not None and groups.index is not None else GraphIndex(graph)
    by_id, recorded, degree, recalls = index.by_id, index.recorded, index.degree, index.recalls
    counts = groups.counts if groups is not None else {}
    out = []
    for node in nodes:
        style = LABEL_STYLE.get(node.type, LABEL_STYLE["Memory"])
        colour = FAILED_COLOUR if _failed(node) else DELETED_COLOUR if _deleted(node) else style["color"]
        size = style["size"]
        count = counts.get(node.id)
        if count is not None:  # a group grows with what it holds
            size = round(size + 3 * math.log2(1 + count), 1)
        elif node.type in ("Entity", "Tool"):  # hubs grow with what points at them
            size = round(size + 3 * math.log2(1 + degree[node.id]), 1)
        label = caption(node)
        if count is not None:
            label = f"{label} ({count:,})"
        p = node.properties
        item: dict[str, Any] = {
            "id": node.id, "type": node.type, "label": label, "title": tooltip(node, recorded.get(node.id)),
            "shape": style["shape"], "size": size, "failed": _failed(node), "deleted": _deleted(node),
            "color": {"background": colour, "border": "#222222" if node.type == "Trace" or _failed(node) else colour,
                      "highlight": {"background": colour, "border": "#000000"}},
            "borderWidth": 3 if _failed(node) else 1,
            "props": properties(node),
            "degree": degree[node.id], "recalls": len(recalls.get(node.id, ())),
            "ns": f"{p.get('user_id')} / {p.get('agent_id')}", "kind": str(p.get("kind") or node.type),
        }
        if count is not None:
            item["count"] = count
            item["group"] = bool(groups and groups.members.get(node.id))
        if node.type == "Memory":
            runs = index.runs_that_recalled(node.id)
            item["used_by"] = [[t, caption(by_id[t]) if t in by_id else t] for t in runs]
        if _deleted(node):
            item["color"]["border"] = "#7F7F7F"
            item["shapeProperties"] = {"borderDashes": [3, 3]}
            item["borderWidth"] = 2
        if layout == "workflow" and node.type == "Step":
            item["font"] = {"size": 14}
        elif node.type in ("Memory", "Step"):  # many, long captions: shown once zoomed in enough to read them
            item["font"] = {"size": 11}
            item["scaling"] = {"label": {"enabled": True, "drawThreshold": 7}}
        elif node.type in ("Entity", "Tool", "Workflow"):
            item["font"] = {"size": 14}
        if positions and node.id in positions:
            item["x"], item["y"] = positions[node.id]
        out.append(item)
    return out


def style_edges(edges: Iterable[GraphEdge]) -> list[dict[str, Any]]:
    out = []
    for e in edges:
        item: dict[str, Any] = {"id": e.id, "from": e.source, "to": e.target, "title": _edge_title(e), "type": e.type}
        if e.type in EDGE_STYLE:
            look = EDGE_STYLE[e.type]
            item.update(width=look["width"], dashes=look["dashes"], color={"color": look["color"]})
        elif e.type == "NEXT":
            item.update(width=3, color={"color": "#0072B2"})
        elif e.type == "HAS_MEMORY":  # the namespace holds every memory: drawn, but it must not pull them in
            item.update(physics=False, color={"color": "#dde1e7"})
        elif e.type in GROUP_EDGE_STYLE:
            item.update(color={"color": GROUP_EDGE_STYLE[e.type]["color"]})
        count = e.properties.get("count")
        if isinstance(count, int) and count > 1:  # thicker for more, but never a band across the picture
            item["width"] = round(min(1 + 0.8 * math.log2(count), 6.0), 1)
            item["title"] = f"{item['title']} · {count:,}"
        out.append(item)
    return out


def legend(nodes: Iterable[GraphNode]) -> list[dict[str, Any]]:
    counts: dict[str, int] = defaultdict(int)
    failed = deleted = 0
    for n in nodes:
        if _failed(n):
            failed += 1
        elif _deleted(n):
            deleted += 1
        else:
            counts[n.type] += 1
    items = [{"type": t, "label": LEGEND_LABELS.get(t, t), "count": counts[t], "color": LABEL_STYLE[t]["color"],
              "shape": LABEL_STYLE[t]["shape"]} for t in _ORDER if counts.get(t)]
    if failed:
        items.append({"type": "Step:failed", "label": "failed step", "count": failed, "color": FAILED_COLOUR,
                      "shape": "dot"})
    if deleted:
        items.append({"type": "Memory:deleted", "label": "deleted memory", "count": deleted, "color": DELETED_COLOUR,
                      "shape": "dot"})
    return items


def edge_legend(edges: Iterable[GraphEdge]) -> list[dict[str, Any]]:
    """The edge kinds a reader must tell apart (a step's own memory, what it recalled), when drawn."""
    kinds = {e.type for e in edges}
    return [{"type": kind, **look} for kind, look in EDGE_STYLE.items() if kind in kinds and "RECALLED" in kinds]


# -- the cut ------------------------------------------------------------------------------


def _spread(items: list[GraphNode], k: int) -> list[GraphNode]:
    """``k`` items evenly spaced over ``items`` (sorted by time), the first and the newest included."""
    if k >= len(items):
        return items
    if k <= 0:
        return []
    if k == 1:
        return [items[-1]]
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]


def select(graph: MemoryGraph, max_nodes: int = 300, group: str | None = None) -> GraphView:
    """Keep at most ``max_nodes`` nodes, representative of the whole (see the module docstring).

    ``group="entity"`` draws the overview instead: memories folded into the entities that mention
    them (and steps into their runs), each group with its count, opened by a click; ``"auto"``
    groups only a graph with more nodes than ``max_nodes``.
    """
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise InvalidInputError(f"max_nodes must be a positive integer, got {max_nodes!r}")
    _check_group(group)
    graph = collapse_recall_nodes(graph)  # a stored recall is drawn as edges, on every view
    if group == "entity" or (group == "auto" and len(graph.nodes) > max_nodes):
        return _grouped(graph, max_nodes)
    total: dict[str, int] = defaultdict(int)
    for n in graph.nodes:
        total[n.type] += 1
    kept = list(graph.nodes) if len(graph.nodes) <= max_nodes else _cut(graph, max_nodes)
    ids = {n.id for n in kept}
    edges = [e for e in graph.edges if e.source in ids and e.target in ids]
    shown: dict[str, int] = defaultdict(int)
    for n in kept:
        shown[n.type] += 1
    recalled = {e.target for e in edges if e.type == "RECALLED"}
    is_workflow = bool(shown.get("Step")) and all(
        n.properties.get("type") == "trace" for n in kept if n.type == "Memory" and n.id not in recalled)
    positions = _workflow_layout(kept, edges) if is_workflow else _force_start(kept, edges)
    return GraphView(graph, kept, edges, dict(total), dict(shown), "workflow" if is_workflow else "force", positions)


def _cut(graph: MemoryGraph, max_nodes: int) -> list[GraphNode]:
    by_id = {n.id: n for n in graph.nodes}
    near: dict[str, list[str]] = defaultdict(list)
    step_of: dict[str, str] = {}
    for e in graph.edges:
        near[e.source].append(e.target)
        near[e.target].append(e.source)
        if e.type == "RECORDED_AS":
            step_of[e.target] = e.source
    keep: dict[str, GraphNode] = {}
    # The few structural nodes first (a namespace, a workflow's runs), never more than a tenth.
    for n in graph.nodes:
        if n.type in ("Namespace", "Workflow", "Trace") and len(keep) < max(1, max_nodes // 10):
            keep[n.id] = n
    memories = sorted((n for n in graph.nodes if n.type == "Memory"),
                      key=lambda n: (n.properties.get("created_us") or 0, n.id))
    kinds: dict[str, list[GraphNode]] = defaultdict(list)
    for m in memories:
        kinds[str(m.properties.get("type") or "note")].append(m)
    # Half the room for memories (a trace memory brings its step), shared between kinds by size.
    room = (max_nodes - len(keep)) // 2
    cost = {k: 2 if k == "trace" else 1 for k in kinds}
    wanted = sum(len(v) * cost[k] for k, v in kinds.items()) or 1
    for kind, items in sorted(kinds.items(), key=lambda kv: len(kv[1])):
        quota = max(1, round(room * len(items) * cost[kind] / wanted) // cost[kind])
        for m in _spread(items, quota):
            if len(keep) + cost[kind] > max_nodes:
                break
            keep[m.id] = m
            if m.id in step_of and step_of[m.id] in by_id:
                keep[step_of[m.id]] = by_id[step_of[m.id]]
    # Then what those memories and steps point at, most pointed-at first.
    score: dict[str, int] = defaultdict(int)
    for kept_id in list(keep):
        for other in near[kept_id]:
            if other not in keep and by_id[other].type not in ("Memory", "Step"):
                score[other] += 1
    for other in sorted(score, key=lambda i: (-score[i], -len(near[i]), i)):
        if len(keep) >= max_nodes:
            break
        keep[other] = by_id[other]
    # Any room left goes to more memories, newest first.
    for m in reversed(memories):
        if len(keep) >= max_nodes:
            break
        keep.setdefault(m.id, m)
    return list(keep.values())


# -- grouping -----------------------------------------------------------------------------

GROUP_KINDS = ("entity",)
# Members one click adds to the drawing; the panel offers the next ones.
MEMBERS_SHOWN = 60
# Co-mention edges kept per entity (the strongest), so a hub does not draw a star to every other.
_CO_MENTIONS = 3
UNLINKED = "Group"


def _unlinked_id(ns_id: str) -> str:
    return f"group:unlinked:{ns_id}"


class GraphIndex:
    """What drawing and opening groups look up per node, built once per view (a click must not scan
    every edge of a 20,000-edge graph)."""

    def __init__(self, graph: MemoryGraph) -> None:
        self.by_id = {n.id: n for n in graph.nodes}
        self.incident: dict[str, list[GraphEdge]] = defaultdict(list)
        self.degree: dict[str, int] = defaultdict(int)
        self.recalls: dict[str, set[str]] = defaultdict(set)
        self.recalled: dict[str, list[str]] = defaultdict(list)
        self.trace_of: dict[str, str] = {}
        self.recorded: dict[str, GraphNode | None] = {}
        for e in graph.edges:
            self.incident[e.source].append(e)
            if e.target != e.source:
                self.incident[e.target].append(e)
            self.degree[e.source] += 1
            self.degree[e.target] += 1
            if e.type == "RECALLED":
                self.recalls[e.target].add(e.source)
                self.recalled[e.source].append(e.target)
            elif e.type == "HAS_STEP":
                self.trace_of[e.target] = e.source
            elif e.type == "RECORDED_AS":
                self.recorded[e.source] = self.by_id.get(e.target)

    def runs_that_recalled(self, memory_id: str) -> list[str]:
        """The trace (run) nodes whose steps recalled ``memory_id``, the most recent recall first."""
        def when(step: str) -> int:
            node = self.by_id.get(step)
            return int((node.properties.get("created_us") or 0) if node is not None else 0)

        steps = sorted(self.recalls.get(memory_id, ()), key=lambda s: (-when(s), s))
        return list(dict.fromkeys(self.trace_of[s] for s in steps if s in self.trace_of))


@dataclass
class Grouping:
    """How a grouped view folds the graph: each group's members (in drawing order) and its count."""

    members: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    extra_nodes: dict[str, GraphNode] = field(default_factory=dict)
    index: GraphIndex | None = None


def _check_group(group: str | None) -> None:
    if group is not None and group != "auto" and group not in GROUP_KINDS:
        raise InvalidInputError(f"group must be None, 'auto' or one of {', '.join(map(repr, GROUP_KINDS))}, "
                                f"got {group!r}")


def grouping(graph: MemoryGraph) -> Grouping:
    """Fold memories into the entities that mention them, steps into their runs, runs into their workflow.

    A memory that mentions nothing and records no step goes to its namespace's "other memories" group,
    so every memory is one click away.
    """
    by_id = {n.id: n for n in graph.nodes}
    members: dict[str, list[str]] = defaultdict(list)
    steps_of: dict[str, list[str]] = defaultdict(list)
    recorded: set[str] = set()
    linked: set[str] = set()
    ns_of: dict[str, str] = {}
    for e in graph.edges:
        if e.type == "MENTIONS":
            members[e.target].append(e.source)
            linked.add(e.source)
        elif e.type == "HAS_TRACE":
            members[e.source].append(e.target)
        elif e.type == "HAS_STEP":
            steps_of[e.source].append(e.target)
        elif e.type == "USES_TOOL":
            members[e.target].append(e.source)
        elif e.type == "RECORDED_AS":
            recorded.add(e.target)
        elif e.type == "HAS_MEMORY":
            ns_of[e.target] = e.source
    out = Grouping()
    for ns_id in sorted({ns_of[m] for m in ns_of}):
        gid = _unlinked_id(ns_id)
        ns = by_id.get(ns_id)
        props = dict(ns.properties) if ns is not None else {}
        out.extra_nodes[gid] = GraphNode(gid, UNLINKED, {"id": gid, "user_id": props.get("user_id"),
                                                         "agent_id": props.get("agent_id")})
    for n in graph.nodes:
        if n.type == "Memory" and n.id not in linked and n.id not in recorded and n.id in ns_of:
            members[_unlinked_id(ns_of[n.id])].append(n.id)

    def newest(i: str) -> tuple[int, str]:
        node = by_id.get(i)
        return (-int((node.properties.get("created_us") or 0) if node else 0), i)

    for gid, ids in members.items():
        first = by_id.get(gid) or out.extra_nodes.get(gid)
        unique = list(dict.fromkeys(ids))
        if first is not None and first.type == "Workflow":
            unique.sort(key=lambda t: min((by_id[s].properties.get("created_us") or 0 for s in steps_of[t]
                                           if s in by_id), default=0))
        else:
            unique.sort(key=newest)
        out.members[gid] = unique
        out.counts[gid] = len(unique)
    for trace, steps in steps_of.items():
        chain = _chain([by_id[s] for s in dict.fromkeys(steps) if s in by_id], graph.edges)
        out.members[trace] = [s.id for s in chain]
        out.counts[trace] = len(chain)
    return out


def _grouped(graph: MemoryGraph, max_nodes: int) -> GraphView:
    """The overview of a large graph: namespaces, workflows (and their runs when few), the entities with
    the most memories and each namespace's other memories, every one a group a click opens."""
    groups = grouping(graph)
    total: dict[str, int] = defaultdict(int)
    for n in graph.nodes:
        total[n.type] += 1
    keep: dict[str, GraphNode] = {}
    for n in graph.nodes:
        if n.type in ("Namespace", "Workflow"):
            keep[n.id] = n
    for gid, node in groups.extra_nodes.items():
        if groups.counts.get(gid):
            keep[gid] = node
    traces = [n for n in graph.nodes if n.type == "Trace"]
    show_runs = len(traces) <= max(max_nodes // 6, 1)
    if show_runs:
        for n in traces:
            keep[n.id] = n
    hubs = sorted((n for n in graph.nodes if n.type in ("Entity", "Tool")),
                  key=lambda n: (-groups.counts.get(n.id, 0), caption(n).lower(), n.id))
    for n in hubs:
        if len(keep) >= max_nodes:
            break
        keep[n.id] = n
    edges = _group_edges(graph, groups, keep, show_runs)
    shown: dict[str, int] = defaultdict(int)
    for n in keep.values():
        shown[n.type] += 1
    nodes = list(keep.values())
    whole = MemoryGraph([*graph.nodes, *groups.extra_nodes.values()], list(graph.edges))
    groups.index = GraphIndex(whole)
    positions = _force_start(nodes, edges)
    for i, gid in enumerate(g for g in groups.extra_nodes if g in keep):  # beside the namespace, not on the rim
        positions[gid] = (90.0, 60.0 * i)
    view = GraphView(whole, nodes, edges, dict(total), dict(shown), "grouped", positions)
    view.groups = groups
    view.counts = groups.counts
    left = [n for n in hubs if n.id not in keep]
    memories = total.get("Memory", 0)
    parts = [f"{shown[k]:,} {_plural(k) if shown[k] != 1 else k.lower()}" for k in ("Entity", "Tool")
             if shown.get(k)]
    if shown.get("Workflow"):
        runs = f"{len(traces):,} run{'s' if len(traces) != 1 else ''}"
        parts.append(f"{shown['Workflow']:,} workflow{'s' if shown['Workflow'] != 1 else ''} with "
                     + ((f"its {runs}" if shown["Workflow"] == 1 else f"their {runs}") if show_runs
                        else f"{runs} inside"))
    text = (f"{memories:,} memories grouped: {', '.join(parts) or 'nothing to group by'}"
            " (each group with a count of what is in it). Click a group to open it")
    if left:
        most = max(groups.counts.get(n.id, 0) for n in left)
        text += f"; left out: {len(left):,} entities and tools with at most {most:,} memories each (search finds them)"
    view.summary = text
    return view


def _group_edges(graph: MemoryGraph, groups: Grouping, keep: dict[str, GraphNode],
                 show_runs: bool) -> list[GraphEdge]:
    """Edges between drawn groups, each standing for the memories or steps behind it (``count``)."""
    mentioned: dict[str, list[str]] = defaultdict(list)
    workflow_of: dict[str, str] = {}
    trace_of: dict[str, str] = {}
    ns_of_workflow: dict[str, str] = {}
    ns_by_key = {(n.properties.get("user_id"), n.properties.get("agent_id")): n.id
                 for n in graph.nodes if n.type == "Namespace"}
    for e in graph.edges:
        if e.type == "MENTIONS" and e.target in keep:
            mentioned[e.source].append(e.target)
        elif e.type == "HAS_TRACE":
            workflow_of[e.target] = e.source
        elif e.type == "HAS_STEP":
            trace_of[e.target] = e.source
    for n in graph.nodes:
        if n.type == "Workflow":
            ns = ns_by_key.get((n.properties.get("user_id"), n.properties.get("agent_id")))
            if ns is not None:
                ns_of_workflow[n.id] = ns
    out: dict[str, GraphEdge] = {}

    def add(kind: str, source: str, target: str, count: int = 1) -> None:
        key = edge_id(kind, source, target)
        if key in out:
            out[key].properties["count"] += count
        else:
            out[key] = GraphEdge(key, kind, source, target, {"count": count})

    for wf, ns in ns_of_workflow.items():
        if wf in keep and ns in keep:
            add("HAS_WORKFLOW", ns, wf)
    for gid, node in groups.extra_nodes.items():
        ns = next((v for k, v in ns_by_key.items() if k == (node.properties.get("user_id"),
                                                             node.properties.get("agent_id"))), None)
        if gid in keep and ns in keep:
            add("IN_GROUP", ns, gid, groups.counts.get(gid, 0))
    if show_runs:
        for trace, wf in workflow_of.items():
            if trace in keep and wf in keep:
                add("HAS_TRACE", wf, trace)
    step_node: dict[str, str] = {}
    for e in graph.edges:
        if e.type == "RECORDED_AS":
            step_node[e.target] = e.source
    owner: dict[str, str] = {}
    for step, trace in trace_of.items():
        owner[step] = trace if show_runs else workflow_of.get(trace, trace)
    for e in graph.edges:  # a tool hangs off its workflow, not off each of a thousand runs
        wf = workflow_of.get(trace_of.get(e.source, ""), "")
        if e.type == "USES_TOOL" and e.target in keep and wf in keep:
            add("USES_TOOL", wf, e.target)
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for memory, ents in mentioned.items():
        ents = sorted(set(ents))
        run = owner.get(step_node.get(memory, ""))
        if run is not None and run in keep:
            for x in ents[:3]:
                add("MENTIONS", run, x)
        for i, a in enumerate(ents):
            for b in ents[i + 1:]:
                pairs[(a, b)] += 1
    strongest: dict[str, int] = defaultdict(int)
    for (a, b), count in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0])):
        if strongest[a] < _CO_MENTIONS or strongest[b] < _CO_MENTIONS:
            strongest[a] += 1
            strongest[b] += 1
            add("CO_MENTIONED", a, b, count)
    return list(out.values())


Places = dict[str, tuple[float, float]]


def expansion(view: GraphView, group_id: str, drawn: set[str], offset: int = 0,
              limit: int = MEMBERS_SHOWN) -> tuple[list[GraphNode], list[GraphEdge], Places, int]:
    """What opening ``group_id`` adds: its next members (and, for a run, what its steps recalled), the edges
    between them and what is drawn, each new node's place relative to the group, and how many remain."""
    groups = view.groups
    if groups is None:
        return [], [], {}, 0
    index = groups.index or GraphIndex(view.graph)
    by_id = index.by_id
    group = by_id.get(group_id)
    if group is None:
        return [], [], {}, 0
    members = groups.members.get(group_id, [])
    page = [m for m in members[offset:offset + limit] if m in by_id]
    remaining = max(len(members) - offset - limit, 0)
    new: dict[str, GraphNode] = {}
    where: Places = {}
    if group_id not in drawn:
        new[group_id] = group
        where[group_id] = (0.0, 0.0)
    golden = math.pi * (3 - math.sqrt(5))
    if group.type == "Trace":  # a run reads left to right, what each step recalled under it
        recalled = index.recalled
        for i, sid in enumerate(page):
            x = 190.0 + 120.0 * (i + offset)  # room for the run's caption before its first step
            if sid not in drawn:
                new[sid] = by_id[sid]
                where[sid] = (x, 0.0)
            for k, memory in enumerate(recalled.get(sid, [])[:8]):
                if memory not in drawn and memory not in new and memory in by_id:
                    new[memory] = by_id[memory]
                    where[memory] = (x - 40 + 80 * (k % 2), 70.0 + 45 * k)
    elif group.type == "Workflow":
        for i, tid in enumerate(page):
            if tid not in drawn:
                new[tid] = by_id[tid]
                where[tid] = (160.0, 45.0 * (i + offset - min(len(members), limit) / 2))
    else:
        for i, mid in enumerate(page):
            if mid not in drawn:
                k = i + offset
                r = 60.0 + 26.0 * math.sqrt(k + 1)
                new[mid] = by_id[mid]
                where[mid] = (r * math.cos(k * golden), r * math.sin(k * golden))
    both = drawn | set(new)
    found: dict[str, GraphEdge] = {}
    for n in new:
        for e in index.incident.get(n, ()):
            if e.type != "HAS_MEMORY" and e.source in both and e.target in both:
                found[e.id] = e
    edges = list(found.values())
    if group.type == UNLINKED:
        edges += [GraphEdge(edge_id("IN_GROUP", group_id, m), "IN_GROUP", group_id, m, {}) for m in new
                  if m != group_id]
    if group.type == "Workflow":
        edges = [e for e in edges if e.type != "HAS_TRACE" or e.source == group_id]
    return list(new.values()), edges, where, remaining


# -- layouts ------------------------------------------------------------------------------


def _chain(steps: list[GraphNode], edges: list[GraphEdge]) -> list[GraphNode]:
    """The steps of one run in ``NEXT`` order (the stored order when the chain is cut)."""
    ids = {s.id for s in steps}
    after = {e.source: e.target for e in edges if e.type == "NEXT" and e.source in ids and e.target in ids}
    has_before = set(after.values())
    by_id = {s.id: s for s in steps}

    def key(s: GraphNode) -> tuple[int, int, str]:
        order = s.properties.get("order")
        return (order if isinstance(order, int) else 2**62, s.properties.get("created_us") or 0, s.id)

    out: list[GraphNode] = []
    seen: set[str] = set()
    for head in sorted((s for s in steps if s.id not in has_before), key=key):
        current: str | None = head.id
        while current is not None and current not in seen:
            seen.add(current)
            out.append(by_id[current])
            current = after.get(current)
    out.extend(sorted((s for s in steps if s.id not in seen), key=key))
    return out


def _workflow_layout(nodes: list[GraphNode], edges: list[GraphEdge]) -> dict[str, tuple[float, float]]:
    """Runs as rows, steps left to right along NEXT, each step's memory above it; tools in a lane below."""
    dx, row_height, lift = 210.0, 190.0, 80.0
    by_id = {n.id: n for n in nodes}
    trace_of = {e.target: e.source for e in edges if e.type == "HAS_STEP"}
    runs: dict[str, list[GraphNode]] = defaultdict(list)
    for n in nodes:
        if n.type == "Step":
            runs[trace_of.get(n.id, "")].append(n)
    pos: dict[str, tuple[float, float]] = {}
    order = sorted(runs, key=lambda t: min(s.properties.get("created_us") or 0 for s in runs[t]))
    out_edges: dict[str, list[GraphEdge]] = defaultdict(list)
    for e in edges:
        out_edges[e.source].append(e)
    tools: dict[str, list[float]] = defaultdict(list)
    recalled = any(e.type == "RECALLED" for e in edges)
    if recalled:  # room under each row for what its steps recalled
        row_height += 280
    for row, trace in enumerate(order):
        y = row * row_height
        if trace in by_id:
            pos[trace] = (-dx, y)
        for i, step in enumerate(_chain(runs[trace], edges)):
            x = i * dx
            pos[step.id] = (x, y)
            fresh = [e.target for e in out_edges[step.id] if e.type == "RECALLED" and e.target not in pos]
            for k, memory in enumerate(fresh):  # under the first step that recalled it, zigzag so captions clear
                column, line = divmod(k, 5)
                pos[memory] = (x - 55 + 110 * (line % 2) + 140 * column, y + 70 + 46 * line)
            for e in out_edges[step.id]:
                if e.type == "USES_TOOL":
                    tools[e.target].append(x)
                elif e.type == "RECORDED_AS" and e.target not in pos:
                    pos[e.target] = (x, y - lift)
    rows = max(len(order), 1)
    bottom = (rows - 1) * row_height + (row_height - 80 if recalled else row_height * 0.6)
    for tool, xs in tools.items():
        pos[tool] = (min(xs), bottom)
    middle = (rows - 1) * row_height / 2
    for n in nodes:
        if n.type == "Workflow":
            pos[n.id] = (-1.8 * dx, middle)
        elif n.type == "Namespace":
            pos[n.id] = (-2.5 * dx, middle)
    # What the trace memories mention goes in a lane above the first run, over its first mention.
    mentioned: dict[str, list[float]] = defaultdict(list)
    for e in edges:
        if e.type == "MENTIONS" and e.target not in pos and e.source in pos:
            mentioned[e.target].append(pos[e.source][0])
    top = -lift - row_height * 0.6
    used: dict[float, int] = defaultdict(int)
    for entity, xs in sorted(mentioned.items(), key=lambda kv: (min(kv[1]), kv[0])):
        x = min(xs)
        pos[entity] = (x + 60 * (used[x] % 3), top - 45 * (used[x] // 3) - 20 * (used[x] % 3))
        used[x] += 1
    for i, n in enumerate(n for n in nodes if n.id not in pos):
        pos[n.id] = (-3 * dx, bottom + 60 + 40 * i)
    return pos


def _force_start(nodes: list[GraphNode], edges: list[GraphEdge]) -> dict[str, tuple[float, float]]:
    """Hubs on a sunflower spiral (most connected in the middle), every other node near its hubs."""
    hub_types = ("Entity", "Tool", "Workflow", "Trace")
    degree: dict[str, int] = defaultdict(int)
    near: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        degree[e.source] += 1
        degree[e.target] += 1
        if e.type != "HAS_MEMORY":
            near[e.source].append(e.target)
            near[e.target].append(e.source)
    hubs = sorted((n for n in nodes if n.type in hub_types), key=lambda n: (-degree[n.id], n.id))
    spacing = 70.0
    golden = math.pi * (3 - math.sqrt(5))
    pos: dict[str, tuple[float, float]] = {}
    for i, hub in enumerate(hubs):
        r = spacing * math.sqrt(i + 0.5) * 1.6
        pos[hub.id] = (r * math.cos(i * golden), r * math.sin(i * golden))
    outer = spacing * math.sqrt(len(hubs) + 1) * 1.6 + 150
    loose = [n for n in nodes if n.id not in pos and not any(o in pos for o in near[n.id])]
    placed = 0
    for n in nodes:
        if n.id in pos or n.type == "Namespace":
            continue
        anchors = [pos[o] for o in near[n.id] if o in pos]
        spin = zlib.crc32(n.id.encode())
        angle = (spin % 3600) / 3600 * 2 * math.pi
        if anchors:
            x = sum(a[0] for a in anchors) / len(anchors)
            y = sum(a[1] for a in anchors) / len(anchors)
            radius = 35 + (spin % 40)
            pos[n.id] = (x + radius * math.cos(angle), y + radius * math.sin(angle))
        else:  # nothing in common with the rest: an outer ring, evenly spaced
            a = 2 * math.pi * placed / max(len(loose), 1)
            pos[n.id] = (outer * math.cos(a), outer * math.sin(a))
            placed += 1
    for n in nodes:
        if n.type == "Namespace":
            pos[n.id] = (0.0, 0.0)
    return pos


# -- what the browser gets ----------------------------------------------------------------


def payload(view: GraphView, title: str = "") -> dict[str, Any]:
    """Everything ``_graph.js`` draws, as JSON-ready data."""
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


def widget_esm() -> str:
    """vis-network (its UMD build, given a private ``module`` to fill) and ``_graph.js`` as one ES module."""
    return (
        "const module = { exports: {} };\nconst exports = module.exports;\n"
        + _asset("vis-network.min.js")
        + "\nconst vis = module.exports;\n"
        + _asset("_graph.js")
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
    """A whole offline HTML document: vis-network, ``_graph.js`` and the data, nothing fetched.

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
        f"<script>{_asset('_graph.js')}\nmemkitGraph(vis, document.getElementById('memkit-graph-root'),"
        " memkitStaticModel(JSON.parse(document.getElementById('memkit-graph-data').textContent)));</script>"
        "</body></html>\n"
    )


def to_pyvis(view: GraphView) -> Any:
    """A ``pyvis.network.Network`` of ``view`` with the same captions, colours, tooltips and layout."""
    _pyvis_dir()
    from pyvis.network import Network

    net = Network(height="720px", width="100%", directed=True, cdn_resources="in_line")
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


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """vis-network options; the same object ``_graph.js`` builds."""
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

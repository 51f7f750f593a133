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
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memkit._core._errors import InvalidInputError
from memkit._core._graph_parts import GraphEdge, GraphNode, _record, node_properties
from memkit._core._graph_schema import edge_id, record_parts
from memkit._core._models import MemoryItem
from memkit._core._recalls import Recall, step_namespace
from memkit.graph._groups import MEMBERS_SHOWN, UNLINKED, GraphIndex, Grouping, _check_group, grouping
from memkit.graph._layout import _force_start, _workflow_layout
from memkit.graph._style import _ORDER, _plural, caption

if TYPE_CHECKING:
    from memkit._core._graph_model import MemoryGraph


# Co-mention edges kept per entity (the strongest), so a hub does not draw a star to every other.
_CO_MENTIONS = 3


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
    return replace(graph, nodes=[n for n in graph.nodes if n.id not in recalls], edges=edges)


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
    return replace(graph, nodes=nodes, edges=edges)


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
    whole = replace(graph, nodes=[*graph.nodes, *groups.extra_nodes.values()], edges=list(graph.edges))
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
                r = 80.0 + 40.0 * math.sqrt(k + 1)  # room for the captions of an opened page
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

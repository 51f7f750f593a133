"""How each node and edge looks: colour and shape by schema label, captions, tooltips, legends.

Colours are Okabe & Ito's (colour-blind safe; vermillion only for failed steps); a caption is chosen
per label (``TP53``, ``3 · bwa``, a memory's first words; never a UUID); memories and steps read
through :mod:`memkit._display`.
"""

from __future__ import annotations

import contextlib
import json
import math
import textwrap
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memkit._core._graph_parts import GraphEdge, GraphNode
from memkit._core._models import MemoryItem
from memkit._core._records import from_us
from memkit._display import format_time, is_trace, printable, shorten, status_of, step_fields, summary
from memkit.graph._groups import GraphIndex, Grouping

if TYPE_CHECKING:
    from memkit._core._graph_model import MemoryGraph


# Okabe & Ito's palette: distinguishable with every common colour-vision deficiency. Shapes differ too.
LABEL_STYLE: dict[str, dict[str, Any]] = {
    "Namespace": {"color": "#000000", "shape": "hexagon", "size": 20},
    "Memory": {"color": "#56B4E9", "shape": "dot", "size": 9},
    "Entity": {"color": "#E69F00", "shape": "diamond", "size": 12},
    "Workflow": {"color": "#CC79A7", "shape": "square", "size": 18},
    "Trace": {"color": "#F0E442", "shape": "triangle", "size": 14},
    "Step": {"color": "#0072B2", "shape": "dot", "size": 13},
    "Tool": {"color": "#009E73", "shape": "triangleDown", "size": 14},
    # a namespace's memories that mention nothing: Tol's wine, told apart from a Memory's sky blue
    "Group": {"color": "#882255", "shape": "star", "size": 16},
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


def _plural(label: str) -> str:
    return {"Entity": "entities", "Memory": "memories", "Group": "memory groups"}.get(label, label.lower() + "s")


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
    """``value`` on one line of at most ``width`` characters, cut after a whole word (the tooltip
    holds the whole text); a single word longer than the line is cut where it must be."""
    flat = " ".join(str("" if value is None else value).split())
    if len(flat) > width:
        cut = flat[: width - 1]
        space = cut.rfind(" ")
        cut = cut[:space] if space >= width // 3 else cut
        flat = cut.rstrip(" ·,;:-") + "…"
    return printable(flat)


def _step_caption(item: MemoryItem) -> str:
    """A trace memory's caption: its step's index and name (its tool is the step node's caption)."""
    step = step_fields(item)
    name = step["step_name"] if step["step_name"] is not None else step["tool"]
    head = f"step {step['step_index']}" if step["step_index"] is not None else "step"
    return f"{head} · {name}" if name is not None else head


def caption(node: GraphNode) -> str:
    """The label drawn under a node: a name, ``3 · bwa``, a memory's first words; never its UUID."""
    p = node.properties
    if node.type == "Memory":
        item = _item(p)
        text = _step_caption(item) if is_trace(item) else summary(item, 80)
        return _text(("(deleted) " if p.get("deleted") else "") + text)
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

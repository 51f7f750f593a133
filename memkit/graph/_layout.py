"""Where nodes start: a workflow read left to right along ``NEXT``, a namespace around its hubs.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from typing import TYPE_CHECKING

from memkit._core._graph_parts import GraphEdge, GraphNode

if TYPE_CHECKING:
    pass


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

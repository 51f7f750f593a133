"""Groups at scale: memories folded into the entities that mention them, steps into their runs,
runs into their workflow; and the per-node index opening a group reads.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memkit._core._errors import InvalidInputError
from memkit._core._graph_parts import GraphEdge, GraphNode
from memkit.graph._layout import _chain

if TYPE_CHECKING:
    from memkit._core._graph_model import MemoryGraph


GROUP_KINDS = ("entity",)


# Members one click adds to the drawing; the panel offers the next ones.
MEMBERS_SHOWN = 60


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

"""``GraphExplorer``: a namespace's or a workflow's graph as a live, explorable widget.

The drawing is an anywidget (``GraphView``) whose JavaScript ships in the package
(``memkit/graph/_graph*.js`` on the vis-network build pyvis embeds): nothing is fetched.
Click a node for its properties (``explorer.selected`` in Python), double-click to
fetch its neighbours from the store, search by caption, toggle types in the legend.
A workflow's graph also shows what its steps recalled (dashed purple ``RECALLED`` edges),
read through the store's recalls (:class:`memkit.SupportsRecalls`) on any adapter that keeps them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets as w
import traitlets

from memkit._core._errors import InvalidInputError, MemkitError
from memkit._core._port import SupportsRecalls
from memkit._core._recalls import step_namespace
from memkit._sync import Memory
from memkit.graph import GraphNode, MemoryGraph, memory_graph, neighbourhood
from memkit.graph._groups import MEMBERS_SHOWN, _check_group
from memkit.graph._page import payload, widget_css, widget_esm
from memkit.graph._page import reserve as first_pages
from memkit.graph._read import DEFAULT_GRAPH_LIMIT
from memkit.graph._style import style_edges, style_nodes
from memkit.graph._view import GraphView, collapse_recall_nodes, expansion, select, with_recalls
from memkit.widgets._common import Panel
from memkit.widgets._common import workflows as list_workflows

__all__ = ["GraphExplorer", "GraphWidget"]

# Memories a grouped namespace view reads (the newest); groups keep the drawing small.
GROUPED_LIMIT = 10_000
SIZE_RULES = ("type", "count", "degree", "recalls")
# "open these runs" draws this many (the most recent); the panel lists them all.
RUNS_SHOWN = 6
ROW = 150.0
COLOUR_RULES = ("type", "ns", "kind")

GraphFn = Callable[[Memory, str, str, str | None], MemoryGraph]
ExpandFn = Callable[[GraphNode], MemoryGraph]


@functools.cache
def _esm() -> str:
    return widget_esm()


@functools.cache
def _css() -> str:
    return widget_css()


class GraphWidget(anywidget.AnyWidget):
    """One drawn graph: the browser side of :class:`GraphExplorer` (usable alone with ``show``)."""

    _esm = traitlets.Unicode(_esm()).tag(sync=True)
    _css = traitlets.Unicode(_css()).tag(sync=True)
    data = traitlets.Dict().tag(sync=True)
    selected_id = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    # Styling rules: ``size_by`` one of type, count, degree, recalls; ``color_by`` one of type, ns, kind.
    style = traitlets.Dict({"size_by": "type", "color_by": "type"}).tag(sync=True)
    # Each drawn group's first page (see ``reserve``), so a first click opens a group without the kernel;
    # a trait rather than a message, so a widget drawn before it is displayed has it too.
    reserve = traitlets.Dict().tag(sync=True)

    def __init__(self, expand: ExpandFn | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.graph = MemoryGraph()
        self.view: GraphView | None = None
        self._expand = expand
        self._drawn: set[str] = set()
        self.on_msg(self._on_message)

    def show(self, graph: MemoryGraph, max_nodes: int = 300, title: str = "", note: str = "",
             group: str | None = "auto") -> GraphView:
        view = select(graph, max_nodes, group)
        view.note = note
        self.graph = view.graph
        self.view = view
        self.selected_id = None
        self._drawn = {n.id for n in view.nodes}
        self._shown: dict[str, int] = {}
        self.reserve = {}
        self.data = payload(view, title)
        if view.groups is not None:  # after the drawing, which the browser is already busy with
            self.reserve = first_pages(view)
        return view

    def _opened(self, group_id: str) -> None:
        """The browser opened ``group_id``'s first page from the reserve: note what is drawn now."""
        if self.view is None or self.view.groups is None or self._shown.get(group_id):
            return
        fresh, _, _, _ = expansion(self.view, group_id, self._drawn)
        self._drawn.update(n.id for n in fresh)
        self._shown[group_id] = min(self.view.counts.get(group_id, 0), MEMBERS_SHOWN)

    def open_group(self, group_id: str, offset: int | None = None) -> list[GraphNode]:
        """Draw the next members of a group (a click on it does the same); returns the nodes added."""
        if self.view is None or self.view.groups is None:
            return []
        start = self._shown.get(group_id, 0) if offset is None else offset
        fresh, edges, where, remaining = expansion(self.view, group_id, self._drawn, start)
        count = self.view.counts.get(group_id, 0)
        shown = min(count, start + MEMBERS_SHOWN)
        self._shown[group_id] = shown
        node = self.graph.node(group_id)
        kind = node.type.lower() if node is not None else "group"
        self._send_nodes(fresh, edges, where, group_id, {
            "group": group_id, "shown": shown,
            "message": f"{len(fresh)} new node{'s' if len(fresh) != 1 else ''} from {kind}"
                       + (f"; {remaining:,} more in it (its panel shows more)" if remaining else ""),
        })
        return fresh

    def runs_of(self, memory_id: str) -> list[GraphNode]:
        """The runs whose steps recalled ``memory_id`` (from the recall audit)."""
        if self.view is None:
            return []
        from memkit.graph._groups import GraphIndex

        groups = self.view.groups
        index = groups.index if groups is not None and groups.index is not None else GraphIndex(self.graph)
        return [index.by_id[t] for t in index.runs_that_recalled(memory_id) if t in index.by_id]

    def open_runs(self, memory_id: str) -> list[GraphNode]:
        """Draw the runs that recalled ``memory_id`` (the ``RUNS_SHOWN`` most recent), each as its ordered
        steps with what they recalled, the memory to their left; returns the runs drawn."""
        every = self.runs_of(memory_id)
        total, runs = len(every), every[:RUNS_SHOWN]
        if self.view is None or self.view.groups is None:
            return runs
        fresh: list[GraphNode] = []
        edges: list[Any] = []
        where: dict[str, tuple[float, float]] = {}
        move: dict[str, list[float]] = {}
        steps: list[str] = []
        for row, run in enumerate(runs):
            nodes, more_edges, places, _ = expansion(self.view, run.id, self._drawn | {n.id for n in fresh})
            self._shown[run.id] = min(self.view.counts.get(run.id, 0), MEMBERS_SHOWN)
            fresh.extend(nodes)
            edges.extend(more_edges)
            steps.extend(self.view.groups.members.get(run.id, [])[:MEMBERS_SHOWN])
            # runs stacked one under the other, each read left to right from its run node
            where.update({k: (x, y + ROW * row) for k, (x, y) in places.items()})
            move[run.id] = [0.0, ROW * row]  # a run already drawn comes along
        # the memory to the left of its runs: the picture of who used it reads on its own
        move[memory_id] = [-260.0, ROW / 2 * max(len(runs) - 1, 0)]
        # a run reads as its steps and what they recalled; each step's tool is in its caption
        edges = [e for e in edges if e.type != "USES_TOOL"]
        self._send_nodes(fresh, edges, where, memory_id, {
            "anchor": memory_id, "beside": True, "move": move, "focus": [memory_id, *(r.id for r in runs), *steps],
            "message": f"{len(runs)} run{'s' if len(runs) != 1 else ''} that recalled this memory"
                       + (f" (the most recent of {total})" if total > len(runs) else ""),
        })
        return runs

    def find(self, query: str) -> GraphNode | None:
        """Draw (if needed) and focus the first node whose caption matches ``query``, drawn or not."""
        from memkit.graph._style import caption

        q = query.strip().lower()
        if not q or self.view is None:
            return None
        candidates = [n for n in self.graph.nodes if n.type != "Recall"]
        hit = next((n for n in candidates if caption(n).lower() == q), None) or next(
            (n for n in candidates if q in caption(n).lower()), None)
        if hit is None:
            self.send({"event": "error", "message": f'no node matches "{query.strip()}"'})
            return None
        fresh = [] if hit.id in self._drawn else [hit]
        ids = self._drawn | {hit.id}
        edges = [e for e in self.graph.edges if e.type != "HAS_MEMORY" and hit.id in (e.source, e.target)
                 and e.source in ids and e.target in ids]
        anchor = next((e.target if e.source == hit.id else e.source for e in edges), "")
        self._send_nodes(fresh, edges, {hit.id: (60.0, 60.0)}, anchor, {
            "anchor": anchor, "focus": [hit.id], "message": f'found {hit.type} "{caption(hit)}"'})
        return hit

    def _send_nodes(self, fresh: list[GraphNode], edges: list[Any], where: dict[str, tuple[float, float]],
              anchor: str, extra: dict[str, Any]) -> None:
        self._drawn.update(n.id for n in fresh)
        styled = style_nodes(fresh, self.graph, layout="grouped", groups=self.view.groups if self.view else None)
        for item in styled:
            if item["id"] in where:
                item["offset"] = list(where[item["id"]])
        self.send({"event": "expanded", "id": anchor, "nodes": styled, "edges": style_edges(edges), **extra})

    @property
    def selected(self) -> GraphNode | None:
        """The node last clicked (or found by the search box), with all its properties."""
        return self.graph.node(self.selected_id) if self.selected_id else None

    def expand(self, node_id: str) -> MemoryGraph:
        """Fetch ``node_id``'s neighbours from the store and add them to the drawing."""
        node = self.graph.node(node_id)
        if node is None or self._expand is None:
            return MemoryGraph()
        found = self._expand(node)
        self.graph = self.graph.merge(found)
        fresh = [n for n in found.nodes if n.id not in self._drawn]
        self._drawn.update(n.id for n in fresh)
        self.send({
            "event": "expanded", "id": node_id, "nodes": style_nodes(fresh, self.graph),
            "edges": style_edges(found.edges),
            "message": f"{len(fresh)} new node{'s' if len(fresh) != 1 else ''} around {node.type.lower()}"
                       + (" (all its neighbours were already drawn)" if not fresh else ""),
        })
        return found

    def _on_message(self, _: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        event, target = content.get("event"), content.get("id")
        try:
            if event == "expand" and isinstance(target, str):
                self.expand(target)
            elif event == "open" and isinstance(target, str):
                offset = content.get("offset")
                self.open_group(target, offset if isinstance(offset, int) and offset >= 0 else None)
            elif event == "opened" and isinstance(target, str):
                self._opened(target)
            elif event == "runs" and isinstance(target, str):
                self.open_runs(target)
            elif event == "find" and isinstance(content.get("query"), str):
                self.find(content["query"])
        except (MemkitError, ValueError) as exc:
            self.send({"event": "error", "message": f"{type(exc).__name__}: {exc}"})


class GraphExplorer(Panel):
    """Draw one namespace's or one workflow's graph and explore it (see the module docstring).

    Parameters
    ----------
    mem
        An open store.
    graph
        ``graph(mem, user_id, agent_id, workflow_id_or_None)`` returning a :class:`MemoryGraph`
        (default: :func:`memkit.graph.memory_graph` of the newest 1,000 memories).
    max_nodes
        Initial node cap; over it the view groups memories (see ``group``).
    group
        ``"auto"`` (default): over ``max_nodes`` nodes, memories are folded into the entities that
        mention them and steps into their runs, each group with its count, opened by a click;
        ``"entity"``: always; ``None``: never (a representative cut instead).
    size_by, color_by
        Styling rules, also in the drawing's toolbar: size by ``"type"``, ``"count"`` (memories in a
        group), ``"degree"`` or ``"recalls"`` (times a memory was recalled); colour by ``"type"``,
        ``"ns"`` (namespace) or ``"kind"`` (entity kind).
    """

    def __init__(self, mem: Memory, graph: GraphFn | None = None, max_nodes: int = 300,
                 group: str | None = "auto", size_by: str = "type", color_by: str = "type") -> None:
        super().__init__()
        _check_group(group)
        if size_by not in SIZE_RULES:
            raise InvalidInputError(f"size_by must be one of {', '.join(SIZE_RULES)}, got {size_by!r}")
        if color_by not in COLOUR_RULES:
            raise InvalidInputError(f"color_by must be one of {', '.join(COLOUR_RULES)}, got {color_by!r}")
        self.mem = mem
        self.group = group
        self._graph_fn: GraphFn = graph or _load_graph
        self.scope = w.ToggleButtons(options=["namespace", "workflow"], value="namespace")
        self.namespace = w.Dropdown(description="namespace", layout=w.Layout(width="420px"))
        self.workflow = w.Dropdown(description="workflow", layout=w.Layout(width="560px"))
        self.max_nodes = w.IntSlider(value=max_nodes, min=10, max=5000, step=10, description="max nodes",
                                     continuous_update=False)
        self.draw_button = w.Button(description="draw", icon="project-diagram", button_style="primary")
        self.recalls = w.Checkbox(value=True, description="what each step recalled", indent=False,
                                  layout=w.Layout(width="220px"))
        self.status = self.status_line()
        self.canvas = GraphWidget(expand=lambda node: neighbourhood(self.mem, node, limit=50),
                                  style={"size_by": size_by, "color_by": color_by})
        self.widget = w.VBox([
            w.HBox([self.scope, self.max_nodes, self.draw_button]),
            self.namespace, w.HBox([self.workflow, self.recalls]), self.status, self.canvas,
        ])
        self._counts: dict[tuple[str, str], int] = {}
        self.scope.observe(lambda c: self._sync_scope(), names="value")
        self.recalls.observe(lambda c: self.draw() if self.scope.value == "workflow" else None, names="value")
        self.draw_button.on_click(lambda _: self.draw())
        self.refresh()
        self._sync_scope()

    @property
    def view(self) -> GraphView | None:
        """What is drawn: ``view.nodes``, ``view.edges``, ``view.message``."""
        return self.canvas.view

    @property
    def selected(self) -> GraphNode | None:
        """The node clicked in the drawing (``None`` before any click)."""
        return self.canvas.selected

    def refresh(self) -> None:
        """Reload namespaces and workflows."""
        infos = self._guard(self.mem.namespaces)
        flows = self._guard(lambda: list_workflows(self.mem))
        if infos is None or flows is None:
            return
        self._counts = {(i.user_id, i.agent_id): i.count for i in infos}
        self.namespace.options = [(f"{i.user_id} / {i.agent_id}  ({i.count:,})", (i.user_id, i.agent_id))
                                  for i in infos]
        self.workflow.options = [(f"{wf}  ({u} / {a})", (u, a, wf)) for u, a, wf in flows]
        # ipywidgets 8 leaves a Dropdown empty when its options are replaced.
        if infos:
            self.namespace.value = (infos[0].user_id, infos[0].agent_id)
        if flows:
            self.workflow.value = flows[0]

    def _sync_scope(self) -> None:
        by_workflow = self.scope.value == "workflow"
        self.namespace.layout.display = "none" if by_workflow else "flex"
        self.workflow.layout.display = "flex" if by_workflow else "none"
        self.recalls.layout.display = "flex" if by_workflow else "none"

    def draw(self) -> None:
        """Build the selected graph and show it."""
        note = ""
        if self.scope.value == "workflow":
            if self.workflow.value is None:
                self.say("no workflow to draw", "warn")
                return
            user, agent, wf = self.workflow.value
            caption = f"workflow {wf} ({user} / {agent})"
        else:
            if self.namespace.value is None:
                self.say("no namespace to draw", "warn")
                return
            (user, agent), wf = self.namespace.value, None
            caption = f"namespace {user} / {agent}"
            count = self._counts.get((user, agent), 0)
            limit = GROUPED_LIMIT if self.group is not None else DEFAULT_GRAPH_LIMIT
            if count > limit and self._graph_fn is _load_graph:
                note = f"the newest {limit:,} of {count:,} memories; "
        if self._graph_fn is _load_graph and self.group is not None:
            graph = self._guard(lambda: memory_graph(self.mem, user, agent, wf, limit=GROUPED_LIMIT))
        else:
            graph = self._guard(lambda: self._graph_fn(self.mem, user, agent, wf))
        if graph is None:
            return
        if wf is None and isinstance(self.mem.provider, SupportsRecalls):
            # which runs recalled each memory: the namespace's own recall audit
            loaded = graph
            graph = self._guard(lambda: _with_namespace_recalls(self.mem, loaded, user, agent))
            if graph is None:
                return
        if wf is not None:
            shown = graph if self.recalls.value else MemoryGraph(
                [n for n in graph.nodes if n.type != "Recall"],
                [e for e in graph.edges if e.type != "RECALLED"])
            graph = self._guard(lambda: _recalled(self.mem, shown, wf, (user, agent)) if self.recalls.value
                                else collapse_recall_nodes(shown))
            if graph is None:
                return
        self.canvas.show(graph, self.max_nodes.value, caption, note, self.group)
        self.say("")  # the drawing says what it shows; the status line is for problems

    def summary(self) -> str:
        return f"GraphExplorer: {self.view.message}" if self.view else "GraphExplorer: nothing drawn yet"


def _recalled(mem: Memory, graph: MemoryGraph, workflow_id: str, space: tuple[str, str]) -> MemoryGraph:
    """``graph`` with what the workflow's steps in namespace ``space`` recalled, from any namespace
    they searched (another namespace's run of the same workflow is not read)."""
    if not isinstance(mem.provider, SupportsRecalls):
        return collapse_recall_nodes(graph)
    recalls = [r for r in mem.recalls(workflow_id=workflow_id) if step_namespace(r) == space]
    ids = dict.fromkeys(hit.id for r in recalls for hit in r.hits)
    return with_recalls(graph, recalls, {memory_id: mem.get(memory_id) for memory_id in ids})


def _with_namespace_recalls(mem: Memory, graph: MemoryGraph, user_id: str, agent_id: str) -> MemoryGraph:
    """``graph`` with a ``RECALLED`` edge from each of its steps to each memory of it that step recalled."""
    have = {n.id for n in graph.nodes}
    # only this namespace's memories: a hit elsewhere would draw another namespace
    recalls = [r.model_copy(update={"hits": [h for h in r.hits if h.id in have]})
               for r in mem.recalls(user_id=user_id, agent_id=agent_id)
               if r.user_id == user_id and r.agent_id == agent_id]
    return with_recalls(graph, recalls, {})


def _load_graph(mem: Memory, user_id: str, agent_id: str, workflow_id: str | None = None) -> MemoryGraph:
    return memory_graph(mem, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)

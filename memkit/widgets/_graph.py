"""``GraphExplorer``: a namespace's or a workflow's graph as a live, explorable widget.

The drawing is an anywidget (``GraphView``) whose JavaScript ships in the package
(``memkit/_graph.js`` on the vis-network build pyvis embeds): nothing is fetched.
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

from memkit._errors import MemkitError
from memkit._graphview import (
    GraphView,
    collapse_recall_nodes,
    payload,
    select,
    style_edges,
    style_nodes,
    widget_css,
    widget_esm,
    with_recalls,
)
from memkit._protocols import SupportsRecalls
from memkit._recall import step_namespace
from memkit._sync import Memory
from memkit.graph import DEFAULT_GRAPH_LIMIT, GraphNode, MemoryGraph, memory_graph, neighbourhood
from memkit.widgets._common import Panel, status_html
from memkit.widgets._common import workflows as list_workflows

__all__ = ["GraphExplorer", "GraphWidget"]

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

    def __init__(self, expand: ExpandFn | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.graph = MemoryGraph()
        self.view: GraphView | None = None
        self._expand = expand
        self._drawn: set[str] = set()
        self.on_msg(self._on_message)

    def show(self, graph: MemoryGraph, max_nodes: int = 300, title: str = "", note: str = "") -> GraphView:
        view = select(graph, max_nodes)
        view.note = note
        self.graph = graph
        self.view = view
        self.selected_id = None
        self._drawn = {n.id for n in view.nodes}
        self.data = payload(view, title)
        return view

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
        if not isinstance(content, dict) or content.get("event") != "expand" or not isinstance(content.get("id"), str):
            return
        try:
            self.expand(content["id"])
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
        Initial node cap; over it the view keeps a representative part and says what it left out.
    """

    def __init__(self, mem: Memory, graph: GraphFn | None = None, max_nodes: int = 300) -> None:
        self.mem = mem
        self._graph_fn: GraphFn = graph or _load_graph
        self.scope = w.ToggleButtons(options=["namespace", "workflow"], value="namespace")
        self.namespace = w.Dropdown(description="namespace", layout=w.Layout(width="420px"))
        self.workflow = w.Dropdown(description="workflow", layout=w.Layout(width="560px"))
        self.max_nodes = w.IntSlider(value=max_nodes, min=10, max=5000, step=10, description="max nodes",
                                     continuous_update=False)
        self.draw_button = w.Button(description="draw", icon="project-diagram", button_style="primary")
        self.recalls = w.Checkbox(value=True, description="what each step recalled", indent=False,
                                  layout=w.Layout(width="220px"))
        self.status = w.HTML()
        self.canvas = GraphWidget(expand=lambda node: neighbourhood(self.mem, node, limit=50))
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
                self.status.value = status_html("no workflow to draw", "warn")
                return
            user, agent, wf = self.workflow.value
            caption = f"workflow {wf} ({user} / {agent})"
        else:
            if self.namespace.value is None:
                self.status.value = status_html("no namespace to draw", "warn")
                return
            (user, agent), wf = self.namespace.value, None
            caption = f"namespace {user} / {agent}"
            count = self._counts.get((user, agent), 0)
            if count > DEFAULT_GRAPH_LIMIT and self._graph_fn is _load_graph:
                note = f"the newest {DEFAULT_GRAPH_LIMIT:,} of {count:,} memories; "
        graph = self._guard(lambda: self._graph_fn(self.mem, user, agent, wf))
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
        self.canvas.show(graph, self.max_nodes.value, caption, note)
        self.status.value = ""  # the drawing says what it shows; the status line is for problems

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


def _load_graph(mem: Memory, user_id: str, agent_id: str, workflow_id: str | None = None) -> MemoryGraph:
    return memory_graph(mem, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)

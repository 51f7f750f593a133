"""``GraphExplorer``: the graph of a namespace or a workflow in the safe offline view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w

from memkit._graphview import GraphView, graph_html, graph_view
from memkit._sync import Memory
from memkit.graph import memory_graph
from memkit.widgets._common import Panel, status_html
from memkit.widgets._common import workflows as list_workflows

__all__ = ["GraphExplorer"]

GraphFn = Callable[[Memory, str, str, str | None], Any]


class GraphExplorer(Panel):
    """Draw one namespace's or one workflow's graph: colour by node type, size by degree, capped.

    Parameters
    ----------
    mem
        An open store.
    graph
        ``graph(mem, user_id, agent_id, workflow_id_or_None)`` returning nodes/edges
        (default: ``memkit.graph.memory_graph`` when installed, else a small builder).
    max_nodes
        Initial node cap; the most connected nodes are kept.
    """

    def __init__(self, mem: Memory, graph: GraphFn | None = None, max_nodes: int = 150) -> None:
        self.mem = mem
        self._graph_fn: GraphFn = graph or _load_graph
        self.view: GraphView | None = None

        self.scope = w.ToggleButtons(options=["namespace", "workflow"], value="namespace")
        self.namespace = w.Dropdown(description="namespace", layout=w.Layout(width="420px"))
        self.workflow = w.Dropdown(description="workflow", layout=w.Layout(width="560px"))
        self.max_nodes = w.IntSlider(value=max_nodes, min=10, max=1000, step=10, description="max nodes",
                                     continuous_update=False)
        self.draw_button = w.Button(description="draw", icon="project-diagram", button_style="primary")
        self.status = w.HTML()
        self.view_html = w.HTML()
        self.widget = w.VBox([
            w.HBox([self.scope, self.max_nodes, self.draw_button]),
            self.namespace, self.workflow, self.status, self.view_html,
        ])
        self.scope.observe(lambda c: self._sync_scope(), names="value")
        self.draw_button.on_click(lambda _: self.draw())
        self.refresh()
        self._sync_scope()

    def refresh(self) -> None:
        """Reload namespaces and workflows."""
        infos = self._guard(self.mem.namespaces)
        flows = self._guard(lambda: list_workflows(self.mem))
        if infos is None or flows is None:
            return
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

    def draw(self) -> None:
        """Build the selected graph and show it."""
        if self.scope.value == "workflow":
            if self.workflow.value is None:
                self.status.value = status_html("no workflow to draw", "warn")
                return
            user, agent, wf = self.workflow.value
            caption = f"workflow {wf}"
        else:
            if self.namespace.value is None:
                self.status.value = status_html("no namespace to draw", "warn")
                return
            (user, agent), wf = self.namespace.value, None
            caption = f"namespace {user} / {agent}"
        graph = self._guard(lambda: self._graph_fn(self.mem, user, agent, wf))
        if graph is None:
            return
        self.view = graph_view(graph, self.max_nodes.value)
        self.status.value = status_html(f"{caption}: {self.view.message}")
        self.view_html.value = graph_html(self.view, caption=caption)

    def summary(self) -> str:
        return f"GraphExplorer: {self.view.message}" if self.view else "GraphExplorer: nothing drawn yet"


def _load_graph(mem: Memory, user_id: str, agent_id: str, workflow_id: str | None = None) -> Any:
    return memory_graph(mem, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)

"""``Dashboard``: the three panels in tabs."""

from __future__ import annotations

import ipywidgets as w

from memkit._sync import Memory
from memkit.widgets._common import Panel
from memkit.widgets._graph import GraphExplorer
from memkit.widgets._namespaces import NamespaceBrowser
from memkit.widgets._traces import TraceReplay

__all__ = ["Dashboard"]


class Dashboard(Panel):
    """Namespaces, traces and graph of one store, one tab each.

    Examples
    --------
    >>> Dashboard(memkit.open("sqlite:///data/memory.db"))  # doctest: +SKIP
    """

    def __init__(self, mem: Memory) -> None:
        super().__init__()
        self.mem = mem
        self.browser = NamespaceBrowser(mem)
        # Reading every trace is the slow part of opening; it waits until the Traces tab is shown.
        self.replay = TraceReplay(mem, load=False)
        self.explorer = GraphExplorer(mem)
        self.status = self.status_line()
        self.tabs = w.Tab(children=[self.browser.widget, self.replay, self.explorer.widget])
        for index, title in enumerate(["Namespaces", "Traces", "Graph"]):
            self.tabs.set_title(index, title)
        self.tabs.observe(self._on_tab, names="selected_index")
        self.widget = w.VBox([self.tabs, self.status])

    def _on_tab(self, change: dict[str, object]) -> None:
        if change["new"] == 1:
            self.replay.ensure_loaded()

    def summary(self) -> str:
        return "\n".join(["Dashboard", self.browser.summary(), self.replay.summary(), self.explorer.summary()])

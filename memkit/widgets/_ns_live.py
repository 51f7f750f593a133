"""Following a store in :class:`~memkit.widgets.NamespaceBrowser`: memories and namespaces another
process writes appear as they are written.

Each look reads the namespace list (a count and the newest write per namespace, what the overview
shows anyway); only when it differs from the one shown are the list and the open view (the page,
or the search, at the same place) read again, and the memory open in the detail stays open. The
thread only looks; in a notebook the redraw is handed to the kernel's own thread (its event loop), so
it never lands in the middle of a change the user is making.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import ipywidgets as w
import traitlets as t

from memkit._core._models import MemoryItem, NamespaceInfo
from memkit.widgets._common import table_html, when
from memkit.widgets._follow import Follower, checked_interval
from memkit.widgets._nsgrid import NamespaceGrid, kinds_counted

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from memkit._core._recalls import Recall
    from memkit._sync import Memory

__all__ = ["NamespacesLive"]


def _signature(infos: list[NamespaceInfo]) -> list[tuple[Any, ...]]:
    return [(i.user_id, i.agent_id, i.count, i.last_at) for i in infos]


class NamespacesLive(t.HasTraits):
    """``follow()``/``unfollow()``/``poll()``/``close()`` and the namespace list for ``NamespaceBrowser``."""

    following = t.Bool(False)
    """Whether the browser is following the store."""

    mem: Memory
    widget: w.Box | None
    namespace: w.Dropdown
    overview: w.HTML
    rows: NamespaceGrid
    items: list[MemoryItem]
    selected: MemoryItem | None
    _infos: list[NamespaceInfo]
    _hits: list[MemoryItem] | None
    _matched: Any
    _recalled: dict[tuple[str, str], dict[str, list[tuple[Recall, int]]]]
    _follower: Follower | None = None
    _pending = False  # a redraw is waiting for the kernel's thread

    if TYPE_CHECKING:
        def say(self, message: str, kind: str = "info") -> None: ...
        def working(self, what: str) -> AbstractContextManager[None]: ...
        def show_page(self) -> None: ...
        def run_search(self) -> None: ...
        def _show(self, items: list[MemoryItem], where: str) -> None: ...
        def _on_namespace(self, change: dict[str, Any]) -> None: ...

    def _reload(self, infos: list[NamespaceInfo]) -> None:
        """Show ``infos`` as the namespace list, keeping the chosen namespace, then its view read again."""
        self._recalled = {}
        self._matched = None
        self._infos = infos
        total = sum(i.count for i in infos)
        self.overview.value = (
            f"<b>{len(infos)} namespaces, {kinds_counted(self.mem, total)}</b>"
            + table_html(["user", "agent", "records", "last activity"],
                         [(i.user_id, i.agent_id, f"{i.count:,}", when(i.last_at)) for i in infos])
        )
        current, opened = self.namespace.value, self.selected
        options = [(f"{i.user_id} / {i.agent_id}  ({i.count:,})", (i.user_id, i.agent_id)) for i in infos]
        # New options move the value through the first one: the view is not reset on the way.
        self.namespace.unobserve(self._on_namespace, names="value")
        try:
            self.namespace.options = options
            values = [v for _, v in options]
            if values:
                self.namespace.value = current if current in values else values[0]
        finally:
            self.namespace.observe(self._on_namespace, names="value")
        if not options:
            self._show([], "the store is empty")
        elif self.namespace.value != current:
            self._on_namespace({"new": self.namespace.value})
        elif self._hits is not None:
            self.run_search()
        else:
            self.show_page()
        if opened is not None and any(i.id == opened.id for i in self.items):
            self.rows.value = opened.id  # the memory being read stays open

    def follow(self, interval: float = 0.5) -> None:
        """Show new memories and namespaces as another process writes them, looking every ``interval``
        seconds; :meth:`unfollow` or :meth:`close` stops it."""
        seconds = checked_interval(interval)
        self.unfollow()
        self.poll()
        try:  # in a notebook, redraw on the kernel's thread: never in the middle of the user's own change
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._follower = Follower(self, seconds, lambda: self._look(loop), self.say,
                                  lambda: setattr(self, "following", False))
        self.following = True

    def unfollow(self) -> None:
        """Stop following the store and wait for the following thread to end."""
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
        self.following = False

    def poll(self) -> bool:
        """Look at the store once and redraw if it changed since the last look; whether it had."""
        infos = self.mem.namespaces()
        changed = _signature(infos) != _signature(self._infos)
        if changed:
            self._reload(infos)
        return changed

    def _look(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """The following thread's look: the check here, the redraw where the user's changes are made."""
        infos = self.mem.namespaces()
        if _signature(infos) == _signature(self._infos) or self._pending:
            return
        if loop is None:
            self._reload(infos)
            return
        self._pending = True
        loop.call_soon_threadsafe(self._redraw, infos)

    def _redraw(self, infos: list[NamespaceInfo]) -> None:
        self._pending = False
        if self._follower is not None:  # not after unfollow() or close()
            with self.working("following"):
                self._reload(infos)

    def close(self) -> None:
        """Stop following, then close the browser's view."""
        self.unfollow()
        if self.widget is not None:
            self.widget.close()

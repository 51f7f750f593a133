"""``NamespaceBrowser``: namespaces, paging, search, detail and delete for any store."""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w

from memkit._errors import InvalidInputError
from memkit._models import MemoryItem, NamespaceInfo
from memkit._sync import Memory
from memkit.widgets._common import Panel, esc, pretty, search_modes, short, status_html, table_html, when

__all__ = ["NamespaceBrowser"]


class NamespaceBrowser(Panel):
    """Browse a store one namespace at a time.

    Pick a namespace to page through its memories newest first (``get_page``,
    one page in memory at a time), search it with any mode the store supports
    and a JSON metadata filter, open one memory, delete it after a confirmation.

    Parameters
    ----------
    mem
        An open store (``memkit.open(...)``).
    page_size
        Rows per page and search results per query.

    Examples
    --------
    >>> browser = NamespaceBrowser(memkit.open("sqlite:///data/memory.db"))  # doctest: +SKIP
    >>> browser  # doctest: +SKIP
    """

    def __init__(self, mem: Memory, page_size: int = 20) -> None:
        self.mem = mem
        self.page_size = page_size
        self.offset = 0
        self.items: list[MemoryItem] = []
        self.selected: MemoryItem | None = None
        self._has_more = False
        self._infos: list[NamespaceInfo] = []

        self.overview = w.HTML()
        self.namespace = w.Dropdown(description="namespace", layout=w.Layout(width="420px"))
        self.refresh_button = w.Button(description="refresh", icon="refresh", layout=w.Layout(width="90px"))
        self.query = w.Text(placeholder="search text (empty = browse newest first)", layout=w.Layout(width="360px"))
        self.mode = w.Dropdown(options=["keyword"], value="keyword", description="mode", layout=w.Layout(width="200px"))
        self.filters = w.Text(placeholder='metadata filter, JSON: {"gene": "TP53"}', layout=w.Layout(width="360px"))
        self.search_button = w.Button(description="search", icon="search", button_style="primary")
        self.clear_button = w.Button(description="clear")
        self.prev_button = w.Button(description="◀ newer", disabled=True)
        self.next_button = w.Button(description="older ▶", disabled=True)
        self.page_label = w.HTML()
        self.status = w.HTML()
        self.table = w.HTML()
        self.rows = w.Select(options=[], rows=8, description="open", layout=w.Layout(width="100%"))
        self.detail = w.HTML()
        self.delete_button = w.Button(description="delete…", icon="trash", button_style="danger", disabled=True)
        self.confirm_button = w.Button(description="yes, delete it", button_style="danger")
        self.cancel_button = w.Button(description="cancel")
        self.confirm_text = w.HTML()
        self.confirm_box = w.HBox([self.confirm_text, self.confirm_button, self.cancel_button],
                                  layout=w.Layout(display="none"))

        self.widget = w.VBox([
            self.overview,
            w.HBox([self.namespace, self.refresh_button]),
            w.HBox([self.query, self.mode]),
            w.HBox([self.filters, self.search_button, self.clear_button]),
            self.status,
            w.HBox([self.prev_button, self.next_button, self.page_label]),
            self.table,
            self.rows,
            self.detail,
            w.HBox([self.delete_button]),
            self.confirm_box,
        ])

        self.namespace.observe(self._on_namespace, names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.search_button.on_click(lambda _: self.run_search())
        self.clear_button.on_click(lambda _: self._clear())
        self.prev_button.on_click(lambda _: self._page(-1))
        self.next_button.on_click(lambda _: self._page(+1))
        self.rows.observe(self._on_row, names="value")
        self.delete_button.on_click(lambda _: self._ask_delete())
        self.confirm_button.on_click(lambda _: self._do_delete())
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.refresh()

    # -- namespaces ---------------------------------------------------------------

    def refresh(self) -> None:
        """Reload the namespace list (keeping the current choice) and the current page."""
        infos = self._guard(self.mem.namespaces)
        if infos is None:
            return
        self._infos = infos
        total = sum(i.count for i in infos)
        self.overview.value = (
            f"<b>{len(infos)} namespaces, {total:,} memories</b>"
            + table_html(["user", "agent", "memories", "last activity"],
                         [(i.user_id, i.agent_id, f"{i.count:,}", when(i.last_at)) for i in infos])
        )
        current = self.namespace.value
        options = [(f"{i.user_id} / {i.agent_id}  ({i.count:,})", (i.user_id, i.agent_id)) for i in infos]
        self.namespace.options = options
        values = [v for _, v in options]
        if current in values:
            self.namespace.value = current
            self.show_page()
        elif values:
            self.namespace.value = values[0]  # fires _on_namespace
        else:
            self._show([], "the store is empty")

    def _on_namespace(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        modes = search_modes(self.mem)
        # Keep a mode the user picked (there was a choice to make); otherwise the store's own
        # default: hybrid when it has vectors.
        chosen = self.mode.value if len(self.mode.options) > 1 else None
        self.mode.options = modes
        self.mode.value = chosen if chosen in modes else ("hybrid" if "hybrid" in modes else modes[0])
        self.offset = 0
        self.query.value = ""
        self.show_page()

    @property
    def count(self) -> int:
        """Memories in the selected namespace (from ``namespaces()``)."""
        for info in self._infos:
            if (info.user_id, info.agent_id) == self.namespace.value:
                return info.count
        return 0

    # -- paging and search --------------------------------------------------------

    def _parsed_filters(self) -> dict[str, Any] | None:
        text = self.filters.value.strip()
        if not text:
            return None
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"the metadata filter is not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidInputError('the metadata filter must be a JSON object, e.g. {"gene": "TP53"}')
        return parsed

    def show_page(self) -> None:
        """Show the page at ``offset`` (newest first, filter applied)."""
        if self.namespace.value is None:
            return
        user, agent = self.namespace.value

        def fetch() -> list[MemoryItem]:
            filters = self._parsed_filters()
            # One extra row says whether an older page exists without counting the namespace.
            return self.mem.get_page(user, agent, offset=self.offset, limit=self.page_size + 1, filters=filters)

        items = self._guard(fetch)
        if items is None:
            return
        self._has_more = len(items) > self.page_size
        items = items[: self.page_size]
        if self.filters.value.strip():
            where = f"rows {self.offset + 1 if items else 0}–{self.offset + len(items)} matching the filter"
        else:
            where = f"rows {self.offset + 1 if items else 0}–{self.offset + len(items)} of {self.count:,}"
        self._show(items, where)

    def _page(self, step: int) -> None:
        self.offset = max(0, self.offset + step * self.page_size)
        self.show_page()

    def run_search(self) -> None:
        """Search the namespace; an empty query browses it (with the filter) instead."""
        if self.namespace.value is None:
            return
        self.offset = 0
        text = self.query.value.strip()
        if not text:
            self.show_page()
            return
        user, agent = self.namespace.value
        mode = self.mode.value

        def fetch() -> list[MemoryItem]:
            return self.mem.search(text, user, agent, self.page_size, self._parsed_filters(), mode=mode)

        items = self._guard(fetch)
        if items is None:
            return
        self._has_more = False
        self._show(items, f"{len(items)} best {mode} matches for {text!r}")

    def _clear(self) -> None:
        self.query.value = ""
        self.filters.value = ""
        self.offset = 0
        self.show_page()

    def _show(self, items: list[MemoryItem], where: str) -> None:
        self.items = items
        self.status.value = ""
        self.page_label.value = esc(where)
        self.prev_button.disabled = self.offset == 0
        self.next_button.disabled = not self._has_more
        scored = any(i.score is not None for i in items)
        headers = ["#", "created", *(["score"] if scored else []), "content", "metadata", "id"]
        rows = [
            (self.offset + n, when(i.created_at),
             *([f"{i.score:.3f}" if i.score is not None else "-"] if scored else []),
             short(i.content), short(json.dumps(i.metadata, default=str, ensure_ascii=False), 60), i.id[:8])
            for n, i in enumerate(items, start=1)
        ]
        self.table.value = table_html(headers, rows) if items else status_html("no memories here")
        self.rows.options = [(f"{self.offset + n:>4}  {short(i.content, 100)}", i.id) for n, i in enumerate(items, 1)]
        self.rows.value = None
        self._select(None)

    # -- detail and delete -----------------------------------------------------------

    def _on_row(self, change: dict[str, Any]) -> None:
        self._select(change["new"])

    def _select(self, memory_id: str | None) -> None:
        self._hide_confirm()
        item = next((i for i in self.items if i.id == memory_id), None)
        self.selected = item
        self.delete_button.disabled = item is None
        if item is None:
            self.detail.value = ""
            return
        self.detail.value = (
            '<div class="memkit-detail" style="border-top:1px solid #ddd;margin-top:6px;padding-top:4px">'
            f"<b>memory {esc(item.id)}</b> · {esc(item.user_id)} / {esc(item.agent_id)} · {esc(when(item.created_at))}"
            f'<pre style="white-space:pre-wrap">{esc(item.content)}</pre>'
            f"<b>metadata</b><pre>{esc(pretty(item.metadata))}</pre>"
            + (f"<b>score</b> {esc(item.score)}<pre>{esc(pretty(item.score_details))}</pre>"
               if item.score_details is not None else "")
            + "</div>"
        )

    def _ask_delete(self) -> None:
        if self.selected is None:
            return
        self.confirm_text.value = f"Delete memory <b>{esc(self.selected.id)}</b>? This cannot be undone."
        self.confirm_box.layout.display = "flex"

    def _hide_confirm(self) -> None:
        self.confirm_box.layout.display = "none"

    def _do_delete(self) -> None:
        item = self.selected
        self._hide_confirm()
        if item is None:
            return
        user, agent = item.user_id or "", item.agent_id or ""
        deleted = self._guard(lambda: self.mem.delete(item.id, user_id=user, agent_id=agent))
        if deleted is None:
            return
        message = f"deleted memory {item.id}" if deleted else f"memory {item.id} was already gone"
        self.refresh()
        self.status.value = status_html(message, "ok" if deleted else "warn")

    def summary(self) -> str:
        ns = "/".join(self.namespace.value) if self.namespace.value else "-"
        return f"NamespaceBrowser: {len(self._infos)} namespaces; showing {ns}, {len(self.items)} rows"

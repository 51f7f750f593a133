"""``NamespaceBrowser``: namespaces, paging, search, detail and delete for any store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as w

from memkit._core._errors import InvalidInputError, MemkitError
from memkit._core._models import MemoryItem, NamespaceInfo
from memkit._core._port import SupportsRecalls
from memkit._core._recalls import Recall
from memkit._display import is_trace, shorten, summary
from memkit._sync import Memory
from memkit.widgets._common import Panel, T, esc, search_modes
from memkit.widgets._ns_live import NamespacesLive
from memkit.widgets._nsgrid import (
    _CHUNK,
    _FILTERABLE,
    _KIND_FILTER,
    CSV_CAP,
    KINDS,
    NamespaceGrid,
    _matches,
    _memory_row,
    _recall_row,
    csv_text,
    detail_html,
    recalled_html,
)

__all__ = ["NamespaceBrowser"]


def _wrap() -> w.Layout:
    """A row of controls that wraps onto the next line when the cell is too narrow for it."""
    return w.Layout(flex_flow="row wrap", max_width="100%")


class NamespaceBrowser(Panel, NamespacesLive):
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
    follow
        Show memories and namespaces other processes write as they are written (:meth:`follow`;
        :meth:`close` stops it).

    Examples
    --------
    >>> browser = NamespaceBrowser(memkit.open("sqlite:///data/memory.db"))  # doctest: +SKIP
    >>> browser  # doctest: +SKIP
    """

    def __init__(self, mem: Memory, page_size: int = 20, follow: bool = False) -> None:
        super().__init__()
        self.mem = mem
        self.page_size = page_size
        self.offset = 0
        self.items: list[MemoryItem] = []
        self.selected: MemoryItem | None = None
        self._has_more = False
        self._infos: list[NamespaceInfo] = []
        # The last search's hits (before the column filters); None while browsing.
        self._hits: list[MemoryItem] | None = None
        # What found them (query, namespace, mode, metadata filter): the CSV runs it again for every hit.
        self._search: tuple[str, str, str, str | None, Any] | None = None
        # The column-filtered rows of the namespace, kept while paging through them.
        self._matched: tuple[tuple[Any, ...], list[MemoryItem], bool] | None = None
        # Which recalls returned each memory, per namespace; read on the first open, dropped on refresh.
        self._recalled: dict[tuple[str, str], dict[str, list[tuple[Recall, int]]]] = {}

        self.overview = w.HTML()
        self.namespace = w.Dropdown(description="namespace", layout=w.Layout(width="420px", max_width="100%"))
        # Sized to its buttons: ipywidgets' default box (300 px) for three 148 px buttons wraps "recalls";
        # 100 px holds "memories" in the bold of the chosen button.
        self.kind = w.ToggleButtons(options=list(KINDS), value="memories",
                                    tooltips=["memories the agent stored", "trace steps", "recorded searches"],
                                    style={"button_width": "100px"}, layout=w.Layout(width="auto", flex="none"))
        self.refresh_button = w.Button(description="refresh", icon="refresh", layout=w.Layout(width="90px"))
        self.query = w.Text(placeholder="search text (empty = browse newest first)",
                            layout=w.Layout(width="360px", max_width="100%"))
        self.mode = w.Dropdown(options=["keyword"], value="keyword", description="mode", layout=w.Layout(width="200px"))
        self.filters = w.Text(placeholder='metadata filter, JSON: {"gene": "TP53"}',
                              layout=w.Layout(width="360px", max_width="100%"))
        self.search_button = w.Button(description="search", icon="search", button_style="primary")
        self.clear_button = w.Button(description="clear")
        self.prev_button = w.Button(description="◀ newer", disabled=True)
        self.next_button = w.Button(description="older ▶", disabled=True)
        self.page_label = w.HTML(layout=w.Layout(display="none"))  # the grid's caption says the same
        self.status = self.status_line()
        # The table spans the cell; the detail sits beside it on a wide cell, below it on a narrow one
        # (the row wraps), and is not there at all until a row is opened.
        self.rows = NamespaceGrid(layout=w.Layout(flex="3 1 620px", min_width="0"))
        self.detail = w.HTML(layout=w.Layout(min_width="0"))
        self.delete_button = w.Button(description="delete…", icon="trash", button_style="danger", disabled=True)
        self.confirm_button = w.Button(description="yes, delete it", button_style="danger")
        self.cancel_button = w.Button(description="cancel")
        self.confirm_text = w.HTML()
        self.confirm_box = w.HBox([self.confirm_text, self.confirm_button, self.cancel_button],
                                  layout=w.Layout(display="none", flex_flow="row wrap"))
        self.side = w.VBox([self.detail, self.delete_button, self.confirm_box],
                           layout=w.Layout(flex="1 1 320px", min_width="0", display="none"))

        self.widget = w.VBox([
            self.overview,
            # rows of controls wrap on a narrow cell rather than running past its edge
            w.HBox([self.namespace, self.refresh_button, self.kind], layout=_wrap()),
            w.HBox([self.query, self.mode], layout=_wrap()),
            w.HBox([self.filters, self.search_button, self.clear_button], layout=_wrap()),
            self.status,
            w.HBox([self.prev_button, self.next_button, self.page_label]),
            w.Box([self.rows, self.side], layout=w.Layout(display="flex", flex_flow="row wrap", width="100%",
                                                          align_items="flex-start", grid_gap="12px")),
        ], layout=w.Layout(width="100%"))
        self.widget.add_class("memkit-namespace-browser")

        self.namespace.observe(self._on_namespace, names="value")
        self.kind.observe(lambda _: self._on_kind(), names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.search_button.on_click(lambda _: self.run_search())
        # Enter in either box submits (the value only changes on Enter or leaving the box).
        self.query.continuous_update = False
        self.filters.continuous_update = False
        self.query.observe(self._submitted, names="value")
        self.filters.observe(self._submitted, names="value")
        self.clear_button.on_click(lambda _: self._clear())
        self.prev_button.on_click(lambda _: self._page(-1))
        self.next_button.on_click(lambda _: self._page(+1))
        self.rows.observe(self._on_row, names="value")
        self.rows.observe(lambda _: self._on_column_filters(), names="column_filters")
        self.rows.on_msg(self._on_grid_message)
        self.delete_button.on_click(lambda _: self._ask_delete())
        self.confirm_button.on_click(lambda _: self._do_delete())
        self.cancel_button.on_click(lambda _: self._hide_confirm())
        self.refresh()
        if follow:
            self.follow()

    def _submitted(self, change: dict[str, Any]) -> None:
        # Only a value typed in the browser (Enter) searches; Python sets values and clicks search.
        owner = change["owner"]
        if "value" in getattr(owner, "_property_lock", {}):
            self.run_search()

    def _guard(self, fn: Callable[[], T]) -> T | None:
        """Run a store call with the busy mark on; a failure replaces the results with the error."""
        self.rows.busy = True
        try:
            return fn()
        except (MemkitError, ValueError) as exc:
            self.items = []
            self.rows.rows = []
            self.rows.value = ""
            self.rows.caption = ""
            self.rows.empty_text = "no results: see the error above"
            self.page_label.value = ""
            self.detail.value = ""
            self.say(f"{type(exc).__name__}: {exc}", "error")
            return None
        finally:
            self.rows.busy = False

    # -- namespaces ---------------------------------------------------------------

    def refresh(self) -> None:
        """Reload the namespace list (keeping the current choice) and the current page or search."""
        infos = self._guard(self.mem.namespaces)
        if infos is not None:
            self._reload(infos)

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

    def _on_kind(self) -> None:
        self.rows.say("")  # a message about the view left ("CSV: 43 rows") is not about this one
        self.offset = 0
        self.rows.kind = self.kind.value
        self.run_search() if self.query.value.strip() and self.kind.value != "recalls" else self.show_page()

    def _kind_filters(self) -> dict[str, Any] | None:
        """The user's filter with the switch's: a ``type`` the user asks for wins."""
        mine = self._parsed_filters()
        wanted = _KIND_FILTER.get(self.kind.value)
        if wanted is None or (mine is not None and "type" in mine):
            return mine
        return {**wanted, **(mine or {})}

    def show_recalls(self) -> None:
        """The namespace's recorded searches, newest first: query, mode, hits, and the step that searched."""
        if self.namespace.value is None:
            return
        user, agent = self.namespace.value
        if not isinstance(self.mem.provider, SupportsRecalls):
            self._show([], "this store keeps no recalls")
            return
        found = self._guard(lambda: self.mem.recalls(user_id=user, agent_id=agent))
        if found is None:
            return
        wanted = self._guard(self._column_filters)
        if wanted is None:
            return
        rows = self._recall_rows(found, wanted)
        page = rows[self.offset:self.offset + self.page_size]
        self._has_more = len(rows) > self.offset + self.page_size
        self.items = []
        self.say("")
        self.prev_button.disabled = self.offset == 0
        self.next_button.disabled = not self._has_more
        where = f"recalls {self.offset + 1 if page else 0}–{self.offset + len(page)} of {len(rows):,}"
        if wanted:
            where += " matching the column filters"
        with self.rows.hold_sync():
            self.rows.caption = where
            self.rows.empty_text = "no recorded searches here"
            self.rows.rows = page
            self.rows.value = ""
        self._select(None)

    def _recall_rows(self, found: list[Recall], wanted: dict[str, str]) -> list[dict[str, Any]]:
        """The namespace's recalls, newest first, as rows numbered after the column filters."""
        user, agent = self.namespace.value
        # another namespace's recall never shows here, whatever the store returned
        mine = [r for r in found if r.user_id == user and r.agent_id == agent][::-1]
        rows = [row for row in (_recall_row(0, r) for r in mine) if _matches(row, wanted)]
        for n, row in enumerate(rows, start=1):
            row["n"] = n
        return rows

    def _column_filters(self) -> dict[str, str]:
        """The browser's column filters, lower-cased, empty ones dropped."""
        wanted: dict[str, str] = {}
        for key, text in self.rows.column_filters.items():
            if key not in _FILTERABLE:
                raise InvalidInputError(
                    f"column_filters: no column {key!r} to filter; expected one of {sorted(_FILTERABLE)}")
            if text.strip():
                wanted[key] = text.strip().lower()
        return wanted

    def _on_column_filters(self) -> None:
        self.offset = 0
        if self._hits is not None:
            self._show_hits()
        else:
            self.show_page()

    def _walk(self) -> Iterator[MemoryItem]:
        """Every record of the namespace the switch and the metadata filter let through, newest
        first, read a chunk at a time."""
        user, agent = self.namespace.value
        filters = self._kind_filters()
        offset = 0
        while True:
            chunk = self.mem.get_page(user, agent, offset=offset, limit=_CHUNK, filters=filters)
            # another namespace's memory never shows here, whatever the store returned
            yield from (i for i in chunk if i.user_id == user and i.agent_id == agent)
            if len(chunk) < _CHUNK:
                return
            offset += _CHUNK

    def _matching(self, wanted: dict[str, str]) -> tuple[list[MemoryItem], bool]:
        """The namespace's records whose cells match the column filters, at most ``CSV_CAP``,
        and whether there were more. Kept while the view stays the same, so paging is one slice."""
        key = (self.namespace.value, self.kind.value, self.filters.value, tuple(sorted(wanted.items())))
        if self._matched is not None and self._matched[0] == key:
            return self._matched[1], self._matched[2]
        found: list[MemoryItem] = []
        capped = False
        for item in self._walk():
            if _matches(_memory_row(0, item), wanted):
                if len(found) == CSV_CAP:
                    capped = True
                    break
                found.append(item)
        self._matched = (key, found, capped)
        return found, capped

    def show_page(self) -> None:
        """Show the page at ``offset`` (newest first, filter applied)."""
        if self.namespace.value is None:
            return
        self._hits = None
        if self.kind.value == "recalls":
            self.show_recalls()
            return
        user, agent = self.namespace.value
        wanted = self._guard(self._column_filters)
        if wanted is None:
            return
        if wanted:
            matched = self._guard(lambda: self._matching(wanted))
            if matched is None:
                return
            found, capped = matched
            shown = found[self.offset:self.offset + self.page_size]
            self._has_more = len(found) > self.offset + self.page_size
            span = f"{self.offset + 1 if shown else 0}–{self.offset + len(shown)}"
            of = f"the first {len(found):,}" if capped else f"{len(found):,}"
            self._show(shown, f"{self.kind.value} {span} of {of} matching the column filters")
            return

        def fetch() -> list[MemoryItem]:
            filters = self._kind_filters()
            # One extra row says whether an older page exists without counting the namespace.
            return self.mem.get_page(user, agent, offset=self.offset, limit=self.page_size + 1, filters=filters)

        items = self._guard(fetch)
        if items is None:
            return
        self._has_more = len(items) > self.page_size
        items = items[: self.page_size]
        span = f"{self.offset + 1 if items else 0}–{self.offset + len(items)}"
        if self.filters.value.strip():
            where = f"{self.kind.value} {span} matching the filter"
        else:
            where = f"{self.kind.value} {span} (of {self.count:,} records in the namespace)"
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
        if not text or self.kind.value == "recalls":
            self.show_page()
            return
        user, agent = self.namespace.value
        mode = self.mode.value

        def fetch() -> list[MemoryItem]:
            return self.mem.search(text, user, agent, self.page_size, self._kind_filters(), mode=mode)

        items = self._guard(fetch)
        if items is None:
            return
        self._hits = _found(items)
        self._search = (text, user, agent, mode, self._kind_filters())
        self._show_hits()

    def _show_hits(self) -> None:
        """The last search's hits with the column filters applied."""
        hits = self._hits or []
        wanted = self._guard(self._column_filters)
        if wanted is None:
            return
        items = [i for i in hits if _matches(_memory_row(0, i), wanted)]
        self._has_more = False
        where = f"{len(items)} best {self.mode.value} matches for {self.query.value.strip()!r}"
        if wanted:
            where += f" ({len(items)} of {len(hits)} match the column filters)"
        self._show(items, where)

    def _clear(self) -> None:
        self.query.value = ""
        self.filters.value = ""
        self.rows.column_filters = {}
        self.offset = 0
        self.show_page()

    def _show(self, items: list[MemoryItem], where: str) -> None:
        self.items = items
        self.say("")
        self.page_label.value = esc(where)
        self.prev_button.disabled = self.offset == 0
        self.next_button.disabled = not self._has_more
        # one message: the caption never names rows the grid does not show yet
        with self.rows.hold_sync():
            self.rows.caption = where
            self.rows.empty_text = "no memories here"
            self.rows.rows = [self._row(self.offset + n, i) for n, i in enumerate(items, start=1)]
            self.rows.value = ""
        self._select(None)

    @staticmethod
    def _row(n: int, item: MemoryItem) -> dict[str, Any]:
        return _memory_row(n, item)


    # -- CSV -------------------------------------------------------------------------

    def _csv_rows(self) -> tuple[list[dict[str, Any]], bool]:
        """Every row of the current view (the namespace's records or recalls, or the last search's
        hits, column filters applied), at most ``CSV_CAP``, and whether the view had more."""
        if self.namespace.value is None:
            return [], False
        wanted = self._column_filters()
        if self.kind.value == "recalls":
            if not isinstance(self.mem.provider, SupportsRecalls):
                return [], False
            user, agent = self.namespace.value
            rows = self._recall_rows(self.mem.recalls(user_id=user, agent_id=agent), wanted)
            return rows[:CSV_CAP], len(rows) > CSV_CAP
        if self._hits is not None and self._search is not None:
            rows, capped = self._every_hit(wanted)
        else:
            rows = []
            capped = False
            for item in self._walk():
                row = _memory_row(0, item)
                if _matches(row, wanted):
                    if len(rows) == CSV_CAP:
                        capped = True
                        break
                    rows.append(row)
        for n, row in enumerate(rows, start=1):
            row["n"] = n
        return rows, capped

    def _every_hit(self, wanted: dict[str, str]) -> tuple[list[dict[str, Any]], bool]:
        """Every hit of the last search, best first (not only the page the grid shows), column filters
        applied, and whether the store cut it: one search returns at most ``search_cap`` hits."""
        assert self._search is not None
        text, user, agent, mode, filters = self._search
        cap = self.search_cap
        items = self.mem.search(text, user, agent, cap, filters, mode=mode)
        rows = [row for i in _found(items)
                if (i.user_id, i.agent_id) == (user, agent) and _matches(row := _memory_row(0, i), wanted)]
        return rows, len(items) >= cap

    @property
    def search_cap(self) -> int:
        """The most hits one search (so a search's CSV) holds: the store's ``max_limit``, at most ``CSV_CAP``."""
        limit = getattr(getattr(self.mem.provider, "limits", None), "max_limit", None)
        return min(limit if isinstance(limit, int) and limit > 0 else 10_000, CSV_CAP)

    def to_csv(self, columns: list[tuple[str, str]] | None = None) -> tuple[str, int, bool]:
        """The current view as spreadsheet-safe CSV: ``(text, rows, capped)``.

        Browsing: every record of the namespace (all pages). After a search: every hit of that
        search, best first, up to :attr:`search_cap` (not only the page of hits the grid shows).
        Column filters apply to both.

        ``columns`` are ``(key, label)`` pairs of the grid's columns (all of them by default);
        a cell holds the full text, not the shortened one the grid shows.
        """
        if columns is None:
            columns = [("n", "#"), ("created", "created"), ("score", "score"), ("text", "memory"),
                       ("metadata", "metadata"), ("short_id", "id")]
        rows, capped = self._csv_rows()
        return csv_text(rows, columns), len(rows), capped

    def _on_grid_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("action") != "csv":
            return
        asked = content.get("columns")
        columns = ([(str(c.get("key")), str(c.get("label"))) for c in asked if isinstance(c, dict)]
                   if isinstance(asked, list) else None)
        with self.rows.working("CSV export"):
            text, count, capped = self.to_csv(columns)
            name = f"memkit-{self.kind.value}.csv"
            self.rows.send({"event": "csv", "name": name, "text": text, "rows": count})
            searched = self._hits is not None
            if capped and searched:
                self.rows.say(f"CSV: the best {count:,} hits of the search only (a search returns at most "
                              f"{self.search_cap:,})", "warn")
            elif capped:
                self.rows.say(f"CSV: the first {count:,} rows only (an export stops at {CSV_CAP:,})", "warn")
            elif searched:
                self.rows.say(f"CSV: every hit of the search, {count:,} rows, best first (not only this page)", "info")
            else:
                self.rows.say(f"CSV: {count:,} rows", "info")

    # -- detail and delete -----------------------------------------------------------

    def _on_row(self, change: dict[str, Any]) -> None:
        self._select(change["new"] or None)

    def _select(self, memory_id: str | None) -> None:
        self._hide_confirm()
        item = next((i for i in self.items if i.id == memory_id), None)
        self.selected = item
        self.delete_button.disabled = item is None
        self.side.layout.display = "none" if item is None else "flex"
        if item is None:
            self.detail.value = ""
            return
        self.detail.value = detail_html(item, self._recalled_html(item))

    def recalled_by(self, item: MemoryItem) -> list[tuple[Recall, int]]:
        """The recalls that returned ``item`` (oldest first) with its rank in each; ``[]`` on a
        store that keeps no recalls. A recall lives in the namespace it searched, which is the memory's."""
        if not isinstance(self.mem.provider, SupportsRecalls) or item.user_id is None or item.agent_id is None:
            return []
        space = (item.user_id, item.agent_id)
        if space not in self._recalled:
            index: dict[str, list[tuple[Recall, int]]] = {}
            for recall in self.mem.recalls(user_id=item.user_id, agent_id=item.agent_id):
                for hit in recall.hits:
                    index.setdefault(hit.id, []).append((recall, hit.rank))
            self._recalled[space] = index
        return self._recalled[space].get(item.id, [])

    def _recalled_html(self, item: MemoryItem) -> str:
        if not isinstance(self.mem.provider, SupportsRecalls):
            return ""
        return recalled_html(self.recalled_by(item))

    def _ask_delete(self) -> None:
        if self.selected is None:
            return
        item = self.selected
        what = "trace step" if is_trace(item) else "memory"
        self.confirm_text.value = (
            f"Delete 1 {what} from <b>{esc(item.user_id)} / {esc(item.agent_id)}</b>: "
            f"“{esc(shorten(summary(item, 80), 80))}” (id {esc(item.id)})? This cannot be undone.")
        self.confirm_button.description = f"yes, delete this {what}"
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
        self._matched = None
        message = f"deleted memory {item.id}" if deleted else f"memory {item.id} was already gone"
        self.refresh()
        self.say(message, "ok" if deleted else "warn")

    def summary(self) -> str:
        ns = "/".join(self.namespace.value) if self.namespace.value else "-"
        return f"NamespaceBrowser: {len(self._infos)} namespaces; showing {ns}, {len(self.items)} rows"


def _found(items: list[MemoryItem]) -> list[MemoryItem]:
    # Hits with no score left found nothing; showing (or exporting) them would only pad the list.
    return [i for i in items if i.score is None or i.score > 0]

"""Shared pieces of the panels: escaping, tables, error display, search-mode discovery."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import ipywidgets as w

from memkit._errors import MemkitError
from memkit._models import MemoryItem
from memkit._protocols import SupportsSearchModes
from memkit._sync import Memory

__all__ = ["Panel", "esc", "short", "status_html", "table_html"]

T = TypeVar("T")

MODES = ("keyword", "semantic", "hybrid")


def esc(value: object) -> str:
    """Memory text is hostile input: everything shown as HTML goes through here."""
    return html.escape("" if value is None else str(value), quote=True)


def short(text: object, width: int = 90) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def status_html(message: str, kind: str = "info") -> str:
    colour = {"info": "#444", "ok": "#1a7f37", "error": "#b42318", "warn": "#9a6700"}[kind]
    return f'<div class="memkit-status memkit-{kind}" style="color:{colour}">{esc(message)}</div>'


def table_html(headers: Sequence[str], rows: Sequence[Sequence[object]], css_class: str = "memkit-table") -> str:
    """An HTML table with every cell escaped."""
    head = "".join(f'<th style="text-align:left;padding:2px 8px">{esc(h)}</th>' for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td style="padding:2px 8px;vertical-align:top">{esc(c)}</td>' for c in row) + "</tr>"
        for row in rows
    )
    return f'<table class="{css_class}" style="border-collapse:collapse;font-size:13px"><tr>{head}</tr>{body}</table>'


def search_modes(mem: Memory) -> list[str]:
    """The search modes this store declares (keyword search for a provider that declares none)."""
    provider = mem.provider
    declared = provider.search_modes if isinstance(provider, SupportsSearchModes) else ("keyword",)
    return [m for m in MODES if m in declared]


class Panel:
    """A panel owns a widget tree (``.widget``) and a status line; Jupyter displays the tree."""

    widget: w.Box
    status: w.HTML

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = self.summary()
        return bundle

    def summary(self) -> str:
        """One deterministic line for ``text/plain`` (what nbval compares)."""
        return type(self).__name__

    def _guard(self, fn: Callable[[], T]) -> T | None:
        """Run a store call; a memkit error or bad JSON shows in the status line instead of escaping."""
        try:
            return fn()
        except (MemkitError, ValueError) as exc:
            self.status.value = status_html(f"{type(exc).__name__}: {exc}", "error")
            return None


_PAGE = 500


def _pages(mem: Memory, user: str, agent: str, limit: int, filters: dict[str, Any] | None = None) -> list[MemoryItem]:
    items: list[MemoryItem] = []
    while len(items) < limit:
        page = mem.get_page(user, agent, offset=len(items), limit=min(_PAGE, limit - len(items)), filters=filters)
        items.extend(page)
        if len(page) < min(_PAGE, limit - len(items) + len(page)):
            break
    return items


def workflows(mem: Memory, max_traces: int = 5000) -> list[tuple[str, str, str]]:
    """(user_id, agent_id, workflow_id) of the traces in the store, scanning at most ``max_traces`` per namespace."""
    found: dict[tuple[str, str, str], None] = {}
    for ns in mem.namespaces():
        for item in _pages(mem, ns.user_id, ns.agent_id, max_traces, {"type": "trace"}):
            wf = item.metadata.get("workflow_id")
            if wf is not None:
                found[(ns.user_id, ns.agent_id, str(wf))] = None
    return sorted(found)

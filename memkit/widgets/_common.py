"""The one panel base (:class:`Panel`) and what the panels share: escaping, tables, search-mode discovery."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import ipywidgets as w
import traitlets

from memkit._core._errors import MemkitError
from memkit._core._port import SupportsSearchModes
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
    """An HTML table with every cell escaped; as wide as its cells, which do not wrap."""
    cell = "padding:2px 8px;vertical-align:top;white-space:nowrap;text-align:left"
    head = "".join(f'<th style="{cell}">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{cell}">{esc(c)}</td>' for c in row) + "</tr>" for row in rows)
    return (f'<table class="{css_class}" style="border-collapse:collapse;font-size:13px;width:auto">'
            f"<tr>{head}</tr>{body}</table>")


def search_modes(mem: Memory) -> list[str]:
    """The search modes this store declares (keyword search for a provider that declares none)."""
    provider = mem.provider
    declared = provider.search_modes if isinstance(provider, SupportsSearchModes) else ("keyword",)
    return [m for m in MODES if m in declared]


def workflows(mem: Memory, max_traces: int | None = None) -> list[tuple[str, str, str]]:
    """(user_id, agent_id, workflow_id) of the traces in the store, from the columnar trace reader.

    ``max_traces`` is accepted for callers of the old page-scanning version and ignored:
    the columnar read of every trace is faster than scanning a few thousand per namespace.
    """
    from memkit.frames import traces_frame  # pandas only when a panel asks

    steps = traces_frame(mem, usage=False)
    keys = steps[["user_id", "agent_id", "workflow_id"]].dropna().drop_duplicates()
    return sorted((str(u), str(a), str(w)) for u, a, w in keys.itertuples(index=False, name=None))


# -- the one panel base -------------------------------------------------------------------

_HERE = Path(__file__).resolve().parent


class Panel(traitlets.HasTraits):
    """Base of every memkit panel: a message line, a busy flag, error capture and a text/plain summary.

    A panel is drawn one of two ways. An anywidget panel (``class P(Panel, anywidget.AnyWidget)``)
    is its own widget: its ES module, shipped next to this file and put behind ``_grid.js`` (what
    every module shares; no build step, nothing fetched), draws ``message`` and ``busy``, which sync
    to the browser. A panel of ipywidgets keeps its tree in ``widget`` and shows the message in a
    :meth:`status_line`. Either way a store call goes through :meth:`working` or :meth:`_guard`,
    so a memkit error shows in the message line instead of escaping, and ``text/plain`` is
    :meth:`summary`, one deterministic line for nbval to compare.
    """

    _css = (_HERE / "_panels.css").read_text(encoding="utf-8")
    message = traitlets.Unicode("").tag(sync=True)
    message_kind = traitlets.Unicode("info").tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    #: The ipywidgets tree a panel of ipywidgets displays (``None``: the panel is an anywidget).
    widget: w.Box | None = None

    @staticmethod
    def module(name: str) -> str:
        return (_HERE / "_grid.js").read_text(encoding="utf-8") + "\n" + (_HERE / name).read_text(encoding="utf-8")

    def status_line(self) -> w.HTML:
        """An HTML line that follows ``message`` (for a panel of ipywidgets)."""
        line = w.HTML()

        def show(_: object = None) -> None:
            line.value = status_html(self.message, self.message_kind) if self.message else ""

        self.observe(show, names=["message", "message_kind"])
        return line

    def answer_ready(self) -> None:
        """Send the whole state when a browser view says it is drawn (an anywidget panel only).

        Under load a view can be drawn from the state its comm opened with while updates sent just
        after the opening are lost on the way, leaving a stale panel (an empty run list next to an
        idle kernel); the view's ``ready`` message brings it up to date however it got there.
        """
        def answer(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("action") == "ready":
                self.send_state()  # type: ignore[attr-defined]

        self.on_msg(answer)  # type: ignore[attr-defined]

    def say(self, message: str, kind: str = "info") -> None:
        self.message_kind = kind
        self.message = message

    @contextmanager
    def working(self, what: str) -> Iterator[None]:
        """Mark the panel busy; a memkit error or bad input shows in the message line instead of escaping."""
        self.busy = True
        if self.message_kind == "error":  # a new attempt clears the last failure
            self.say("")
        try:
            yield
        except (MemkitError, ValueError, TypeError) as exc:
            self.say(f"{what} failed: {type(exc).__name__}: {exc}", "error")
        finally:
            self.busy = False

    def _guard(self, fn: Callable[[], T]) -> T | None:
        """Run a store call; a memkit error or bad JSON shows in the message line instead of escaping."""
        try:
            return fn()
        except (MemkitError, ValueError) as exc:
            self.say(f"{type(exc).__name__}: {exc}", "error")
            return None

    def summary(self) -> str:
        """One deterministic line for ``text/plain`` (what nbval compares)."""
        return type(self).__name__

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        if self.widget is not None:
            bundle = self.widget._repr_mimebundle_(**kwargs)
        else:
            drawn: Any = super()
            bundle = drawn._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = self.summary()
        return bundle

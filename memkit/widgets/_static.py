"""A static HTML picture of a panel's current widget state.

``ipywidgets.embed`` loads its widget manager from a CDN, so for saved reports
and for the headless-browser check memkit renders the state itself: HTML
widgets as their (already escaped) value, every other value escaped here.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from memkit.widgets._common import esc, table_html

__all__ = ["snapshot_html"]


def _hidden(widget: w.Widget) -> bool:
    layout = getattr(widget, "layout", None)
    return layout is not None and layout.display == "none"


def _render(widget: w.Widget) -> str:
    if _hidden(widget):
        return ""
    label = getattr(widget, "description", "")
    prefix = f'<label style="margin-right:4px">{esc(label)}</label>' if label else ""
    if isinstance(widget, w.Tab):
        titles = [widget.get_title(i) or f"tab {i}" for i in range(len(widget.children))]
        return "".join(
            f'<section><h3 style="font:600 15px sans-serif;border-bottom:1px solid #ccc">{esc(t)}</h3>{_render(c)}'
            "</section>"
            for t, c in zip(titles, widget.children, strict=True)
        )
    if isinstance(widget, w.Box):
        direction = "row" if isinstance(widget, w.HBox) else "column"
        inner = "".join(_render(c) for c in widget.children)
        return f'<div style="display:flex;flex-direction:{direction};gap:6px;margin:3px 0">{inner}</div>'
    rows = getattr(widget, "rows", None)
    if isinstance(rows, list) and rows and all(isinstance(r, dict) and "text" in r for r in rows):
        caption = f"<div>{esc(getattr(widget, 'caption', ''))}</div>"
        return caption + table_html(["#", "created", "memory", "id"],
                                    [(r["n"], r["created"], r["text"], r["short_id"]) for r in rows])
    if isinstance(widget, w.HTML):
        return f"<div>{widget.value}</div>"  # panels escape what they put in HTML widgets
    if isinstance(widget, w.Button):
        return f"<button{' disabled' if widget.disabled else ''}>{esc(widget.description)}</button>"
    if isinstance(widget, (w.Dropdown, w.Select, w.ToggleButtons)):
        size = f' size="{widget.rows}"' if isinstance(widget, w.Select) else ""
        options = "".join(
            f"<option{' selected' if i == widget.index else ''}>{esc(text)}</option>"
            for i, text in enumerate(widget._options_labels)
        )
        return f"<span>{prefix}<select{size} style=\"max-width:100%\">{options}</select></span>"
    if isinstance(widget, (w.Text, w.Textarea)):
        return f'<span>{prefix}<input value="{esc(widget.value)}" placeholder="{esc(widget.placeholder)}"></span>'
    if isinstance(widget, (w.IntSlider, w.Play)):
        return f"<span>{prefix}{esc(widget.value)} / {esc(widget.max)}</span>"
    return f"<span>{esc(type(widget).__name__)}</span>"


def snapshot_html(panel: Any, title: str = "memkit panel") -> str:
    """A standalone HTML document showing ``panel`` (a memkit panel or any widget) as it is now."""
    widget = getattr(panel, "widget", panel)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title></head>"
        f'<body style="font:13px sans-serif;margin:12px">{_render(widget)}</body></html>\n'
    )

"""The namespace browser's table: its rows (memories, trace steps or recalls), column filters, CSV
export and the detail pane, as data and escaped HTML; :mod:`memkit.widgets._namespaces` drives it."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import anywidget
import traitlets as t

from memkit._core._errors import InvalidInputError
from memkit._core._models import MemoryItem
from memkit._core._recalls import Recall, step_namespace
from memkit._display import format_duration, format_time, is_trace, printable, shorten, step_fields, summary
from memkit._sync import Memory
from memkit.widgets._common import Panel, esc, pretty, table_html

_LEGS = ("keyword", "semantic")
# What the switch above the table shows; memories leave the trace steps out, traces are only them.
KINDS = ("memories", "traces", "recalls")
_KIND_FILTER: dict[str, dict[str, Any]] = {"memories": {"type": {"$ne": "trace"}}, "traces": {"type": "trace"}}
# Most rows one CSV export (or one column-filtered view) holds; a bigger namespace is cut there and
# the browser says so. 100,000 rows is tens of MB of CSV, about what one widget message can carry.
CSV_CAP = 100_000
# Rows read from the store per call while walking a whole namespace.
_CHUNK = 500
# The grid's columns a filter box or the CSV can name, and the row field each one reads: the full
# text rather than the shortened cell, so a filter finds a word the cell cut off.
_FIELDS = {"n": "n", "created": "created", "score": "score", "text": "full", "metadata": "metadata_full",
           "short_id": "id"}
_FILTERABLE = frozenset(_FIELDS) - {"n"}  # the row number follows the filter, so it cannot be one
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a spreadsheet-safe CSV cell: text a spreadsheet would run as a formula gets a
    leading quote, so it opens as the text it is. Numbers stay numbers."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _matches(row: dict[str, Any], wanted: dict[str, str]) -> bool:
    """Whether every column filter is a substring (any case) of the row's cell."""
    for key, text in wanted.items():
        cell = row.get(_FIELDS[key])
        if text not in ("" if cell is None else str(cell)).lower():
            return False
    return True


class NamespaceGrid(Panel, anywidget.AnyWidget):
    """The memory table of :class:`NamespaceBrowser`: sortable, columns to show or hide, full text on hover.

    ``rows`` are display-ready dicts; ``value`` is the id of the open memory (``""`` for none),
    set by a click or from Python.
    """

    _esm = Panel.module("_namespaces.js")
    rows: t.List[dict[str, Any]] = t.List().tag(sync=True)  # elements not validated one by one
    value = t.Unicode("").tag(sync=True)
    caption = t.Unicode("").tag(sync=True)
    empty_text = t.Unicode("no memories here").tag(sync=True)
    hidden_columns = t.List(t.Unicode()).tag(sync=True)
    kind = t.Unicode("memories").tag(sync=True)  # memories, traces or recalls: the column names follow
    # column key -> text its cell must contain (any case), over the whole namespace; set in the browser
    column_filters = t.Dict(value_trait=t.Unicode()).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answer_ready()


def _legs(item: MemoryItem) -> list[dict[str, Any]]:
    """Each search leg's part of a hit's score, for the small bar: found, rank, raw score, share."""
    details = item.score_details if isinstance(item.score_details, dict) else {}
    legs: list[dict[str, Any]] = []
    mode = details.get("mode")
    alpha = details.get("fused", {}).get("alpha") if isinstance(details.get("fused"), dict) else None
    for name in _LEGS:
        leg = details.get(name)
        if not isinstance(leg, dict):
            if mode == name and item.score is not None:
                legs.append({"name": name, "found": True, "rank": None, "raw": round(float(item.score), 3),
                             "share": 1.0})
            continue
        weight = (alpha if name == "semantic" else 1 - alpha) if isinstance(alpha, (int, float)) else 1.0
        norm = leg.get("normalized")
        raw = leg.get("score")
        if isinstance(norm, (int, float)) and math.isfinite(norm):
            share = float(norm) * weight
        else:
            # a search by this leg alone: the whole score is its share (a 0 would draw no bar at all)
            share = 1.0 if mode == name and leg.get("rank") is not None else 0.0
        legs.append({"name": name, "found": leg.get("rank") is not None, "rank": leg.get("rank"),
                     "raw": round(float(raw), 3) if isinstance(raw, (int, float)) else None, "share": share})
    return legs


def csv_text(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    """``rows`` as spreadsheet-safe CSV of ``columns`` (``(key, label)`` pairs of the grid's columns)."""
    for key, label in columns:
        if key not in _FIELDS or not isinstance(label, str):
            raise InvalidInputError(f"columns: {key!r} is not a column; expected (key, label) pairs with a "
                                    f"key among {sorted(_FIELDS)}")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([csv_cell(label) for _, label in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(_FIELDS[key])) for key, _ in columns])
    return out.getvalue()


def kinds_counted(mem: Memory, total: int) -> str:
    """``5,049 memories and 6,739 trace steps``: the two kinds a store's records are, counted apart
    (the namespace list's counts are records of both)."""
    from memkit._core._port import SupportsStats

    if not isinstance(mem.provider, SupportsStats):
        return f"{total:,} records (memories and trace steps)"
    traces = mem.stats().traces
    return f"{total - traces:,} memories and {traces:,} trace steps"


def recall_short_id(recall_id: str) -> str:
    """A recall id cut to what tells it apart: a process's recall ids share their first 16 digits (a
    random per-process part) and count up in the last 16, so both ends are kept (``5f3a…000c``)."""
    return recall_id if len(recall_id) <= 12 else f"{recall_id[:4]}…{recall_id[-6:]}"


def _recall_row(n: int, r: Recall) -> dict[str, Any]:
    where = " · ".join(str(x) for x in (r.workflow_id, r.run_id, r.step_name) if x) or "outside any step"
    ids = ", ".join(h.id[:8] for h in r.hits)
    return {
        "n": n, "id": r.id, "short_id": recall_short_id(r.id), "created": format_time(r.created_at),
        "created_ts": r.created_at.timestamp() if r.created_at else None, "score": None, "legs": [],
        "text": shorten(printable(r.query), 140), "full": printable(r.query),
        # the hover text (and what a column filter reads) starts with the cell, then names the hits
        "metadata": f"{r.mode or r.kind} · {len(r.hits)} hits · {where}",
        "metadata_full": f"{r.mode or r.kind} · {len(r.hits)} hits · {where}\nhits: {ids}",
        "trace": False, "status": None,
    }


def _memory_row(n: int, item: MemoryItem) -> dict[str, Any]:
    meta = {k: v for k, v in item.metadata.items() if k != "trace"} if is_trace(item) else item.metadata
    meta_text = printable(json.dumps(meta, default=str, ensure_ascii=False, sort_keys=True))
    trace = is_trace(item)
    return {
        "n": n, "id": item.id, "short_id": item.id[:8],
        "created": format_time(item.created_at),
        "created_ts": item.created_at.timestamp() if item.created_at else None,
        "score": round(float(item.score), 4) if item.score is not None else None, "legs": _legs(item),
        "text": summary(item, 140), "full": summary(item, 2000) if trace else printable(item.content),
        "metadata": shorten(meta_text, 70), "metadata_full": meta_text,
        "trace": trace, "status": step_fields(item)["status"] if trace else None,
    }


def detail_html(item: MemoryItem, recalled: str) -> str:
    """The detail pane of one memory or trace step: what it says, its score per search leg, and
    ``recalled`` (which steps recalled it, from :func:`recalled_html`)."""
    head = (f"<b>memory {esc(item.id)}</b><br>{esc(item.user_id)} / {esc(item.agent_id)} · "
            f"{esc(format_time(item.created_at))}")
    if is_trace(item):
        step = step_fields(item)
        facts = [("step", step["step_index"]), ("name", step["step_name"]), ("tool", step["tool"]),
                 ("status", step["status"]), ("duration", format_duration(step["duration"])),
                 ("retries", step["retry_count"]), ("started", format_time(step["timestamp"])),
                 ("workflow", step["workflow_id"]), ("run id", step["run_id"])]
        body = (f'<div style="margin:4px 0">{esc(summary(item))}</div>'
                + table_html(["", ""], [(k, "" if v is None else printable(v)) for k, v in facts])
                + (f'<b>error</b><pre style="white-space:pre-wrap;color:#b42318">{esc(printable(step["error"]))}'
                   "</pre>" if step["error"] else "")
                + f"<b>parameters</b><pre>{esc(pretty(step['parameters']))}</pre>"
                + f"<b>result</b><pre>{esc(pretty(step['result']))}</pre>")
    else:
        body = (f'<pre style="white-space:pre-wrap">{esc(printable(item.content))}</pre>'
                f"<b>metadata</b><pre>{esc(pretty(item.metadata))}</pre>")
    score = ""
    if item.score is not None:
        legs = _legs(item)
        lines = "".join(
            f'<div><span style="display:inline-block;width:70px">{esc(leg["name"])}</span>'
            f'<span style="display:inline-block;height:9px;width:{round(leg["share"] * 120)}px;'
            f'background:{"#1565c0" if leg["name"] == "keyword" else "#8e24aa"}"></span> '
            + (esc(f"rank {leg['rank']}, score {leg['raw']}") if leg["found"] else "not found")
            + "</div>"
            for leg in legs
        )
        score = f"<b>score {item.score:.3f}</b>{lines}"
    return (
        '<div class="memkit-detail" style="border-left:1px solid #ddd;padding-left:8px;'
        'overflow-wrap:break-word;word-break:normal;max-height:520px;overflow:auto">'
        f"{head}{body}{score}{recalled}</div>"
    )


def recalled_html(found: list[tuple[Recall, int]]) -> str:
    """Which steps a memory was recalled by (``found``: each recall with the memory's rank in it)."""
    steps = [(r, rank) for r, rank in found if r.step_index is not None or r.step_name is not None]
    loose = len(found) - len(steps)
    distinct = len({(*step_namespace(r), r.workflow_id, r.run_id, r.step_index, r.step_name) for r, _ in steps})
    if distinct:
        title = f"recalled by {distinct} step{'' if distinct == 1 else 's'}"
        if len(steps) > distinct:
            title += f" ({len(steps)} searches)"
    else:
        title = "not recalled by any step"
    html = f'<div class="memkit-recalled-by"><b>{esc(title)}</b>'
    # Two lines per recall rather than a wide table: the detail is the narrow half of the browser.
    for r, rank in steps:
        step = f"{r.step_index if r.step_index is not None else '?'} · {r.step_name or '?'}"
        html += (f'<div style="margin:3px 0 3px 8px"><b>{esc(step)}</b> · rank {rank} · '
                 f"{esc(format_time(r.created_at))}<br>"
                 f'<span style="color:#555;overflow-wrap:anywhere">{esc(r.workflow_id or "")} / '
                 f'{esc(r.run_id or "—")} · query “{esc(shorten(printable(r.query), 80))}”</span></div>')
    if loose:
        lead = "and" if distinct else "but returned by"
        html += f"<div>{esc(f'{lead} {loose} recorded searches outside any step')}</div>"
    return html + "</div>"

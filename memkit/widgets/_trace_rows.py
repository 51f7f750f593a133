"""What the trace panel sends the browser, as JSON-ready data: the run rows, one run's timeline,
a memory's view, and the cell conversions they share."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from memkit._core._items import error_headline
from memkit._core._models import MemoryItem
from memkit._display import format_duration, format_run_duration, format_time, printable, shorten, summary


def _text(value: Any) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return printable(value)


_TRACEBACK = "Traceback (most recent call last):"


def error_lines(text: str) -> str:
    """An error with its traceback on lines of its own, as Python printed it. LangChain records
    ``repr(e)`` run straight into the traceback ("...TP53')Traceback (most recent call last):") and
    joins the traceback's parts with two more newlines each; both are undone here."""
    at = text.find(_TRACEBACK)
    if at < 0:
        return text
    head = text[:at].rstrip() + "\n" if at > 0 and text[at - 1] != "\n" else text[:at]
    return head + _unpadded(text[at:])


# LangChain's stack trace is "\n\n".join(traceback.format_exception(e)): every part (the header, each
# frame, the exception line, a "The above exception..." line) ends in a newline, then gets two more.
# Python itself never writes two blank lines in a row after the header, so they mark that joining.
_PADDED = _TRACEBACK + "\n\n\n"
_RUN = re.compile(r"\n{3,}")


def _unpadded(traceback: str) -> str:
    """The traceback with the two newlines LangChain added at each joint taken out again: a run of n
    blank lines there was n - 2 in Python's own traceback (one either side of "The above exception
    was the direct cause..."). Every line with text, and every other traceback, is left as it is."""
    if not traceback.startswith(_PADDED):
        return traceback
    return _RUN.sub(lambda run: run.group()[:-2], traceback)


def error_message(text: str) -> str:
    """An error in one line (for one-line cells): :func:`memkit._core._items.error_headline`."""
    return error_headline(text)


def _seconds(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _jsonable(value: Any) -> Any:
    """A cell as JSON the browser can draw (numpy scalars, timestamps and odd objects as text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value if not isinstance(value, str) else printable(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {printable(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        try:
            return _jsonable(value.item())
        except (TypeError, ValueError):
            pass
    return printable(value)


def run_rows(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Every run as the browser shows it, built once per read (filtering only picks rows)."""
    seen: dict[Any, str | None] = {}

    def text(value: Any) -> str | None:
        key = value if isinstance(value, str) or value is None else repr(value)
        if key not in seen:
            seen[key] = _text(value)
        return seen[key]

    started = [format_time(v.to_pydatetime()) if pd.notna(v) else "" for v in runs["started_at"]]
    return [
        {"run": printable(key), "workflow_id": text(wf), "agent_id": text(agent), "user_id": text(user),
         "run_id": text(run_id) or "—", "started": start, "duration": format_run_duration(_seconds(dur), kind),
         "duration_kind": kind,
         "steps": int(n), "failed_steps": int(failed), "retries": int(retries),
         "first_error": shorten(error_message(text(error) or ""), 90),
         "first_error_full": error_lines(text(error) or ""), "status": status,
         "recalls": None if recalls is pd.NA else int(recalls)}
        for key, wf, agent, user, run_id, start, dur, kind, n, failed, retries, error, status, recalls in zip(
            runs.index, runs["workflow_id"], runs["agent_id"], runs["user_id"], runs["run_id"], started,
            runs["duration_s"], runs["duration_kind"], runs["steps"], runs["failed_steps"], runs["retries"],
            runs["first_error"], runs["status"], runs["recalls"], strict=True)
    ]


def step_tree(parent: list[int | None]) -> tuple[list[int], list[int]] | None:
    """The run as a tree: (the order to show its steps in, each shown step's parent row or -1).

    ``parent`` is each step's parent position (``frames._runs._parent_positions``). Children
    follow their parent, in the order the run stored them. ``None`` when no step has a
    parent (a flat run is shown as it always was). A loop of parents makes a root: what was
    recorded is shown, never dropped.
    """
    n = len(parent)
    if all(p is None or p == k for k, p in enumerate(parent)):
        return None
    children: list[list[int]] = [[] for _ in range(n)]
    for k, p in enumerate(parent):
        if p is not None and p != k:
            children[p].append(k)
    order: list[int] = []
    shown_parent: list[int] = []
    row_of: dict[int, int] = {}

    def walk(root: int) -> None:
        stack: list[tuple[int, int]] = [(root, -1)]
        while stack:
            k, up = stack.pop()
            if k in row_of:  # a loop of parents: the step is already shown
                continue
            row_of[k] = len(order)
            order.append(k)
            shown_parent.append(up)
            stack.extend((c, row_of[k]) for c in reversed(children[k]))

    for k, p in enumerate(parent):
        if p is None or p == k:
            walk(k)
    for k in range(n):  # steps whose parents form a loop
        if k not in row_of:
            walk(k)
    return order, shown_parent


def _cover(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _tree_columns(
    parents: list[int], durations: np.ndarray, timed: np.ndarray, starts: list[float | None]
) -> dict[str, Any]:
    """Depth, child count and the children's rolled-up time of each shown row (parents come first).

    A parent's rolled-up time is the wall-clock time its children cover: children that ran at the
    same time (parallel tool calls) count once, as the union of their intervals. A child without a
    start time cannot be placed, so its duration is added; children with no start times at all
    therefore roll up to the sum of their durations. A child with no duration of its own counts
    as the time its own children cover.
    """
    n = len(parents)
    depth = [0] * n
    kids = [0] * n
    for k, p in enumerate(parents):
        if p >= 0:
            depth[k] = depth[p] + 1
            kids[p] += 1
    own = [float(d) if t else None for d, t in zip(durations.tolist(), timed.tolist(), strict=True)]
    # Per row, what its children cover: intervals placed in time, and seconds that could not be placed.
    placed: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    unplaced = [0.0] * n
    covered = [False] * n
    rolled: list[float | None] = [None] * n
    for k in range(n - 1, -1, -1):  # children after their parent: each child is done before its parent
        if covered[k]:
            placed[k] = _cover(placed[k])
            rolled[k] = sum(hi - lo for lo, hi in placed[k]) + unplaced[k]
        p = parents[k]
        if p < 0:
            continue
        seconds = own[k]
        if seconds is not None:
            start = starts[k]
            if start is None:
                unplaced[p] += seconds
            else:
                placed[p].append((start, start + seconds))
            covered[p] = True
        elif covered[k]:
            placed[p].extend(placed[k])
            unplaced[p] += unplaced[k]
            covered[p] = True
    return {
        "parent": parents, "depth": depth, "children": kids,
        "rolled_s": [None if r is None else round(r, 3) for r in rolled],
        "rolled": [format_duration(r) if c and r is not None else "" for r, c in zip(rolled, kids, strict=True)],
    }


def _steps_text(row: pd.Series, rows: int) -> str:
    """``3 steps``, or ``2 steps in 4 rows`` when attempts were written on rows of their own."""
    steps = row.get("steps")
    steps = rows if steps is None or pd.isna(steps) else int(steps)
    return f"{steps} steps" + (f" in {rows} rows (attempts on rows of their own)" if rows != steps else "")


def _one_after_another(durations: np.ndarray, parents: list[int] | None) -> np.ndarray:
    """Offsets of steps laid end to end in order; with ``parents`` (parents before their children),
    each child starts where its parent's previous child ended, inside its parent's bar."""
    if parents is None:
        offsets: np.ndarray = durations.cumsum() - durations
        return offsets
    placed = np.zeros(len(durations))
    cursor = np.zeros(len(durations))
    top = 0.0
    for k, p in enumerate(parents):
        if p < 0:
            placed[k], top = top, top + durations[k]
        else:
            placed[k] = cursor[p]
            cursor[p] += durations[k]
        cursor[k] = placed[k]
    return placed


def _start_offsets(starts: pd.Series) -> list[float | None]:
    """Each step's start in seconds from the run's first, ``None`` where the step recorded none."""
    if not starts.notna().any():
        return [None] * len(starts)
    seconds = (starts - starts.min()).dt.total_seconds()
    return [None if pd.isna(v) else float(v) for v in seconds.tolist()]


def timeline(run: str, row: pd.Series, steps: pd.DataFrame, parents: list[int] | None = None) -> dict[str, Any]:
    """The run's bars as columns (one list per field), which the browser draws in one pass.

    ``parents`` (each step's parent row, -1 for a root; parents before their children) draws the
    run as a tree: ``depth``, ``children`` and each parent's ``rolled`` children's time.
    """
    n = len(steps)
    kind = row.get("duration_kind")
    starts = steps["started_at"]
    timed = steps["duration_s"].notna().to_numpy()
    untimed = int(n - timed.sum())
    by_order = bool(n) and untimed == n
    note = ""
    if by_order:
        # No duration at all: one equal bar per step, in step order, and the note says so.
        durations = np.ones(n)
        offsets = np.arange(n, dtype=float)
        note = ("No step timing recorded in this run: bars show step order, not time. Record it with "
                "history.step(...) or a duration / duration_ms / started_at+ended_at key.")
    else:
        durations = steps["duration_s"].fillna(0.0).clip(lower=0).to_numpy(dtype=float)
        if starts.notna().all():
            offsets = (starts - starts.min()).dt.total_seconds().to_numpy(dtype=float)
        else:  # steps without times are drawn one after another, a child inside its parent's bar
            offsets = _one_after_another(durations, parents)
        if untimed:
            note = f"{untimed} of {n} steps recorded no duration: drawn as thin marks."
    ends = offsets + durations
    span = float(ends.max()) if n else 0.0
    reached = np.maximum.accumulate(ends) if n else ends
    gaps = np.zeros(n)
    if n > 1:
        gaps[1:] = np.clip(offsets[1:] - reached[:-1], 0, None)
    gaps[gaps <= span * 0.02] = 0.0
    index = steps["step_index"].astype("Int64").astype(object).where(steps["step_index"].notna(), None)
    positions = pd.Series(range(n), index=steps.index, dtype=object)
    index = index.where(index.notna(), positions)
    names = steps["step_name"].map(lambda v: _text(v) or "?", na_action=None)
    tools = steps["tool"].map(lambda v: _text(v) or "?", na_action=None)
    retries = steps["retry_count"].fillna(0).astype("int64").to_numpy()
    recalls = (steps["recalls"].fillna(0).astype("int64").tolist() if "recalls" in steps.columns
               else [0] * n)
    errors = steps["error"].tolist()
    labels, short_errors = [], []
    for i, (idx, name, tool) in enumerate(zip(index.tolist(), names.tolist(), tools.tolist(), strict=True)):
        labels.append(f"{idx} · {name}" + (f" ({tool})" if tool != name else ""))
        error = errors[i]
        short_errors.append(shorten(printable(error_message(error)), 80) if isinstance(error, str) and error else "")
    return {
        "run": printable(run), "status": row["status"], "span_s": span, "n": n,
        "label": labels, "error": short_errors, "status_of": steps["status"].tolist(),
        "start_s": np.round(offsets, 3).tolist(), "duration_s": np.round(durations, 3).tolist(),
        "retries": retries.tolist(), "gap_s": np.round(gaps, 3).tolist(), "recalls": recalls,
        "statuses": sorted(set(steps["status"])), "axis": "steps" if by_order else "seconds",
        "timing_note": note, "timed": timed.tolist(),
        **({} if parents is None else _tree_columns(parents, durations, timed, _start_offsets(starts))),
        "caption": f"{_steps_text(row, n)} · "
                   f"{'no timing' if by_order else format_run_duration(_seconds(row['duration_s']), kind)}"
                   f" · started "
                   f"{format_time(row['started_at'].to_pydatetime()) if pd.notna(row['started_at']) else '?'}",
    }


def memory_view(item: MemoryItem) -> dict[str, Any]:
    meta = {k: v for k, v in item.metadata.items() if k != "trace"}
    return {
        "id": item.id, "deleted": False,
        "title": f"memory {item.id[:8]} · {printable(f'{item.user_id} / {item.agent_id}')}",
        "text": summary(item, 2000) if item.metadata.get("type") == "trace" else printable(item.content),
        "facts": [["created", format_time(item.created_at)], ["id", item.id],
                  ["metadata", printable(json.dumps(meta, default=str, ensure_ascii=False, sort_keys=True))]],
        "note": "",
    }

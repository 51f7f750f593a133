"""How a memory reads to a person: one line for a table, a CLI row, a tooltip or a caption.

A trace memory is stored as ``[trace] workflow=… data={json}`` so keyword search can
find it; nobody should have to read that. Every view goes through :func:`summary`, so
a step reads the same everywhere: ``step 3 · bwa · failed · 2.1 s · "Connection reset…"``.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memkit._core._items import status_of as shown_status
from memkit._core._timing import step_timing

if TYPE_CHECKING:
    from memkit._core._models import MemoryItem

__all__ = [
    "UNKNOWN_STATUS",
    "format_duration",
    "format_run_duration",
    "format_time",
    "is_trace",
    "printable",
    "shorten",
    "status_of",
    "step_fields",
    "summary",
]

UNKNOWN_STATUS = "unknown"
_SEP = " · "


def printable(text: object) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\u202e``), safe for a terminal."""
    text = str(text)
    if text.isprintable():  # the common case, checked in C; isprintable() is False for every escaped char
        return text
    out: list[str] = []
    for ch in text:
        if ch in "\n\t" or unicodedata.category(ch)[0] != "C":
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def shorten(text: object, width: int = 80) -> str:
    """One line of at most ``width`` characters, whitespace collapsed, ``…`` where cut."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)].rstrip() + "…"


def _metadata(item: MemoryItem | Mapping[str, Any]) -> Mapping[str, Any]:
    """A memory's metadata, of the model or of its fields as a dict (what the command line reads)."""
    return item["metadata"] if isinstance(item, Mapping) else item.metadata


def is_trace(item: MemoryItem | Mapping[str, Any]) -> bool:
    return _metadata(item).get("type") == "trace"


def status_of(value: object) -> str:
    """A stored status as shown (:func:`memkit._core._items.status_of`: the vocabularies agents write)."""
    return shown_status(value)


def format_duration(seconds: object) -> str:
    """``2.1 s``, ``340 ms``, ``3 min 4 s``; empty for a missing or non-numeric value."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def format_run_duration(seconds: object, kind: object) -> str:
    """A run's duration as its ``duration_kind`` says: ``2.1 s`` (wall clock), ``Σ 2.1 s`` (the sum of its
    steps' durations: some steps recorded no start), empty when unknown."""
    text = format_duration(seconds)
    return f"Σ {text}" if text and kind == "sum of steps" else text


def format_time(value: object) -> str:
    """A datetime or an epoch float (seconds) as ``2026-11-23 14:05:09 UTC``; empty when unknown."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, (int, float)) and math.isfinite(value):
        try:
            value = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return ""
    if not isinstance(value, datetime):
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def step_fields(item: MemoryItem | Mapping[str, Any]) -> dict[str, Any]:
    """A trace memory's step as a flat dict: step_index, step_name, tool, status, duration, error, …

    Reads the payload kept under ``metadata["trace"]`` (never the content string);
    ``status`` is normalised by :func:`status_of`.
    """
    meta = _metadata(item)
    raw = meta.get("trace")
    payload: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

    def pick(key: str) -> Any:
        value = payload.get(key)
        return meta.get(key) if value is None else value

    index = pick("step_index")
    timing = step_timing(payload) if payload else step_timing(meta, warn=False)
    return {
        "workflow_id": meta.get("workflow_id"),
        "run_id": pick("run_id"),
        "step_index": index if isinstance(index, int) and not isinstance(index, bool) else None,
        "step_name": pick("step_name"),
        "tool": pick("tool"),
        "status": status_of(pick("status")),
        "duration": timing.duration,
        "retry_count": pick("retry_count"),
        "error": pick("error"),
        "timestamp": timing.start,
        "parameters": payload.get("parameters"),
        "result": payload.get("result"),
    }


def summary(item: MemoryItem | Mapping[str, Any], width: int = 120) -> str:
    """One readable line for any memory (the model or its fields as a dict): a step for a trace, the
    text otherwise."""
    if not is_trace(item):
        return printable(shorten(item["content"] if isinstance(item, Mapping) else item.content, width))
    step = step_fields(item)
    parts: list[str] = []
    if step["step_index"] is not None:
        parts.append(f"step {step['step_index']}")
    name, tool = step["step_name"], step["tool"]
    if tool is not None:
        parts.append(str(tool))
    if name is not None and name != tool:
        parts.append(str(name))
    if not parts:
        parts.append(f"step of {step['workflow_id']}")
    parts.append(step["status"])
    duration = format_duration(step["duration"])
    if duration:
        parts.append(duration)
    if isinstance(step["retry_count"], int) and not isinstance(step["retry_count"], bool) and step["retry_count"] > 0:
        parts.append(f"{step['retry_count']} retr{'y' if step['retry_count'] == 1 else 'ies'}")
    line = _SEP.join(str(p) for p in parts)
    if step["error"]:
        room = max(width - len(line) - 5, 20)
        line += f'{_SEP}"{shorten(step["error"], room)}"'
    return printable(line)

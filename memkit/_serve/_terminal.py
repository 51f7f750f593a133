"""Printing for a terminal: stored text never drives it, tables line up, JSON stays inert.

Everything the ``memkit`` command prints goes through :func:`say`, which escapes control
characters (a stored escape sequence must not retitle the window or clear the screen).
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime
from typing import Any, TextIO

from memkit._display import format_time, printable, shorten

__all__ = ["cell", "json_line", "say", "table", "when"]


def say(text: object, file: TextIO | None = None) -> None:
    """Print one message with control characters escaped: stored text must never drive the terminal."""
    print(printable(text), file=file or sys.stdout)


def json_line(value: object) -> str:
    """JSON with every non-ASCII character escaped, so it is valid JSON and inert in a terminal."""
    return json.dumps(value, ensure_ascii=True, default=str)


def cell(value: Any, width: int = 0) -> str:
    """One table cell: missing shows as ``-``, whitespace flattened, control characters escaped."""
    if value is None or value == "":
        return "-"
    text = printable(" ".join(str(value).split()))
    return shorten(text, width) if width else text


def when(value: datetime | None) -> str:
    return format_time(value) if value is not None else "-"


def table(headers: list[str], rows: list[list[str]], flex: int | None = None) -> list[str]:
    """Aligned columns; column ``flex`` (the free text) takes what the terminal has left."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if flex is not None and rows:
        room = shutil.get_terminal_size((120, 24)).columns - sum(w + 2 for i, w in enumerate(widths) if i != flex)
        widths[flex] = max(min(widths[flex], room), 12)
        rows = [[shorten(c, widths[flex]) if i == flex else c for i, c in enumerate(r)] for r in rows]
    return ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in [headers, *rows]]

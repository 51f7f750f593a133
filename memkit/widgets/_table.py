"""``Grid``: a DataFrame shown as a table the browser sorts, filters and pages by itself.

Every row (up to ``max_rows``) is sent once as columns of JSON values; sorting, filtering and paging
then run in the page, so a keystroke in the filter box costs no kernel round trip and the table works
offline (nothing is fetched). The frame itself stays a plain DataFrame: :func:`show` returns the
widget for one frame, :func:`interactive_frames` makes every DataFrame a notebook shows draw this way.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import anywidget
import numpy as np
import pandas as pd
import traitlets as t

from memkit._core._errors import InvalidInputError
from memkit._display import printable
from memkit.widgets._common import Panel

__all__ = ["Grid", "interactive_frames", "show"]

MAX_ROWS = 20_000
"""Rows sent to the browser by default; the caption says when the frame holds more."""
PAGE_SIZES = (10, 25, 50, 100)


def _cell(value: Any) -> Any:
    """A JSON value the page can sort: numbers stay numbers, times become ISO text, missing is ``None``."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, pd.Timestamp | datetime | date):
        return value.isoformat()
    if isinstance(value, pd.Timedelta):
        return value.total_seconds()
    return printable(value)


def _kind(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_timedelta64_dtype(series):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "time"
    return "text"


class Grid(Panel, anywidget.AnyWidget):
    """``frame`` as a table sorted (click a header), filtered (a column and a condition, or every column)
    and paged in the browser; ``frame`` itself is left as it is.

    Parameters
    ----------
    frame
        Any DataFrame (its index is shown as its first columns).
    page_size
        Rows per page at first (the page offers 10, 25, 50 and 100).
    max_rows
        Rows sent to the browser; a longer frame shows its first ``max_rows`` and says so.

    Examples
    --------
    >>> Grid(memkit.frames.runs_frame(mem))        # doctest: +SKIP
    """

    _esm = Panel.module("_table.js")

    columns: t.List[dict[str, Any]] = t.List().tag(sync=True)
    """``{"name", "kind"}`` per column (index columns first); kind is number, time, bool or text."""
    data: t.List[list[Any]] = t.List().tag(sync=True)
    """One list of cells per column."""
    total_rows = t.Int(0).tag(sync=True)
    page_size = t.Int(25).tag(sync=True)

    def __init__(self, frame: pd.DataFrame, *, page_size: int = 25, max_rows: int = MAX_ROWS) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise InvalidInputError(f"Grid shows a pandas DataFrame, got {type(frame).__name__}")
        for name, value in (("page_size", page_size), ("max_rows", max_rows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be a positive int, got {value!r}")
        super().__init__()
        self.frame = frame
        shown = frame.iloc[:max_rows]
        if not isinstance(shown.index, pd.RangeIndex):  # a meaningful index (a run id, a step id) is a column
            shown = shown.reset_index()
        names = [printable(c if not isinstance(c, tuple) else " / ".join(map(str, c))) for c in shown.columns]
        series = [shown.iloc[:, i] for i in range(shown.shape[1])]
        self.columns = [{"name": n, "kind": _kind(s)} for n, s in zip(names, series, strict=True)]
        self.data = [[_cell(v) for v in s.tolist()] for s in series]
        self.total_rows = len(frame)
        self.page_size = page_size
        self.answer_ready()

    def summary(self) -> str:
        rows, columns = self.frame.shape
        return f"Grid: {rows:,} rows × {columns} columns"


def show(frame: pd.DataFrame, *, page_size: int = 25, max_rows: int = MAX_ROWS) -> Grid:
    """``frame`` as a :class:`Grid` (sortable, filterable and paged in the browser)."""
    return Grid(frame, page_size=page_size, max_rows=max_rows)


def _bundle(frame: pd.DataFrame, include: Any = None, exclude: Any = None) -> Any:
    return Grid(frame)._repr_mimebundle_(include=include, exclude=exclude)


def interactive_frames(on: bool = True) -> None:
    """Draw every DataFrame a notebook cell shows as a :class:`Grid` (``False``: as pandas' table again).

    Code still gets plain DataFrames; only how IPython displays them changes (and nothing outside a
    running IPython, where this raises)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the notebook extra installs IPython
        raise InvalidInputError("interactive_frames needs IPython (a notebook)") from None
    shell = get_ipython()
    if shell is None:
        raise InvalidInputError("interactive_frames needs a running IPython (a notebook kernel)")
    formatter = shell.display_formatter.mimebundle_formatter
    if on:
        formatter.for_type(pd.DataFrame, _bundle)
    else:
        formatter.type_printers.pop(pd.DataFrame, None)

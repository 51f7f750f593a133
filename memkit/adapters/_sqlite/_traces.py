"""Trace steps as columns: how the SQLite store reads its ``trace_steps`` table (written by
:mod:`._trace_writes`), a column per field, in one ``SELECT``; see ``docs/traces.md``.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import methodcaller
from typing import TYPE_CHECKING, Any

from memkit._core._runs import RunScope, RunSummary, summarise_rows
from memkit.adapters._sqlbase import trace_filter
from memkit.adapters._sqlite._sql import SQLITE
from memkit.traces._items import status_of
from memkit.traces._timing import step_timing

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    import numpy as np

__all__ = ["MISSING", "TRACE_NUMBERS", "run_summaries", "step_timing_us", "trace_columns"]

# The columns of a step that trace_columns returns beside id and error (texts and int64 numbers);
# a missing number is int64's minimum, which is also numpy's NaT, so timestamps need no extra pass.
TRACE_NUMBERS = (
    "seq", "created_us", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status",
    "step_index", "started_us", "duration_us", "retry_count",
)
_TEXTS = frozenset(("user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status"))
MISSING = -(2**63)
_copy = methodcaller("copy")
_NO_KEYS: dict[str, Any] = {}


def step_timing_us(trace_json: str) -> tuple[int | None, int | None]:
    """(start, duration) in microseconds of a step whose trace has no numeric ``timestamp`` nor
    ``duration`` (written by ``add_many``, not ``add_trace``), read as the generic reads read it
    (:func:`memkit._core._runs.step_of`): from any spelling :func:`step_timing` knows."""
    trace = json.loads(trace_json)
    if not isinstance(trace, dict):
        return None, None
    with warnings.catch_warnings():  # the reads warn about unreadable times; a write stays silent
        warnings.simplefilter("ignore")
        timing = step_timing(trace, warn=False)
    start = None if timing.start is None else round(timing.start * 1e6)
    duration = None if timing.duration is None else round(timing.duration * 1e6)
    return start, duration


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of cells are made: its passes over them cost ~2x."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _nesting(value: Any) -> int:
    """0 for a JSON scalar, 1 for a list or dict of scalars, 2 for deeper containers."""
    if isinstance(value, list):
        return 2 if any(isinstance(v, (list, dict)) for v in value) else 1
    if isinstance(value, dict):
        return 2 if any(isinstance(v, (list, dict)) for v in value.values()) else 1
    return 0


def _parse(cells: list[str]) -> tuple[np.ndarray | None, list[Any]]:
    """JSON texts -> (codes, values): ``values[codes[i]]`` is cell i, each distinct text parsed once.

    Mostly distinct cells (judged on a sample) are parsed one by one instead (codes ``None``):
    hashing a million distinct texts costs more than it saves.
    """
    import numpy as np
    import pandas as pd

    sample = cells[:: max(1, len(cells) // 2_000)]
    if len(set(sample)) > len(sample) // 2:
        return None, json.loads("[" + ",".join(cells) + "]")
    codes, uniques = pd.factorize(np.array(cells, dtype=object))
    return codes, json.loads("[" + ",".join(uniques) + "]")


def _column(values: list[Any], codes: np.ndarray | None) -> np.ndarray:
    """One object cell per row; a list or dict that several rows would share is copied per
    row, so mutating one cell never changes another row."""
    import numpy as np

    cells = np.fromiter(values, dtype=object, count=len(values))
    if codes is None:
        return cells
    column: np.ndarray = cells[codes]
    shared = np.flatnonzero(np.bincount(codes, minlength=len(cells)) > 1)
    nesting = np.zeros(len(cells), dtype=np.int8)
    nesting[shared] = [_nesting(v) for v in cells[shared]]
    if (nesting == 1).any():  # a shallow copy is a full one
        rows = np.flatnonzero(nesting[codes] == 1)
        column[rows] = np.fromiter(map(_copy, column[rows]), dtype=object, count=len(rows))
    if (nesting == 2).any():
        rows = np.flatnonzero(nesting[codes] == 2)
        texts = np.array([json.dumps(v) if n == 2 else "" for v, n in zip(cells, nesting, strict=True)],
                         dtype=object)
        column[rows] = np.fromiter(json.loads("[" + ",".join(texts[codes[rows]]) + "]"), dtype=object,
                                   count=len(rows))
    return column


def _json_column(cells: list[str]) -> np.ndarray:
    codes, values = _parse(cells)
    return _column(values, codes)


def _object_columns(cells: list[str], prefix: str) -> dict[str, np.ndarray]:
    """JSON objects (or ``null``), one per row -> one object column per key."""
    if not cells:
        return {}
    codes, parsed = _parse(cells)
    objects = [o if type(o) is dict else _NO_KEYS for o in parsed]
    keys = sorted(set().union(*objects))
    return {f"{prefix}.{key}": _column(list(map(dict.get, objects, repeat(key))), codes) for key in keys}


def decode_trace_fields(fields: list[str]) -> dict[str, Any]:
    """The unit-separated cells of some steps (id, error, params, result) -> columns."""
    return {
        "id": fields[0::4],
        "error": _json_column(fields[1::4]),
        **_object_columns(fields[2::4], "params"),
        **_object_columns(fields[3::4], "result"),
    }


def trace_columns(
    db: sqlite3.Connection,
    path: str,
    workflow_id: str | None,
    agent_id: str | None,
    user_id: str | None,
    status: str | None,
    since_us: int | None,
) -> dict[str, Any]:
    """Every trace step that matches, as columns (see :class:`memkit.SupportsTraceColumns`)."""
    import numpy as np

    values = {"workflow_id": workflow_id, "agent_id": agent_id, "user_id": user_id, "status": status}
    where, params = trace_filter(SQLITE, _TRACE_TESTS, "created_us >= ?", values, since_us)
    with gc_paused():
        rows = db.execute(f"SELECT {_COLUMNS} FROM trace_steps WHERE {where}", params).fetchall()  # noqa: S608
        if not rows:
            return {"id": [], "error": [], **{name: np.zeros(0, dtype=np.int64) for name in TRACE_NUMBERS}}
        columns = list(zip(*rows, strict=True))
        out: dict[str, Any] = {"id": list(columns[len(TRACE_NUMBERS)])}
        for name, column in zip(TRACE_NUMBERS, columns, strict=False):
            if name in _TEXTS:
                out[name] = np.array(column, dtype=object)
            else:
                out[name] = np.fromiter((MISSING if v is None else v for v in column), dtype=np.int64,
                                        count=len(rows))
        error, parameters, result = columns[len(TRACE_NUMBERS) + 1:]
        out["error"] = np.array(error, dtype=object)
        out.update(_object_columns([p or "null" for p in parameters], "params"))
        out.update(_object_columns([r or "null" for r in result], "result"))
    return out


_COLUMNS = ", ".join((*TRACE_NUMBERS, "id", "error", "parameters", "result"))
_TRACE_TESTS = {column: f"{column} = ?" for column in ("workflow_id", "agent_id", "user_id", "status")}


_RUN_STEPS = (
    "SELECT created_us, user_id, agent_id, workflow_id, run_id, step_name, tool, status, step_index, started_us,"
    " duration_us, retry_count, error FROM trace_steps WHERE {where} ORDER BY created_us, seq"
)


def run_summaries(
    db: sqlite3.Connection, op: RunScope, recalls: Callable[[RunScope], dict[tuple[Any, ...], str]],
    marks: Callable[[RunScope], list[tuple[Any, ...]]],
) -> list[RunSummary]:
    """Every run in one row, newest first, from its steps' columns (no record's JSON is read, no numpy is
    loaded), summarised by :func:`memkit._core._runs.summarise_rows`; ``recalls`` lists the step index of
    each recall per run (see :func:`memkit.adapters._sqlite._queries.step_recall_counts`), ``marks``
    counts them per run in SQL.

    The steps are summarised in the order they were written, ``(created_us, seq)``, as a listing reads them."""
    where, params = ["1"], []
    for column, value in (("workflow_id", op.workflow_id), ("agent_id", op.agent_id), ("user_id", op.user_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    db.execute("BEGIN")  # the steps and the counts from one snapshot
    try:
        steps = db.execute(_RUN_STEPS.format(where=" AND ".join(where)), params).fetchall()
        indexes = recalls(op)
        marked = marks(op)
    finally:
        db.execute("COMMIT")
    per_index = {key: Counter(map(int, listed.split(","))) for key, listed in indexes.items() if listed}
    by_run: dict[tuple[Any, ...], dict[str, int]] = {}
    for user, agent, workflow, run, label, n in marked:
        by_run.setdefault((user, agent, workflow, run), {})[label] = n
    states: dict[str | None, str] = {}
    rows = []
    for created, user, agent, workflow, run, name, tool, status, index, started, duration, retries, error in steps:
        key = (user, agent, workflow, run)
        found = per_index.get(key)
        state = states.get(status)
        if state is None:
            state = states[status] = status_of(status)
        rows.append((key, (
            state, index, name, tool, started, duration, retries, error if state == "failed" else None,
            found.get(index, 0) if found is not None and index is not None else 0, created)))
    return summarise_rows(rows, by_run)

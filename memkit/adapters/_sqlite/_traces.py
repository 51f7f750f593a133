"""Trace steps as columns: how the SQLite store reads its ``trace_steps`` table (written by
:mod:`._trace_writes`), a column per field, in one ``SELECT``; see ``docs/traces.md``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memkit._core._items import status_of
from memkit._core._runs import RunScope, RunSummary, summarise_rows
from memkit.adapters._sqlbase import trace_filter
from memkit.adapters._sqlite._sql import SQLITE
from memkit.adapters._trace_columns import MISSING, TEXTS, TRACE_NUMBERS, gc_paused, object_columns

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    pass

__all__ = ["run_summaries", "trace_columns"]

def trace_columns(
    db: sqlite3.Connection,
    path: str,
    workflow_id: str | None,
    agent_id: str | None,
    user_id: str | None,
    status: str | None,
    since_us: int | None,
    after_seq: int | None = None,
) -> dict[str, Any]:
    """Every trace step that matches, as columns (see :class:`memkit.SupportsTraceColumns`); ``after_seq``:
    only the steps written after that ``seq`` (one writer at a time hands seqs out in commit order)."""
    import numpy as np

    values = {"workflow_id": workflow_id, "agent_id": agent_id, "user_id": user_id, "status": status}
    where, params = trace_filter(SQLITE, _TRACE_TESTS, "created_us >= ?", values, since_us)
    if after_seq is not None:
        where, params = f"{where} AND seq > ?", [*params, after_seq]
    with gc_paused():
        rows = db.execute(f"SELECT {_COLUMNS} FROM trace_steps WHERE {where}", params).fetchall()  # noqa: S608
        if not rows:
            return {"id": [], "error": [], **{name: np.zeros(0, dtype=np.int64) for name in TRACE_NUMBERS}}
        columns = list(zip(*rows, strict=True))
        out: dict[str, Any] = {"id": list(columns[len(TRACE_NUMBERS)])}
        for name, column in zip(TRACE_NUMBERS, columns, strict=False):
            if name in TEXTS:
                out[name] = np.array(column, dtype=object)
            else:
                out[name] = np.fromiter((MISSING if v is None else v for v in column), dtype=np.int64,
                                        count=len(rows))
        error, parameters, result = columns[len(TRACE_NUMBERS) + 1:]
        out["error"] = np.array(error, dtype=object)
        out.update(object_columns([p or "null" for p in parameters], "params"))
        out.update(object_columns([r or "null" for r in result], "result"))
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
            found.get(index, 0) if found is not None and index is not None else 0, created, None)))
    return summarise_rows(rows, by_run)

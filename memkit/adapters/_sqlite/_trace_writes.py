"""Trace steps' rows, built in Python in the transaction that inserts their memories: the one place
``trace_steps`` is written (add_trace, add_many, replacing writes, bulk imports and the migration that
builds an older file's rows again).

A step's fields are read as the generic reads read a stored record (:func:`memkit._core._runs.step_of`):
a text field that is not a string, an index that is not an integer, is no value; so a step reads the
same from these rows as from its record on any backend, whatever an agent's ``add_many`` wrote.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from memkit._core._timing import step_timing

__all__ = ["Fields", "delete_replaced", "insert_memories", "step_fields", "write_steps"]

_INSERT_STEP = (
    "INSERT INTO trace_steps (seq, id, created_us, user_id, agent_id, workflow_id, run_id, step_name, tool, status,"
    " step_index, started_us, duration_us, retry_count, error, parameters, result)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_MEMORY = (
    "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us) VALUES (?, ?, ?, ?, ?, ?)"
)
# The form trace_row's texts of parameters and result have (so a cell is the same text either way).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

# A step's trace_steps row after its seq, id, write time and namespace: workflow, run, step name, tool,
# status, step index, start and duration (microseconds), retries, error, and parameters and result as
# JSON objects; None where the step has none.
Fields = tuple[Any, ...]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) < value < 2**63:
        return value
    return None


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _micros(seconds: float | None) -> int | None:
    if seconds is None:
        return None
    try:
        return _integer(round(seconds * 1e6))
    except (OverflowError, ValueError):  # an infinite or NaN time is no time
        return None


def _object(value: Any) -> str | None:
    return _COMPACT.encode(value) if isinstance(value, dict) else None


def step_fields(
    meta: dict[str, Any], objects: Sequence[str] | None = None
) -> Fields | None:
    """The fields of one memory's trace_steps row (None when it is not a trace step). ``objects``: its
    parameters' and result's JSON texts when the caller has them already (trace_row's, "null" for none)."""
    if meta.get("type") != "trace":
        return None
    trace = meta.get("trace")
    if not isinstance(trace, dict):
        trace = {}
    start, duration = _seconds(trace.get("timestamp")), _seconds(trace.get("duration"))
    if start is None and duration is None:  # timing spelt otherwise (add_many): read as the reads read it
        with warnings.catch_warnings():  # the reads warn about unreadable times; a write stays silent
            warnings.simplefilter("ignore")
            try:
                timing = step_timing(trace, warn=False)
                start, duration = timing.start, timing.duration
            except Exception:  # a step without readable timing is still stored
                pass
    if objects is None:
        parameters, result = _object(trace.get("parameters")), _object(trace.get("result"))
    else:
        parameters, result = (None if text == "null" else text for text in objects)
    return (_text(meta.get("workflow_id")), _text(meta.get("run_id")), _text(trace.get("step_name")),
            _text(trace.get("tool")), _text(trace.get("status")), _integer(trace.get("step_index")),
            _micros(start), _micros(duration), _integer(trace.get("retry_count")), _text(trace.get("error")),
            parameters, result)


def write_steps(db: sqlite3.Connection, steps: Iterable[tuple[Any, ...]]) -> None:
    """Write the trace_steps rows ``(seq, id, created_us, user_id, agent_id, *fields)``, inside the
    caller's write transaction."""
    db.executemany(_INSERT_STEP, steps)


def insert_memories(
    db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]], metas: Sequence[dict[str, Any]], first_seq: int,
    fields: Sequence[Fields | None] | None = None,
) -> None:
    """Insert ``rows`` (memories' columns: id, user_id, agent_id, content, metadata text, created_us;
    ``metas`` their metadata) taking seqs from ``first_seq`` on, and the trace steps among them, inside
    the caller's write transaction: the only place memkit inserts memories. ``fields``: each row's
    :func:`step_fields` where the caller made them already (a bulk import)."""
    db.executemany(_INSERT_MEMORY, rows)
    if fields is None:
        fields = [step_fields(meta) for row, meta in zip(rows, metas, strict=True)]
    write_steps(db, ((first_seq + i, row[0], row[5], row[1], row[2], *f)
                     for i, (row, f) in enumerate(zip(rows, fields, strict=True)) if f is not None))


def delete_replaced(db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, str]]:
    """Delete the memories ``rows`` replace (a row's id held in its own namespace), inside the caller's
    write transaction (BEGIN IMMEDIATE: no other writer between this and the insert); an id held in
    another namespace raises ``IntegrityError``, as a plain insert of it would. Returns the
    namespaces of the rows deleted (their steps go with them: trace_steps_delete)."""
    gone: list[tuple[str, str]] = []
    for start in range(0, len(rows), 500):
        chunk = {row[0]: (row[1], row[2]) for row in rows[start : start + 500]}
        marks = ",".join("?" * len(chunk))
        held = db.execute(
            f"SELECT id, user_id, agent_id FROM memories WHERE id IN ({marks})", list(chunk)  # noqa: S608
        ).fetchall()
        if any(chunk[memory_id] != (user, agent) for memory_id, user, agent in held):
            raise sqlite3.IntegrityError("an id of this batch belongs to another namespace")
        db.executemany("DELETE FROM memories WHERE id = ?", [(h[0],) for h in held])
        gone.extend((user, agent) for _, user, agent in held)
    return gone

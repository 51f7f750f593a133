"""The rows a bulk import writes: memories (with their trace steps) and recalls, straight from the
planned steps and recall bodies.

The general path builds a :class:`~memkit._core._records.Record` per step, a pydantic ``Recall`` per
recall, then reads each back to make its rows. An import (:class:`memkit._core._ops.ImportStepsOp`)
hands the SQLite store the steps as ``add_trace`` takes them and the recalls as stored bodies: each
step's memories row comes from :func:`~memkit._core._records.trace_row` (the same texts
``trace_record`` gives) and its trace_steps row from the same code as any other write
(:mod:`._trace_writes`), so an import writes the bytes ``add_trace`` + ``add_recalls`` would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._ops import StepsRestarted
from memkit._core._records import Record, trace_row
from memkit._core._validate import Limits
from memkit._recall import _recording as _recall
from memkit.adapters._sqlite._trace_writes import Odd, prepare

__all__ = ["INSERT_RECALL", "memory_rows", "recall_rows", "step_rows"]

INSERT_RECALL = (
    "INSERT INTO recalls (id, created_us, user_id, agent_id, workflow_id, run_id, step_index, step_user_id,"
    " step_agent_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

MemoryRow = tuple[str, str, str, str, str, int]


def memory_rows(records: Sequence[Record]) -> tuple[list[MemoryRow], list[dict[str, Any]]]:
    """``records`` as memories' columns (id, user_id, agent_id, content, metadata text, created_us),
    and their metadata."""
    rows = [
        (r.id, r.user_id, r.agent_id, r.content,
         r.metadata_json or json.dumps(r.metadata, ensure_ascii=False, separators=(",", ":")), r.created_us)
        for r in records
    ]
    return rows, [r.metadata for r in records]


def step_rows(
    steps: Iterable[tuple[str, str, str, dict[str, Any]]], general: Callable[[int], Record], limits: Limits
) -> tuple[list[MemoryRow], list[dict[str, Any]], list[Any]]:
    """The memories columns and metadata of each planned ``(user, agent, workflow, trace_data)`` step,
    checked as ``add_trace`` checks them, and for its trace_steps row what
    :func:`~memkit.adapters._sqlite._trace_writes.prepare` gives (else its parameters' and result's
    cells, the texts the metadata holds, encoded once); ``general(i)`` makes (or refuses, naming the step) the record of
    a step :func:`trace_row` does not take. ``steps`` may be a stream that starts over
    (:class:`~memkit._core._ops.StepsRestarted`): the rows so far are then dropped."""
    while True:
        try:
            return _step_rows(steps, general, limits)
        except StepsRestarted:
            continue


def _step_rows(
    steps: Iterable[tuple[str, str, str, dict[str, Any]]], general: Callable[[int], Record], limits: Limits
) -> tuple[list[MemoryRow], list[dict[str, Any]], list[Any]]:
    rows: list[MemoryRow] = []
    metas: list[dict[str, Any]] = []
    objects: list[Any] = []  # each step's cells (a pair), what prepare() gave, or None
    add_row, add_meta, add_objects = rows.append, metas.append, objects.append
    for i, (user, agent, workflow, data) in enumerate(steps):
        try:
            row = trace_row(agent, workflow, data, user, limits)
        except InvalidInputError:
            row = None  # general(i) says so, naming the step
        if row is None:
            record = general(i)
            more, meta = memory_rows((record,))
            add_row(more[0])
            add_meta(meta[0])
            add_objects(None)
        else:
            add_row(row[:6])
            add_meta(row[6])
            try:
                # Its trace_steps row but for the seq and codes, now: a stream's steps are being
                # planned meanwhile, while the writes wait for the last one.
                add_objects(prepare(row[0], row[1], row[2], row[6], row[7:]))
            except Odd:
                add_objects(row[7:])  # written by the trigger's SQL, which _row decides again
    return rows, metas, objects


def recall_rows(bodies: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The recalls table's rows of recall bodies (see :mod:`memkit._recall._recording`)."""
    return [
        (b["id"], _recall.created_us(b), b["user_id"], b["agent_id"], b["workflow_id"], b["run_id"],
         b["step_index"], b.get("trace_user_id") or b["user_id"], b.get("trace_agent_id") or b["agent_id"],
         _recall.encode(b))
        for b in bodies
    ]

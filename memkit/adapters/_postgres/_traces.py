"""Trace steps as columns, read from the PostgreSQL store (see :class:`memkit.SupportsTraceColumns`).

The step fields are read out of each trace's metadata in SQL, with the same rules as the
SQLite store's trace table: text fields only when they are strings, integers only when
they are whole numbers, times in microseconds; then the cells are decoded as SQLite's are.
"""

from __future__ import annotations

from typing import Any

from memkit.adapters._postgres._sql import POSTGRES
from memkit.adapters._postgres._writes import json_out, text_in, text_out
from memkit.adapters._sqlbase import trace_filter
from memkit.adapters._trace_columns import MISSING, TRACE_NUMBERS, decode_trace_fields, gc_paused, step_timing_us

__all__ = ["read"]

_MARK = "\uffff"
_TEXTS = ("user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status")

_TESTS = {
    "workflow_id": "m.metadata ->> 'workflow_id' = %s", "agent_id": "m.agent_id = %s", "user_id": "m.user_id = %s",
    "status": "m.metadata -> 'trace' ->> 'status' = %s",
}

_SQL = """
SELECT m.seq, m.created_us, m.user_id, m.agent_id,
    CASE WHEN jsonb_typeof(m.metadata -> 'workflow_id') = 'string' THEN m.metadata ->> 'workflow_id' END,
    CASE WHEN jsonb_typeof(m.metadata -> 'run_id') = 'string' THEN m.metadata ->> 'run_id' END,
    CASE WHEN jsonb_typeof(t.v -> 'step_name') = 'string' THEN t.v ->> 'step_name' END,
    CASE WHEN jsonb_typeof(t.v -> 'tool') = 'string' THEN t.v ->> 'tool' END,
    CASE WHEN jsonb_typeof(t.v -> 'status') = 'string' THEN t.v ->> 'status' END,
    CASE WHEN jsonb_typeof(t.v -> 'step_index') = 'number' AND (t.v ->> 'step_index') ~ '^-?[0-9]{{1,18}}$'
        THEN (t.v ->> 'step_index')::bigint END,
    CASE WHEN jsonb_typeof(t.v -> 'timestamp') = 'number'
        THEN round((t.v ->> 'timestamp')::numeric * 1000000)::bigint END,
    CASE WHEN jsonb_typeof(t.v -> 'duration') = 'number'
        THEN round((t.v ->> 'duration')::numeric * 1000000)::bigint END,
    CASE WHEN jsonb_typeof(t.v -> 'retry_count') = 'number' AND (t.v ->> 'retry_count') ~ '^-?[0-9]{{1,18}}$'
        THEN (t.v ->> 'retry_count')::bigint END,
    m.id,
    coalesce((t.v -> 'error')::text, 'null'),
    CASE WHEN jsonb_typeof(t.v -> 'parameters') = 'object' THEN (t.v -> 'parameters')::text ELSE 'null' END,
    CASE WHEN jsonb_typeof(t.v -> 'result') = 'object' THEN (t.v -> 'result')::text ELSE 'null' END,
    CASE WHEN jsonb_typeof(t.v) = 'object' AND coalesce(jsonb_typeof(t.v -> 'timestamp'), '') <> 'number'
        AND coalesce(jsonb_typeof(t.v -> 'duration'), '') <> 'number' THEN t.v::text END
FROM memories m CROSS JOIN LATERAL (SELECT m.metadata -> 'trace' AS v) t
WHERE m.metadata ->> 'type' = 'trace' AND {where}
ORDER BY m.seq
"""


async def read(
    pool: Any, *, workflow_id: str | None, agent_id: str | None, user_id: str | None, status: str | None,
    since_us: int | None, after_seq: int | None = None,
) -> dict[str, Any]:
    """The matching steps' columns; ``after_seq``: only the steps written after that ``seq`` (a follower's read)."""
    import numpy as np

    # Metadata strings are stored with NUL and U+FFFF spelled out (see _postgres_writes.jsonb_text).
    given = {"workflow_id": None if workflow_id is None else text_in(workflow_id), "agent_id": agent_id,
             "user_id": user_id, "status": None if status is None else text_in(status)}
    where, params = trace_filter(POSTGRES, _TESTS, "m.created_us >= %s", given, since_us)
    if after_seq is not None:
        where, params = f"{where} AND m.seq > %s", [*params, after_seq]
    async with pool.connection() as conn:
        cur = conn.cursor()
        await cur.execute(_SQL.format(where=where), params)
        rows = await cur.fetchall()
    with gc_paused():
        out: dict[str, Any] = {}
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in range(len(TRACE_NUMBERS) + 5)]
        for j, name in enumerate(TRACE_NUMBERS):
            values = columns[j]
            if name in _TEXTS:
                if name not in ("user_id", "agent_id") and any(v is not None and _MARK in v for v in values):
                    values = tuple(None if v is None else text_out(v) for v in values)
                out[name] = np.array(values, dtype=object)
            else:
                out[name] = np.array([MISSING if v is None else v for v in values], dtype=np.int64)
        # A step without add_trace's numeric timestamp and duration (written with add_many): its
        # timing from whatever spelling it has, as the generic reads take it.
        started, duration = out["started_us"], out["duration_us"]
        for i, trace in enumerate(columns[len(TRACE_NUMBERS) + 4] if rows else ()):
            if trace is not None:
                start_us, duration_us = step_timing_us(json_out(trace))
                started[i] = MISSING if start_us is None else start_us
                duration[i] = MISSING if duration_us is None else duration_us
        first = len(TRACE_NUMBERS)
        # The memory's id, then its error, parameters and result as JSON text from the metadata.
        fields = [cell if k == 0 else json_out(cell) for row in rows for k, cell in enumerate(row[first:first + 4])]
        if fields:
            out.update(decode_trace_fields(fields))
        else:
            out.update({"id": [], "error": np.zeros(0, dtype=object)})
        return out

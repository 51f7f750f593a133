"""pandas views of a store: traces (one row per step), memories, namespaces, and audits.

Every function takes a provider or a :class:`memkit.Memory`. Trace frames follow the
convention of Arize Phoenix's spans DataFrame: one row per step, indexed by its id,
snake_case columns, and nested attributes flattened to dotted columns
(``params.<key>``, ``result.<key>``; lists and dicts stay as object cells).

Columns of :func:`traces_frame`, in this order: ``workflow_id, agent_id, user_id,
run_id, step_index, step_name, tool, status, started_at, ended_at, duration_s,
retry_count, error, created_at``, then ``params.*`` and ``result.*`` sorted by name (and
``data.*``, every other key the agents wrote, with ``data=True``). ``status`` reads as shown
(an agent's ``ok``, ``ERROR`` or ``503`` as ``success``/``failed``: :func:`memkit._core._items.status_of`).
``started_at``/``ended_at``/``created_at`` are tz-aware UTC; rows are in replay
order (the order the steps were stored).

One concern per module: ``_reading`` (a store read into trace, memory and namespace frames, and
the tool and failure audits), ``_runs`` (runs from steps, their filters, one run's steps),
``_compare`` (two runs side by side), ``_usage`` (LLM usage per step and run), ``_audit`` (latency
percentiles, steps found by the words in their payloads), ``_recalls`` (what steps recalled, and the marks made on
it) and ``_replay`` (a workflow walked step by step; a recall run again on today's store).
"""

from __future__ import annotations

from memkit.frames._audit import FOUND_COLUMNS, LATENCY_COLUMNS, find_steps, latency_stats
from memkit.frames._compare import compare_runs
from memkit.frames._reading import (
    TRACE_COLUMNS,
    failure_patterns,
    memories_frame,
    namespaces_frame,
    tool_stats,
    traces_frame,
)
from memkit.frames._recalls import (
    ANNOTATION_COLUMNS,
    RECALL_COLUMNS,
    annotations_frame,
    recall_counts,
    recalls_frame,
)
from memkit.frames._replay import REPLAY_COLUMNS, ReplayState, replay, replay_recall
from memkit.frames._runs import RUN_COLUMNS, filter_runs, run_steps, runs_frame

__all__ = [
    "ANNOTATION_COLUMNS",
    "FOUND_COLUMNS",
    "LATENCY_COLUMNS",
    "RECALL_COLUMNS",
    "REPLAY_COLUMNS",
    "RUN_COLUMNS",
    "TRACE_COLUMNS",
    "ReplayState",
    "annotations_frame",
    "compare_runs",
    "failure_patterns",
    "filter_runs",
    "find_steps",
    "latency_stats",
    "memories_frame",
    "namespaces_frame",
    "recall_counts",
    "recalls_frame",
    "replay",
    "replay_recall",
    "run_steps",
    "runs_frame",
    "tool_stats",
    "traces_frame",
]
